"""Block sizes, launch options and the experiment knobs of the Triton SSD's launchers.

The defaults come from the H200 runs in ``benchmarks/NOTES.md``; the environment variables
``SEMISEP_TRITON_FWD`` / ``_BWD`` (fields of :func:`pick_config`), ``SEMISEP_TRITON_FAST``,
``_PRE_DECAYS``, ``_FACTOR``, ``_FP32_PRECISION`` and ``_ONE_LAUNCH`` override them, for
experiments (``SEMISEP_TRITON_FAST_LAUNCH``, ``_GRAM`` and ``_GLUON``: :mod:`.fastlaunch`,
:func:`_gram`, :func:`.gluon_fwd.eligible`, which reads it per call).
The launchers read them when they build a launch plan, whose key holds their values
(:data:`KNOBS`, :func:`knobs`).
"""

from __future__ import annotations

import os
from typing import Optional

import torch


def _cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` (triton.cdiv is a constexpr function: ~5 us a call from Python)."""
    return -(-a // b)


def _pow2(n: int) -> int:
    """The least power of two >= n (and 1 for n <= 1)."""
    return 1 << max(n - 1, 0).bit_length()


_ENCODED: dict = {}


def _encoded(name: str):
    """``name`` as the environment's own mapping holds it (cached)."""
    key = _ENCODED.get(name)
    if key is None:
        key = _ENCODED[name] = os.environ.encodekey(name)
    return key


def _env(name: str, default=None):
    """``os.environ.get(name, default)`` without its exception for a missing name (~2 us a
    read, on the host's critical path): a lookup in the environment's own mapping."""
    data = getattr(os.environ, "_data", None)
    if data is None:
        return os.environ.get(name, default)
    value = data.get(_encoded(name))
    return default if value is None else os.environ.decodevalue(value)


# Every environment knob a launch plan (launch._plan) reads while it is built
KNOBS = ("SEMISEP_TRITON_FWD", "SEMISEP_TRITON_BWD", "SEMISEP_TRITON_FAST",
         "SEMISEP_TRITON_PRE_DECAYS", "SEMISEP_TRITON_FACTOR", "SEMISEP_TRITON_FP32_PRECISION",
         "SEMISEP_TRITON_GRAM", "SEMISEP_TRITON_ONE_LAUNCH", "TRITON_INTERPRET")


_KNOB_KEYS = tuple(map(_encoded, KNOBS))


def knobs() -> tuple:
    """The values of :data:`KNOBS` (None for an unset one; encoded, as the environment holds
    them): part of a launch plan's key, so that a knob set between two calls takes effect.
    Read twice per forward+backward, so the names are encoded once (this 2-core VM: 1.3 us a
    read, against 2.4 us encoding each name through :func:`_encoded`)."""
    data = getattr(os.environ, "_data", None)
    if data is None:
        return tuple([os.environ.get(k) for k in KNOBS])
    return tuple(map(data.get, _KNOB_KEYS))


def _interpret() -> bool:
    return _env("TRITON_INTERPRET", "0") == "1"


def pick_config(p: int, n: int, chunk_size: Optional[int], dtype, kind: str = "fwd",
                whole: bool = False) -> dict:
    """Block sizes and launch options for one call (``kind``: fwd, bwd).

    Defaults from the H200 runs in benchmarks/NOTES.md: 4 warps; chunks of 64 for n <= 64
    and of 32 above (register pressure; a forward's plan takes 64 there for the Gluon kernel
    and for a small call that hands its decays to the backward, :func:`.launch._fwd_plan`).
    ``SEMISEP_TRITON_FWD`` / ``_BWD`` override any field for experiments, e.g.
    ``"BP=32,num_warps=4"``, and add ``maxnreg`` (registers per thread), for the forward ``UNROLL`` (chunks per loop iteration) and ``STATE_T`` (1: the
    state carried as (n, p), see
    :func:`kernels.ssd_fwd_kernel`; the default for n <= 64 and for p in blocks under 64), for
    the backward ``fwd_sweep_stages`` (``num_stages`` is the reverse sweep's) and ``E_ON_C``
    (:func:`kernels.ssd_bwd_revsweep_kernel`), for both ``PREFETCH`` (1: the forward's and the
    backward forward sweep's chunk decays loaded a chunk ahead, with the pre-pass) and
    ``EXACT_STAGES`` (the exact loop's
    pipeline stages, e.g. ``1`` beside a one-launch kernel's factored loop,
    :func:`kernels._stages`). ``whole`` (:func:`whole_state`): the backward of a small
    16-bit call at 64 < n <= 128 in one pass over the state's columns, one span, chunks of
    64. The launchers call it when they build a launch plan (:func:`.launch._plan`), not
    per call.
    """
    variable = "SEMISEP_TRITON_FWD" if kind == "fwd" else "SEMISEP_TRITON_BWD"
    return _overridden(_default_config(p, n, chunk_size, kind, whole), variable)


# the input dtypes whose n = 128 sweeps in chunks of 64 fit an SM's shared memory (fp32:
# 246784 B for the forward sweep, 246276 B for the reverse sweep, over sm_90's 232448 B;
# bf16 148480 / 107012 B, fp16's exact loops 152072 / 108548; Triton 3.6,
# benchmarks/aot_check.py)
WHOLE_DTYPES = (torch.bfloat16, torch.float16)


def whole_state(b: int, T: int, h: int, n: int, chunk_size: Optional[int], dtype) -> bool:
    """Whether a call's backward runs its whole state at once (``whole`` in
    :func:`pick_config`): at 64 < n <= 128 with the default chunks and 16-bit inputs
    (:data:`WHOLE_DTYPES`), for a call of ``b * h * T * BN`` up to ``ONE_LAUNCH_AT_MOST``,
    where the host sets the pace.

    One pass over the state's columns in one span of chunks of 64, the forward's: the decay
    pre-pass, the forward and one launch of each sweep, 4 launches a fwd+bwd against 6 in
    two blocks of 64 (:func:`state_block`). Its stored states hold twice x's elements (above
    :func:`span_steps`'s 1.5: at N = 128, T = 1K a peak of 146 MB against 115 in blocks and
    mamba_ssm's 172), and its sweeps spill at n = 128 (640 / 472 B of stack, Triton 3.6 for
    sm_90), which such calls' device time absorbs: H100 s33, N = 128 1K fwd+bwd medians
    0.90 ms against 1.18 in blocks (fla's fused_chunk 1.30), benchmarks/NOTES.md.
    """
    return (chunk_size is None and 64 < n <= 128 and dtype in WHOLE_DTYPES
            and b * h * T * _pow2(n) <= ONE_LAUNCH_AT_MOST)


def _default_config(p: int, n: int, chunk_size: Optional[int], kind: str,
                    whole: bool = False) -> dict:
    BN = max(16, _pow2(n))
    BP = max(16, min(64, _pow2(p)))
    if chunk_size is not None:
        Q = chunk_size
    else:
        Q = 64 if BN <= 64 else 32
    # PREFETCH: the chunk decays that scale results loaded a chunk ahead (decays._e_ahead;
    # H200 s18-3 at T = 16K: N = 64 forward 0.672 -> 0.650 ms; in the backward alone fwd+bwd
    # -0.9 % at N = 64, -1.5 % at N = 128; the N = 128 forward +4 %, so not there)
    cfg = dict(Q=Q, BP=BP, BN=BN, num_warps=4, PREFETCH=1)
    if kind == "fwd":
        # 3 stages: the forward's loads run further ahead (H200 run 9: -10 % at T = 16K)
        cfg.update(num_stages=3, STATE_T=int(BN <= 64 or BP < 64), PREFETCH=int(BN <= 64))
    else:
        # the backward's forward sweep with 3 stages, its reverse sweep with 2 (H200 s7-1 at
        # T = 16K: 1.466 -> 1.339 ms and 1.862 -> 1.935 ms with 3 stages, which spill there);
        # the reverse sweep's e_in on C where C's tile is not the larger (s7-2: 1.80 -> 1.78 ms
        # at N = 64; 4.33 -> 6.06 ms at N = 128, whose C tiles are 32 x 128)
        cfg.update(num_stages=2, fwd_sweep_stages=3, E_ON_C=int(BN <= BP))
        # the state's columns in blocks of 64 above 64 (state_block); a small call's whole
        # state at once (whole_state)
        cfg.update(NB=64 if BN > 64 else 0)
        if whole:
            cfg.update(Q=64, NB=0)
    return cfg


def state_block(p: int, n: int, chunk_size: Optional[int], dtype, whole: bool = False) -> int:
    """The width of the blocks of the state's n columns that the backward runs one after
    another (n: one block).

    The SSD is linear in its state's columns: with ``B = [B_1 B_2]``, ``C = [C_1 C_2]`` (and
    the state, h0, its final state split alike), ``y = ssd(x, B_1, C_1) + ssd(x, B_2, C_2)``,
    the intra-chunk ``C B^T`` being the blocks' sum too. So the gradients of x, of the raw dt
    (or log_a), of A and dt_bias are the blocks' sums, those of B, C and h0 their columns
    side by side. With z the blocks take the gated dy of one pass before them
    (:mod:`.gate`, from the forward's ungated y), and dz comes from that pass. Blocks of
    64 run the kernels' n = 64 configuration (chunks of 64, one span, no spills): N = 128 is
    two n = 64 backwards, which redo the intra-chunk products with x and dy but take 24 %
    less time than one n = 128 backward in spans (H200 at T = 16K: 6.26 ms against 8.29;
    fwd+bwd 7.22 against 9.25, s14-2 against s13-3). ``NB`` in ``SEMISEP_TRITON_BWD`` sets
    the width (experiments, tests; 0: one block). ``whole``: :func:`whole_state`.
    """
    nb = pick_config(p, n, chunk_size, dtype, "bwd", whole).get("NB", 0)
    return n if (nb <= 0 or nb >= n) else nb


def span_steps(T: int, p: int, n: int, chunk_size: Optional[int], dtype,
               whole: bool = False) -> Optional[int]:
    """The steps of each span the backward runs in (None: the whole call is one).

    The backward stores the state entering each of its chunks for the reverse sweep, p x n
    per chunk of Q steps: n / Q times the elements of x. It runs in spans, last first
    (each: the forward sweep from the state entering it, which the forward kept, then the
    reverse sweep, carrying the adjoint to the span before; a launch per sweep and span),
    so that one span's states hold at most 1.5 times x's elements: one span for n <= Q
    (the default chunks of 64 at n <= 64), three at n = 128 (chunks of 32), for the peak
    memory of a forward+backward (H200 s13-3: 2104 MB at T = 16K, N = 128, against 3361 in
    one span and mamba_ssm's 2336; each span boundary costs 5-8 % of the time, s13-2, but
    two spans take 2353 MB). n is the width of one pass of the backward: a block of the
    state's columns where it runs in blocks (:func:`state_block`: n = 64 blocks, one span by
    default). Spans are whole chunks of the forward's and of the backward's. ``SPAN`` in
    ``SEMISEP_TRITON_BWD`` sets the backward's chunks per span (experiments, tests).
    ``chunk_size`` None or -1: the default. ``whole`` (:func:`whole_state`): one span.
    """
    chunk = chunk_size if chunk_size and chunk_size > 0 else None
    cfg = pick_config(p, n, chunk, dtype, "bwd", whole)
    if whole and not cfg.get("SPAN"):
        return None
    Qb, Qf = cfg["Q"], pick_config(p, n, chunk, dtype, "fwd")["Q"]
    per = cfg.get("SPAN") or max(1, 3 * _cdiv(T, Qb) * Qb // (2 * max(n, 1)))
    steps = _cdiv(per * Qb, Qf) * Qf
    return steps if steps < T else None


def _overridden(cfg: dict, variable: str) -> dict:
    """``cfg`` with the ``key=int`` items of the environment variable ``variable`` (experiments)."""
    cfg = dict(cfg)
    for item in filter(None, _env(variable, "").split(",")):
        k, v = item.split("=")
        cfg[k.strip()] = int(v)
    return cfg


def _prec(dtype) -> str:
    if dtype == torch.float32:
        return _env("SEMISEP_TRITON_FP32_PRECISION", "ieee")
    return "tf32"


def _even(cfg, T, p, n) -> bool:
    """Whether every chunk is whole and p, n fill their blocks: the sweeps then load and store
    without masks (``EVEN``)."""
    return T % cfg["Q"] == 0 and p % cfg["BP"] == 0 and n == cfg["BN"]


def _launch_opts(cfg):
    if _interpret():
        return {}
    opts = dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    if cfg.get("maxnreg"):
        opts["maxnreg"] = cfg["maxnreg"]
    return opts


# Defaults from the H200 runs (benchmarks/NOTES.md, runs 5 and 9): the decay pre-pass in both
# directions (the factored loops need its chunk decays); in the exact loop, the per-entry decay
# tile forward and the factorized tile backward. The environment overrides both directions.
_DEFAULTS = {"fwd": dict(pre="1", factor="0"), "bwd": dict(pre="1", factor="1")}


def _factor(kind: str = "fwd") -> bool:
    return _env("SEMISEP_TRITON_FACTOR", _DEFAULTS[kind]["factor"]) == "1"


def _fast(dtype, pre: bool) -> bool:
    """Whether the sweeps run their factored loop where every chunk of a (b, h) decays by
    more than ``decays.FACTOR_MIN`` (read from the pre-pass's chunk decays).

    Not for float16, whose range the factored operands ``x exp(-l)`` (up to ``2^64 |x|``)
    exceed; ``SEMISEP_TRITON_FAST=0`` turns it off (experiments).
    """
    return (pre and dtype != torch.float16
            and _env("SEMISEP_TRITON_FAST", "1") == "1")


def _gram(h: int, g: int, n: int) -> bool:
    """Whether the forward's factored loop loads each chunk's ``lower(C B^T)``, computed once
    per group (:func:`.kernels.ssd_gram_kernel`), instead of a dot per head: where a group has
    at least two heads and n > 64 (H200, 2026-12-01 run 4 at T = 16K: N = 128 forward
    1.158 -> 1.055 ms; N = 64 0.684 -> 0.692, no gain). ``SEMISEP_TRITON_GRAM=1`` / ``0``
    turns it on / off for any n (experiments)."""
    knob = _env("SEMISEP_TRITON_GRAM")
    return h // g >= 2 and (n > 64 if knob is None else knob == "1")


WIDE_AT = 2 ** 31


def _wide(elements: int) -> bool:
    """Whether a per-(b, h) row of chunk tiles (the backward's states, the forward's shared
    ``lower(C B^T)`` tiles) needs int64 offsets within it: ``elements >= WIDE_AT`` (2^31)."""
    return elements >= WIDE_AT


# The largest call, in b * h * T * BN, whose sweeps launch once holding both loops by default
# (H200 s9-2, s9-3, N = 64: fwd+bwd 1.01 -> 0.88 ms at 1K, where the host sets the pace; 1.95
# -> 2.01 ms at 8K and 3.86 -> 3.95 ms at 16K, where the GPU does). 2^25 since s11-4: with the
# launch plans the host's fwd+bwd (0.56-0.91 ms) no longer sets the pace at N = 64, 4K (device
# 1.015 ms in one launch, 0.977 in two: the one-launch reverse sweep 0.449 against 0.403)
ONE_LAUNCH_AT_MOST = 2 ** 25


def _launches(fast: bool, size: int):
    """The ``(FACTORED, ONE_LAUNCH)`` values to launch a sweep with.

    Where programs choose their loop (``fast``): for a call of ``size = b * h * T * BN`` up
    to ``ONE_LAUNCH_AT_MOST``, one launch holding both the factored and the exact loop (3
    launches fewer per fwd+bwd, for calls bound by the host); above it a launch per loop kind
    (the one-launch loops take 0-5 % more instructions, Triton 3.6 proxy).
    ``SEMISEP_TRITON_ONE_LAUNCH=1`` / ``0`` forces one / the other. Else the exact loop.
    """
    if not fast:
        return ((False, False),)
    knob = _env("SEMISEP_TRITON_ONE_LAUNCH")
    if (size <= ONE_LAUNCH_AT_MOST) if knob is None else knob == "1":
        return ((False, True),)
    return ((True, False), (False, False))


def _pre(kind: str = "fwd") -> bool:
    return _env("SEMISEP_TRITON_PRE_DECAYS", _DEFAULTS[kind]["pre"]) == "1"

"""Launchers, argument checks, and the torch.library ops (with autograd) of the Triton SSD.

Public entry points: :func:`ssd` (chunked SSD, differentiable, torch.compile-able) and
:func:`ssd_decode_step` (one token, state updated in place).
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Optional

import torch

from .decays import CLAMP, ssd_decays_kernel
from . import kernels as K

__all__ = ["ssd", "ssd_decode_step", "supports_reason", "pick_config"]

_FLOAT = (torch.float32, torch.bfloat16, torch.float16)


# ---------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------

def _cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` (triton.cdiv is a constexpr function: ~5 us a call from Python)."""
    return -(-a // b)


def _pow2(n: int) -> int:
    """The least power of two >= n (and 1 for n <= 1)."""
    return 1 << max(n - 1, 0).bit_length()


def _interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def pick_config(p: int, n: int, chunk_size: Optional[int], dtype, kind: str = "fwd") -> dict:
    """Block sizes and launch options for one call (``kind``: fwd, bwd).

    Defaults from the H200 runs in benchmarks/NOTES.md: 4 warps; chunks of 64 for n <= 64
    and of 32 above (register pressure). ``SEMISEP_TRITON_FWD`` / ``_BWD`` override any
    field for experiments, e.g. ``"BP=32,num_warps=4"``, and add ``maxnreg`` (registers per
    thread), for the forward ``UNROLL`` (chunks per loop iteration), for the backward
    ``STATE_EVERY`` (1 or 2: keep every chunk state, or every second one) and ``DA_ROWS``
    (1: dA's terms per position, summed by torch, see :func:`kernels.ssd_bwd_revsweep_kernel`);
    for the forward ``STATE_T`` (1: the state carried as (n, p), see
    :func:`kernels.ssd_fwd_kernel`; the default for n <= 64 and for p in blocks under 64).
    """
    BN = max(16, _pow2(n))
    BP = max(16, min(64, _pow2(p)))
    if chunk_size is not None:
        Q = chunk_size
    else:
        Q = 64 if BN <= 64 else 32
    cfg = dict(Q=Q, BP=BP, BN=BN, num_warps=4)
    if kind == "fwd":
        # 3 stages: the forward's loads run further ahead (H200 run 9: -10 % at T = 16K)
        cfg.update(num_stages=3, STATE_T=int(BN <= 64 or BP < 64))
    else:
        cfg.update(num_stages=2)
    return _overridden(cfg, f"SEMISEP_TRITON_{kind.upper()}")


def _overridden(cfg: dict, variable: str) -> dict:
    """``cfg`` with the ``key=int`` items of the environment variable ``variable`` (experiments)."""
    cfg = dict(cfg)
    for item in filter(None, os.environ.get(variable, "").split(",")):
        k, v = item.split("=")
        cfg[k.strip()] = int(v)
    return cfg


def _prec(dtype) -> str:
    if dtype == torch.float32:
        return os.environ.get("SEMISEP_TRITON_FP32_PRECISION", "ieee")
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


def _device_ctx(t: torch.Tensor):
    if t.is_cuda:
        return torch.cuda.device(t.device)
    return contextlib.nullcontext()


# ---------------------------------------------------------------------------
# checks
# ---------------------------------------------------------------------------

def _shape_err(name, got, want):
    got = "nothing" if got is None else f"shape {tuple(got)}"
    return ValueError(f"{name} must have shape {want}, got {got}")


def supports_reason(x, B, C, *, chunk_size=None) -> Optional[str]:
    """None when the kernels run these inputs, else why not."""
    if not (isinstance(x, torch.Tensor) and isinstance(B, torch.Tensor)
            and isinstance(C, torch.Tensor)):
        return "the Triton kernels take torch tensors"
    if not x.is_cuda and not _interpret():
        return f"the Triton kernels need CUDA tensors, got device {x.device}"
    if x.dtype not in _FLOAT:
        return f"x dtype {x.dtype} is not one of float32, bfloat16, float16"
    if not x.is_cuda and x.dtype == torch.bfloat16:
        # the interpreter multiplies bfloat16 bit patterns in tl.dot (triton-lang/triton#11584)
        return ("the Triton interpreter (TRITON_INTERPRET=1) gives wrong bfloat16 dots; "
                "use float32 or float16 on the CPU, bfloat16 on a GPU")
    if x.dim() != 4 or B.dim() != 4:
        return "the Triton kernels take the ssd layout x (b, T, h, p), B (b, T, g, n)"
    p, n = x.shape[-1], B.shape[-1]
    if p > 256 or n > 256:
        return f"head dim p={p} and state size n={n} must be at most 256"
    if chunk_size is not None and (chunk_size < 16 or chunk_size & (chunk_size - 1)):
        return f"chunk_size must be a power of two >= 16 for the Triton kernels, got {chunk_size}"
    return None


def _check(x, la_or_dt, B, C, A, D, z, dt_bias, h0, seq_idx, has_dt):
    if x.dim() != 4:
        raise _shape_err("x", x.shape, "(batch, T, heads, headdim)")
    b, T, h, p = x.shape
    if B.dim() != 4 or B.shape[:2] != (b, T):
        raise _shape_err("B", B.shape, f"({b}, {T}, groups, N)")
    g, n = B.shape[2], B.shape[3]
    if C.shape != B.shape:
        raise _shape_err("C", C.shape, tuple(B.shape))
    if h % g:
        raise ValueError(f"groups g={g} (B.shape[2]) must divide heads h={h} (x.shape[2])")
    name = "dt" if has_dt else "log_a"
    if la_or_dt.shape != (b, T, h):
        raise _shape_err(name, la_or_dt.shape, (b, T, h))
    if has_dt and (A is None or A.shape != (h,)):
        raise _shape_err("A", None if A is None else A.shape, (h,))
    if D is not None and D.shape not in ((h,), (h, p)):
        raise _shape_err("D", D.shape, f"({h},) or ({h}, {p})")
    if z is not None and z.shape != x.shape:
        raise _shape_err("z", z.shape, tuple(x.shape))
    if dt_bias is not None and dt_bias.shape != (h,):
        raise _shape_err("dt_bias", dt_bias.shape, (h,))
    if h0 is not None and h0.shape != (b, h, p, n):
        raise _shape_err("initial_state", h0.shape, (b, h, p, n))
    if seq_idx is not None and seq_idx.shape != (b, T):
        raise _shape_err("seq_idx", seq_idx.shape, (b, T))
    for nm, t in (("B", B), ("C", C)):
        if t.dtype not in _FLOAT:
            raise TypeError(f"{nm} must be float32, bfloat16 or float16, got {t.dtype}")
    if x.dtype not in _FLOAT:
        raise TypeError(f"x must be float32, bfloat16 or float16, got {x.dtype}")
    devs = {t.device for t in (x, la_or_dt, B, C, A, D, z, dt_bias, h0, seq_idx)
            if t is not None}
    if len(devs) > 1:
        raise ValueError(f"all inputs must be on one device, got {sorted(map(str, devs))}")


def _c(t):
    return None if t is None else t.contiguous()


def _dummy(x):
    return x.new_empty(1)


# ---------------------------------------------------------------------------
# raw launchers
# ---------------------------------------------------------------------------

def _fwd(x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus, chunk_size,
         for_grad=False):
    """``(y, final state, decays)``: decays is what :func:`_pre_decays` made (or None), which
    the backward can take instead of running the pre-pass again (``for_grad``: with the rows
    only the backward reads)."""
    b, T, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    # B, C share x's dtype inside the dots
    B = B.to(x.dtype)
    C = C.to(x.dtype)
    cfg = pick_config(p, n, None if chunk_size < 0 else chunk_size, x.dtype, "fwd")
    y = torch.empty_like(x)
    hT = torch.empty(b, h, p, n, device=x.device, dtype=torch.float32)
    d = _dummy(x)
    grid = (_cdiv(p, cfg["BP"]), b * h)
    if T == 0:
        hT.copy_(h0 if h0 is not None else torch.zeros_like(hT))
        return y, hT, None
    pre = _pre("fwd")
    with _device_ctx(x):
        dec, etot = _pre_decays(pre, x, dtla, A, dt_bias, seq_idx, has_dt, dt_softplus,
                                cfg["Q"], for_grad)
        fast = _fast(x.dtype, pre)
        for factored in _launches(fast):
            K.ssd_fwd_kernel[grid](
                x, dtla, A if A is not None else d, dt_bias if dt_bias is not None else d, B, C,
                D if D is not None else d, z if z is not None else d,
                h0 if h0 is not None else d, seq_idx if seq_idx is not None else d, dec, etot,
                y, hT,
                T, h, g, p, n,
                HAS_DT=has_dt, DT_SOFTPLUS=dt_softplus, HAS_DTB=dt_bias is not None,
                HAS_D=D is not None, D_PER_P=D is not None and D.dim() == 2,
                HAS_Z=z is not None, HAS_H0=h0 is not None, HAS_SEQ=seq_idx is not None,
                STORE_HT=True, Q=cfg["Q"], BP=cfg["BP"], BN=cfg["BN"], PREC=_prec(x.dtype),
                CLAMP_C=CLAMP, PRE=pre, FACTOR=_factor("fwd"), FAST=fast,
                FACTORED=factored, EVEN=_even(cfg, T, p, n), UNROLL=cfg.get("UNROLL", 1),
                STATE_T=bool(cfg["STATE_T"]), **_launch_opts(cfg))
    return y, hT, ((cfg["Q"], dec, etot) if pre else None)


# Defaults from the H200 runs (benchmarks/NOTES.md, runs 5 and 9): the decay pre-pass in both
# directions (the factored loops need its chunk decays); in the exact loop, the per-entry decay
# tile forward and the factorized tile backward. The environment overrides both directions.
_DEFAULTS = {"fwd": dict(pre="1", factor="0"), "bwd": dict(pre="1", factor="1")}


def _factor(kind: str = "fwd") -> bool:
    return os.environ.get("SEMISEP_TRITON_FACTOR", _DEFAULTS[kind]["factor"]) == "1"


def _fast(dtype, pre: bool) -> bool:
    """Whether the sweeps run their factored loop where every chunk of a (b, h) decays by
    more than ``decays.FACTOR_MIN`` (read from the pre-pass's chunk decays).

    Not for float16, whose range the factored operands ``x exp(-l)`` (up to ``2^64 |x|``)
    exceed; ``SEMISEP_TRITON_FAST=0`` turns it off (experiments).
    """
    return (pre and dtype != torch.float16
            and os.environ.get("SEMISEP_TRITON_FAST", "1") == "1")


def _launches(fast: bool):
    """The FACTORED values to launch a sweep with: both when programs choose (``fast``)."""
    return (True, False) if fast else (False,)


def _pre(kind: str = "fwd") -> bool:
    return os.environ.get("SEMISEP_TRITON_PRE_DECAYS", _DEFAULTS[kind]["pre"]) == "1"


def _pre_decays(pre, x, dtla, A, dt_bias, seq_idx, has_dt, dt_softplus, Q, for_grad=True):
    """The decay arrays of :func:`.decays.ssd_decays_kernel` (or dummies when not ``pre``);
    ``for_grad``: with rows 6-7, which only the backward reads."""
    if not pre:
        d = _dummy(x)
        return d.float(), d.float()
    b, T, h = dtla.shape
    nc = _cdiv(T, Q)
    dec = torch.empty(8 if for_grad else 6, b * h, nc * Q, device=x.device,
                      dtype=torch.float32)
    etot = torch.empty(b * h, nc, device=x.device, dtype=torch.float32)
    d = _dummy(x)
    ssd_decays_kernel[(nc, b * h)](
        dtla, A if A is not None else d, dt_bias if dt_bias is not None else d,
        seq_idx if seq_idx is not None else d, dec, etot, T, h,
        HAS_DT=has_dt, DT_SOFTPLUS=dt_softplus, HAS_DTB=dt_bias is not None,
        HAS_SEQ=seq_idx is not None, Q=Q, CLAMP_C=CLAMP, GRAD_ROWS=for_grad)
    return dec, etot


def _sweeps_bwd(dy, dhT, x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus,
                chunk_size, need_dh0, fp32_states, decays=None):
    """The two backward sweeps: the state forward, then its adjoint backward. ``decays``:
    the forward's ``(Q, dec, etot)``, used when the chunk size matches."""
    b, T, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    Bx = B.to(x.dtype)
    Cx = C.to(x.dtype)
    dy = dy.contiguous()
    cfg = pick_config(p, n, None if chunk_size < 0 else chunk_size, x.dtype, "bwd")
    BP = cfg["BP"]
    npb = _cdiv(p, BP)
    f32 = dict(device=x.device, dtype=torch.float32)
    # dB, dC: added in place over heads and p-blocks (fp32, the order of the sums not fixed:
    # not bit-reproducible), or under torch.use_deterministic_algorithms one partial per head
    atomic = not torch.are_deterministic_algorithms_enabled()
    if atomic:
        dC_part = torch.zeros(1, b, T, g, 1, n, **f32)
        dB_part = torch.zeros(1, b, T, g, 1, n, **f32)
    else:
        dC_part = torch.empty(npb, b, T, h, n, **f32)
        dB_part = torch.empty(npb, b, T, h, n, **f32)
    nc = _cdiv(T, cfg["Q"])
    w = torch.empty(npb, b * h, T, **f32)
    # the raw dt's (or log_a's) gradient, and per program the sums for dA and d dt_bias
    # (DA_ROWS: dA's terms per position, laid out as ddt)
    ddt = torch.empty(npb, b, T, h, **f32)
    da_rows = bool(cfg.get("DA_ROWS", 0))
    if not has_dt:
        dsum = _dummy(ddt)
    elif da_rows:
        dsum = torch.empty(npb, b, T, h, **f32)
    else:
        dsum = torch.empty(2, npb, b, h, **f32)
    st_dtype = torch.float32 if (x.dtype == torch.float32 or fp32_states) else x.dtype
    # the chunk states the reverse sweep reads (every STATE_EVERY-th: a knob for memory)
    every = cfg.get("STATE_EVERY", 1)
    if every not in (1, 2):
        raise ValueError(f"STATE_EVERY must be 1 or 2, got {every}")
    states = torch.empty(b, h, _cdiv(nc, every), p, n, device=x.device, dtype=st_dtype)
    dz = torch.empty_like(z) if z is not None else None
    dD_part = torch.empty(b, h, p, **f32) if D is not None else None
    dx = torch.empty_like(x)
    dh0 = torch.empty(b, h, p, n, **f32) if need_dh0 else None
    d = _dummy(x)
    o = lambda t: t if t is not None else d  # noqa: E731
    grid = (npb, b * h)
    flags = dict(HAS_DT=has_dt, DT_SOFTPLUS=dt_softplus, HAS_DTB=dt_bias is not None,
                 HAS_D=D is not None, D_PER_P=D is not None and D.dim() == 2,
                 HAS_Z=z is not None, HAS_SEQ=seq_idx is not None, HAS_DHT=dhT is not None,
                 Q=cfg["Q"], BP=BP, BN=cfg["BN"], PREC=_prec(x.dtype), CLAMP_C=CLAMP,
                 EVEN=_even(cfg, T, p, n), HAS_H0=h0 is not None, STATE_EVERY=every)
    pre = _pre("bwd")
    fast = _fast(x.dtype, pre)
    if T > 0:
        with _device_ctx(x):
            if pre and decays is not None and decays[0] == cfg["Q"] and len(decays[1]) == 8:
                dec, etot = decays[1:]
            else:
                dec, etot = _pre_decays(pre, x, dtla, A, dt_bias, seq_idx, has_dt, dt_softplus,
                                        cfg["Q"])
            flags.update(PRE=pre, FACTOR=_factor("bwd"), ATOMIC=atomic, FAST=fast)
            for factored in _launches(fast):
                K.ssd_bwd_fwdsweep_kernel[grid](
                    x, dtla, o(A), o(dt_bias), Bx, Cx, o(D), o(z), o(h0), o(seq_idx), dy,
                    dec, etot, o(dhT),
                    dC_part, w, o(dz), o(dD_part), states,
                    T, h, g, p, n, npb, FACTORED=factored, **flags,
                    **_launch_opts(cfg))
            for factored in _launches(fast):
                K.ssd_bwd_revsweep_kernel[grid](
                    x, dtla, o(A), o(dt_bias), Bx, Cx, o(D), o(z), o(h0), o(seq_idx), dy, o(dhT),
                    dec, etot, states, w, dx, dB_part, ddt, dsum, o(dh0),
                    T, h, g, p, n, npb, STORE_DH0=need_dh0, DA_ROWS=da_rows,
                    FACTORED=factored, **flags,
                    **_launch_opts(cfg))
    else:
        if need_dh0:
            dh0.copy_(dhT if dhT is not None else torch.zeros_like(dh0))
        ddt.zero_()
        dsum.zero_()
        if dD_part is not None:
            dD_part.zero_()
    del states
    # one p-block (p <= 64): the partials are the sums
    ddt = ddt[0] if npb == 1 else ddt.sum(0)
    # over (p-blocks,) batch (and time): the gradients of A and dt_bias, per head
    if not has_dt:
        sums = (None, None)
    elif da_rows:
        sums = (dsum.sum((0, 1, 2)), ddt.sum((0, 1)))
    else:
        sums = (dsum[0].sum((0, 1)), dsum[1].sum((0, 1)))
    if atomic:
        dB32, dC32 = dB_part.view(b, T, g, n), dC_part.view(b, T, g, n)
    else:
        dB32 = dB_part.view(npb, b, T, g, h // g, n).sum((0, 4))
        dC32 = dC_part.view(npb, b, T, g, h // g, n).sum((0, 4))
    dDp = None if dD_part is None else dD_part
    return dx, dz, ddt, sums, dB32, dC32, dDp, dh0


def _bwd(dy, dhT, x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus,
         chunk_size, fp32_states, decays=None):
    """The gradients of every input, in the op's order (None for the absent ones)."""
    dx, dz, ddt, sums, dB32, dC32, dD_part, dh0 = _sweeps_bwd(
        dy, dhT, x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus,
        chunk_size, h0 is not None, fp32_states, decays)
    # the kernels applied the chain rule of the clamp, dt -> dt A and the softplus
    dA = ddtb = None
    if has_dt:
        dA = sums[0].to(A.dtype)
        if dt_bias is not None:
            ddtb = sums[1].to(dt_bias.dtype)
    ddtla = ddt.to(dtla.dtype)
    dB = dB32.to(B.dtype)
    dC = dC32.to(C.dtype)
    dD = None
    if D is not None:
        dD = dD_part.sum(0)
        dD = (dD if D.dim() == 2 else dD.sum(-1)).to(D.dtype)
    if dh0 is not None and h0 is not None:
        dh0 = dh0.to(h0.dtype)
    return dx, ddtla, dA, dB, dC, dD, dz, ddtb, dh0


# ---------------------------------------------------------------------------
# torch.library ops
# ---------------------------------------------------------------------------

@torch.library.custom_op("semisep::ssd_chunked_fwd", mutates_args=())
def _op_fwd(x: torch.Tensor, dtla: torch.Tensor, A: Optional[torch.Tensor], B: torch.Tensor,
            C: torch.Tensor, D: Optional[torch.Tensor], z: Optional[torch.Tensor],
            dt_bias: Optional[torch.Tensor], h0: Optional[torch.Tensor],
            seq_idx: Optional[torch.Tensor], has_dt: bool, dt_softplus: bool,
            chunk_size: int, fp32_states: bool) -> tuple[torch.Tensor, torch.Tensor]:
    # fp32_states is for the backward (setup_context keeps it): the forward's state is fp32
    y, hT, _ = _fwd(x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus,
                    chunk_size)
    return y, hT


@_op_fwd.register_fake
def _(x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus, chunk_size,
      fp32_states):
    b, T, h, p = x.shape
    n = B.shape[-1]
    return torch.empty_like(x), x.new_empty(b, h, p, n, dtype=torch.float32)


def _empty_like_or_none(t, ref):
    return t if t is not None else ref.new_empty(0)


@torch.library.custom_op("semisep::ssd_chunked_bwd", mutates_args=())
def _op_bwd(dy: torch.Tensor, dhT: Optional[torch.Tensor], x: torch.Tensor, dtla: torch.Tensor,
            A: Optional[torch.Tensor], B: torch.Tensor, C: torch.Tensor,
            D: Optional[torch.Tensor], z: Optional[torch.Tensor],
            dt_bias: Optional[torch.Tensor], h0: Optional[torch.Tensor],
            seq_idx: Optional[torch.Tensor], has_dt: bool, dt_softplus: bool,
            chunk_size: int, fp32_states: bool) -> list[torch.Tensor]:
    outs = _bwd(dy, dhT, x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus,
                chunk_size, fp32_states)
    return [_empty_like_or_none(t, x) for t in outs]


@_op_bwd.register_fake
def _(dy, dhT, x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus, chunk_size,
      fp32_states):
    e = x.new_empty(0)
    return [torch.empty_like(x), torch.empty_like(dtla),
            torch.empty_like(A) if has_dt else e, torch.empty_like(B), torch.empty_like(C),
            torch.empty_like(D) if D is not None else e,
            torch.empty_like(z) if z is not None else e,
            torch.empty_like(dt_bias) if (has_dt and dt_bias is not None) else e,
            torch.empty_like(h0) if h0 is not None else e]


def _save(ctx, inputs):
    (x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus, chunk_size,
     fp32_states) = inputs
    ctx.save_for_backward(x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx)
    ctx.flags = (has_dt, dt_softplus, chunk_size, fp32_states)


def _input_grads(ctx, dy, dhT, bwd):
    """The gradients of the op's 14 inputs from ``bwd`` (the raw :func:`_bwd` in eager mode,
    the ``ssd_chunked_bwd`` op under torch.compile)."""
    x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx = ctx.saved_tensors
    has_dt, dt_softplus, chunk_size, fp32_states = ctx.flags
    if dy is None:
        dy = torch.zeros_like(x)
    dx, ddtla, dA, dB, dC, dD, dz, ddtb, dh0 = bwd(
        dy, dhT, x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus, chunk_size,
        fp32_states)
    nz = lambda g, ref: g if ref is not None else None  # noqa: E731
    return (dx, ddtla, dA if has_dt else None, dB, dC, nz(dD, D), nz(dz, z),
            ddtb if (has_dt and dt_bias is not None) else None, nz(dh0, h0), None, None, None,
            None, None)


def _setup(ctx, inputs, output):
    _save(ctx, inputs)


def _backward(ctx, dy, dhT):
    return _input_grads(ctx, dy, dhT, _op_bwd)


torch.library.register_autograd("semisep::ssd_chunked_fwd", _backward, setup_context=_setup)




class _EagerSSD(torch.autograd.Function):
    """The eager twin of the op: the same launchers and gradients without the custom-op
    dispatch, whose checks cost more host time than the kernels at T <= 4K (H200 profile in
    benchmarks/NOTES.md). Under torch.compile the op is used, for its fake tensors."""

    @staticmethod
    def forward(ctx, *inputs):
        ctx.set_materialize_grads(False)
        _save(ctx, inputs)
        y, hT, ctx.decays = _fwd(*inputs[:-1], for_grad=any(ctx.needs_input_grad))
        return y, hT

    @staticmethod
    def backward(ctx, dy, dhT):
        # the forward's decay arrays: no second pre-pass (the op recomputes them)
        decays, ctx.decays = ctx.decays, None
        return _input_grads(ctx, dy, dhT, functools.partial(_bwd, decays=decays))


# ---------------------------------------------------------------------------
# public functions
# ---------------------------------------------------------------------------

def ssd(x, log_a=None, B=None, C=None, *, dt=None, A=None, D=None, z=None, dt_bias=None,
        dt_softplus=False, initial_state=None, seq_idx=None, chunk_size=None,
        return_final_state=False, final_state_dtype=None, fp32_states=False):
    """Chunked SSD on the Triton kernels (the ``ssd`` layout; see DESIGN.md and issue 5).

    Either ``log_a`` ``(b, T, h)`` or ``dt`` ``(b, T, h)`` with ``A`` ``(h,)`` (then the
    kernels use ``log_a = dt * A`` and the input ``dt * x``). Returns ``y`` (x's dtype),
    or ``(y, final_state)`` with ``return_final_state`` (fp32 unless ``final_state_dtype``).
    ``fp32_states`` stores the per-chunk states the backward keeps in fp32 rather than in x's
    dtype (fp32 inputs always do); the forward's state and all accumulation are fp32 anyway.
    """
    if B is None or C is None:
        raise TypeError("ssd() needs B and C")
    has_dt = dt is not None
    if has_dt == (log_a is not None):
        raise ValueError("pass exactly one of log_a and dt (with A)")
    if has_dt and A is None:
        raise ValueError("dt needs A, shape (heads,)")
    if not has_dt and (A is not None or dt_bias is not None or dt_softplus):
        raise ValueError("A, dt_bias and dt_softplus go with dt, not with log_a")
    dtla = dt if has_dt else log_a
    _check(x, dtla, B, C, A, D, z, dt_bias, initial_state, seq_idx, has_dt)
    reason = supports_reason(x, B, C, chunk_size=chunk_size)
    if reason is not None:
        raise ValueError(f"backend 'triton' cannot run this ssd: {reason}")
    if seq_idx is not None:
        seq_idx = seq_idx.to(torch.int32)
    op = _op_fwd if torch.compiler.is_compiling() else _EagerSSD.apply
    y, hT = op(x.contiguous(), dtla.contiguous(), _c(A), B.contiguous(), C.contiguous(),
               _c(D), _c(z), _c(dt_bias), _c(initial_state), _c(seq_idx), has_dt,
               bool(dt_softplus), -1 if chunk_size is None else int(chunk_size),
               bool(fp32_states))
    if not return_final_state:
        return y
    if final_state_dtype is not None:
        hT = hT.to(final_state_dtype)
    return y, hT


def ssd_decode_step(state, x, B, C, *, log_a=None, dt=None, A=None, D=None, z=None,
                    dt_bias=None, dt_softplus=False):
    """One token: ``state`` ``(b, h, p, n)`` is updated in place; returns ``y`` ``(b, h, p)``.

    ``x`` ``(b, h, p)``, ``B``/``C`` ``(b, g, n)``, ``log_a`` or ``dt`` ``(b, h)``. The state
    may be fp32 (recommended) or the input dtype; arithmetic is fp32.
    """
    has_dt = dt is not None
    if has_dt == (log_a is not None):
        raise ValueError("pass exactly one of log_a and dt (with A)")
    b, h, p = x.shape
    g, n = B.shape[-2], B.shape[-1]
    if state.shape != (b, h, p, n):
        raise _shape_err("state", state.shape, (b, h, p, n))
    if B.shape != (b, g, n) or C.shape != B.shape:
        raise _shape_err("B/C", B.shape, f"({b}, groups, {n})")
    if not state.is_contiguous():
        raise ValueError("state must be contiguous (it is updated in place)")
    dtla = (dt if has_dt else log_a).contiguous()
    y = torch.empty_like(x)
    BP = max(16, min(64, _pow2(p)))
    BN = max(16, _pow2(n))
    d = _dummy(x)
    with _device_ctx(x):
        K.ssd_decode_kernel[(_cdiv(p, BP), b * h)](
            state, x.contiguous(), dtla, A if A is not None else d,
            dt_bias if dt_bias is not None else d, B.contiguous(), C.contiguous(),
            _c(D) if D is not None else d, _c(z) if z is not None else d, y,
            h, g, p, n,
            HAS_DT=has_dt, DT_SOFTPLUS=bool(dt_softplus), HAS_DTB=dt_bias is not None,
            HAS_D=D is not None, D_PER_P=D is not None and D.dim() == 2, HAS_Z=z is not None,
            BP=BP, BN=BN, CLAMP_C=CLAMP)
    return y

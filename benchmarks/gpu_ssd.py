"""GPU checks and side-by-side timings of the Triton SSD (issue 5).

One run does: the two ceilings (copy GB/s, bf16 matmul TFLOP/s), correctness at full size
against float64 references, a second CUDA device when there is one, the >2^31-element run,
torch.compile, decode, and the timing grid for semisep and the anchors (mamba_ssm
``mamba_chunk_scan_combined``, fla ``chunk_simple_gla`` and ``fused_chunk_simple_gla``, torch
SDPA causal), each when importable.

    python benchmarks/gpu_ssd.py --out DIR [--skip-checks] [--skip-bench] [--variants ...]
                                 [--repeat K] [--host] [--cache-in FILE] [--cache-out FILE]

Writes DIR/h200_ssd.json (one row per impl, N, T: fwd_ms, fwdbwd_ms, peak_mb) and a log.
Variants of our kernels are given as ``name:ENV=VAL;ENV=VAL`` (env read by pick_config).
``--host`` adds, after each timing, the host time of one call (the calls queued behind a sleep
kernel, the least of 3 rounds): where it is near the timing, the host set the cell's pace.
``--repeat K`` times each cell K times, every impl in turn, and keeps the medians (the host,
which bounds the calls up to 4K steps, drifts by up to 30 % within a run).
``--cache-out`` packs the Triton kernel cache of the run (ours and the anchors') into a tar,
``--cache-in`` starts from one: on a fresh machine the checks spend most of their ~250 s
compiling, and a kernel whose source did not change is then not compiled again.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import statistics
import sys
import tarfile
import tempfile
import time
import traceback
import types

import torch

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, REPO)

LOG_PATH = []   # DIR/log.txt once main() knows DIR: every line is appended as it is logged


def _ensure_semisep():
    """Import semisep; if the package's own __init__ fails (a colleague's edit in flight on
    the copied tree), load the backends package alone so the kernels can still be measured."""
    try:
        import semisep  # noqa: F401
    except Exception as e:  # noqa: BLE001
        print(f"import semisep failed ({type(e).__name__}: {e}); loading semisep.backends alone",
              flush=True)
        for k in [k for k in sys.modules if k == "semisep" or k.startswith("semisep.")]:
            del sys.modules[k]
        for name, sub in [("semisep", "semisep"), ("semisep.backends", "semisep/backends")]:
            m = types.ModuleType(name)
            m.__path__ = [os.path.join(REPO, sub)]
            sys.modules[name] = m


_ensure_semisep()


def log(*a):
    """Print and append to DIR/log.txt at once (a run cut by a time limit keeps its log)."""
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    if LOG_PATH:
        with open(LOG_PATH[0], "a") as f:
            f.write(s + "\n")


# ---------------------------------------------------------------------------
# anchors
# ---------------------------------------------------------------------------

def load_mamba():
    """mamba_chunk_scan_combined from the pure-Python wheel, without its package __init__."""
    spec = importlib.util.find_spec("mamba_ssm")
    if spec is None:
        return None
    root = os.path.dirname(spec.origin)
    for name, sub in [("mamba_ssm", ""), ("mamba_ssm.ops", "ops"),
                      ("mamba_ssm.ops.triton", "ops/triton"), ("mamba_ssm.utils", "utils")]:
        if name not in sys.modules:
            m = types.ModuleType(name)
            m.__path__ = [os.path.join(root, sub)]
            sys.modules[name] = m
    from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
    return mamba_chunk_scan_combined


def load_fla():
    from fla.ops.simple_gla import chunk_simple_gla, fused_chunk_simple_gla
    return chunk_simple_gla, fused_chunk_simple_gla


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def env_set(changes):
    """The environment variables ``changes`` set inside the block, restored after it."""
    old = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def rel(a, b):
    a = a.double()
    b = b.double()
    if not torch.isfinite(a).all():
        return float("nan")
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def reference_grads(args, kw, ins, gy, gs=None, y_dtype=None):
    """``(y, final state, gradients)`` of the float64 reference
    ``naive.ssd_reference_chunked(*args, **kw)`` for the loss ``sum(y gy) (+ sum(final gs))``,
    with each tensor of ``ins`` (the leaves) replaced by a float64 copy: a gradient taken from
    a bf16 leaf would come back rounded to bf16 (about 0.3e-3 of dx's 3e-3, NOTES.md s24).
    ``y_dtype``: gy rounded to it first, as the backward of an implementation whose y has that
    dtype receives it (the float64 gradient of what it is given; s26-2: in bf16 that rounding
    alone moves dA by 1.5e-3 to 3.6e-3 on the Gluon checks' draws, their ``dA floor``)."""
    from semisep.backends.triton import naive
    copies = {id(t): t.detach().double().requires_grad_(True) for t in ins}

    def sub(v):
        return copies.get(id(v), v)

    if y_dtype is not None:
        gy = gy.to(y_dtype)
    yr, sr = naive.ssd_reference_chunked(*map(sub, args), **{k: sub(v) for k, v in kw.items()})
    loss = (yr * gy.double()).sum()
    if gs is not None:
        loss = loss + (sr * gs.double()).sum()
    return yr, sr, torch.autograd.grad(loss, [copies[id(t)] for t in ins])


def make_inputs(b, T, h, p, g, n, dtype, seed=0, device="cuda"):
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(b, T, h, p, device=device, generator=gen).to(dtype)
    dt = torch.exp(torch.empty(b, T, h, device=device).uniform_(math.log(1e-3), math.log(1e-1),
                                                                generator=gen))
    A = -torch.empty(h, device=device).uniform_(1, 16, generator=gen)
    B = (torch.randn(b, T, g, n, device=device, generator=gen) / math.sqrt(n)).to(dtype)
    C = torch.randn(b, T, g, n, device=device, generator=gen).to(dtype)
    D = torch.randn(h, device=device, generator=gen)
    return x, dt, A, B, C, D


def ceilings():
    out = {}
    a = torch.empty(2 * 1024**3 // 4, device="cuda", dtype=torch.float32).uniform_()
    bb = torch.empty_like(a)
    from triton.testing import do_bench
    ms = do_bench(lambda: bb.copy_(a), warmup=25, rep=200, return_mode="median")
    out["copy_GBps"] = 2 * a.numel() * 4 / ms / 1e6
    m = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    m2 = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = do_bench(lambda: m @ m2, warmup=25, rep=200, return_mode="median")
    out["bf16_TFLOPs"] = 2 * 8192**3 / ms / 1e9
    torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------------------
# checks
# ---------------------------------------------------------------------------

_GLUON_KERNELS = ("ssd_fwd_gluon_kernel", "ssd_bwd_fwdsweep_gluon_kernel",
                  "ssd_bwd_revsweep_gluon_kernel")


def gluon_checks(report):
    """Section 1b of the checks: the Gluon kernels (semisep/backends/triton/gluon_fwd.py,
    gluon_bwd.py: sm_90, bf16) against the Triton kernels and float64, each case with and
    without them (``SEMISEP_TRITON_GLUON``), two launches a sweep (the factored one is
    Gluon's), head 3 decaying past FACTOR_MIN (its programs run the Triton kernels' exact
    loops beside the Gluon ones), dt_bias with softplus and D. Cases: p = 128 (two p-blocks:
    the forward's Gluon kernel, the Triton backward), p = 64 (every Gluon kernel), n = 128
    (the forward's Gluon kernel in chunks of 64 with B, C in halves, the backward's sweeps
    in two blocks; off, the Triton forward in the same chunks without GRAM), n = 128 with z
    (the backward's Gluon sweeps in two blocks of columns, the second adding its dx, after
    the gate's pass; the Triton forward), and n = 128 with the default plan (the forward's
    Gluon kernel, the backward's whole state at once in the Triton sweeps)."""
    from semisep.backends.triton import gluon_bwd, gluon_launch
    # its own draws, the same in --quick-checks and --gluon-checks (and probe/grad_error.py)
    torch.manual_seed(0)
    # the backward's kernels at these small shapes too (they take calls of 2^27 and more)
    at_least, gluon_bwd.AT_LEAST = gluon_bwd.AT_LEAST, 0
    try:
        _gluon_cases(report)
    finally:
        gluon_bwd.AT_LEAST = at_least
    # every kernel compiled above launches through its C launcher (gluon_launch._direct)
    compiled = gluon_launch._COMPILED.values()
    report("gluon: every kernel launched directly (0: yes)",
           float(not compiled or any(run is None for _, run in compiled)), 0.5)


# the cases of gluon_checks: tag, (b, T, h, p, g, n), with z, which of _GLUON_KERNELS they
# launch, the environment of the run they are compared with (SEMISEP_TRITON_GLUON=0), the
# environment of both runs. The n = 128 Gluon forward runs chunks of 64 without GRAM: the
# Triton kernel too, there. At these sizes an n = 128 call's backward runs its whole state at
# once by default (config.whole_state), which the Gluon sweeps do not take: NB=64 puts the
# first two n = 128 cases in blocks of 64 columns (the plan of such calls before s33); the
# last one runs the default plan (appended last: the earlier cases' draws stay as they were)
_SAME_PLAN = {"SEMISEP_TRITON_FWD": "Q=64", "SEMISEP_TRITON_GRAM": "0"}
_BLOCKS = {"SEMISEP_TRITON_BWD": "NB=64"}
GLUON_CASES = [
    ("p128", (2, 4096, 8, 128, 2, 64), False, (1, 0, 0), {}, {}),
    ("p64", (2, 4096, 8, 64, 2, 64), False, (1, 1, 1), {}, {}),
    ("n128", (2, 4096, 8, 64, 2, 128), False, (1, 1, 1), _SAME_PLAN, _BLOCKS),
    ("n128 z", (2, 4096, 8, 64, 2, 128), True, (0, 1, 1), {}, _BLOCKS),
    ("n128 whole", (2, 4096, 8, 64, 2, 128), False, (1, 0, 0), _SAME_PLAN, {}),
]


def gluon_case_inputs():
    """Per case of :data:`GLUON_CASES`, in order: ``(case, ins, kw, gy)``, the inputs (each
    requiring grad), ``ssd``'s keywords and the output's cotangent. dt_bias, z and gy come
    from the global generator, as :func:`gluon_checks` seeds it (``torch.manual_seed(0)``):
    drawn after that seed, the cases repeat the checks' inputs (``probe/grad_error.py
    --case``)."""
    for case in GLUON_CASES:
        b, T, h, p, g, n = case[1]
        x, dt, A, B, C, D = make_inputs(b, T, h, p, g, n, torch.bfloat16, seed=4)
        A[3] = -1e4
        dtb = torch.randn(h, device="cuda") * 0.5
        ins = [x, dt, A, B, C, D, dtb]
        kw = dict(dt=dt, A=A, D=D, dt_bias=dtb, dt_softplus=True)
        if case[2]:
            z = torch.randn(b, T, h, p, device="cuda").to(torch.bfloat16)
            ins.append(z)
            kw["z"] = z
        for t in ins:
            t.requires_grad_(True)
        gy = torch.randn(b, T, h, p, device="cuda")
        yield case, ins, kw, gy


def _gluon_cases(report):
    """The cases of :func:`gluon_checks`."""
    from semisep.backends.triton import ssd
    for (tag, _, _, expect, off, both), ins, kw, gy in gluon_case_inputs():
        x, B, C = ins[0], ins[3], ins[4]
        runs = {}
        for flag in ("1", "0"):
            with env_set({"SEMISEP_TRITON_ONE_LAUNCH": "0", "SEMISEP_TRITON_GLUON": flag,
                          **both, **(off if flag == "0" else {})}):
                with torch.profiler.profile(
                        activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    y, hT = ssd(x, None, B, C, return_final_state=True, **kw)
                    grads = torch.autograd.grad((y.float() * gy).sum(), ins)
                    torch.cuda.synchronize()
                names = {e.key for e in prof.key_averages()}
                runs[flag] = (y, hT, grads,
                              [any(k in nm for nm in names) for k in _GLUON_KERNELS])
        yr, sr, gref = reference_grads((x, None, B, C), kw, ins, gy, y_dtype=x.dtype)
        (y1, s1, g1, ran1), (y0, s0, g0, ran0) = runs["1"], runs["0"]
        # what the cotangent's rounding to bf16 alone makes of dA (the reference given gy
        # unrounded against the one given it rounded, as every bf16 implementation gets it)
        _, _, gexact = reference_grads((x, None, B, C), kw, ins, gy)
        log(f"  dA floor (gy's bf16 rounding alone) {tag}: {rel(gref[2], gexact[2]):.3e}; "
            f"dA against the unrounded gy's gradient {rel(g1[2], gexact[2]):.3e}")
        # a forward that autograd does not record (the pre-pass's factored rows only)
        with env_set({"SEMISEP_TRITON_ONE_LAUNCH": "0", **both}), torch.no_grad():
            yn, sn = ssd(x, None, B, C, return_final_state=True, **kw)
        report(f"gluon {tag} y without autograd vs with", rel(yn, y1), 1e-6)
        report(f"gluon {tag} final without autograd vs with", rel(sn, s1), 1e-6)
        # the kernels launched (torch's profiler): where they apply by default, none when off
        report(f"gluon {tag}: kernels launched as expected (0: yes)",
               float([int(r) for r in ran1] != list(expect)), 0.5)
        report(f"gluon {tag}: none launched when off (0: right)", float(any(ran0)), 0.5)
        report(f"gluon {tag} y", rel(y1, yr), 5e-3)
        report(f"gluon {tag} final", rel(s1, sr), 5e-3)
        names = ["dx", "ddt", "dA", "dB", "dC", "dD", "ddt_bias", "dz"]
        for nm, a, r in zip(names, g1, gref):
            report(f"gluon {tag} {nm}", rel(a, r), 5e-3)
        # the same operations in the same order as the Triton kernels' factored loops: the
        # forward's y equal bit for bit in s19-8; the sums are atomic (in no fixed order)
        report(f"gluon {tag} y vs triton", rel(y1, y0), 1e-6)
        report(f"gluon {tag} final vs triton", rel(s1, s0), 1e-5)
        for nm, a, c in zip(names, g1, g0):
            report(f"gluon {tag} {nm} vs triton", rel(a, c), 1e-4)
        del x, B, C, ins, kw, gy, y, hT, yr, sr, gref, gexact, runs, y1, y0, g1, g0, grads, yn
        torch.cuda.empty_cache()


def checks(results, quick=False, late=False, gluon=False):
    """The correctness checks; ``quick``: sections 1-3 only, ``late``: sections 4-8 only,
    ``gluon``: section 1b only."""
    from semisep.backends.triton import naive, ssd, ssd_decode_step
    # the inputs drawn from the global generator (until run 17 unseeded: the all-extras
    # case's dA and dt_bias moved between runs with its random dt)
    torch.manual_seed(0)
    ok = True

    def report(name, val, tol):
        nonlocal ok
        good = (val == val) and val <= tol
        ok &= good
        log(f"  {'ok ' if good else 'BAD'} {name}: {val:.3e} (tol {tol:.0e})")
        results.setdefault("checks", {})[name] = val
        if not good:
            results.setdefault("checks_failed", []).append(f"{name}: {val:.3e} > {tol:.0e}")

    if gluon:
        gluon_checks(report)
        results["checks_ok"] = ok
        return ok
    if not late:
        # 1. bf16 / fp32 / fp16, forward and backward, against the float64 chunked reference
        for dtype, tol, (b, T, h, p, g, n) in [
            (torch.bfloat16, 5e-3, (2, 4000, 32, 64, 1, 64)),
            (torch.bfloat16, 5e-3, (1, 2048, 32, 64, 4, 128)),
            (torch.bfloat16, 5e-3, (2, 1024, 8, 128, 1, 64)),   # p = 128: two p-blocks per head
            (torch.bfloat16, 5e-3, (2, 1000, 8, 32, 1, 64)),    # p = 32: p-blocks of 32 (run 19)
            # the other block shapes pick_config makes: n of 16, 32, 256 and p of 16, 256
            (torch.bfloat16, 5e-3, (1, 1000, 4, 64, 1, 16)),
            (torch.bfloat16, 5e-3, (1, 1000, 4, 64, 1, 32)),
            (torch.bfloat16, 5e-3, (1, 1000, 4, 64, 1, 256)),
            (torch.bfloat16, 5e-3, (1, 1000, 4, 16, 1, 64)),
            (torch.bfloat16, 5e-3, (1, 1000, 4, 256, 1, 64)),
            (torch.float32, 1e-5, (1, 1000, 8, 64, 2, 64)),
            (torch.float16, 5e-3, (2, 1000, 8, 64, 1, 64)),     # float16: the exact loop only
        ]:
            x, dt, A, B, C, D = make_inputs(b, T, h, p, g, n, dtype, seed=1)
            h0 = torch.randn(b, h, p, n, device="cuda")
            ins = [x, dt, A, B, C, D, h0]
            for t in ins:
                t.requires_grad_(True)
            y, hT = ssd(x, None, B, C, dt=dt, A=A, D=D, initial_state=h0, return_final_state=True)
            gy = torch.randn_like(y)
            gs = torch.randn_like(hT)
            grads = torch.autograd.grad((y.float() * gy.float()).sum() + (hT * gs).sum(), ins)
            yr, sr, gref = reference_grads(
                (x, None, B, C), dict(dt=dt, A=A, D=D, initial_state=h0), ins, gy, gs)
            tag = f"{str(dtype)[6:]} b{b} T{T} h{h} p{p} g{g} n{n}"
            if dtype == torch.bfloat16 and n == 64:
                y2 = ssd(x, None, B, C, dt=dt, A=A, D=D, initial_state=h0, fp32_states=True)
                g2 = torch.autograd.grad((y2.float() * gy.float()).sum(), (dt, A))
                yr2, _ = naive.ssd_reference_chunked(x, None, B, C, dt=dt, A=A, D=D,
                                                     initial_state=h0)
                gr2 = torch.autograd.grad((yr2 * gy.double()).sum(), (dt, A))
                report(f"{tag} ddt (fp32 states)", rel(g2[0], gr2[0]), tol)
                report(f"{tag} dA (fp32 states)", rel(g2[1], gr2[1]), tol)
            report(f"{tag} y", rel(y, yr), tol)
            report(f"{tag} final", rel(hT, sr), tol)
            for nm, a, r in zip(["dx", "ddt", "dA", "dB", "dC", "dD", "dh0"], grads, gref):
                report(f"{tag} {nm}", rel(a, r), tol)
            del x, dt, A, B, C, D, h0, y, hT, yr, sr, grads, gref
            torch.cuda.empty_cache()

        gluon_checks(report)

        # 2. all the extras (bf16): z, D (h,p), dt_bias + softplus, seq_idx, initial state
        b, T, h, p, g, n = 2, 3000, 8, 64, 2, 64
        x, dt, A, B, C, _ = make_inputs(b, T, h, p, g, n, torch.bfloat16, seed=2)
        dt = torch.randn(b, T, h, device="cuda") - 3
        D = torch.randn(h, p, device="cuda")
        z = torch.randn(b, T, h, p, device="cuda").to(torch.bfloat16)
        dtb = torch.randn(h, device="cuda") * 0.5
        h0 = torch.randn(b, h, p, n, device="cuda")
        seq = torch.zeros(b, T, dtype=torch.int32, device="cuda")
        seq[:, 700:] = 1
        seq[:, 2100:] = 2
        seq[1, 1500:] = 5
        ins = [x, dt, A, B, C, D, z, dtb, h0]
        for t in ins:
            t.requires_grad_(True)
        kw = dict(dt=dt, A=A, D=D, z=z, dt_bias=dtb, dt_softplus=True, seq_idx=seq,
                  initial_state=h0)
        y, hT = ssd(x, None, B, C, return_final_state=True, **kw)
        gy = torch.randn_like(y)
        gs = torch.randn_like(hT)
        grads = torch.autograd.grad((y.float() * gy.float()).sum() + (hT * gs).sum(), ins)
        yr, sr, gref = reference_grads((x, None, B, C), kw, ins, gy, gs)
        report("extras y", rel(y, yr), 5e-3)
        for nm, a, r in zip(["dx", "ddt", "dA", "dB", "dC", "dD", "dz", "ddt_bias", "dh0"],
                            grads, gref):
            report(f"extras {nm}", rel(a, r), 5e-3)
        # per-sequence: the second sequence alone equals its slice
        y2 = ssd(x[:, 700:2100].detach(), None, B[:, 700:2100].detach(), C[:, 700:2100].detach(),
                 dt=dt[:, 700:2100].detach(), A=A.detach(), D=D.detach(), z=z[:, 700:2100].detach(),
                 dt_bias=dtb.detach(), dt_softplus=True)
        report("seq_idx == per-sequence", rel(y[0, 700:1500], y2[0, :800]), 1e-2)

        # 3. extreme log-decays in [-1e4, 0] with -inf resets: finite, and close to reference
        b, T, h, p, g, n = 2, 2000, 8, 64, 1, 64
        x, _, _, B, C, _ = make_inputs(b, T, h, p, g, n, torch.bfloat16, seed=3)
        la = -torch.exp(torch.empty(b, T, h, device="cuda").uniform_(-10, math.log(1e4)))
        la[:, ::97] = float("-inf")
        la[:, 5:40] = -1e4
        ins = [x, la, B, C]
        for t in ins:
            t.requires_grad_(True)
        y = ssd(x, la, B, C)
        grads = torch.autograd.grad(y.float().sum(), ins)
        fin = bool(torch.isfinite(y).all()) and all(bool(torch.isfinite(gg).all()) for gg in grads)
        log(f"  {'ok ' if fin else 'BAD'} extreme decays finite (y and grads): {fin}")
        ok &= fin
        yr, _ = naive.ssd_reference_chunked(x, la, B, C)
        report("extreme y", rel(y, yr), 5e-3)
        results.setdefault("checks", {})["extreme_finite"] = fin
        try:
            chunk_gla, _ = load_fla()
            hh = h
            q = C.detach().expand(b, T, hh, n).contiguous()
            k = B.detach().expand(b, T, hh, n).contiguous()
            o, _ = chunk_gla(q, k, x.detach(), g=la.detach().float(), scale=1.0)
            log(f"  fla chunk_simple_gla with -inf resets finite: {bool(torch.isfinite(o).all())}")
        except Exception as e:  # noqa: BLE001
            log(f"  fla reset check skipped: {type(e).__name__}: {e}")

        # another CUDA device than the current one (the kernels must launch on the inputs' device)
        if torch.cuda.device_count() > 1:
            runs = []
            inputs = make_inputs(2, 300, 4, 64, 1, 64, torch.bfloat16, seed=7, device="cuda:0")
            for dev in ("cuda:0", "cuda:1"):
                x, dt, A, B, C, D = [t.to(dev).detach().clone() for t in inputs]
                x.requires_grad_(True)
                B.requires_grad_(True)
                y = ssd(x, None, B, C, dt=dt, A=A, D=D)
                dx, dB = torch.autograd.grad(y.float().square().sum(), (x, B))
                runs.append([t.detach().cpu() for t in (y, dx, dB)])
            log(f"  current device during the cuda:1 run: cuda:{torch.cuda.current_device()}")
            for nm, a0, a1 in zip(("y", "dx", "dB"), *runs):
                report(f"cuda:1 == cuda:0 {nm}", rel(a1, a0), 1e-5)
        else:
            log("  device index check skipped: one GPU")

    if quick:
        results["checks_ok"] = ok
        return ok
    # 4. more than 2^31 elements: batch element 2 equals the run of it alone
    b, T, h, p, g, n = 3, 1 << 19, 32, 64, 1, 64
    log(f"  big run: x has {b * T * h * p / 2**31:.2f} * 2^31 elements")
    x = torch.randn(b, T, h, p, device="cuda", dtype=torch.bfloat16)
    dt = torch.rand(b, T, h, device="cuda") * 0.1
    A = -torch.rand(h, device="cuda") * 4
    B = torch.randn(b, T, g, n, device="cuda", dtype=torch.bfloat16) / 8
    C = torch.randn(b, T, g, n, device="cuda", dtype=torch.bfloat16)
    y = ssd(x, None, B, C, dt=dt, A=A)
    y2 = ssd(x[2:].contiguous(), None, B[2:].contiguous(), C[2:].contiguous(),
             dt=dt[2:].contiguous(), A=A)
    report("2^31+ elements: last batch vs alone", rel(y[2:], y2), 0.0)
    del x, y, y2, B, C, dt
    torch.cuda.empty_cache()

    # 5. torch.compile: compiled == eager, forward and backward. Deterministic mode: by
    # default dB and dC are fp32 atomic sums over heads, whose order varies from run to run
    # (s6-4: 7.4e-6 between two runs once rounded to bf16), so only this mode can be exact
    try:
        x, dt, A, B, C, D = make_inputs(2, 1000, 8, 64, 1, 64, torch.bfloat16, seed=4)
        for t in (x, dt, B, C):
            t.requires_grad_(True)

        def f(x, dt, B, C):
            return ssd(x, None, B, C, dt=dt, A=A, D=D).float().square().sum()

        cf = torch.compile(f, fullgraph=True)
        torch.use_deterministic_algorithms(True)
        try:
            l1 = f(x, dt, B, C)
            g1 = torch.autograd.grad(l1, (x, dt, B, C))
            l2 = cf(x, dt, B, C)
            g2 = torch.autograd.grad(l2, (x, dt, B, C))
        finally:
            torch.use_deterministic_algorithms(False)
        report("torch.compile loss", abs((l1 - l2).item()) / abs(l1.item()), 1e-6)
        report("torch.compile grads (deterministic)",
               max(rel(a, c) for a, c in zip(g2, g1)), 1e-6)
        l3 = cf(x, dt, B, C)
        g3 = torch.autograd.grad(l3, (x, dt, B, C))
        report("torch.compile grads (atomic dB, dC)",
               max(rel(a, c) for a, c in zip(g3, g1)), 1e-4)
    except Exception as e:  # noqa: BLE001
        ok = False
        log(f"  BAD torch.compile: {type(e).__name__}: {e}")

    # 6. decode: T steps of decode == chunked forward (fp32 state)
    b, T, h, p, g, n = 2, 20, 8, 64, 2, 128
    x, dt, A, B, C, D = make_inputs(b, T, h, p, g, n, torch.bfloat16, seed=5)
    z = torch.randn_like(x)
    h0 = torch.randn(b, h, p, n, device="cuda")
    y, hT = ssd(x, None, B, C, dt=dt, A=A, D=D, z=z, initial_state=h0, return_final_state=True)
    st = h0.clone()
    ys = [ssd_decode_step(st, x[:, t], B[:, t], C[:, t], dt=dt[:, t], A=A, D=D, z=z[:, t])
          for t in range(T)]
    report("decode y vs chunked", rel(torch.stack(ys, 1), y), 1e-2)
    report("decode state vs chunked", rel(st, hT), 1e-3)

    # 7. the launch cache (fastlaunch) launches what Triton's own path launches: every output
    # and gradient bit for bit (deterministic mode), all features, masked and unmasked loops
    from semisep.backends.triton import fastlaunch
    for T in (300, 512):
        x, dt, A, B, C, D = make_inputs(2, T, 8, 64, 2, 64, torch.bfloat16, seed=6)
        z = torch.randn_like(x)
        h0 = torch.randn(2, 8, 64, 64, device="cuda")
        seq = (torch.arange(T, device="cuda", dtype=torch.int32) // 200).expand(2, T).contiguous()
        Dp = torch.randn(8, 64, device="cuda")
        ins = [t.detach().clone().requires_grad_(True) for t in (x, dt, B, C, z, h0, Dp)]

        def run(env):
            os.environ["SEMISEP_TRITON_FAST_LAUNCH"] = env
            xi, dti, Bi, Ci, zi, h0i, Di = ins
            y, hT = ssd(xi, None, Bi, Ci, dt=dti, A=A, D=Di, z=zi, dt_bias=A * 0.1,
                        dt_softplus=True, initial_state=h0i, seq_idx=seq,
                        return_final_state=True)
            g = torch.autograd.grad(y.float().square().sum() + hT.sum(), ins)
            st = h0.clone()
            yd = ssd_decode_step(st, x[:, 0], B[:, 0], C[:, 0], dt=dt[:, 0], A=A, D=D)
            return (y, hT, yd, st) + g

        torch.use_deterministic_algorithms(True)
        try:
            ref = run("0")
            run("1")                                      # fills the cache
            hits = len(fastlaunch._CACHE)
            got = run("1")                                # launches from it
        finally:
            torch.use_deterministic_algorithms(False)
            os.environ.pop("SEMISEP_TRITON_FAST_LAUNCH", None)
        log(f"  launch cache: {hits} kernels (enabled: {fastlaunch._enabled()})")
        report(f"cached launch == Triton's launch, T={T}",
               max(rel(a, c) for a, c in zip(got, ref)), 0.0)

    # 8. SEMISEP_TRITON_ONE_LAUNCH=1 (both loops in one launch per kernel) == a launch per loop
    # kind: batch entry 0 with a reset (dt A below -128 at one step: the exact loop), entry 1
    # without (the factored loop); and packed sequences (the segmented factored loops)
    for T in (300, 512):
        x, dt, A, B, C, D = make_inputs(2, T, 8, 64, 2, 64, torch.bfloat16, seed=7)
        dt[0, T // 2] = 200.0
        packed = (torch.arange(T, device="cuda", dtype=torch.int32) // 200).expand(2, T)
        ins = [t.detach().clone().requires_grad_(True) for t in (x, dt, B, C)]

        def run_one(env, seq):
            os.environ["SEMISEP_TRITON_ONE_LAUNCH"] = env
            xi, dti, Bi, Ci = ins
            y = ssd(xi, None, Bi, Ci, dt=dti, A=A, D=D, seq_idx=seq)
            return (y,) + torch.autograd.grad(y.float().square().sum(), ins)

        for name, seq in (("a reset", None), ("packed", packed.contiguous())):
            torch.use_deterministic_algorithms(True)
            try:
                two, one = run_one("0", seq), run_one("1", seq)
            finally:
                torch.use_deterministic_algorithms(False)
                os.environ.pop("SEMISEP_TRITON_ONE_LAUNCH", None)
            report(f"one launch == two launches, {name}, T={T}",
                   max(rel(a, c) for a, c in zip(one, two)), 1e-5)
    results["checks_ok"] = ok
    return ok


# ---------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------

def peak_of(fn):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def host_ms(fn, calls=20, rounds=7):
    """Host time per call while the GPU is busy (the calls queue behind a sleep): the
    least over ``rounds`` rounds of ``calls`` calls (the host's noise only adds time)."""
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        torch.cuda._sleep(int(2e8))   # ~0.1 s of GPU cycles: every launch below only queues
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e3)
        torch.cuda.synchronize()
    return best


def _median_rows(reps):
    """One row per impl from ``reps`` (each a list of rows of one repetition of a cell): the
    median of each timing over the repetitions, which alternate the impls (the host's speed
    drifts by up to 30 % within a run), and the single times in ``*_ms_all``."""
    out = []
    for i, row in enumerate(reps[0]):
        row = dict(row)
        for key in ("fwd_ms", "fwdbwd_ms", "fwd_host_ms", "fwdbwd_host_ms"):
            if key not in row:
                continue
            vals = [r[i].get(key) for r in reps if r[i].get(key) is not None]
            if len(reps) > 1:
                row[f"{key}_all"] = vals
            row[key] = statistics.median(vals) if vals else None
        if len(reps) > 1 and row.get("fwd_ms") and reps[0][i].get("fwd_ms"):
            scale = reps[0][i]["fwd_ms"] / row["fwd_ms"]
            row["fwd_TFLOPs"] *= scale
            row["fwd_GBps"] *= scale
        out.append(row)
    return out


def bench_grid(results, variants, Ns, Ts, impls, b=8, h=32, p=64, g=1, repeat=1, host=False):
    from triton.testing import do_bench
    from semisep.backends.triton import ssd
    rows = results.setdefault("rows", [])
    mamba = fla = None
    if "mamba" in impls:
        try:
            mamba = load_mamba()
        except Exception as e:  # noqa: BLE001
            log(f"mamba_ssm not importable: {type(e).__name__}: {e}")
    if "fla" in impls:
        try:
            fla = load_fla()
        except Exception as e:  # noqa: BLE001
            log(f"fla not importable: {type(e).__name__}: {e}")
    bench = lambda f: do_bench(f, warmup=10, rep=40, return_mode="median")  # noqa: E731
    for n in Ns:
        for T in Ts:
            x, dt, A, B, C, D = make_inputs(b, T, h, p, g, n, torch.bfloat16, seed=T + n)
            gy = torch.randn_like(x)
            gate = torch.randn_like(x) if "gated" in impls else None    # z, for 'gated'
            leaves = (x, dt, B, C)
            xg, dtg, Bg, Cg = [t.detach().clone().requires_grad_(True) for t in leaves]
            flops = b * h * T * (2 * 64 * (n + p) + 4 * n * p)
            nbytes = 2 * x.numel() * 2 + 2 * B.numel() * 2 + dt.numel() * 4
            reps = []
            for rep in range(repeat):
                cell = []

                def add(impl, fwd, fwdbwd):
                    row = dict(impl=impl, N=n, T=T, b=b, h=h, p=p, g=g)
                    for key, fn in (("fwd", fwd), ("fwdbwd", fwdbwd)):
                        if fn is None:
                            row[f"{key}_ms"] = None
                            continue
                        try:
                            fn()
                            row[f"{key}_ms"] = bench(fn)
                            if key == "fwdbwd":
                                row["peak_mb"] = peak_of(fn)
                            elif "peak_mb" not in row:
                                row["fwd_peak_mb"] = peak_of(fn)
                        except Exception as e:  # noqa: BLE001
                            row[f"{key}_ms"] = None
                            row[f"{key}_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                        if host and row[f"{key}_ms"] is not None:
                            # right after its timing: whether the host set its pace then
                            try:
                                row[f"{key}_host_ms"] = host_ms(fn, rounds=3)
                            except Exception as e:  # noqa: BLE001
                                row[f"{key}_host_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                    if row.get("fwd_ms"):
                        row["fwd_TFLOPs"] = flops / row["fwd_ms"] / 1e9
                        row["fwd_GBps"] = nbytes / row["fwd_ms"] / 1e6
                    cell.append(row)
                    log(f"N={n:4d} T={T:6d} {impl:28s} fwd {row.get('fwd_ms') or float('nan'):8.3f} ms"
                        f"  fwdbwd {row.get('fwdbwd_ms') or float('nan'):8.3f} ms"
                        f"  peak {row.get('peak_mb', float('nan')):8.1f} MB"
                        + (f"  host {row.get('fwd_host_ms') or float('nan'):.3f} / "
                           f"{row.get('fwdbwd_host_ms') or float('nan'):.3f} ms" if host else "")
                        + (f"  err {row.get('fwd_error', '')}{row.get('fwdbwd_error', '')}"
                           if ('fwd_error' in row or 'fwdbwd_error' in row) else ""))

                first_y = None
                for vname, env in variants:
                    with env_set(env):
                        # every variant is checked against the first (knobs such as UNROLL change
                        # nothing under the CPU interpreter, so only a GPU run can test them)
                        if rep == 0:
                            yv = ssd(xg, None, Bg, Cg, dt=dtg, A=A, D=D)
                            dv = torch.autograd.grad(yv, (xg, dtg, Bg, Cg), gy)
                            if first_y is None:
                                first_y = (yv.detach(), dv)
                            else:
                                errs = [rel(a, b) for a, b in zip((yv.detach(), *dv),
                                                                  (first_y[0], *first_y[1]))]
                                log(f"  {vname} vs {variants[0][0]}: y, dx, ddt, dB, dC "
                                    + " ".join(f"{e:.1e}" for e in errs))
                            del yv, dv
                        add(f"semisep[{vname}]",
                            lambda: ssd(x, None, B, C, dt=dt, A=A, D=D),
                            lambda: torch.autograd.grad(
                                ssd(xg, None, Bg, Cg, dt=dtg, A=A, D=D), (xg, dtg, Bg, Cg), gy))
                        if "gated" in impls:
                            add(f"semisep[{vname}, z]",
                                lambda: ssd(x, None, B, C, dt=dt, A=A, D=D, z=gate),
                                lambda: torch.autograd.grad(
                                    ssd(xg, None, Bg, Cg, dt=dtg, A=A, D=D, z=gate),
                                    (xg, dtg, Bg, Cg), gy))
                if mamba is not None:
                    add("mamba_chunk_scan_combined",
                        lambda: mamba(x, dt, A, B, C, chunk_size=256, D=D),
                        lambda: torch.autograd.grad(
                            mamba(xg, dtg, A, Bg, Cg, chunk_size=256, D=D), (xg, dtg, Bg, Cg), gy))
                    if "gated" in impls:
                        add("mamba_chunk_scan_combined[z]",
                            lambda: mamba(x, dt, A, B, C, chunk_size=256, D=D, z=gate),
                            lambda: torch.autograd.grad(
                                mamba(xg, dtg, A, Bg, Cg, chunk_size=256, D=D, z=gate),
                                (xg, dtg, Bg, Cg), gy))
                if "packed" in impls:
                    # packed sequences of 2000 steps (seq_idx), as in training: boundaries
                    # inside chunks (the segmented factored loops, decays.py)
                    seq = (torch.arange(T, device="cuda", dtype=torch.int32) // 2000).expand(b, T)
                    seq = seq.contiguous()
                    add("semisep[packed 2000]", lambda: ssd(x, None, B, C, dt=dt, A=A, D=D, seq_idx=seq),
                        lambda: torch.autograd.grad(
                            ssd(xg, None, Bg, Cg, dt=dtg, A=A, D=D, seq_idx=seq), (xg, dtg, Bg, Cg),
                            gy))
                    if mamba is not None:
                        add("mamba_chunk_scan_combined[packed 2000]",
                            lambda: mamba(x, dt, A, B, C, chunk_size=256, D=D, seq_idx=seq),
                            lambda: torch.autograd.grad(
                                mamba(xg, dtg, A, Bg, Cg, chunk_size=256, D=D, seq_idx=seq),
                                (xg, dtg, Bg, Cg), gy))
                if fla is not None:
                    chunk_gla, fused_gla = fla
                    q = C.expand(b, T, h, n).contiguous()
                    k = B.expand(b, T, h, n).contiguous()
                    v = (x.float() * dt[..., None]).to(x.dtype)
                    gg = (dt * A).contiguous()
                    qg, kg, vg, ggg = [t.detach().clone().requires_grad_(True) for t in (q, k, v, gg)]
                    add("fla_chunk_simple_gla",
                        lambda: chunk_gla(q, k, v, g=gg, scale=1.0)[0],
                        lambda: torch.autograd.grad(chunk_gla(qg, kg, vg, g=ggg, scale=1.0)[0],
                                                    (qg, kg, vg, ggg), gy))
                    add("fla_fused_chunk_simple_gla",
                        lambda: fused_gla(q, k, v, g=gg, scale=1.0)[0],
                        lambda: torch.autograd.grad(fused_gla(qg, kg, vg, g=ggg, scale=1.0)[0],
                                                    (qg, kg, vg, ggg), gy))
                if "sdpa" in impls:
                    qs = torch.randn(b, h, T, 64, device="cuda", dtype=torch.bfloat16)
                    ks, vs = torch.randn_like(qs), torch.randn_like(qs)
                    qsg, ksg, vsg = [t.clone().requires_grad_(True) for t in (qs, ks, vs)]
                    sdpa = torch.nn.functional.scaled_dot_product_attention
                    add("torch_sdpa_causal",
                        lambda: sdpa(qs, ks, vs, is_causal=True),
                        lambda: torch.autograd.grad(sdpa(qsg, ksg, vsg, is_causal=True),
                                                    (qsg, ksg, vsg), gy.transpose(1, 2)))
                reps.append(cell)
            rows.extend(_median_rows(reps))
            torch.cuda.empty_cache()
            if results.get("_out"):
                with open(os.path.join(results["_out"], "h200_ssd.json"), "w") as f:
                    json.dump({k: v for k, v in results.items() if k != "_out"}, f, indent=1)


def use_cache(tar_in):
    """Point Triton at a fresh cache directory, unpacked from ``tar_in`` when it exists."""
    d = tempfile.mkdtemp(prefix="triton-cache-")
    if tar_in and os.path.exists(tar_in):
        with tarfile.open(tar_in) as tf:
            tf.extractall(d, filter="data")
        log(f"triton cache: {len(os.listdir(d))} entries from {tar_in}")
    os.environ["TRITON_CACHE_DIR"] = d
    return d


def pack_cache(d, tar_out):
    with tarfile.open(tar_out, "w:gz") as tf:
        tf.add(d, arcname=".")
    log(f"triton cache: {os.path.getsize(tar_out) / 2**20:.1f} MB written to {tar_out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    ap.add_argument("--skip-checks", action="store_true")
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--quick-checks", action="store_true")
    ap.add_argument("--late-checks", action="store_true",
                    help="only the checks after the quick ones (2^31+ elements, torch.compile, "
                         "decode, the cached launch, the one-launch kernels)")
    ap.add_argument("--gluon-checks", action="store_true",
                    help="only section 1b (the Gluon kernels)")
    ap.add_argument("--Ns", default="64,128")
    ap.add_argument("--Ts", default="1024,2048,4096,8192,16384")
    ap.add_argument("--impls", default="mamba,fla,sdpa",
                    help="anchors to time (mamba, fla, sdpa), 'gated': semisep (each variant) and "
                         "mamba with a z gate, and 'packed': semisep and mamba "
                         "with seq_idx (sequences of 2000 steps)")
    ap.add_argument("--variants", nargs="*", default=["default:"])
    ap.add_argument("--repeat", type=int, default=1,
                    help="time every cell this many times, the impls in turn; rows keep medians")
    ap.add_argument("--host", action="store_true",
                    help="after each timing, the host time of a call (queued behind a sleep "
                         "kernel): fwd_host_ms, fwdbwd_host_ms")
    ap.add_argument("--cache-in", default=None)
    ap.add_argument("--cache-out", default=None)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    LOG_PATH.append(os.path.join(args.out, "log.txt"))
    cache_dir = use_cache(args.cache_in) if (args.cache_in or args.cache_out) else None
    import triton
    results = dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                   triton=triton.__version__, date=time.strftime("%Y-%m-%d %H:%M UTC",
                                                                 time.gmtime()))
    log(json.dumps(results))
    results["_out"] = args.out
    t0 = time.time()
    results["ceilings"] = ceilings()
    log("ceilings", results["ceilings"])
    if not args.skip_checks:
        try:
            checks(results, quick=args.quick_checks, late=args.late_checks,
                   gluon=args.gluon_checks)
        except Exception:  # noqa: BLE001
            log("checks crashed:\n" + traceback.format_exc())
            results["checks_ok"] = False
        log(f"checks done at {time.time() - t0:.0f} s")
    if not args.skip_bench:
        variants = []
        for v in args.variants:
            name, _, spec = v.partition(":")
            env = dict(kv.split("=", 1) for kv in spec.split(";") if kv)
            variants.append((name, env))
        impls = set(args.impls.split(",")) if args.impls else set()
        bench_grid(results, variants, [int(s) for s in args.Ns.split(",")],
                   [int(s) for s in args.Ts.split(",")], impls, repeat=args.repeat,
                   host=args.host)
        log(f"bench done at {time.time() - t0:.0f} s")
    results.pop("_out", None)
    with open(os.path.join(args.out, "h200_ssd.json"), "w") as f:
        json.dump(results, f, indent=1)
    if args.cache_out:
        pack_cache(cache_dir, args.cache_out)


if __name__ == "__main__":
    main()

"""The backward in spans (config.span_steps) and in blocks of the state's columns
(config.state_block) on a GPU at full size: every gradient against the float64 chunked
reference and (bf16) against the same call in one span and one block
(``SEMISEP_TRITON_BWD`` set to ``NB=0,SPAN=1000000``), with all the extras (D per p, dt_bias
+ softplus, seq_idx, h0, d final state, z), in bf16 and fp32, atomic and deterministic: the
first four cases run the whole state (``NB=0``, so in spans at n > 64), the last four the
default blocks of 64 columns (in one span each).

    python benchmarks/gpu_spans.py [CASE ...] [mamba]  # one line per check; exit 1 on a miss

CASE: indices into the case list (default: all). ``mamba``: also mamba_ssm's
``mamba_chunk_scan_combined`` on the same inputs (chunks of 256; its own semantics of every
extra), its error against the same float64 reference printed beside ours (a calibration of
the tolerance for bf16, not a check).
"""

from __future__ import annotations

import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gpu_ssd import load_mamba, make_inputs, rel  # noqa: E402

NAMES = ["y", "final", "dx", "ddt", "dA", "dB", "dC", "dD", "dz", "ddt_bias", "dh0"]


def run(b, T, h, p, g, n, dtype, seed):
    """The inputs of a call with all the extras, and a random loss's
    cotangents."""
    x, dt, A, B, C, _ = make_inputs(b, T, h, p, g, n, dtype, seed=seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dt = torch.randn(b, T, h, device="cuda", generator=gen) - 3
    D = torch.randn(h, p, device="cuda", generator=gen)
    z = torch.randn(b, T, h, p, device="cuda", generator=gen).to(dtype)
    dtb = torch.randn(h, device="cuda", generator=gen) * 0.5
    h0 = torch.randn(b, h, p, n, device="cuda", generator=gen)
    seq = (torch.arange(T, device="cuda") * 3 // T).to(torch.int32).expand(b, T).contiguous()
    ins = [None if t is None else t.detach().clone().requires_grad_(True)
           for t in (x, dt, A, B, C, D, z, dtb, h0)]
    gy = torch.randn(b, T, h, p, device="cuda", generator=gen)
    gs = torch.randn(b, h, p, n, device="cuda", generator=gen)
    return ins, dict(seq_idx=seq, dt_softplus=True), gy, gs


def grads(ssd_fn, ins, kw, gy, gs):
    x, dt, A, B, C, D, z, dtb, h0 = ins
    y, hT = ssd_fn(x, None, B, C, dt=dt, A=A, D=D, z=z, dt_bias=dtb, initial_state=h0,
                   return_final_state=True, **kw)
    loss = (y.double() * gy.double()).sum() + (hT.double() * gs.double()).sum()
    leaves = [t for t in ins if t is not None]
    got = iter(torch.autograd.grad(loss, leaves))
    return [y, hT, *[None if t is None else next(got) for t in ins]]


def mamba_grads(mamba, ins, kw, gy, gs):
    """:func:`grads` of mamba_ssm's chunked SSD (its outputs in our order), or None where it
    refuses the call (printed)."""
    def fn(x, _, B, C, *, dt, A, D, z, dt_bias, initial_state, seq_idx, dt_softplus,
           return_final_state):
        return mamba(x, dt, A, B, C, chunk_size=256, D=D, z=z, dt_bias=dt_bias,
                     initial_states=initial_state, seq_idx=seq_idx, dt_softplus=dt_softplus,
                     return_final_states=True)
    try:
        return grads(fn, ins, kw, gy, gs)
    except Exception as e:   # noqa: BLE001 (a calibration: report and go on)
        print(f"  mamba_ssm refused the call: {type(e).__name__}: {str(e)[:160]}")
        return None


def main(picked, with_mamba=False):
    from semisep.backends.triton import config, naive, ssd
    mamba = load_mamba() if with_mamba else None
    ok = True
    cases = [   # (dtype, tolerance, shape, deterministic, the whole state)
        (torch.bfloat16, 5e-3, (2, 3000, 8, 64, 2, 128), False, True),
        (torch.bfloat16, 5e-3, (2, 3000, 8, 64, 2, 128), True, True),
        (torch.bfloat16, 5e-3, (1, 1000, 4, 64, 1, 256), False, True),
        (torch.float32, 1e-5, (1, 1000, 8, 64, 2, 128), False, True),
        (torch.bfloat16, 5e-3, (2, 3000, 8, 64, 2, 128), False, False),
        (torch.bfloat16, 5e-3, (2, 3000, 8, 64, 2, 128), True, False),
        (torch.bfloat16, 5e-3, (1, 1000, 4, 64, 1, 256), False, False),
        (torch.float32, 1e-5, (1, 1000, 8, 64, 2, 128), False, False),
    ]
    for dtype, tol, shape, det, whole in [c for i, c in enumerate(cases)
                                          if not picked or i in picked]:
        b, T, h, p, g, n = shape
        torch.use_deterministic_algorithms(det)
        knob = os.environ.get("SEMISEP_TRITON_BWD")      # the caller's, restored below
        if whole:
            os.environ["SEMISEP_TRITON_BWD"] = "NB=0"
        nb = config.state_block(p, n, None, dtype)
        steps = config.span_steps(T, p, nb, None, dtype)
        ins, kw, gy, gs = run(b, T, h, p, g, n, dtype, seed=T + n)
        t0 = time.perf_counter()
        spanned = grads(ssd, ins, kw, gy, gs)
        torch.cuda.synchronize()
        print(f"  ({time.perf_counter() - t0:.0f} s: spanned / blocked call, compiles included)")
        # fp32: float64 alone (1e-5 bounds the spans' difference too; the one-span
        # kernels' compiles took the rest of a 270 s call in s15-3)
        one = [None] * len(spanned)
        if dtype != torch.float32:
            os.environ["SEMISEP_TRITON_BWD"] = "NB=0,SPAN=1000000"
            one = grads(ssd, ins, kw, gy, gs)
            torch.cuda.synchronize()
            print(f"  ({time.perf_counter() - t0:.0f} s: one span and block)")
        if knob is None:
            os.environ.pop("SEMISEP_TRITON_BWD", None)
        else:
            os.environ["SEMISEP_TRITON_BWD"] = knob
        torch.use_deterministic_algorithms(False)
        want = grads(lambda *a, return_final_state, **k: naive.ssd_reference_chunked(*a, **k),
                     ins, kw, gy, gs)
        theirs = mamba_grads(mamba, ins, kw, gy, gs) if mamba is not None else None
        tag = (f"{str(dtype)[6:]} {shape} {'deterministic' if det else 'atomic'}"
               f"{' whole state' if whole else ''}")
        print(f"{tag}: {-(-n // nb)} blocks of {nb} columns, spans of {steps} steps "
              f"({-(-T // steps) if steps else 1})")
        for i, (nm, s, o, w) in enumerate(zip(NAMES, spanned, one, want)):
            if s is None:
                continue
            e_ref, e_one = rel(s, w), (0.0 if o is None else rel(s, o))
            # spans run the same kernels (rounding apart: a tenth of the tolerance); blocks
            # of 64 columns run the n = 64 ones, in chunks of their own (the tolerance)
            near = tol if nb < n else tol / 10
            good = e_ref <= tol and e_one <= near and bool(torch.isfinite(s).all())
            ok &= good
            against = "" if o is None else f", {e_one:.2e} against one span and block"
            if theirs is not None and theirs[i] is not None:
                against += f"; mamba_ssm {rel(theirs[i], w):.2e} against float64"
            print(f"  {'ok ' if good else 'BAD'} {nm}: {e_ref:.2e} against float64 (tol "
                  f"{tol:.0e}){against}")
    print("all ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main({int(a) for a in args if a != "mamba"}, "mamba" in args))

"""The Gluon sweep probes (gfwdsweep.py, grevsweep.py) beside the library's sweeps, on the H200.

    PYTHONPATH=$PWD python3 benchmarks/probe/run_gsweeps.py     # env: TS=4096,16384 STAGES=2

b=8, h=32, p=64, g=1, n=64, bf16, dt (a quarter of gpu_ssd's, so that every chunk is
factorable and the library runs its factored loops everywhere, as the probes do), A, D, one
span. All start from the library forward's decay rows. The forward sweeps' dC, w, dD and
stored states are compared, then the reverse sweeps' dx, dB, ddt and dA / d dt_bias sums,
both reverse sweeps reading the library forward sweep's states and w (dB, dC, dD and the sums
are atomic: equal to rounding). Each kernel is timed alone (the library's: its factored
launch and its exact one, whose programs all return at once).
"""
import os
import sys

import torch
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.testing import do_bench

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import gfwdsweep  # noqa: E402
import grevsweep  # noqa: E402

from gpu_ssd import make_inputs  # noqa: E402
from semisep.backends.triton import kernels as K  # noqa: E402
from semisep.backends.triton import launch as L  # noqa: E402


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()


def timed(name, T, go, outs):
    """Run ``go`` once on zeroed ``outs`` and keep copies (atomics accumulate), then time it."""
    for o in outs:
        o.zero_()
    go()
    torch.cuda.synchronize()
    kept = tuple(o.clone() for o in outs)
    print(f"T={T} {name}: {do_bench(go, warmup=20, rep=200):.4f} ms", flush=True)
    return kept


def main():
    b, h, p, g, n = 8, 32, 64, 1, 64
    stages = int(os.environ.get("STAGES", 2))
    lay = gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16)

    def desc(t, r, c):
        return TensorDescriptor(t.view(r, c), [r, c], [c, 1], [64, 64], lay)

    for T in [int(v) for v in os.environ.get("TS", "4096,16384").split(",")]:
        x, dt, A, B, C, D = make_inputs(b, T, h, p, g, n, torch.bfloat16)
        dt = dt * 0.25
        dy = torch.randn_like(x)
        _, _, (Q, dec, etot), _, _ = L._fwd(x, dt, A, B, C, D, None, None, None, None, True,
                                            False, -1, for_grad=True)
        nc, rows = T // Q, b * T
        plan = L._plan(L._bwd_plan, b, T, h, p, g, n, x.dtype, True, False, False, 1, False,
                       False, False, False, -1, True)
        grid, (_, _, fwd_opts, rev_opts), per = plan[2], plan[5][0], plan[7]
        d = L._dummy(x)
        f32 = dict(device=x.device, dtype=torch.float32)
        slot = L._slot_size(b, h, p, n)

        fwd = {}
        for who in ("library", "probe"):
            dC, w = torch.zeros(b, T, g, n, **f32), torch.empty(1, b * h, T, **f32)
            dD = torch.zeros(h, **f32)
            st = torch.empty(b, h, per, p, n, device=x.device, dtype=x.dtype)
            if who == "library":
                def go():
                    for opts in fwd_opts:
                        L.launch(K.ssd_bwd_fwdsweep_kernel, grid, x, dt, A, d, B, C, D, d, d, d,
                                 dy, dec, etot, dC, w, dD, st, T, h, g, p, n, n, 0, nc, per,
                                 0, slot, opts=opts)
            else:
                args = (desc(x, rows, h * p), desc(dy, rows, h * p), desc(B, rows, g * n),
                        desc(C, rows, g * n), desc(st, b * h * per * p, n), dec, etot, dC, w,
                        dD, T, h, g, nc)

                def go():
                    gfwdsweep.gfwdsweep_kernel[(b * h,)](*args, Q=64, P=64, N=64,
                                                         STAGES=stages, HAS_D=True,
                                                         num_warps=4)
            fwd[who] = timed(f"{who} forward sweep", T, go, (dC, w, dD, st))
        for name, a, r in zip(("dC", "w", "dD", "states"), fwd["probe"], fwd["library"]):
            print(f"T={T} forward sweep, probe vs library {name}: {rel(a, r):.2e}", flush=True)

        _, w, _, st = fwd["library"]
        rev = {}
        for who in ("library", "probe"):
            dx = torch.empty_like(x)
            dB = torch.zeros(b, T, g, n, **f32)
            ddt = torch.empty(1, b, T, h, **f32)
            dsum = torch.zeros(2, h, **f32)
            if who == "library":
                def go():
                    for opts in rev_opts:
                        L.launch(K.ssd_bwd_revsweep_kernel, grid, x, dt, A, d, B, C, D, d, dy,
                                 d, d, dec, etot, st, w, dx, dB, ddt, dsum, d, T, h, g, p, n,
                                 n, 1, 0, nc, per, 0, 1, opts=opts)
            else:
                args = (desc(x, rows, h * p), desc(dy, rows, h * p), desc(B, rows, g * n),
                        desc(C, rows, g * n), desc(st, b * h * per * p, n),
                        desc(dx, rows, h * p), dec, etot, w, A, D, dB, ddt, dsum, T, h, g, nc)

                def go():
                    grevsweep.grevsweep_kernel[(b * h,)](*args, Q=64, P=64, N=64,
                                                         STAGES=stages, HAS_D=True,
                                                         num_warps=4)
            rev[who] = timed(f"{who} reverse sweep", T, go, (dx, dB, ddt, dsum))
        for name, a, r in zip(("dx", "dB", "ddt", "dA / d dt_bias sums"), rev["probe"],
                              rev["library"]):
            print(f"T={T} reverse sweep, probe vs library {name}: {rel(a, r):.2e}", flush=True)


main()

"""The Gluon forward-sweep probe (gfwdsweep.py) beside the library's forward sweep, on the H200.

    PYTHONPATH=$PWD python3 benchmarks/probe/run_gfwdsweep.py     # env: TS=4096,16384 STAGES=2

b=8, h=32, p=64, g=1, n=64, bf16, dt (a quarter of gpu_ssd's, so that every chunk is
factorable and the library runs its factored loop everywhere, as the probe does), A, D. Both
start from the library forward's decay rows; the probe's dC, w, dD and stored states are
compared with the library kernel's (dC and dD are atomic sums: equal to rounding), and the two
kernels are timed alone (the library's launches: its factored one and its exact one, whose
programs all return at once).
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

from gpu_ssd import make_inputs  # noqa: E402
from semisep.backends.triton import kernels as K  # noqa: E402
from semisep.backends.triton import launch as L  # noqa: E402


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()


def main():
    b, h, p, g, n = 8, 32, 64, 1, 64
    stages = int(os.environ.get("STAGES", 2))
    for T in [int(v) for v in os.environ.get("TS", "4096,16384").split(",")]:
        x, dt, A, B, C, D = make_inputs(b, T, h, p, g, n, torch.bfloat16)
        dt = dt * 0.25
        dy = torch.randn_like(x)
        _, _, (Q, dec, etot), _, _ = L._fwd(x, dt, A, B, C, D, None, None, None, None, True,
                                            False, -1, for_grad=True)
        nc = T // Q
        plan = L._plan(L._bwd_plan, b, T, h, p, g, n, x.dtype, True, False, False, 1, False,
                       False, False, False, -1, True)
        grid, blocks, per = plan[2], plan[5], plan[7]
        fwd_opts = blocks[0][2]
        d = L._dummy(x)
        f32 = dict(device=x.device, dtype=torch.float32)
        out = {}
        for who in ("library", "probe"):
            dC = torch.zeros(b, T, g, n, **f32)
            w = torch.empty(1, b * h, T, **f32)
            dD = torch.zeros(h, **f32)
            st = torch.empty(b, h, per, p, n, device=x.device, dtype=x.dtype)
            if who == "library":
                def go():
                    for opts in fwd_opts:
                        L.launch(K.ssd_bwd_fwdsweep_kernel, grid, x, dt, A, d, B, C, D, d, d, d,
                                 dy, dec, etot, dC, w, dD, st, T, h, g, p, n, n, 0, nc, per,
                                 0, L._slot_size(b, h, p, n), opts=opts)
            else:
                lay = gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16)
                rows = b * T

                def desc(t, r, c):
                    return TensorDescriptor(t.view(r, c), [r, c], [c, 1], [64, 64], lay)
                args = (desc(x, rows, h * p), desc(dy, rows, h * p), desc(B, rows, g * n),
                        desc(C, rows, g * n), desc(st, b * h * per * p, n), dec, etot, dC, w,
                        dD, T, h, g, nc)

                def go():
                    gfwdsweep.gfwdsweep_kernel[(b * h,)](*args, Q=64, P=64, N=64,
                                                         STAGES=stages, HAS_D=True,
                                                         num_warps=4)
            go()
            torch.cuda.synchronize()
            out[who] = (dC.clone(), w.clone(), dD.clone(), st.clone())
            t = do_bench(go, warmup=20, rep=200)
            print(f"T={T} {who}: forward sweep {t:.4f} ms", flush=True)
        for name, a, r in zip(("dC", "w", "dD", "states"), out["probe"], out["library"]):
            print(f"T={T} probe vs library {name}: {rel(a, r):.2e}", flush=True)


main()

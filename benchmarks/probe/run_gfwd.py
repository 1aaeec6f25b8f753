"""The Gluon forward probe (gfwd.py) beside the library's forward, on the H200.

    PYTHONPATH=$PWD python3 benchmarks/probe/run_gfwd.py   # env: TS=8192,16384
                                                           #      CFG=stages:pipe:bp,...
                                                           #      ONCE=1 (one launch each, for ncu)

b=8, h=32, p=64, g=1, n=64, bf16, dt, A, D (the issue's grid). The decay rows come from the
library's own forward (``launch._fwd``, whose pre-pass the probe's kernel reads); the probe's
y and final state are compared with the library's, and its kernel time is printed beside the
library's whole forward (pre-pass 0.046 ms + kernel at 16K, s18-1).
"""
import os
import sys
import time

import torch
from triton.testing import do_bench

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import gfwd  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402

from gpu_ssd import make_inputs  # noqa: E402
from semisep import ssd  # noqa: E402
from semisep.backends.triton import launch  # noqa: E402


def prepare(x, B, C, D, dec, etot, stages, pipe, bp, Q=64):
    """``(y, hT, go)``: the probe's outputs and a launch of its kernel into them."""
    b, T, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    lay = gl.NVMMASharedLayout.get_default_for([Q, n], gl.bfloat16)
    layp = gl.NVMMASharedLayout.get_default_for([Q, bp], gl.bfloat16)
    y = torch.empty_like(x)
    hT = torch.empty(b, h, p, n, device=x.device, dtype=torch.float32)
    rows = b * T
    xd = TensorDescriptor(x.view(rows, h * p), [rows, h * p], [h * p, 1], [Q, bp], layp)
    yd = TensorDescriptor(y.view(rows, h * p), [rows, h * p], [h * p, 1], [Q, bp], layp)
    bd = TensorDescriptor(B.view(rows, g * n), [rows, g * n], [g * n, 1], [Q, n], lay)
    cd = TensorDescriptor(C.view(rows, g * n), [rows, g * n], [g * n, 1], [Q, n], lay)

    def go():
        gfwd.gfwd_kernel[(b * h * (p // bp),)](
            xd, bd, cd, yd, dec, etot, D, hT, T, h, g, T // Q, p,
            Q=Q, P=bp, N=n, STAGES=stages, HAS_D=True, PIPE=pipe, num_warps=4)
    return y, hT, go


def main():
    once = bool(os.environ.get("ONCE"))
    b, h, p, g, n = 8, 32, 64, 1, 64
    for T in [int(v) for v in os.environ.get("TS", "8192,16384").split(",")]:
        x, dt, A, B, C, D = make_inputs(b, T, h, p, g, n, torch.bfloat16)
        y_ref, hT_ref, (Q, dec, etot), _, _ = launch._fwd(
            x, dt, A, B, C, D, None, None, None, None, True, False, -1, for_grad=True)
        scale = y_ref.float().abs().max().item()
        t_lib = 0.0 if once else do_bench(lambda: ssd(x, None, B, C, dt=dt, A=A, D=D),
                                          warmup=50, rep=300)
        for cfg in os.environ.get("CFG", "2:0:64,2:0:32").split(","):
            stages, pipe, bp = map(int, cfg.split(":"))
            t0 = time.time()
            y, hT, go = prepare(x, B, C, D, dec, etot, stages, pipe, bp, Q)
            go()
            torch.cuda.synchronize()
            err = (y.float() - y_ref.float()).abs().max().item() / scale
            err_s = ((hT - hT_ref).abs().max() / hT_ref.abs().max()).item()
            t = 0.0 if once else do_bench(go, warmup=50, rep=300)
            print(f"T={T} stages={stages} pipe={pipe} bp={bp}: probe kernel {t:.4f} ms "
                  f"(library forward {t_lib:.4f}); y vs library {err:.2e}, final state "
                  f"{err_s:.2e}; first call {time.time() - t0:.1f} s", flush=True)


main()

"""The Python host time of the Triton SSD's launchers, on a CPU: no GPU, no kernels.

    python benchmarks/cpu_host.py [--profile N]

Up to 4K steps an H200 call is bound by its host (benchmarks/NOTES.md, s8): the Python of
``ssd()``'s forward and backward, torch's dispatch and the launches. This runs that Python on
the CPU with tiny tensors: the launchers' ``launch`` is replaced by a stub that builds the cache
key ``fastlaunch.launch`` would (from the ``arg_key``, or every argument's specialization) and
launches nothing, so the figures are our code's and torch's dispatch cost, not a kernel's or
the CUDA driver's. Printed: microseconds per call (the least of 9 rounds of 200 calls) of a
forward+backward, a forward with autograd, one without (no autograd.Function since s38), and
the floor of an autograd.Function that does nothing; ``--profile N`` adds the N largest
functions by own time (cProfile).
``CPU_HOST_T`` sets the steps (64: one chunk), ``CPU_HOST_N`` the state size (16; 128 runs the
backward in two blocks of the state's columns); e.g. ``CPU_HOST_T=192
SEMISEP_TRITON_BWD=SPAN=1`` runs the backward in three spans.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ["TRITON_INTERPRET"] = "1"     # CPU tensors pass the launchers' device check
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from semisep.backends.triton import fastlaunch  # noqa: E402
from semisep.backends.triton import launch as launchers  # noqa: E402
from semisep.backends.triton import ops, ssd  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_profile import NothingFunction  # noqa: E402

LAUNCHES = []


def stub_launch(kernel, grid, *args, arg_key=None, opts=None, **kwargs):
    """What ``fastlaunch.launch`` does before the C launcher, without it."""
    key = (kernel, fastlaunch._specs(args) if arg_key is None else arg_key,
           opts.key if opts is not None else tuple(kwargs.items()))
    LAUNCHES.append(hash(key))


def per_call_us(fn, calls=200, rounds=9):
    fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", type=int, default=0)
    args = ap.parse_args()
    launchers.launch = ops.launch = stub_launch
    # the launch options of a GPU run (the interpreter takes none)
    launchers._launch_opts = lambda cfg: dict(num_warps=cfg["num_warps"],
                                              num_stages=cfg["num_stages"])
    b, T, h, p = 1, int(os.environ.get("CPU_HOST_T", 64)), 2, 16
    n = int(os.environ.get("CPU_HOST_N", 16))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, T, h, p, generator=g)
    dt = torch.rand(b, T, h, generator=g) * 0.1
    A = -torch.rand(h, generator=g)
    B, C = torch.randn(b, T, 1, n, generator=g), torch.randn(b, T, 1, n, generator=g)
    D = torch.randn(h, generator=g)
    gy = torch.randn_like(x)
    xg, dtg, Bg, Cg = [t.clone().requires_grad_(True) for t in (x, dt, B, C)]
    pieces = {
        "fwd+bwd": lambda: torch.autograd.grad(ssd(xg, None, Bg, Cg, dt=dtg, A=A, D=D),
                                               (xg, dtg, Bg, Cg), gy),
        "fwd with grad": lambda: ssd(xg, None, Bg, Cg, dt=dtg, A=A, D=D),
        "fwd without autograd": lambda: ssd(x, None, B, C, dt=dt, A=A, D=D),
        "autograd.Function doing nothing, fwd+grad": lambda: torch.autograd.grad(
            NothingFunction.apply(xg, dtg, A, Bg, Cg, D), (xg, dtg, Bg, Cg), gy, allow_unused=True),
    }
    LAUNCHES.clear()
    pieces["fwd+bwd"]()
    print(f"launches per fwd+bwd: {len(LAUNCHES)}")
    for name, fn in pieces.items():
        print(f"{per_call_us(fn):8.1f} us  {name}")
    if args.profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(300):
            pieces["fwd+bwd"]()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()

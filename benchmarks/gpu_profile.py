"""Where the time of one SSD call goes on the GPU: per-kernel device time and host time.

    python benchmarks/gpu_profile.py [--Ts 1024,16384] [--n 64] [--variants name:ENV=VAL;...] [--fla]
                                     [--cprofile N] [--sections] [--trace FILE]

For each T and variant, forward and forward+backward (b=8, h=32, p=64, g=1, N=64 or ``--n``,
bf16, the inputs of gpu_ssd.py): the device time of every kernel (torch.profiler, mean over 5 calls),
their sum, and the host time of one call, measured while the GPU is held busy by a sleep
kernel (so the calls only queue: the time is Python, dispatch and launches alone). A call
whose host time exceeds its device time is bound by the host at that size. ``--cprofile N``
adds the N largest Python functions (own time) of 20 forward+backward calls; ``--sections``
the host time of the pieces of one call (forward without and with autograd, the backward's
launchers alone, one launch of the pre-pass kernel, the floors of autograd and of torch ops);
``--trace FILE`` a chrome trace (CPU and CUDA, with Python stacks) of ten forward+backward calls
at the first of ``--Ts``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gpu_ssd import env_set, host_ms, load_fla, make_inputs  # noqa: E402


def kernel_times(fn, calls=5):
    """{kernel name: mean device ms per call} and the sum, from torch.profiler."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    per = defaultdict(float)
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            per[ev.name[:70]] += ev.device_time / 1e3 / calls
    return dict(sorted(per.items(), key=lambda kv: -kv[1])), sum(per.values())


def python_profile(fn, top, calls=20):
    """The ``top`` functions by own time over ``calls`` host-only calls (cProfile)."""
    import cProfile
    import pstats
    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9))
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def report(name, fn, top=0):
    per, total = kernel_times(fn)
    host = host_ms(fn)
    print(f"\n{name}: device {total:.3f} ms (sum of kernels), host {host:.3f} ms per call",
          flush=True)
    for k, v in per.items():
        if v >= 0.002:
            print(f"  {v:8.3f}  {k}", flush=True)
    if top:
        python_profile(fn, top)


class NothingFunction(torch.autograd.Function):
    """The host-time floor of an ``autograd.Function``: of (x, dt, A, B, C, D), forward makes
    an empty x-shaped output, backward hands the gradient back to x."""

    @staticmethod
    def forward(ctx, *a):
        return a[0].new_empty(a[0].shape)

    @staticmethod
    def backward(ctx, gy):
        return gy, None, None, None, None, None


def sections(T, b=8, h=32, p=64, g=1, n=64):
    """Host ms of the pieces of a forward+backward call (GPU held busy, see host_ms), and the
    floors: an autograd.Function that launches nothing, single torch ops, one launch."""
    from semisep.backends.triton import decays, launch, ssd
    from semisep.backends.triton.fastlaunch import launch as fast
    x, dt, A, B, C, D = make_inputs(b, T, h, p, g, n, torch.bfloat16, seed=T + n)
    gy = torch.randn_like(x)
    xg, dtg, Bg, Cg = [t.detach().clone().requires_grad_(True) for t in (x, dt, B, C)]
    nc = (T + 63) // 64
    dec = torch.empty(8, b * h, nc * 64, device="cuda")     # the pre-pass writes 8 rows
    etot = torch.empty(b * h, nc, device="cuda")
    y = ssd(xg, None, Bg, Cg, dt=dtg, A=A, D=D)
    ckpt = launch._fwd(x, dt, A, B, C, D, None, None, None, None, True, False, -1,
                       checkpoints=True)[3]
    f = torch.empty(b, h, T, device="cuda")

    pre_args = (dt, A, dt, dt, dec, etot, T, h)
    pre_kw = dict(HAS_DT=True, DT_SOFTPLUS=False, HAS_DTB=False, HAS_SEQ=False, Q=64,
                  CLAMP_C=decays.CLAMP, HB=launch._prepass_heads(h), GRAD_ROWS=True)
    pre_grid = (nc, b * h // pre_kw["HB"])
    pieces = {
        "fwd+bwd": lambda: torch.autograd.grad(ssd(xg, None, Bg, Cg, dt=dtg, A=A, D=D),
                                               (xg, dtg, Bg, Cg), gy),
        "fwd, no grad": lambda: ssd(x, None, B, C, dt=dt, A=A, D=D),
        "fwd, with grad": lambda: ssd(xg, None, Bg, Cg, dt=dtg, A=A, D=D),
        "autograd.grad of a kept y": lambda: torch.autograd.grad(y, (xg, dtg, Bg, Cg), gy,
                                                                 retain_graph=True),
        "launch._fwd alone": lambda: launch._fwd(x, dt, A, B, C, D, None, None, None, None,
                                                 True, False, -1, True, True),
        "launch._bwd alone": lambda: launch._bwd(gy, None, x, dt, A, B, C, D, None, None, None,
                                                 None, True, False, -1, False, ckpt=ckpt),
        "launch._sweeps_bwd alone": lambda: launch._sweeps_bwd(
            gy, None, x, dt, A, B, C, D, None, None, None, None, True, False, -1, False, False,
            ckpt=ckpt),
        "Nothing Function fwd+grad (6 inputs)": lambda: torch.autograd.grad(
            NothingFunction.apply(xg, dtg, A, Bg, Cg, D), (xg, dtg, Bg, Cg), gy, allow_unused=True),
        "one pre-pass launch, Triton's": lambda: decays.ssd_decays_kernel[pre_grid](
            *pre_args, **pre_kw),
        "one pre-pass launch, fastlaunch": lambda: fast(decays.ssd_decays_kernel, pre_grid,
                                                        *pre_args, **pre_kw),
        "torch.empty x 10": lambda: [torch.empty(b, h, T, device="cuda") for _ in range(10)],
        "torch.zeros x 10": lambda: [torch.zeros(b, h, T, device="cuda") for _ in range(10)],
        "10 elementwise ops": lambda: [dt * 2.0 for _ in range(10)],
        "10 sums over 2 dims": lambda: [f.sum((0, 2)) for _ in range(10)],
        "10 bf16 -> fp32 .to": lambda: [B.float() for _ in range(10)],
        "10 no-op .contiguous()": lambda: [x.contiguous() for _ in range(10)],
    }
    for name, fn in pieces.items():
        print(f"T={T} host {host_ms(fn):7.3f} ms  {name}", flush=True)
    import gc
    gc.disable()
    print(f"T={T} host {host_ms(pieces['fwd+bwd']):7.3f} ms  fwd+bwd, gc off", flush=True)
    gc.enable()
    print(f"T={T} host {host_ms(pieces['fwd+bwd']):7.3f} ms  fwd+bwd, again", flush=True)


def trace(T, path, b=8, h=32, p=64, g=1, n=64, calls=10):
    """A chrome trace (torch.profiler, CPU and CUDA) of ``calls`` forward+backward calls queued
    behind a sleep kernel: the host's timeline of one call, its ops and launches per thread."""
    from torch.profiler import ProfilerActivity, profile, record_function
    from semisep.backends.triton import ssd
    x, dt, A, B, C, D = make_inputs(b, T, h, p, g, n, torch.bfloat16, seed=T + n)
    gy = torch.randn_like(x)
    xg, dtg, Bg, Cg = [t.detach().clone().requires_grad_(True) for t in (x, dt, B, C)]

    def call():
        return torch.autograd.grad(ssd(xg, None, Bg, Cg, dt=dtg, A=A, D=D), (xg, dtg, Bg, Cg), gy)
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True) as prof:
        torch.cuda._sleep(int(2e8))
        for i in range(calls):
            with record_function(f"call {i}"):
                call()
        torch.cuda.synchronize()
    prof.export_chrome_trace(path)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--Ts", default="1024,16384")
    ap.add_argument("--n", type=int, default=64, help="state size N")
    ap.add_argument("--variants", nargs="*", default=["default:"])
    ap.add_argument("--fla", action="store_true")
    ap.add_argument("--cprofile", type=int, default=0)
    ap.add_argument("--sections", action="store_true")
    ap.add_argument("--trace", default=None, help="write a chrome trace of fwd+bwd at --Ts here")
    args = ap.parse_args()
    if args.trace:
        trace(int(args.Ts.split(",")[0]), args.trace)
        return
    if args.sections:
        for T in [int(s) for s in args.Ts.split(",")]:
            sections(T, n=args.n)
        return
    from semisep.backends.triton import ssd
    b, h, p, g, n = 8, 32, 64, 1, args.n
    for T in [int(s) for s in args.Ts.split(",")]:
        x, dt, A, B, C, D = make_inputs(b, T, h, p, g, n, torch.bfloat16, seed=T + n)
        gy = torch.randn_like(x)
        xg, dtg, Bg, Cg = [t.detach().clone().requires_grad_(True) for t in (x, dt, B, C)]
        for v in args.variants:
            vname, _, spec = v.partition(":")
            env = dict(kv.split("=", 1) for kv in spec.split(";") if kv)
            with env_set(env):
                torch.use_deterministic_algorithms(env.get("DETERMINISTIC") == "1",
                                                   warn_only=True)
                try:
                    report(f"T={T} N={n} semisep[{vname}] fwd",
                           lambda: ssd(x, None, B, C, dt=dt, A=A, D=D))
                    report(f"T={T} N={n} semisep[{vname}] fwd+bwd", lambda: torch.autograd.grad(
                        ssd(xg, None, Bg, Cg, dt=dtg, A=A, D=D), (xg, dtg, Bg, Cg), gy),
                        args.cprofile)
                finally:
                    torch.use_deterministic_algorithms(False)
        if args.fla:
            _, fused = load_fla()
            q = C.expand(b, T, h, n).contiguous()
            k = B.expand(b, T, h, n).contiguous()
            vv = (x.float() * dt[..., None]).to(x.dtype)
            gg = (dt * A).contiguous()
            qg, kg, vg, ggg = [t.detach().clone().requires_grad_(True) for t in (q, k, vv, gg)]
            report(f"T={T} fla fused fwd", lambda: fused(q, k, vv, g=gg, scale=1.0)[0])
            report(f"T={T} fla fused fwd+bwd", lambda: torch.autograd.grad(
                fused(qg, kg, vg, g=ggg, scale=1.0)[0], (qg, kg, vg, ggg), gy))


if __name__ == "__main__":
    main()

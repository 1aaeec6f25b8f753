"""How far each gradient of a bf16 SSD call lies from float64, for semisep and mamba_ssm on
the same inputs: is a gradient's error the kernel's or the problem's?

    python benchmarks/probe/grad_error.py [--n 128] [--T 4096] [--seeds 4,5,6,7]

The inputs of ``gpu_ssd.py --gluon-checks`` (b=2, h=8, p=64, g=2, head 3 with A = -1e4,
dt_bias with softplus, D per head), each seed its own draw. Per seed and gradient: the
norm-wise relative error (as the checks compute it) of semisep in bf16 (16b), of semisep in fp32 on
the same (bf16-representable) values, and of ``mamba_chunk_scan_combined`` in bf16; for dA
also the error of each head and ``sum |dt dla| / |dA|``, how much the sum that makes dA
cancels (dla from float64 autograd of the reference on the log-decays).
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from gpu_ssd import load_mamba, make_inputs, rel  # noqa: E402

from semisep.backends.triton import naive, ssd  # noqa: E402

NAMES = ["dx", "ddt", "dA", "dB", "dC", "dD", "ddt_bias"]


def draw(seed, b, T, h, p, g, n, dtype, device):
    x, dt, A, B, C, D = make_inputs(b, T, h, p, g, n, dtype, seed=seed, device=device)
    A[3] = -1e4
    gen = torch.Generator(device=device).manual_seed(seed + 1000)
    dtb = torch.randn(h, device=device, generator=gen) * 0.5
    gy = torch.randn(b, T, h, p, device=device, generator=gen)
    return [x, dt, A, B, C, D, dtb], gy


def grads(fn, ins, gy):
    ins = [t.detach().clone().requires_grad_(True) for t in ins]
    y = fn(*ins)
    return torch.autograd.grad((y.double() * gy.double()).sum(), ins)


def semisep(x, dt, A, B, C, D, dtb):
    return ssd(x, None, B, C, dt=dt, A=A, D=D, dt_bias=dtb, dt_softplus=True)


def reference(x, dt, A, B, C, D, dtb):
    return naive.ssd_reference_chunked(x, None, B, C, dt=dt, A=A, D=D, dt_bias=dtb,
                                       dt_softplus=True)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--seeds", default="4,5,6,7")
    ap.add_argument("--device", default="cuda", help="cpu: float16 under TRITON_INTERPRET=1")
    args = ap.parse_args()
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float16
    mamba = load_mamba() if args.device == "cuda" else None
    b, h, p, g = 2, 8, 64, 2
    for seed in map(int, args.seeds.split(",")):
        ins, gy = draw(seed, b, args.T, h, p, g, args.n, dtype, args.device)
        ref = grads(reference, ins, gy)
        rows = {"semisep 16b": grads(semisep, ins, gy),
                "semisep fp32": grads(semisep, [t.float() for t in ins], gy)}
        if mamba is not None:
            rows["mamba 16b"] = grads(lambda x, dt, A, B, C, D, dtb: mamba(
                x, dt, A, B, C, chunk_size=256, D=D, dt_bias=dtb, dt_softplus=True),
                ins, gy)
        print(f"seed {seed} n {args.n} T {args.T}")
        for name, gs in rows.items():
            print(f"  {name:13s} " + " ".join(f"{k} {rel(a, r):.2e}"
                                                for k, a, r in zip(NAMES, gs, ref)))
        for name, gs in rows.items():
            per = (gs[2].double() - ref[2]).abs() / ref[2].abs().clamp_min(1e-300)
            print(f"  {name:13s} dA per head " + " ".join(f"{v:.1e}" for v in per.tolist()))
        print("  dA ref " + " ".join(f"{v:.3g}" for v in ref[2].tolist()))
        # dA = sum over (b, t) of dt_eff * dla: the cancellation of that sum per head
        x, dt, A, B, C, D, dtb = [t.detach().double() for t in ins]
        dte = torch.nn.functional.softplus(dt + dtb).requires_grad_(True)
        y = naive.ssd_reference_chunked(x, None, B, C, dt=dte, A=A, D=D)[0]
        (ddte,) = torch.autograd.grad((y * gy.double()).sum(), [dte])
        # d/dA of f(dt * A) at fixed dt: dt * dla, dla = ddte part through log-decays only
        la = (dte * A).detach().requires_grad_(True)
        y = naive.ssd_reference_chunked(x * dte.detach()[..., None], la, B, C, D=D)[0]
        (dla,) = torch.autograd.grad((y * gy.double()).sum(), [la])
        terms = dte.detach() * dla
        cancel = terms.abs().sum((0, 1)) / terms.sum((0, 1)).abs().clamp_min(1e-300)
        print("  dA cancellation sum|dt dla|/|dA| " + " ".join(f"{v:.3g}"
                                                            for v in cancel.tolist()))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

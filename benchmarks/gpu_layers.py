"""The layers on the GPU against the CPU (issue 6): same weights, same input.

For `semisep.nn.Mamba2` and `semisep.nn.MaskedAttention` (selective and decay masks):
the float64 CPU layer (torch backend) is the reference; the CUDA layer in float32 and
bfloat16 (whatever backend CUDA tensors select: Triton where it supports the case) is
compared on the forward output, the gradients of the input and of every parameter, and
decoding step by step. Prints one line per (layer, dtype) with relative errors
``|got - want|_F / |want|_F`` (the worst parameter for the gradients).

    python benchmarks/gpu_layers.py [--T 1000] [--batch 2]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import semisep  # noqa: E402
from semisep.nn import Mamba2, MaskedAttention  # noqa: E402


def rel(got, want):
    got, want = got.detach().double().cpu(), want.detach().double()
    return float((got - want).norm() / want.norm().clamp_min(1e-300))


def run_layer(name, make, u, w, dtype, decode_steps, device):
    torch.manual_seed(0)
    layer = make(torch.float32)
    ref = make(torch.float64)
    ref.load_state_dict({k: v.double() for k, v in layer.state_dict().items()})
    u64 = u.double().requires_grad_()
    want = ref(u64)
    want_grads = torch.autograd.grad((want * w.double()).sum(), [u64, *ref.parameters()])

    gpu = make(dtype).to(device)
    gpu.load_state_dict(layer.state_dict())
    u_gpu = u.to(device, dtype).requires_grad_()
    got = gpu(u_gpu)
    got_grads = torch.autograd.grad((got.float() * w.to(device)).sum(),
                                    [u_gpu, *gpu.parameters()])
    names = ["input", *(n for n, _ in gpu.named_parameters())]
    grad_err, worst = max((rel(g, h), n) for g, h, n in zip(got_grads, want_grads, names))
    cache = gpu.allocate_cache(u.shape[0])
    with torch.no_grad():
        steps = torch.stack([gpu.step(u_gpu[:, t], cache) for t in range(decode_steps)], 1)
    try:
        with semisep.use_backend("triton"):
            same = bool(torch.equal(gpu(u_gpu), got))
        on_triton = "same as forced triton" if same else "DIFFERS from forced triton"
    except (ValueError, RuntimeError) as e:
        on_triton = f"triton refused: {str(e)[:80]}"
    line = (f"{name:28s} {str(dtype):15s} y {rel(got, want):.2e}  dx {rel(got_grads[0], want_grads[0]):.2e}"
            f"  worst grad {grad_err:.2e} ({worst})  decode[:{decode_steps}] "
            f"{rel(steps, want[:, :decode_steps]):.2e}  finite {bool(torch.isfinite(got).all())}  {on_triton}")
    print(line, flush=True)
    return line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--decode-steps", type=int, default=100)
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the script itself")
    args = ap.parse_args()
    where = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    print(f"semisep {semisep.__version__}, torch {torch.__version__}, {where}", flush=True)
    torch.manual_seed(0)
    d = 256
    u = torch.randn(args.batch, args.T, d)
    w = torch.randn(args.batch, args.T, d)
    makes = {
        "Mamba2(d_state=64, hd=64)": lambda dt: Mamba2(d, d_state=64, headdim=64, ngroups=1,
                                                       chunk_size=64, dtype=dt),
        "Mamba2(d_state=16, g=2)": lambda dt: Mamba2(d, d_state=16, headdim=32, ngroups=2,
                                                     chunk_size=64, dtype=dt),
        "MaskedAttention(selective)": lambda dt: MaskedAttention(d, 4, mask="selective",
                                                                 dtype=dt),
        "MaskedAttention(decay)": lambda dt: MaskedAttention(d, 4, mask="decay", dtype=dt),
    }
    for name, make in makes.items():
        for dtype in (torch.float32, torch.bfloat16):
            run_layer(name, make, u, w, dtype, args.decode_steps, args.device)


if __name__ == "__main__":
    main()

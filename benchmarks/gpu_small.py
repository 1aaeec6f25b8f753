"""A small full-feature forward+backward (for compute-sanitizer) or one timed-size forward (ncu).

python benchmarks/gpu_small.py sanitize [T] | ncu

``T`` (default 300) a multiple of the chunk takes the unmasked (EVEN) loops.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from semisep.backends.triton import ssd, ssd_decode_step  # noqa: E402

mode = sys.argv[1] if len(sys.argv) > 1 else "sanitize"
torch.manual_seed(0)
dev = "cuda"
if mode == "sanitize":
    b, h, p, g, n = 2, 4, 64, 2, 64
    T = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    x = torch.randn(b, T, h, p, device=dev, dtype=torch.bfloat16, requires_grad=True)
    dt = torch.randn(b, T, h, device=dev, requires_grad=True)
    A = -torch.rand(h, device=dev).requires_grad_(True)
    B = torch.randn(b, T, g, n, device=dev, dtype=torch.bfloat16, requires_grad=True)
    C = torch.randn(b, T, g, n, device=dev, dtype=torch.bfloat16, requires_grad=True)
    D = torch.randn(h, p, device=dev, requires_grad=True)
    z = torch.randn(b, T, h, p, device=dev, dtype=torch.bfloat16, requires_grad=True)
    h0 = torch.randn(b, h, p, n, device=dev, requires_grad=True)
    seq = torch.zeros(b, T, dtype=torch.int32, device=dev)
    seq[:, T // 2:] = 1
    y, hT = ssd(x, None, B, C, dt=dt, A=A, D=D, z=z, dt_bias=torch.zeros(h, device=dev),
                dt_softplus=True, seq_idx=seq, initial_state=h0, return_final_state=True)
    (y.float().sum() + hT.sum()).backward()
    st = h0.detach().clone()
    ssd_decode_step(st, x[:, 0].detach(), B[:, 0].detach(), C[:, 0].detach(), dt=dt[:, 0].detach(),
                    A=A.detach(), D=D.detach(), z=z[:, 0].detach())
    torch.cuda.synchronize()
    print("small run finished; finite:", bool(torch.isfinite(y).all()),
          bool(torch.isfinite(x.grad).all()))
else:
    b, T, h, p, g, n = 8, 4096, 32, 64, 1, 64
    x = torch.randn(b, T, h, p, device=dev, dtype=torch.bfloat16, requires_grad=True)
    dt = torch.rand(b, T, h, device=dev) * 0.1
    A = -torch.rand(h, device=dev) * 8
    B = torch.randn(b, T, g, n, device=dev, dtype=torch.bfloat16, requires_grad=True)
    C = torch.randn(b, T, g, n, device=dev, dtype=torch.bfloat16, requires_grad=True)
    for _ in range(2):
        y = ssd(x, None, B, C, dt=dt, A=A)
        y.float().sum().backward()
    torch.cuda.synchronize()
    print("ncu run finished")

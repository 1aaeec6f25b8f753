"""Device-free precision probe of the Triton SSD: float16 under the Triton interpreter.

    python benchmarks/interp_precision.py [--seeds 0-7] [--factored] [--T 400]

The interpreter gets bfloat16 dots wrong (triton-lang/triton#11584), but float16 runs the same
code with the same kind of rounding (8x smaller), so a change that moves the errors of the
gradients here tends to move them the same way in bf16 on the GPU. The case is gpu_ssd.py's
"all extras" one at a CPU-sized shape: z, D per channel, dt_bias with softplus, seq_idx (not
with --factored), an initial state; the relative error of every gradient against float64.

float16 always takes the exact loop (its range is too small for the factored operands at
strong decays); ``--factored`` lets it take the factored loop too and draws mild decays
(A in [-1, 0]), so that loop's rounding can be probed as well. Means over the seeds at the end.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from semisep.backends.triton import launch, naive, ssd  # noqa: E402

NAMES = ["dx", "ddt", "dA", "dB", "dC", "dD", "dz", "ddt_bias", "dh0"]


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def one(seed, T, factored):
    g = torch.Generator().manual_seed(seed)
    b, h, p, gg, n = 2, 4, 32, 2, 32
    rnd = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    x = rnd(b, T, h, p).half()
    dt = rnd(b, T, h) - 3
    A = -torch.rand(h, generator=g) * (1.0 if factored else 15.0) - (0.0 if factored else 1.0)
    B = (rnd(b, T, gg, n) / math.sqrt(n)).half()
    C = rnd(b, T, gg, n).half()
    D, z, dtb, h0 = rnd(h, p), rnd(b, T, h, p).half(), rnd(h) * 0.5, rnd(b, h, p, n)
    ins = [t.requires_grad_(True) for t in (x, dt, A, B, C, D, z, dtb, h0)]
    kw = dict(dt=dt, A=A, D=D, z=z, dt_bias=dtb, dt_softplus=True, initial_state=h0)
    if not factored:
        seq = torch.zeros(b, T, dtype=torch.int32)
        seq[:, T * 3 // 8:] = 1
        seq[:, T * 3 // 4:] = 2
        seq[1, T // 2:] = 5
        kw["seq_idx"] = seq
    y, hT = ssd(x, None, B, C, return_final_state=True, chunk_size=64, **kw)
    gy, gs = rnd(*y.shape), rnd(*hT.shape)
    got = torch.autograd.grad((y.float() * gy).sum() + (hT * gs).sum(), ins)
    yr, sr = naive.ssd_reference(x, None, B, C, **kw)
    want = torch.autograd.grad((yr * gy.double()).sum() + (sr * gs.double()).sum(), ins)
    return {"y": rel(y, yr), **{nm: rel(a, w) for nm, a, w in zip(NAMES, got, want)}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0-7")
    ap.add_argument("--T", type=int, default=400)
    ap.add_argument("--factored", action="store_true")
    args = ap.parse_args()
    lo, _, hi = args.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    if args.factored:
        launch._fast = lambda dtype, pre: pre   # experiment: float16 may take the factored loop
    rows = []
    for s in seeds:
        e = one(s, args.T, args.factored)
        rows.append(e)
        print(s, " ".join(f"{k} {v:.2e}" for k, v in e.items()), flush=True)
    print("mean", " ".join(f"{k} {sum(r[k] for r in rows) / len(rows):.3e}" for k in rows[0]))


if __name__ == "__main__":
    main()

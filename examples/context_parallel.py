"""Context parallelism: one long sequence through the SSD, split across ranks.

Launch (CPU, gloo)::

    torchrun --nproc-per-node 2 examples/context_parallel.py

and unchanged on GPUs (NCCL, one GPU per rank), e.g. the long-context case::

    torchrun --nproc-per-node 2 examples/context_parallel.py --batch 2 --heads 32 \\
        --headdim 64 --state 128 --seq-per-rank 65536 --dtype bfloat16

Every rank draws the whole sequence from the same seed and keeps its slice
(rank r holds steps ``[r T_r, (r+1) T_r)``), runs
:func:`semisep.distributed.ssd` with Mamba-2's arguments forward and backward,
and times it. With ``--check`` (the default) each rank also runs
:func:`semisep.ssd` on the whole sequence on its own device and compares its
slice of the outputs, the final state and the gradients with it.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist

import semisep as ss
import semisep.distributed as ssdist
from semisep.testing import default_rtol, relative_error


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--headdim", type=int, default=16)
    parser.add_argument("--state", type=int, default=16, help="N, the state size per head")
    parser.add_argument("--groups", type=int, default=1, help="groups of B and C")
    parser.add_argument("--seq-per-rank", type=int, default=512, help="T on each rank")
    parser.add_argument("--dtype", default="float32",
                        choices=["float64", "float32", "bfloat16", "float16"])
    parser.add_argument("--chunk-size", type=int, default=64)
    parser.add_argument("--iters", type=int, default=5, help="timed iterations")
    parser.add_argument("--no-check", dest="check", action="store_false",
                        help="skip the comparison with a one-device run")
    return parser.parse_args()


def make_inputs(args, T, device, dtype):
    """Mamba-2's SSD arguments for the whole sequence (leaves, same on every rank)."""
    gen = torch.Generator(device=device).manual_seed(0)
    b, h, p, n, g = args.batch, args.heads, args.headdim, args.state, args.groups

    def rnd(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=gen, device=device)).to(dtype)

    return {"x": rnd(b, T, h, p), "dt": rnd(b, T, h, scale=0.5) - 4.0,
            "B": rnd(b, T, g, n, scale=n ** -0.5), "C": rnd(b, T, g, n, scale=n ** -0.5),
            "A": -torch.rand(h, generator=gen, device=device).add(0.5),   # float32, as Mamba-2
            "dt_bias": rnd(h, scale=0.1), "D": rnd(h)}


PER_STEP = ("x", "dt", "B", "C")


def run(fn, inputs, weights):
    """Forward and backward of ``fn``; returns ``(y, final_state, grads by name)``."""
    leaves = {k: v.detach().requires_grad_() for k, v in inputs.items()}
    y, final = fn(**leaves)
    loss = (y.float() * weights["y"]).sum()
    if weights["final"] is not None:
        loss = loss + (final * weights["final"]).sum()
    loss.backward()
    return y, final, {k: v.grad for k, v in leaves.items()}


def timed(fn, iters, device):
    """Mean seconds per call of ``fn`` after one warm-up call, the slowest rank's."""
    fn()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    seconds = torch.tensor((time.perf_counter() - start) / iters, device=device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    return seconds.item()


def main():
    args = parse_args()
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    dtype = getattr(torch, args.dtype)
    T_r = args.seq_per_rank
    T = world * T_r
    start, stop = rank * T_r, (rank + 1) * T_r

    whole = make_inputs(args, T, device, dtype)
    mine = {k: (v[:, start:stop] if k in PER_STEP else v) for k, v in whole.items()}
    gen = torch.Generator(device=device).manual_seed(1)
    w_y = torch.randn(args.batch, T, args.heads, args.headdim, generator=gen, device=device)
    w_final = torch.randn(args.batch, args.heads, args.headdim, args.state, generator=gen,
                          device=device)
    options = {"dt_softplus": True, "chunk_size": args.chunk_size, "return_final_state": True}

    def distributed(**kw):
        return ssdist.ssd(**kw, **options)

    weights = {"y": w_y[:, start:stop], "final": w_final if rank == world - 1 else None}
    with torch.no_grad():
        t_fwd = timed(lambda: distributed(**mine), args.iters, device)
    t_step = timed(lambda: run(distributed, mine, weights), args.iters, device)

    def alone(**kw):   # the same slice with no state passing: the cost floor
        return ss.ssd(**kw, **options)

    with torch.no_grad():
        t_fwd_alone = timed(lambda: alone(**mine), args.iters, device)
    t_step_alone = timed(lambda: run(alone, mine, weights), args.iters, device)
    if rank == 0:
        b, h, p, n = args.batch, args.heads, args.headdim, args.state
        state_bytes = b * h * (p * n + 1) * (8 if dtype == torch.float64 else 4)
        print(f"semisep.distributed.ssd: world={world} backend={dist.get_backend()} "
              f"device={device.type} dtype={args.dtype} b={b} h={h} p={p} n={n} "
              f"g={args.groups} T={world}x{T_r} chunk={args.chunk_size}")
        print(f"  per step, slowest rank: forward {1e3 * t_fwd:.2f} ms, "
              f"forward+backward {1e3 * t_step:.2f} ms ({args.iters} iterations)")
        print(f"  the slice alone (semisep.ssd, no state passing): forward "
              f"{1e3 * t_fwd_alone:.2f} ms, forward+backward {1e3 * t_step_alone:.2f} ms")
        print(f"  states sent per rank and direction: {state_bytes / 2**20:.2f} MiB "
              f"(each rank receives {world}x that), independent of T")

    if args.check:
        y, final, grads = run(distributed, mine, weights)
        ref_y, ref_final, ref_grads = run(lambda **kw: ss.ssd(**kw, **options), whole,
                                          {"y": w_y, "final": w_final})
        errors = {"y": (relative_error(y, ref_y[:, start:stop]), default_rtol(y.dtype))}
        if rank == world - 1:
            errors["final state"] = (relative_error(final, ref_final), default_rtol(final.dtype))
        for k, g in grads.items():
            ref = ref_grads[k][:, start:stop] if k in PER_STEP else ref_grads[k]
            if k not in PER_STEP:         # shared parameters: sum over ranks
                dist.all_reduce(g)
            errors[f"grad {k}"] = (relative_error(g, ref), default_rtol(g.dtype))
        gathered = [None] * world
        dist.all_gather_object(gathered, errors)
        if rank == 0:
            worst = {k: max(e[k] for e in gathered if k in e) for k in gathered[-1]}
            print("  vs one device (normwise relative error, worst rank): " +
                  ", ".join(f"{k} {err:.1e}" for k, (err, _) in worst.items()))
            bad = [k for k, (err, tol) in worst.items() if not err <= tol]
            print(f"  {'FAILED: ' + ', '.join(bad) if bad else 'ok'} (tolerances by dtype: "
                  f"1e-10 float64, 1e-5 float32, 1e-2 bfloat16/float16)")
        if cuda:   # each rank has its own device; on the CPU the ranks would share the cores
            t_one = timed(lambda: run(lambda **kw: ss.ssd(**kw, **options), whole,
                                      {"y": w_y, "final": w_final}), args.iters, device)
            if rank == 0:
                print(f"  one device, whole sequence: forward+backward {1e3 * t_one:.2f} ms")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""CPU benchmark of structured masked attention: linear vs quadratic, per mask, over T.

    python benchmarks/sma_masks.py [--Ts 256 512 ... 16384] [--quadratic-max-T 8192] [--out FILE]

torch backend, float32, one sequence and one head, N = P = 64, forward only
(``torch.no_grad``), one torch thread by default (``--threads``), timed as the
least process CPU time per call of ``--repeat`` rounds, each timing every T
and mask once (``--sample-T / T`` consecutive calls; see
:func:`best_cpu_seconds`), with glibc's malloc keeping freed memory
(``--no-keep-freed-memory`` for its defaults; see :func:`keep_freed_memory`).
For each mask (Causal, Decay, Toeplitz, Fourier, a 1-SS from log-decays) it
times ``semisep.sma(..., algorithm="linear")`` and ``"quadratic"``, prints
the crossover T (the first measured T from which the linear form stays
faster) and the growth of the linear time from T=1K to 16K (targets: <= 30
for the O(T log T) FFT masks, <= 20 for the others). The quadratic form
holds several T x T float32 arrays (1 GiB each at T=16K, plus the int64 lag
index of the Toeplitz dense form): it is run only up to ``--quadratic-max-T``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import time
from pathlib import Path

import torch

import semisep as ss
from semisep.masks import Causal, Decay, Fourier, Toeplitz

TARGET_GROWTH = {"causal": 20, "decay": 20, "oness": 20, "toeplitz": 30, "fourier": 30}


def make_masks(T: int, gen: torch.Generator) -> dict:
    lags = torch.arange(T, dtype=torch.float32)
    return {
        "causal": Causal(T),
        "decay": Decay(0.99, T),
        "toeplitz": Toeplitz(torch.randn(T, generator=gen) * torch.exp(-lags / 64)),
        "fourier": Fourier(T),
        "oness": ss.OneSS.from_log(-torch.rand(T, generator=gen)),
    }


def keep_freed_memory() -> bool:
    """Have glibc's malloc keep freed memory in the process; whether it applied (glibc only).

    No trimming of the heap, and blocks up to 32 MiB from the heap rather than
    fresh mappings: what jemalloc or tcmalloc (which torch's CPU launcher,
    ``torch.backends.xeon.run_cpu``, preloads) do anyway. With glibc's
    defaults the heap shrinks and grows back from call to call, one page fault
    per 4 KiB touched again: up to a quarter of the CPU time of a call, and
    varying with the allocator's history (0 to 8000 faults for the same call at
    T=1K), which was most of the run-to-run noise of the growth figures; the
    least of a few short runs also tends to catch a call without faults, the
    one long call at T=16K never does.
    """
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(mallopt(m_mmap_threshold, 32 << 20)) and bool(mallopt(m_trim_threshold, 1 << 30))


def best_cpu_seconds(fns: dict, calls: dict, rounds: int) -> dict:
    """Least process CPU time per call of each function, over ``rounds`` rounds.

    In a round every function runs once as a sample of ``calls[name]``
    consecutive calls, timed together. CPU time of this process, not wall
    time: with one torch thread it is the work done, and it leaves out the
    time the machine gives to other processes (the machine this was written
    on was shared and loaded). Every round runs every function (all T, all
    masks), so a slow spell of the machine weighs on all T alike instead of
    on the few timed during it; every function gets the same number of
    samples, and the samples last about as long at every T (more calls per
    sample at small T): the least of more, or of shorter, samples is lower
    (a short one can fall in a quiet moment), which would skew the growth
    from 1K to 16K.
    """
    for fn in fns.values():
        fn()                              # warm up
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.process_time()
            for _ in range(calls[name]):
                fn()
            best[name] = min(best[name], (time.process_time() - start) / calls[name])
    return best


def crossover(rows, mask: str):
    """The first T from which linear beats quadratic at every measured T, as text."""
    both = [r for r in rows if f"{mask}/quadratic" in r]
    faster = [r[f"{mask}/linear"] < r[f"{mask}/quadratic"] for r in both]
    for i in range(len(both)):
        if all(faster[i:]):
            return f"<= {both[0]['T']}" if i == 0 else str(both[i]["T"])
    return f"> {both[-1]['T']}" if both else "n/a"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--Ts", type=int, nargs="+",
                        default=[256, 512, 1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--N", type=int, default=64)
    parser.add_argument("--P", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=10,
                        help="rounds, each timing every mask, algorithm and T once")
    parser.add_argument("--sample-T", type=int, default=16384,
                        help="a timed sample at T is max(1, SAMPLE_T / T) consecutive calls")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (CPU time is the work only with 1)")
    parser.add_argument("--quadratic-max-T", type=int, default=8192)
    parser.add_argument("--masks", nargs="+", choices=sorted(TARGET_GROWTH),
                        default=sorted(TARGET_GROWTH), help="the masks to time (default: all)")
    parser.add_argument("--keep-freed-memory", action=argparse.BooleanOptionalAction,
                        default=True, help="glibc malloc keeps freed memory (keep_freed_memory)")
    parser.add_argument("--out", default="benchmarks/results/sma_masks.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    malloc = "glibc, freed memory kept" if args.keep_freed_memory and keep_freed_memory() \
        else "default"

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"float32, b=1, h=1, N={args.N}, P={args.P}; malloc: {malloc}")
    gen = torch.Generator().manual_seed(0)
    fns, calls = {}, {}
    for T in args.Ts:
        Q, K, V = (torch.randn(T, d, generator=gen) for d in (args.N, args.N, args.P))
        for name, L in make_masks(T, gen).items():
            if name not in args.masks:
                continue
            algorithms = ["linear"] + (["quadratic"] if T <= args.quadratic_max_T else [])
            for algorithm in algorithms:
                key = (T, f"{name}/{algorithm}")
                fns[key] = (lambda Q=Q, K=K, V=V, L=L, a=algorithm:
                            ss.sma(Q, K, V, L, algorithm=a, allow_complex=True))
                calls[key] = max(1, args.sample_T // T)
    with torch.no_grad():
        best = best_cpu_seconds(fns, calls, args.repeat)
    rows = []
    for T in args.Ts:
        row = {"T": T, **{name: t for (t_, name), t in best.items() if t_ == T}}
        rows.append(row)
        cells = "  ".join(f"{k} {v * 1e3:8.1f}" for k, v in row.items() if k != "T")
        print(f"T={T:6d} (ms)  {cells}", flush=True)

    summary = {}
    at = {r["T"]: r for r in rows}
    for name in args.masks:
        summary[f"{name}_crossover_T"] = crossover(rows, name)
        if 1024 in at and 16384 in at:
            growth = at[16384][f"{name}/linear"] / at[1024][f"{name}/linear"]
            summary[f"{name}_linear_16K_over_1K"] = round(growth, 2)
            summary[f"{name}_growth_target_met"] = growth <= TARGET_GROWTH[name]
    for k, v in summary.items():
        print(f"{k}: {v}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "config": {"b": 1, "h": 1, "N": args.N, "P": args.P, "dtype": "float32",
                   "threads": torch.get_num_threads(), "rounds": args.repeat, "sample_T": args.sample_T,
                   "malloc": malloc,
                   "quadratic_max_T": args.quadratic_max_T},
        "rows": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()

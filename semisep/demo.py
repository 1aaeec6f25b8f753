"""``python -m semisep demo``: SSS matrices on the CPU, checked and timed.

1. Builds random SSS matrices of each structure (scalar log-decays, diagonal,
   full A with negative and zero entries) and shows that ``M @ x`` by every
   algorithm equals the dense product.
2. Times the recurrent, quadratic and chunked algorithms over T and prints a
   table (``--plot PATH`` also writes a PNG; needs matplotlib).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ._progress import progress
from .sss import SSS


def _random_matrices(rng, T, N):
    A_full = rng.normal(size=(T, N, N)) / np.sqrt(N)
    A_full[T // 3] = 0.0
    log_a = rng.uniform(-2, 0, size=T)
    log_a[T // 2] = -np.inf
    return {
        "scalar (log-decays, a reset)": SSS.from_log(log_a, rng.normal(size=(T, N)),
                                                     rng.normal(size=(T, N))),
        "diagonal (negative, zero A)": SSS(rng.uniform(-1, 1, size=(T, N)) * (rng.random((T, N)) > 0.1),
                                           rng.normal(size=(T, N)), rng.normal(size=(T, N))),
        "full (zero A at T/3)": SSS(A_full, rng.normal(size=(T, N)), rng.normal(size=(T, N))),
    }


def check(rng, T=50, N=4, P=3) -> list[tuple[str, str, float]]:
    """Relative error of ``M @ x`` against the dense matrix built entry by entry from the
    definition (:func:`semisep.testing.dense_reference`), per structure and algorithm."""
    from .testing.reference import dense_reference

    x = rng.normal(size=(T, P))
    rows = []
    for name, M in _random_matrices(rng, T, N).items():
        dense = dense_reference(M.A, M.B, M.C, structure=M.structure) @ x
        for algorithm in ("recurrent", "quadratic", "chunked"):
            if algorithm == "chunked" and M.structure == "full":
                continue
            y = M.matmul(x, algorithm=algorithm, chunk_size=16)
            rows.append((name, algorithm, float(np.abs(y - dense).max() / np.abs(dense).max())))
    return rows


def _median_time(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def timings(Ts, *, heads=4, N=32, P=32, chunk_size=64, repeat=3, backend=None):
    """Seconds per ``M @ x`` for each algorithm and T (scalar log-decays, ``heads`` batched)."""
    rng = np.random.default_rng(0)
    results = {}
    for T in progress(Ts, desc="timing"):
        M = SSS.from_log(rng.uniform(-1, 0, size=(heads, T)), rng.normal(size=(heads, T, N)),
                         rng.normal(size=(heads, T, N)))
        x = rng.normal(size=(heads, T, P))
        if backend == "torch":
            import torch

            M = SSS.from_log(*(torch.as_tensor(v, dtype=torch.float32)
                               for v in (M.log_a, M.B, M.C)))
            x = torch.as_tensor(x, dtype=torch.float32)
        for algorithm in ("recurrent", "quadratic", "chunked"):
            results[(algorithm, T)] = _median_time(
                lambda: M.matmul(x, algorithm=algorithm, chunk_size=chunk_size), repeat)
    return results


def _plot(results, Ts, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise SystemExit("--plot needs matplotlib: pip install 'semisep[bench]'") from exc
    fig, ax = plt.subplots(figsize=(6, 4))
    for algorithm in ("recurrent", "quadratic", "chunked"):
        ax.loglog(Ts, [results[(algorithm, T)] * 1e3 for T in Ts], "o-", label=algorithm)
    ax.set_xlabel("T")
    ax.set_ylabel("ms per M @ x")
    ax.set_title("semisep on the CPU: the three algorithms")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m semisep demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    parser.add_argument("--backend", choices=["numpy", "torch"], default="numpy")
    parser.add_argument("--plot", metavar="PATH", help="write a PNG of time against T")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    print("1. M @ x by each algorithm against the dense matrix from the definition (relative error)")
    print(f"   {'matrix':32s} {'algorithm':10s} {'error':>9s}")
    worst = 0.0
    for name, algorithm, err in check(rng):
        print(f"   {name:32s} {algorithm:10s} {err:9.1e}")
        worst = max(worst, err)
    print(f"   all agree: {worst < 1e-10}\n", flush=True)

    Ts = [64, 128, 256] if args.quick else [256, 512, 1024, 2048, 4096]
    print(f"2. time per M @ x, {args.backend} backend, 4 heads, N = P = 32, chunk 64", flush=True)
    results = timings(Ts, backend=args.backend, repeat=1 if args.quick else 3)
    print(f"   {'T':>6s} {'recurrent':>12s} {'quadratic':>12s} {'chunked':>12s}")
    for T in Ts:
        cells = " ".join(f"{results[(a, T)] * 1e3:10.2f}ms" for a in ("recurrent", "quadratic", "chunked"))
        print(f"   {T:6d} {cells}")
    if args.plot:
        _plot(results, Ts, args.plot)
        print(f"\n   wrote {args.plot}")
    return 0 if worst < 1e-10 else 1

"""``python -m semisep bench``: time the SSD product over T, per algorithm and backend.

    python -m semisep bench [--quick] [--out DIR] [--name NAME] [--backends numpy torch ...]
                            [--Ts T ...] [--quadratic-max-T T] [--threads N] [--no-plot]

Runs :func:`semisep.ssd` (the Mamba-2 layout, scalar decays per head, B and C
shared by the heads) by each algorithm (recurrent, quadratic, chunked) on each
backend this machine has: numpy and torch on the CPU, and with a GPU torch and
triton on CUDA. Writes ``DIR/NAME.json`` (the machine, the configuration and one
row per backend, algorithm and T) and ``DIR/NAME.png`` (time against T, log-log,
one line per algorithm and backend; needs matplotlib).

Each time is the fastest of a few runs after a warm-up (noise on a shared
machine only ever adds time; slow cells get fewer runs), forward only,
without autograd. The quadratic algorithm materializes ``T x T`` matrices per
head, so it runs only up to ``--quadratic-max-T`` (2048 by default); a cell
that cannot run says why in its row.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from ._progress import progress as _plain_progress
from ._version import __version__
from .backends import available_backends
from .ssd import ssd

ALGORITHMS = ("recurrent", "quadratic", "chunked")
SUITES = {
    "quick": {"Ts": [64, 128, 256], "batch": 1, "heads": 2, "headdim": 16, "state": 16,
              "chunk_size": 32, "repeat": 1, "quadratic_max_T": 256},
    "full": {"Ts": [256, 512, 1024, 2048, 4096, 8192], "batch": 1, "heads": 8, "headdim": 64,
             "state": 64, "chunk_size": 64, "repeat": 5, "quadratic_max_T": 2048},
}


def cases_here(names=None) -> list[tuple[str, str]]:
    """The ``(backend, device)`` pairs this machine can run, restricted to ``names`` if given."""
    have = available_backends()
    cases = [("numpy", "cpu")] if "numpy" in have else []
    if "torch" in have:
        import torch

        cases.append(("torch", "cpu"))
        if torch.cuda.is_available():
            cases.append(("torch", "cuda"))
            if "triton" in have:
                cases.append(("triton", "cuda"))
    if names is not None:
        unknown = set(names) - {name for name, _ in cases}
        if unknown:
            raise SystemExit(f"--backends: {sorted(unknown)} not available here "
                             f"(available: {sorted({name for name, _ in cases})})")
        cases = [case for case in cases if case[0] in names]
    return cases


def make_inputs(backend: str, device: str, T: int, cfg: dict, seed: int = 0):
    """float32 ``(x, log_a, B, C)`` of the suite's sizes, as numpy arrays or torch tensors."""
    rng = np.random.default_rng(seed)
    b, h, p, n = cfg["batch"], cfg["heads"], cfg["headdim"], cfg["state"]
    arrays = (rng.normal(size=(b, T, h, p)), -rng.uniform(0, 1, size=(b, T, h)),
              rng.normal(size=(b, T, 1, n)), rng.normal(size=(b, T, 1, n)))
    arrays = tuple(a.astype(np.float32) for a in arrays)
    if backend == "numpy":
        return arrays
    import torch

    return tuple(torch.from_numpy(a).to(device) for a in arrays)


def _synchronize(device: str):
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def best_seconds(fn, repeat: int, device: str, budget: float = 2.0) -> float:
    """The fastest of up to ``repeat`` timed calls of ``fn`` after one warm-up call.

    Calls slow enough that ``repeat`` of them would pass ``budget`` seconds are
    timed fewer times (at least once), so a slow cell does not stall the suite.
    """
    start = time.perf_counter()
    fn()
    _synchronize(device)
    warm = time.perf_counter() - start
    best = float("inf")
    for _ in range(max(1, min(repeat, int(budget / max(warm, 1e-9))))):
        start = time.perf_counter()
        fn()
        _synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


def run_cell(backend: str, device: str, algorithm: str, T: int, cfg: dict) -> dict:
    """One row: the time of ``ssd`` for this backend, algorithm and T, or why it did not run."""
    row = {"backend": backend, "device": device, "algorithm": algorithm, "T": T,
           "seconds": None}
    if algorithm == "quadratic" and T > cfg["quadratic_max_T"]:
        row["skipped"] = f"quadratic runs only up to T = {cfg['quadratic_max_T']}"
        return row
    x, log_a, B, C = make_inputs(backend, device, T, cfg)

    def fn():
        return ssd(x, log_a, B, C, chunk_size=cfg["chunk_size"], algorithm=algorithm,
                   backend=backend)

    try:
        fn()
    except ValueError as exc:          # a backend that cannot run this case says so
        row["skipped"] = str(exc)
        return row
    if backend == "numpy":
        row["seconds"] = best_seconds(fn, cfg["repeat"], device)
    else:
        import torch

        with torch.no_grad():
            row["seconds"] = best_seconds(fn, cfg["repeat"], device)
    return row


def machine() -> dict:
    """What the timings were measured on."""
    info = {"platform": platform.platform(), "processor": platform.processor() or
            platform.machine(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__}
    threads_env = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                              "MKL_NUM_THREADS") if k in os.environ}
    if threads_env:
        info["env"] = threads_env
    try:
        import torch
    except ImportError:
        return info
    info.update(torch=torch.__version__, torch_threads=torch.get_num_threads())
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def _progress(cells):
    try:
        from tqdm import tqdm
    except ImportError:
        return _plain_progress(cells, desc="bench")
    return tqdm(cells, desc="bench", unit="cell")


def run(cfg: dict, cases) -> list[dict]:
    """Every row of the suite ``cfg`` over ``cases``, with a progress bar on stderr."""
    cells = [(backend, device, algorithm, T) for backend, device in cases
             for algorithm in ALGORITHMS for T in cfg["Ts"]]
    return [run_cell(backend, device, algorithm, T, cfg)
            for backend, device, algorithm, T in _progress(cells)]


def plot(result: dict, path) -> None:
    """Time against T, log-log: a colour per algorithm, a line style per backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = dict(zip(ALGORITHMS, ("tab:blue", "tab:orange", "tab:green")))
    styles = ["-", "--", ":", "-."]
    lines = {}
    for row in result["rows"]:
        if row["seconds"] is not None:
            key = (f"{row['backend']}/{row['device']}", row["algorithm"])
            lines.setdefault(key, []).append((row["T"], row["seconds"] * 1e3))
    backends = sorted({backend for backend, _ in lines})
    cfg = result["config"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (backend, algorithm), points in lines.items():
        Ts, ms = zip(*sorted(points))
        ax.loglog(Ts, ms, styles[backends.index(backend) % len(styles)], marker="o",
                  color=colours[algorithm], label=f"{algorithm}, {backend}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(cfg["Ts"], [str(T) for T in cfg["Ts"]])
    ax.minorticks_off()
    ax.set_xlabel("T (sequence length)")
    ax.set_ylabel("ms per ssd call")
    mach = result["machine"]
    where = mach.get("gpu") or f"{mach['processor']}, {mach['cpu_count']} CPUs"
    threads = f", torch threads {mach['torch_threads']}" if "torch_threads" in mach else ""
    ax.set_title(f"semisep {result['semisep']}: ssd, b={cfg['batch']} h={cfg['heads']} "
                 f"p={cfg['headdim']} N={cfg['state']} Q={cfg['chunk_size']}, float32\n"
                 f"{where}{threads}, {result['date'][:10]}", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(rows) -> str:
    """The rows as a text table, one line per backend and T, a column per algorithm."""
    cells = {(r["backend"], r["device"], r["T"], r["algorithm"]): r["seconds"] for r in rows}
    keys = sorted({k[:3] for k in cells}, key=lambda k: (k[0], k[1], k[2]))
    lines = [f"{'backend':14s} {'T':>6s} " + " ".join(f"{a:>12s}" for a in ALGORITHMS)]
    for backend, device, T in keys:
        times = [cells.get((backend, device, T, a)) for a in ALGORITHMS]
        lines.append(f"{backend + '/' + device:14s} {T:6d} " + " ".join(
            f"{t * 1e3:10.2f}ms" if t is not None else f"{'-':>12s}" for t in times))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m semisep bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds, for tests)")
    parser.add_argument("--out", default="semisep-bench", metavar="DIR",
                        help="folder for NAME.json and NAME.png (default: ./semisep-bench)")
    parser.add_argument("--name", default="bench", help="file name stem (default: bench)")
    parser.add_argument("--backends", nargs="+", metavar="NAME",
                        help="only these backends (default: all available here)")
    parser.add_argument("--Ts", type=int, nargs="+", metavar="T", help="override the lengths")
    parser.add_argument("--quadratic-max-T", type=int, metavar="T",
                        help="run the quadratic algorithm only up to this T")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="torch.set_num_threads(N) first (default: torch's own choice)")
    parser.add_argument("--no-plot", action="store_true", help="write the JSON only")
    args = parser.parse_args(argv)
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)

    cfg = dict(SUITES["quick" if args.quick else "full"])
    if args.Ts:
        cfg["Ts"] = sorted(args.Ts)
    if args.quadratic_max_T is not None:
        cfg["quadratic_max_T"] = args.quadratic_max_T
    cases = cases_here(args.backends)
    result = {"semisep": __version__,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join(["python -m semisep bench",
                                  *(sys.argv[2:] if argv is None else argv)]),
              "suite": "quick" if args.quick else "full", "machine": machine(), "config": cfg}
    print(f"semisep {__version__} bench ({result['suite']}): "
          f"{', '.join(f'{b}/{d}' for b, d in cases)}", flush=True)
    result["rows"] = run(cfg, cases)
    print(table(result["rows"]))

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / f"{args.name}.json"
    json_path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {json_path}")
    if not args.no_plot:
        try:
            plot(result, out / f"{args.name}.png")
        except ImportError as exc:
            raise SystemExit("the plot needs matplotlib: pip install 'semisep[bench]' "
                             "(or pass --no-plot)") from exc
        print(f"wrote {out / (args.name + '.png')}")
    return 0

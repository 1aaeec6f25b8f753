"""CPU benchmark of the SSD product: semisep's three algorithms and mamba-ssm's minimal reference.

    python benchmarks/cpu_ssd.py [--Ts 1024 2048 4096 8192 16384] [--chunk-size 64] [--out FILE]

torch backend, float32, b=1, h=8, p=64, N=64. Side by side in the same run:
semisep's recurrent, quadratic and chunked algorithms (``semisep.ssd``), and the
paper's reference code as shipped by ``mamba-ssm`` (``ssd_minimal_discrete`` in
``mamba_ssm/modules/ssd_minimal.py``), loaded from an installed copy by file
(the package's ``__init__`` imports compiled parts). Without mamba-ssm the
comparison is skipped and said so. The quadratic algorithm is run only while
its T x T matrices fit in a few GB (T <= 4096 here).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time
import types
from pathlib import Path

import torch

import semisep as ss


def load_ssd_minimal():
    """``ssd_minimal_discrete`` from an installed mamba-ssm, or None with the reason."""
    spec = importlib.util.find_spec("mamba_ssm")
    if spec is None or not spec.submodule_search_locations:
        return None, "mamba-ssm is not installed"
    root = Path(list(spec.submodule_search_locations)[0])
    path = root / "modules" / "ssd_minimal.py"
    # ssd_minimal.py imports the Triton SSD only for its own self-test; stub that module (and
    # its parents, so the package __init__ with its compiled parts never runs).
    stubs = {}
    for name in ("mamba_ssm", "mamba_ssm.ops", "mamba_ssm.ops.triton",
                 "mamba_ssm.ops.triton.ssd_combined"):
        if name not in sys.modules:
            stubs[name] = sys.modules[name] = types.ModuleType(name)
    sys.modules["mamba_ssm"].__path__ = [str(root)]
    sys.modules["mamba_ssm.ops.triton.ssd_combined"].mamba_chunk_scan_combined = None
    module_spec = importlib.util.spec_from_file_location("ssd_minimal_reference", path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except ImportError as exc:           # e.g. einops missing
        return None, f"cannot load {path}: {exc}"
    finally:
        for name in stubs:
            del sys.modules[name]
    return module.ssd_minimal_discrete, None


def best_seconds(fns: dict, repeat: int) -> dict:
    """Fastest of ``repeat`` runs per function, the functions interleaved run by run.

    The minimum, not the median: on a shared machine the noise only ever adds
    time, and interleaving gives every implementation the same conditions.
    """
    for fn in fns.values():
        fn()                              # warm up
    best = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--Ts", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--chunk-size", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quadratic-max-T", type=int, default=4096)
    parser.add_argument("--recurrent-max-T", type=int, default=16384)
    parser.add_argument("--out", default="benchmarks/results/cpu_ssd.json")
    args = parser.parse_args(argv)

    b, h, p, n = 1, 8, 64, 64
    minimal, why_not = load_ssd_minimal()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if minimal is None:
        print(f"mamba-ssm comparison skipped: {why_not}")
    rows = []
    gen = torch.Generator().manual_seed(0)
    for T in args.Ts:
        x = torch.randn(b, T, h, p, generator=gen)
        log_a = -torch.rand(b, T, h, generator=gen)
        B = torch.randn(b, T, 1, n, generator=gen)
        C = torch.randn(b, T, 1, n, generator=gen)
        fns = {}
        for algorithm in ("recurrent", "quadratic", "chunked"):
            limit = {"quadratic": args.quadratic_max_T,
                     "recurrent": args.recurrent_max_T}.get(algorithm, T)
            if T <= limit:
                fns[algorithm] = (lambda a=algorithm: ss.ssd(x, log_a, B, C, algorithm=a,
                                                             chunk_size=args.chunk_size))
        if minimal is not None and T % args.chunk_size == 0:
            Bh, Ch = B.expand(b, T, h, n), C.expand(b, T, h, n)
            fns["ssd_minimal_discrete"] = lambda: minimal(x, log_a, Bh, Ch, args.chunk_size)
        with torch.no_grad():
            row = {"T": T, **best_seconds(fns, args.repeat)}
        rows.append(row)
        cells = "  ".join(f"{k} {v * 1e3:9.1f} ms" for k, v in row.items() if k != "T" and v)
        print(f"T={T:6d}  {cells}", flush=True)
    summary = {}
    if minimal is not None:
        at = {r["T"]: r for r in rows}
        if 4096 in at:
            summary["speedup_vs_ssd_minimal_at_4096"] = (at[4096]["ssd_minimal_discrete"]
                                                         / at[4096]["chunked"])
    if 1024 in {r["T"] for r in rows} and 16384 in {r["T"] for r in rows}:
        at = {r["T"]: r for r in rows}
        summary["chunked_time_16K_over_1K"] = at[16384]["chunked"] / at[1024]["chunked"]
    for k, v in summary.items():
        print(f"{k}: {v:.2f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"config": {"b": b, "h": h, "p": p, "n": n,
                                                     "chunk_size": args.chunk_size,
                                                     "dtype": "float32",
                                                     "threads": torch.get_num_threads()},
                                          "rows": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()

"""``python -m semisep bench --quick``: runs in a subprocess, writes valid JSON and a PNG."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import semisep
from semisep.bench import ALGORITHMS, SUITES, cases_here, run_cell, table
from semisep.bench import main as bench_main


def test_bench_quick_writes_json_and_png(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "semisep", "bench", "--quick", "--out",
                           str(tmp_path), "--name", "q"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "q.json").read_text())
    assert result["semisep"] == semisep.__version__
    assert result["suite"] == "quick" and "--quick" in result["command"]
    cases = cases_here()
    Ts = SUITES["quick"]["Ts"]
    assert len(result["rows"]) == len(cases) * len(ALGORITHMS) * len(Ts)
    for row in result["rows"]:
        assert (row["backend"], row["device"]) in cases
        assert row["algorithm"] in ALGORITHMS and row["T"] in Ts
        # in the quick suite every cell on the CPU backends runs
        assert row["seconds"] is not None and row["seconds"] > 0, row
    assert (tmp_path / "q.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "recurrent" in proc.stdout and "wrote" in proc.stdout
    assert "bench" in proc.stderr          # the progress bar


def test_bench_rejects_unknown_backend(tmp_path):
    with pytest.raises(SystemExit, match="nonesuch.*available"):
        bench_main(["--quick", "--out", str(tmp_path), "--backends", "nonesuch"])
    assert not (tmp_path / "bench.json").exists()


def test_bench_skips_quadratic_beyond_its_limit_and_tables_it():
    cfg = dict(SUITES["quick"], quadratic_max_T=64)
    row = run_cell("numpy", "cpu", "quadratic", 128, cfg)
    assert row["seconds"] is None and "64" in row["skipped"]
    assert "-" in table([row, dict(row, algorithm="chunked", seconds=0.001)]).splitlines()[1]

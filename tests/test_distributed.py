"""semisep.distributed on the CPU (gloo): ranks spawned here, compared with single-process ssd.

The spawned ranks run tests/distributed_worker.py, which checks several cases
per spawn (spawning is the slow part); the pure-local pieces are tested in
this process.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import semisep.distributed as ssdist

from distributed_worker import run

TIMEOUT_S = 120

# Ranks are forked from a fresh server process that has imported torch once:
# no per-rank interpreter start-up, and no fork of this (threaded) process.
CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload(["torch", "semisep.distributed", "semisep.testing",
                                "distributed_worker"])


def spawn(world: int, sizes: list, tmp_path: Path):
    """Run :func:`distributed_worker.run` on ``world`` ranks; fail with their errors or on a hang."""
    logs = [tmp_path / f"rank{rank}.log" for rank in range(world)]
    procs = [CONTEXT.Process(target=run, args=(rank, world, str(tmp_path / "store"), sizes,
                                               str(logs[rank])))
             for rank in range(world)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(TIMEOUT_S)
    hung = [rank for rank, proc in enumerate(procs) if proc.is_alive()]
    for rank in hung:
        procs[rank].kill()
        procs[rank].join()
    failed = [rank for rank, proc in enumerate(procs) if proc.exitcode != 0]
    if failed:
        report = [f"--- rank {r} ---\n" + (logs[r].read_text() if logs[r].exists() else
                                           "(no error logged)") for r in failed]
        pytest.fail(f"ranks {failed} failed (hung: {hung})\n" + "\n".join(report))


@pytest.mark.parametrize("sizes", [[5, 12], [3, 9, 1, 7]], ids=["2 ranks", "4 ranks"])
def test_matches_single_process(sizes, tmp_path):
    spawn(len(sizes), sizes, tmp_path)


def test_uninitialised_group_is_a_named_error():
    assert not dist.is_initialized()
    x = torch.zeros(1, 3, 2, 2)
    with pytest.raises(ValueError, match="group: torch.distributed is not initialised"):
        ssdist.ssd(x, torch.zeros(1, 3, 2), torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4))

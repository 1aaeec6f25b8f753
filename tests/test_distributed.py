"""semisep.distributed on the CPU (gloo): ranks spawned here, compared with single-process ssd.

The spawned ranks run tests/distributed_worker.py, which checks several cases
per spawn (spawning is the slow part); the pure-local pieces are tested in
this process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
from hypothesis import given, settings
from hypothesis import strategies as st

import semisep as ss
import semisep.distributed as ssdist
from semisep.distributed.local import ssd_end_state, sss_end_state
from semisep.testing import assert_close, inputs, log_decays, recurrence_reference, sss_matrices

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
    deadline = time.monotonic() + TIMEOUT_S
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
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


def test_example_runs_under_torchrun():
    """examples/context_parallel.py as documented, small: its own check must pass."""
    example = Path(__file__).parents[1] / "examples" / "context_parallel.py"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", str(example), "--seq-per-rank", "40",
                           "--chunk-size", "16", "--dtype", "float64", "--iters", "1"],
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\n  ok (" in done.stdout, done.stdout


@contextlib.contextmanager
def group_of_one():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@settings(max_examples=15, deadline=None)
@given(data=st.data(), T=st.integers(1, 10), groups=st.sampled_from([(1, 1), (2, 4)]),
       initial=st.booleans())
def test_one_rank_is_single_process_ssd(data, T, groups, initial):
    """A group of one holds the whole sequence: outputs, state and gradients of ssd itself."""
    g, h = groups
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    args = {k: torch.as_tensor(rng.normal(size=s)) for k, s in
            (("x", (2, T, h, 3)), ("B", (2, T, g, 4)), ("C", (2, T, g, 4)))}
    args["log_a"] = data.draw(log_decays(shape=(2, T, h), backend="torch"))
    if initial:
        args["initial_state"] = torch.as_tensor(rng.normal(size=(2, h, 3, 4)))
    results = []
    with group_of_one():
        for fn in (ss.ssd, ssdist.ssd):
            leaves = {k: v.clone().requires_grad_() for k, v in args.items()}
            y, state = fn(**leaves, chunk_size=4, return_final_state=True)
            (y.sum() + (state * state).sum()).backward()
            results.append([y, state] + [leaves[k].grad for k in sorted(leaves)])
    for got, expected in zip(*results):
        assert_close(got, expected)


def test_uninitialised_group_is_a_named_error():
    assert not dist.is_initialized()
    x = torch.zeros(1, 3, 2, 2)
    with pytest.raises(ValueError, match="group: torch.distributed is not initialised"):
        ssdist.ssd(x, torch.zeros(1, 3, 2), torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4))


def _end_state_reference(M, x, h0):
    A = M.log_a if M.log_a is not None else M.A
    return recurrence_reference(A, M.B, M.C, x, initial_state=h0, structure=M.structure,
                                log=M.log_a is not None)[1]


@settings(max_examples=40, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(["float64", "float32"]),
       structure=st.sampled_from(["scalar", "diagonal"]))
def test_end_state_and_decay_match_the_recurrence(data, dtype, structure):
    """A slice entered in state h ends in d * h + S: S from zero, d the total decay."""
    M = data.draw(sss_matrices(structure=structure, backend="torch", dtype=dtype))
    x = data.draw(inputs(M, vector=False, backend="torch", dtype=dtype))
    h0 = torch.as_tensor(np.random.default_rng(0).normal(size=M.shape[:-2] + (M.state_size,
                                                                             x.shape[-1])))
    S, d = sss_end_state(M.structure, M.log_a if M.log_a is not None else M.A,
                         M.log_a is not None, M.B, x)
    assert_close(S, _end_state_reference(M, x, None), what="end state from zero")
    assert_close(d * h0.to(S.dtype) + S, _end_state_reference(M, x, h0), what="d * h + S")


@settings(max_examples=20, deadline=None)
@given(data=st.data(), T=st.integers(1, 12), groups=st.sampled_from([(1, 1), (1, 3), (2, 4)]))
def test_ssd_end_state_matches_ssd(data, T, groups):
    g, h = groups
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x, B, C = (torch.as_tensor(rng.normal(size=s)) for s in ((2, T, h, 3), (2, T, g, 4),
                                                             (2, T, g, 4)))
    log_a = data.draw(log_decays(shape=(2, T, h), backend="torch"))
    h0 = torch.as_tensor(rng.normal(size=(2, h, 3, 4)))
    S, d = ssd_end_state(x, log_a, B)
    _, expected = ss.ssd(x, log_a, B, C, return_final_state=True)
    assert_close(S, expected, what="end state from zero")
    _, expected = ss.ssd(x, log_a, B, C, initial_state=h0, return_final_state=True)
    assert_close(d[..., None, None] * h0 + S, expected, what="d * h + S")


def test_end_state_is_float32_accurate_on_long_slices():
    """No cumulative-sum differences: exp(cs[-1] - cs[t]) would lose |cs| eps (4e-5 here)."""
    T = 4096
    rng = np.random.default_rng(1)
    log_a = torch.as_tensor(-rng.uniform(0, 0.5, size=(1, T)), dtype=torch.float32)
    B, C = (torch.as_tensor(rng.normal(size=(1, T, 2)), dtype=torch.float32) for _ in range(2))
    x = torch.as_tensor(rng.normal(size=(1, T, 2)), dtype=torch.float32)
    M = ss.SSS.from_log(log_a, B, C)
    S, _ = sss_end_state("scalar", log_a, True, B, x)
    assert_close(S, _end_state_reference(M, x, None), rtol=1e-5, what="end state")

"""Autograd through every algorithm, low-precision inputs, and long-sequence stability."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import semisep as ss
from semisep.testing import assert_close, dense_reference, sss_matrices

CASES = [("scalar", False), ("scalar", True), ("diagonal", False), ("diagonal", True),
         ("full", False)]


def generators(structure, log, T, N, seed):
    rng = np.random.default_rng(seed)
    core = {"scalar": (T,), "diagonal": (T, N), "full": (T, N, N)}[structure]
    A = rng.uniform(-2, 0, core) if log else rng.uniform(-1, 1, core)
    if not log:
        A.reshape(T, -1)[2] = 0.0          # a zero transition at t = 2
    tensors = [torch.tensor(v, requires_grad=True) for v in
               (A, rng.normal(size=(T, N)), rng.normal(size=(T, N)), rng.normal(size=(T, 2)),
                rng.normal(size=(N, 2)))]
    return tensors


@pytest.mark.parametrize("structure,log,algorithm", [
    case + (algorithm,) for case in CASES for algorithm in ("recurrent", "quadratic", "chunked")
    if not (algorithm == "chunked" and case[0] == "full")])
def test_gradcheck_float64(structure, log, algorithm):
    A, B, C, x, h0 = generators(structure, log, T=7, N=2, seed=0)
    make = ss.SSS.from_log if log else ss.SSS

    def f(A, B, C, x, h0):
        y, h = make(A, B, C, structure=structure).matmul(
            x, algorithm=algorithm, chunk_size=3, initial_state=h0, return_final_state=True)
        return y, h

    assert torch.autograd.gradcheck(f, (A, B, C, x, h0))


def test_gradients_finite_through_resets_and_zeros():
    T, N = 12, 2
    rng = np.random.default_rng(1)
    log_a = rng.uniform(-3, 0, (T,))
    log_a[[0, 4, 5, 11]] = -np.inf
    tensors = [torch.tensor(v, requires_grad=True) for v in
               (log_a, rng.normal(size=(T, N)), rng.normal(size=(T, N)), rng.normal(size=(T, 3)))]
    for algorithm in ("recurrent", "quadratic", "chunked"):
        y = ss.SSS.from_log(*tensors[:3]).matmul(tensors[3], algorithm=algorithm, chunk_size=4)
        grads = torch.autograd.grad(y.square().sum(), tensors)
        assert all(torch.isfinite(g).all() for g in grads), algorithm
    a = rng.uniform(-1, 1, (T,))
    a[[3, 7]] = 0.0
    values = [torch.tensor(a, requires_grad=True)] + tensors[1:]
    for algorithm in ("recurrent", "quadratic", "chunked"):
        y = ss.SSS(*values[:3]).matmul(values[3], algorithm=algorithm, chunk_size=4)
        grads = torch.autograd.grad(y.square().sum(), values)
        assert all(torch.isfinite(g).all() for g in grads), algorithm


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@settings(max_examples=15)
@given(data=st.data())
def test_low_precision_within_tolerance(dtype, data):
    M = data.draw(sss_matrices(backend="torch", dtype=dtype, T=st.integers(1, 40),
                               structure=st.sampled_from(["scalar", "diagonal"])))
    x = torch.randn(M.seq_len, 3, generator=torch.Generator().manual_seed(0)).to(M.B.dtype)
    expected = dense_reference(M.A, M.B, M.C, structure=M.structure) @ x.double().numpy()
    for algorithm in ("recurrent", "quadratic", "chunked"):
        y = M.matmul(x, algorithm=algorithm, chunk_size=8)
        assert y.dtype == M.B.dtype
        assert_close(y, expected, what=algorithm)


def long_sequence(T, Q, seed=0):
    """Log-decays with scattered values down to -1000 and resets at chunk edges."""
    rng = np.random.default_rng(seed)
    log_a = -rng.uniform(0, 0.05, size=(2, T))
    big = rng.random(size=(2, T)) < 0.01
    log_a[big] = -rng.uniform(1, 1000, size=big.sum())
    log_a[:, Q::7 * Q] = -np.inf
    log_a[:, Q - 1::11 * Q] = -np.inf
    return log_a


def test_chunked_fp32_at_T_8192_matches_float64_values_and_gradients():
    T, N, P, Q = 8192, 4, 4, 64
    rng = np.random.default_rng(2)
    arrays = [long_sequence(T, Q), rng.normal(size=(T, N)), rng.normal(size=(T, N)),
              rng.normal(size=(2, T, P))]
    w = torch.tensor(rng.normal(size=(2, T, P)))
    results = {}
    for dtype in (torch.float64, torch.float32):
        leaves = [torch.tensor(v, dtype=dtype, requires_grad=True) for v in arrays]
        y = ss.SSS.from_log(*leaves[:3]).matmul(leaves[3], algorithm="chunked", chunk_size=Q)
        grads = torch.autograd.grad((y * w.to(dtype)).sum(), leaves)
        results[dtype] = (y, grads)
    y32, g32 = results[torch.float32]
    y64, g64 = results[torch.float64]
    assert torch.isfinite(y32).all() and all(torch.isfinite(g).all() for g in g32)
    assert_close(y32, y64, rtol=1e-5)
    for name, a, b in zip(("log_a", "B", "C", "x"), g32, g64):
        assert_close(a, b, rtol=1e-4, what=f"grad {name}")
    # and the float64 chunked result is the recurrence's
    y_rec = ss.SSS.from_log(*arrays[:3]).matmul(arrays[3], algorithm="recurrent")
    assert_close(y64, y_rec)

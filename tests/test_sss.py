"""SSS against the float64 oracle built from the definition, every algorithm and backend."""

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

import semisep as ss
from semisep.testing import (assert_close, assert_matches_dense, dense_reference, inputs,
                             recurrence_reference, shapes, sss_matrices)

BACKENDS = ["numpy", "torch"]


def algorithms_for(M):
    return ["recurrent", "quadratic"] + (["chunked"] if M.structure != "full" else [])


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_matches_dense_reference(backend, data):
    M = data.draw(sss_matrices(backend=backend))
    assert_matches_dense(M, dense_reference(M))


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data(), chunk_size=st.integers(1, 7))
def test_every_algorithm_matches_the_recurrence(backend, data, chunk_size):
    M = data.draw(sss_matrices(backend=backend))
    x = data.draw(inputs(M, backend=backend, vector=False))
    N, P = M.state_size, x.shape[-1]
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    h0_batch = data.draw(shapes(max_dims=1)) + M.batch_shape    # may broadcast beyond M and x
    h0 = rng.normal(size=h0_batch + (N, P))
    if backend == "torch":
        h0 = torch.as_tensor(h0)
    y_ref, h_ref = recurrence_reference(M.A, M.B, M.C, x, initial_state=h0, structure=M.structure)
    for algorithm in algorithms_for(M):
        y, h = M.matmul(x, algorithm=algorithm, chunk_size=chunk_size, initial_state=h0,
                        return_final_state=True)
        assert_close(y, y_ref, what=f"{algorithm} y")
        assert_close(h, h_ref, what=f"{algorithm} final state")


@given(M=sss_matrices(), data=st.data())
def test_vector_x_is_a_vector(M, data):
    x = data.draw(inputs(M, vector=True))
    y = M @ x
    assert y.shape == M.batch_shape + (M.seq_len,)
    assert_close(y, dense_reference(M) @ x)


@given(T=st.integers(1, 12), N=st.integers(1, 3), heads=st.integers(1, 3),
       structure=st.sampled_from(["scalar", "diagonal"]), seed=st.integers(0, 99))
def test_B_and_C_shared_across_heads_broadcast(T, N, heads, structure, seed):
    rng = np.random.default_rng(seed)
    core = (T,) if structure == "scalar" else (T, N)
    log_a = rng.uniform(-2, 0, size=(2, heads) + core)
    B, C = rng.normal(size=(2, 1, T, N)), rng.normal(size=(T, N))
    x = rng.normal(size=(heads, T, 3))
    M = ss.SSS.from_log(log_a, B, C)
    assert M.shape == (2, heads, T, T)
    expected = dense_reference(log_a, B, C, structure=structure, log=True)
    for algorithm in ("recurrent", "quadratic", "chunked"):
        assert_close(M.matmul(x, algorithm=algorithm, chunk_size=4), expected @ x)


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_transpose_is_anticausal(backend, data):
    M = data.draw(sss_matrices(backend=backend))
    Mt = M.T
    dense = dense_reference(M)
    assert_close(Mt.to_dense(), np.swapaxes(dense, -1, -2))
    assert_close(Mt.T.to_dense(), dense)


@given(log_a=st.lists(st.floats(-50, 0), min_size=1, max_size=12), data=st.data())
def test_from_log_equals_values(log_a, data):
    log_a = np.array(log_a)
    T = log_a.size
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    B, C = rng.normal(size=(T, 2)), rng.normal(size=(T, 2))
    assert_close(ss.SSS.from_log(log_a, B, C).to_dense(), ss.SSS(np.exp(log_a), B, C).to_dense())


def test_structure_inference_and_explicit_structure():
    T, N = 4, 4
    rng = np.random.default_rng(0)
    B, C = rng.normal(size=(T, N)), rng.normal(size=(T, N))
    assert ss.SSS(rng.uniform(size=T), B, C).structure == "scalar"
    assert ss.SSS(rng.uniform(size=(T, N)), B, C).structure == "diagonal"
    assert ss.SSS(rng.uniform(size=(T, N, N)), B, C).structure == "full"
    # (4, 4) with B (4, 4): same batch rank as B reads as diagonal; structure= overrides
    A = rng.uniform(size=(T, T))
    assert ss.SSS(A, B, C).structure == "diagonal"
    M = ss.SSS(A, B, C, structure="scalar")
    assert M.shape == (T, T, T)
    assert_close(M.to_dense(), dense_reference(A, B, C, structure="scalar"))


@given(batch=shapes(), T=st.integers(1, 9))
def test_shape_dtype_and_protocol(batch, T):
    rng = np.random.default_rng(1)
    M = ss.SSS(rng.uniform(size=batch + (T,)), rng.normal(size=(T, 2)), rng.normal(size=(T, 2)),
               structure="scalar")
    assert M.shape == batch + (T, T) and M.batch_shape == batch and M.ndim == len(batch) + 2
    assert M.dtype == np.float64 and M.state_size == 2 and M.seq_len == T
    assert isinstance(M.to_dense(), np.ndarray)
    assert "SSS(shape=" in repr(M)


def test_array_and_tensor_rmatmul():
    rng = np.random.default_rng(2)
    T = 6
    M = ss.SSS(rng.uniform(size=T), rng.normal(size=(T, 3)), rng.normal(size=(T, 3)))
    w = rng.normal(size=(2, T))
    assert_close(w @ M, w @ M.to_dense())
    wt = torch.as_tensor(w)
    out = wt @ M
    assert isinstance(out, torch.Tensor)
    assert_close(out, w @ M.to_dense())


def test_dense_wrapper():
    rng = np.random.default_rng(3)
    W = rng.normal(size=(2, 5, 4))
    assert_matches_dense(ss.Dense(W), W)

"""solve (forward substitution) and inverse (an SSS of state N + 1) against float64 dense algebra."""

import numpy as np
import pytest
import torch
from hypothesis import assume, given, strategies as st

import semisep as ss
from semisep.algebra import SingularMatrixError
from semisep.testing import (assert_close, dense_reference, inputs, shapes, sss_matrices,
                             to_numpy64)


def reference_of(M):
    return dense_reference(M.A, M.B, M.C, structure=M.structure)


def dominant(M):
    """``M + c I`` with c above every row sum of ``|M|``: diagonally dominant, cond <= 3."""
    D = reference_of(M)
    c = 2.0 * (np.max(np.sum(np.abs(D), axis=-1)) + 1.0)
    T = M.seq_len
    identity = ss.SSS(np.zeros(T), np.ones((T, 1)), np.ones((T, 1)))
    like = (lambda a: torch.as_tensor(a, dtype=M.B.dtype)) if isinstance(M.B, torch.Tensor) else \
        (lambda a: a.astype(M.B.dtype))
    identity = ss.SSS(*(like(v) for v in (identity.A, identity.B, identity.C)))
    return M + c * identity


def backward_error(D, x, y):
    """``|D x - y| / (|D| |x| + |y|)`` in max norms: O(eps) for a backward stable solve."""
    D, x, y = to_numpy64(D), to_numpy64(x), to_numpy64(y)
    if y.ndim == 1:                       # a vector right-hand side (numpy's convention)
        x, y = x[..., None], y[..., None]
    residual = np.max(np.abs(D @ x - y))
    return residual / (np.max(np.abs(D)) * np.max(np.abs(x)) + np.max(np.abs(y)))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@given(data=st.data())
def test_solve_is_backward_stable(backend, data):
    M = data.draw(sss_matrices(backend=backend))
    y = data.draw(inputs(M, backend=backend))
    D = np.broadcast_to(reference_of(M), M.shape)
    if np.any(np.einsum("...tt->...t", D) == 0):
        with pytest.raises(SingularMatrixError):
            M.solve(y)
        return
    x = M.solve(y)
    assert type(x) is type(y) and tuple(x.shape) == M.batch_shape + tuple(y.shape)
    assert backward_error(D, x, y) < 1e-13


@given(M=sss_matrices(batch_shape=shapes(max_dims=1)), data=st.data())
def test_solve_broadcasts_y_batch(M, data):
    M = dominant(M)
    rng = np.random.default_rng(data.draw(st.integers(0, 100)))
    y = rng.normal(size=(2,) + M.batch_shape + (M.seq_len, 3))
    x = M.solve(y)
    assert x.shape == y.shape
    assert_close(x, np.linalg.solve(reference_of(M), y))


@given(M=sss_matrices(backend="torch", dtype="float32"), data=st.data())
def test_float32_solve_and_inverse_within_1e5(M, data):
    M = dominant(M)
    y = data.draw(inputs(M, backend="torch", dtype="float32", vector=False))
    D = reference_of(M)
    assert M.solve(y).dtype == torch.float32
    assert_close(M.solve(y), np.linalg.solve(D, to_numpy64(y)), rtol=1e-5)
    assert_close(M.inverse().to_dense(), np.linalg.inv(D), rtol=1e-5)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@given(data=st.data())
def test_inverse_times_M_is_identity(backend, data):
    M = dominant(data.draw(sss_matrices(backend=backend)))
    W = M.inverse()
    assert isinstance(W, ss.SSS) and W.structure == "full"
    assert W.state_size == M.state_size + 1
    D = reference_of(M)
    eye = np.broadcast_to(np.eye(M.seq_len), M.shape)
    assert_close(to_numpy64(W.to_dense()) @ D, eye)
    assert_close(D @ to_numpy64(W.to_dense()), eye)
    x = np.ones((M.seq_len, 1)) if backend == "numpy" else torch.ones(M.seq_len, 1, dtype=M.B.dtype)
    assert_close(W @ (M @ x), np.ones(M.shape[:-1] + (1,)))


@given(data=st.data(), N=st.integers(1, 3), structure=st.sampled_from(["scalar", "diagonal", "full"]))
def test_inverse_reaches_the_minimum_N_plus_1(data, N, structure):
    """Generic M (strictly lower blocks of rank N): the inverse needs N + 1 states, no fewer."""
    M = data.draw(sss_matrices(structure=structure, N=st.just(N), T=st.integers(2 * N + 1, 12),
                               batch_shape=(), allow_zeros=False, allow_resets=False))
    assume(np.linalg.cond(reference_of(M)) < 1e8)
    W = M.inverse()
    assert W.state_size == N + 1
    assert W.rank() == N + 1
    assert ss.semiseparable_rank(W.to_dense()) == N + 1


@given(M=sss_matrices(batch_shape=(), allow_resets=False))
def test_inverse_ranks_follow_the_nullity_theorem(M):
    """rank W[k:, :k+1] = 1 + rank M[k+1:, :k]; compress() reaches the largest of these."""
    M = dominant(M)                          # well conditioned; strictly lower rank <= N - 1
    D, W = reference_of(M), M.inverse()
    Dw, T = to_numpy64(W.to_dense()), M.seq_len
    tol = T * np.finfo(float).eps

    def rank(X):
        s = np.linalg.svd(X, compute_uv=False) if X.size else np.zeros(1)
        return int(np.sum(s > tol * max(s[0], 1e-300)))

    strictly_lower = [rank(D[k + 1:, :k]) for k in range(T)]
    assert [rank(Dw[k:, :k + 1]) for k in range(T)] == [1 + r for r in strictly_lower]
    assert W.compress().state_size == 1 + max(strictly_lower) <= W.state_size
    assert_close(W.compress().to_dense(), np.linalg.inv(D))


def test_inverse_of_a_diagonal_compresses_to_one():
    """Zero A: M is diagonal, its strictly lower blocks have rank 0, the minimum is 1."""
    rng = np.random.default_rng(0)
    T, N = 7, 3
    M = ss.SSS(np.zeros(T), rng.normal(size=(T, N)), rng.normal(size=(T, N)))
    W = M.inverse()
    assert W.state_size == N + 1
    small = W.compress()
    assert small.state_size == 1
    assert_close(small.to_dense(), np.diag(1.0 / np.diag(reference_of(M))))


def test_singular_diagonal_is_a_named_error():
    rng = np.random.default_rng(1)
    B, C = rng.normal(size=(2, 5, 2)), rng.normal(size=(2, 5, 2))
    C[1, 3] = 0.0
    M = ss.SSS(rng.uniform(-1, 1, (2, 5)), B, C)
    for op in (lambda: M.solve(np.ones(5)), M.inverse):
        with pytest.raises(SingularMatrixError, match=r"C_t\^T B_t.*t=3 of batch element \(1,\)"):
            op()
    with pytest.raises(np.linalg.LinAlgError):
        M.inverse()
    with pytest.raises(ValueError):          # a LinAlgError is a ValueError
        M.solve(np.ones(5))


def test_bad_right_hand_side_names_the_argument():
    rng = np.random.default_rng(2)
    M = ss.SSS(rng.uniform(-1, 1, 5), rng.normal(size=(5, 2)), rng.normal(size=(5, 2)))
    with pytest.raises(ValueError, match=r"y must have shape \(5,\) or \(\.\.\., 5, P\).*got shape \(4, 2\)"):
        M.solve(np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"y must have shape.*got shape \(\)"):
        M.solve(np.float64(1.0))
    with pytest.raises(TypeError, match="y must be real"):
        M.solve(np.ones(5) * 1j)
    with pytest.raises(ValueError, match=r"batch.*M \(\), y \(3,\)|batch.*y"):
        ss.SSS(rng.uniform(-1, 1, (2, 5)), rng.normal(size=(5, 2)), rng.normal(size=(5, 2))).solve(
            np.ones((3, 5, 1)))


def test_solve_does_not_modify_its_input():
    rng = np.random.default_rng(3)
    M = ss.SSS(rng.uniform(-1, 1, 6), rng.normal(size=(6, 2)) + 2, rng.normal(size=(6, 2)) + 2)
    y = rng.normal(size=(6, 2))
    before = y.copy()
    M.solve(y)
    np.testing.assert_array_equal(y, before)

"""Semiseparable rank, compression and from_dense against dense SVDs of the Hankel blocks."""

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

import semisep as ss
from semisep.testing import (assert_close, dense_reference, redundant_form, shapes, sss_matrices,
                             to_numpy64)


def reference_of(M):
    return dense_reference(M.A, M.B, M.C, structure=M.structure)


def hankel_ranks_by_svd(D, tol):
    """Numerical ranks of every M[k:, :k+1], straight from numpy's SVD."""
    T = D.shape[-1]
    return [int(np.sum(np.linalg.svd(D[k:, :k + 1], compute_uv=False) > tol)) for k in range(T)]


def generic(structure, *, N, backend="numpy", dtype="float64", batch_shape=()):
    """SSS matrices whose semiseparable rank is N: T >= 2N - 1, no zero A, no resets."""
    return sss_matrices(structure=structure, N=st.just(N), T=st.integers(2 * N - 1, 12),
                        batch_shape=batch_shape, allow_zeros=False, allow_resets=False,
                        backend=backend, dtype=dtype)


@given(data=st.data(), N=st.integers(1, 4), structure=st.sampled_from(["scalar", "diagonal", "full"]))
def test_rank_of_generic_generators_is_N(data, N, structure):
    M = data.draw(generic(structure, N=N))
    D = reference_of(M)
    assert ss.semiseparable_rank(D) == N
    assert M.rank() == N
    assert ss.is_semiseparable(D, N) and not ss.is_semiseparable(D, N - 1)


@given(M=sss_matrices(), data=st.data())
def test_rank_matches_svd_of_every_hankel_block(M, data):
    rtol = data.draw(st.sampled_from([None, 1e-6, 1e-2]))
    dense = np.broadcast_to(reference_of(M), M.shape).reshape((-1,) + M.shape[-2:])
    ranks = np.reshape(ss.semiseparable_rank(reference_of(M), rtol=rtol), -1)
    own = np.reshape(M.rank(rtol=rtol), -1)
    for D, r, r_own in zip(dense, np.broadcast_to(ranks, (len(dense),)), np.broadcast_to(own, (len(dense),))):
        T = D.shape[-1]
        s_max = max(np.linalg.svd(D[k:, :k + 1], compute_uv=False)[0] for k in range(T))
        tol = (T * np.finfo(float).eps if rtol is None else rtol) * s_max
        expected = hankel_ranks_by_svd(D, tol)
        # ranks within a hair of the threshold may go either way: only decisive ones are checked
        near = [any(abs(s - tol) < 1e-8 * max(s_max, 1e-300) for s in
                    np.linalg.svd(D[k:, :k + 1], compute_uv=False)) for k in range(T)]
        if not any(near):
            assert r == max(expected) == r_own


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@given(data=st.data(), N=st.integers(1, 3), r=st.integers(0, 3))
def test_rank_deficient_forms_compress_to_their_rank(backend, data, N, r):
    """A rank-r matrix written with r + N states: rank r, and compress() finds it."""
    M = data.draw(generic(st.sampled_from(["scalar", "diagonal", "full"]), N=max(r, 1)))
    if r == 0:
        M = 0.0 * M
    big = redundant_form(M, max(r, 1) + N, seed=data.draw(st.integers(0, 100)))
    if backend == "torch":
        big = ss.SSS(*(torch.as_tensor(v) for v in (big.A, big.B, big.C)), structure="full")
    D = reference_of(M)
    assert ss.semiseparable_rank(D) == r
    assert big.rank() == r
    small = big.compress()
    assert small.state_size == r
    assert_close(small.to_dense(), D, rtol=1e-9)


@given(data=st.data(), N=st.integers(1, 3))
def test_compress_after_a_sum_halves_the_state(data, N):
    M = data.draw(generic(st.sampled_from(["scalar", "diagonal", "full"]), N=N,
                          batch_shape=st.sampled_from([(), (2,)])))
    double = M + M
    assert double.state_size == 2 * N
    small = double.compress()
    assert small.state_size == N
    assert_close(small.to_dense(), 2 * reference_of(M), rtol=1e-9)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@given(data=st.data(), N=st.integers(1, 3))
def test_from_dense_round_trip_finds_the_minimal_N(backend, data, N):
    M = data.draw(generic(st.sampled_from(["scalar", "diagonal", "full"]), N=N, backend=backend,
                          batch_shape=st.sampled_from([(), (2,)])))
    D = M.to_dense()
    F = ss.SSS.from_dense(D)
    assert F.structure == "full" and F.state_size == N
    assert type(F.B) is type(D)
    assert_close(F.to_dense(), reference_of(M), rtol=1e-9)


@given(M=sss_matrices(backend="torch", dtype="float32", allow_zeros=False, allow_resets=False,
                     T=st.integers(1, 12), batch_shape=shapes(max_dims=1, max_side=2)))
def test_float32_compression_within_1e5(M):
    D = reference_of(M)
    F, G = ss.SSS.from_dense(M.to_dense()), (M + M).compress()
    assert F.dtype == G.dtype == torch.float32
    assert_close(F.to_dense(), D, rtol=1e-5)
    assert_close(G.to_dense(), 2 * D, rtol=1e-5)


def test_tolerance_semantics():
    """rtol is relative to the largest Hankel singular value; atol alone is absolute."""
    T = 8
    rng = np.random.default_rng(3)
    U, V = np.linalg.qr(rng.normal(size=(T, 2)))[0], np.linalg.qr(rng.normal(size=(T, 2)))[0]
    D = np.tril(U @ np.diag([1.0, 1e-4]) @ V.T)      # two directions of very different size
    s_max = max(np.linalg.svd(D[k:, :k + 1], compute_uv=False)[0] for k in range(T))
    r_full = ss.semiseparable_rank(D)
    assert r_full == ss.semiseparable_rank(D, rtol=1e-12)
    assert ss.semiseparable_rank(D, rtol=0.5) == 1
    assert ss.semiseparable_rank(D, atol=2 * s_max) == 0
    assert ss.semiseparable_rank(1e6 * D, rtol=0.5) == 1                # scale-free
    assert ss.semiseparable_rank(np.zeros((4, 4))) == 0
    F = ss.SSS.from_dense(D, rtol=1e-2)
    assert F.state_size == ss.semiseparable_rank(D, rtol=1e-2)
    zero = ss.SSS.from_dense(np.zeros((3, 3)))
    assert zero.state_size == 0 and zero.rank() == 0 and zero.compress().state_size == 0
    assert not np.any(zero.to_dense())


def test_batched_ranks_are_per_matrix():
    rng = np.random.default_rng(4)
    B, C = rng.normal(size=(2, 9, 3)), rng.normal(size=(2, 9, 3))
    B[1, :, 2] = B[1, :, 0]                       # scalar A: rank 2 in batch element 1
    M = ss.SSS(rng.uniform(0.3, 1, (2, 9)), B, C)
    np.testing.assert_array_equal(ss.semiseparable_rank(M.to_dense()), [3, 2])
    np.testing.assert_array_equal(M.rank(), [3, 2])
    np.testing.assert_array_equal(ss.is_semiseparable(M.to_dense(), 2), [False, True])
    F = M.compress()
    assert F.state_size == 3
    assert_close(F.to_dense(), reference_of(M), rtol=1e-9)


def test_duality_masked_oness_compresses_to_N():
    masked = pytest.importorskip("semisep.masked", reason="semisep.masked is not built yet").masked
    rng = np.random.default_rng(5)
    T, N = 12, 3
    a = rng.uniform(-1, 1, T)
    B, C = rng.normal(size=(T, N)), rng.normal(size=(T, N))
    expected = dense_reference(a, B, C, structure="scalar")
    W = masked(ss.OneSS(a), C, B)
    assert ss.semiseparable_rank(W.to_dense()) == N
    F = ss.SSS.from_dense(W.to_dense())
    assert F.state_size == N
    assert_close(F.to_dense(), expected, rtol=1e-9)
    # a redundant 2N-dimensional masked form of the same matrix compresses back to N
    Q2, K2 = np.concatenate([C, C], axis=-1), np.concatenate([B, 0 * B], axis=-1)
    W2 = masked(ss.OneSS(a), Q2, K2)
    assert ss.SSS.from_dense(W2.to_dense()).state_size == N
    if hasattr(W2, "to_sss"):
        small = W2.to_sss().compress()
        assert W2.to_sss().state_size == 2 * N and small.state_size == N
        assert_close(small.to_dense(), expected, rtol=1e-9)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match=r"dense must be a square.*got shape \(3, 4\)"):
        ss.semiseparable_rank(np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"dense must have shape \(\.\.\., T, T\), got shape \(3,\)"):
        ss.SSS.from_dense(np.zeros(3))
    with pytest.raises(ValueError, match="dense must be lower triangular"):
        ss.SSS.from_dense(np.ones((3, 3)))
    assert not ss.is_semiseparable(np.ones((3, 3)), 3)
    with pytest.raises(ValueError, match="rtol must be a finite float >= 0.*got -1"):
        ss.semiseparable_rank(np.eye(3), rtol=-1.0)
    with pytest.raises(TypeError, match="atol must be a float"):
        ss.SSS.from_dense(np.eye(3), atol="big")
    with pytest.raises(ValueError, match="N must be an int >= 0"):
        ss.is_semiseparable(np.eye(3), -1)
    M = ss.SSS(np.ones(3), np.ones((3, 1)), np.ones((3, 1)))
    with pytest.raises(ValueError, match="rtol must be"):
        M.compress(rtol=float("nan"))
    with pytest.raises(TypeError, match="dense must be real"):
        ss.semiseparable_rank(np.eye(3) * 1j)
    assert to_numpy64(M.to_dense()).shape == (3, 3)

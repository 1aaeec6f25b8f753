"""Sums, differences, products and scalings of SSS matrices against float64 dense algebra."""

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

import semisep as ss
from semisep.algebra import diag_scale
from semisep.testing import (assert_close, assert_matches_dense, dense_reference, sss_matrices,
                             sss_pairs)

BACKENDS = ["numpy", "torch"]


def reference_of(M):
    return dense_reference(M.A, M.B, M.C, structure=M.structure)


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_sum_and_difference(backend, data):
    M1, M2 = data.draw(sss_pairs(backend=backend))
    D1, D2 = reference_of(M1), reference_of(M2)
    for result, expected in ((M1 + M2, D1 + D2), (M1 - M2, D1 - D2)):
        assert isinstance(result, ss.SSS)
        assert result.state_size == M1.state_size + M2.state_size
        assert_matches_dense(result, expected)


@given(data=st.data())
def test_sum_keeps_structure_and_log_form(data):
    structures = st.sampled_from(["scalar", "diagonal"])
    M1, M2 = data.draw(sss_pairs(structure=structures, log=st.booleans()))
    total = M1 + M2
    assert total.structure == "diagonal"
    assert (total.log_a is not None) == (M1.log_a is not None and M2.log_a is not None)
    assert_close(total.to_dense(), reference_of(M1) + reference_of(M2))


@given(M1=sss_matrices(structure="full", T=5),
       M2=sss_matrices(structure="scalar", T=5, batch_shape=()))
def test_sum_with_full_A_is_full(M1, M2):
    total = M2 + M1
    assert total.structure == "full"
    assert_close(total.to_dense(), reference_of(M2) + reference_of(M1))


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_product(backend, data):
    M1, M2 = data.draw(sss_pairs(backend=backend))
    product = M1 @ M2
    assert isinstance(product, ss.SSS) and product.structure == "full"
    assert product.state_size == M1.state_size + M2.state_size
    assert_matches_dense(product, reference_of(M1) @ reference_of(M2))


def pair_with_states(data):
    """Two SSS matrices of one T, an input ``x`` and an initial state for each."""
    M1, M2 = data.draw(sss_pairs())
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    x = rng.normal(size=(M1.seq_len, 2))
    return M1, M2, x, rng.normal(size=(M1.state_size, 2)), rng.normal(size=(M2.state_size, 2))


@given(data=st.data())
def test_product_initial_state_is_the_cascade(data):
    M1, M2, x, h1, h2 = pair_with_states(data)
    u = M2.matmul(x, initial_state=h2, algorithm="recurrent")
    expected = M1.matmul(u, initial_state=h1, algorithm="recurrent")
    got = (M1 @ M2).matmul(x, initial_state=np.concatenate([h1, h2]), algorithm="recurrent")
    assert_close(got, expected)


@given(data=st.data())
def test_sum_and_difference_initial_state_is_each_operands(data):
    """The state of ``M1 +- M2`` is ``[h1; h2]``: each operand's own, for the difference too."""
    M1, M2, x, h1, h2 = pair_with_states(data)
    y1, f1 = M1.matmul(x, initial_state=h1, algorithm="recurrent", return_final_state=True)
    y2, f2 = M2.matmul(x, initial_state=h2, algorithm="recurrent", return_final_state=True)
    for sign, result in ((1.0, M1 + M2), (-1.0, M1 - M2)):
        y, f = result.matmul(x, initial_state=np.concatenate([h1, h2], axis=-2),
                             algorithm="recurrent", return_final_state=True)
        assert_close(y, y1 + sign * y2)
        batch = np.broadcast_shapes(f1.shape[:-2], f2.shape[:-2])
        assert_close(f, np.concatenate([np.broadcast_to(g, batch + g.shape[-2:]) for g in (f1, f2)],
                                       axis=-2))


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data(), alpha=st.floats(-3, 3, allow_subnormal=False))
def test_scaling(backend, data, alpha):
    M = data.draw(sss_matrices(backend=backend))
    for scaled in (alpha * M, M * alpha):
        assert scaled.structure == M.structure and scaled.state_size == M.state_size
        assert (scaled.log_a is None) == (M.log_a is None)
        assert_close(scaled.to_dense(), alpha * reference_of(M))
    assert_close((-M).to_dense(), -reference_of(M))


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_diagonal_scaling_on_either_side(backend, data):
    M = data.draw(sss_matrices(backend=backend))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    left, right = rng.normal(size=(M.seq_len,)), rng.normal(size=M.batch_shape + (M.seq_len,))
    D = reference_of(M)
    like = (lambda a: torch.as_tensor(a, dtype=M.B.dtype)) if backend == "torch" else (lambda a: a)
    assert_close(diag_scale(M, left=like(left)).to_dense(), left[:, None] * D)
    assert_close(diag_scale(M, right=like(right)).to_dense(), D * right[..., None, :])
    both = diag_scale(M, like(left), like(right))
    assert both.structure == M.structure
    assert_close(both.to_dense(), left[:, None] * D * right[..., None, :])


@given(pair=sss_pairs(backend="torch", dtype="float32"))
def test_float32_within_1e5_of_float64(pair):
    M1, M2 = pair
    D1, D2 = reference_of(M1), reference_of(M2)
    assert (M1 + M2).dtype == torch.float32 and (M1 @ M2).dtype == torch.float32
    assert_close((M1 + M2).to_dense(), D1 + D2, rtol=1e-5)
    assert_close((M1 @ M2).to_dense(), D1 @ D2, rtol=1e-5)


@given(M=sss_matrices(dtype="float32"))
def test_operands_are_not_modified(M):
    before = [np.array(v) for v in (M.A, M.B, M.C)]
    for result in (M + M, M - M, M @ M, 2.0 * M, diag_scale(M, np.ones(M.seq_len))):
        result.to_dense()
    for old, new in zip(before, (M.A, M.B, M.C)):
        np.testing.assert_array_equal(old, new)


def test_oness_operands():
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, 6)
    L = ss.OneSS(a)
    M = ss.SSS(rng.uniform(-1, 1, 6), rng.normal(size=(6, 2)), rng.normal(size=(6, 2)))
    D, DL = reference_of(M), L.to_dense()
    assert_close((M + L).to_dense(), D + DL)
    assert_close((L + M).to_dense(), DL + D)
    assert_close((L - M).to_dense(), DL - D)
    assert_close((L @ M).to_dense(), DL @ D)
    assert_close((M @ L).to_dense(), D @ DL)
    assert_close(ss.algebra.add(L, M).to_dense(), DL + D)          # a OneSS first operand
    assert_close(ss.algebra.multiply(L, M).to_dense(), DL @ D)


def test_array_products_still_go_to_matmul():
    rng = np.random.default_rng(1)
    M = ss.SSS(rng.uniform(-1, 1, 5), rng.normal(size=(5, 2)), rng.normal(size=(5, 2)))
    x = rng.normal(size=(5, 3))
    assert_close(M @ x, reference_of(M) @ x)
    assert_close(x.T @ M, x.T @ reference_of(M))


def test_bad_operands_name_the_problem():
    rng = np.random.default_rng(2)
    M = ss.SSS(rng.uniform(-1, 1, 5), rng.normal(size=(5, 2)), rng.normal(size=(5, 2)))
    M6 = ss.SSS(rng.uniform(-1, 1, 6), rng.normal(size=(6, 2)), rng.normal(size=(6, 2)))
    for op in (lambda: M + M6, lambda: M - M6, lambda: M @ M6):
        with pytest.raises(ValueError, match=r"T=5.*got shape \(6, 6\)"):
            op()
    with pytest.raises(TypeError):
        M + np.eye(5)
    with pytest.raises(TypeError):
        M + 1.0
    with pytest.raises(ValueError, match="alpha must be a scalar.*got shape \\(5,\\)"):
        np.float64(2.0) * M * np.ones(5)
    with pytest.raises(ValueError, match=r"left must have shape \(\.\.\., 5\).*got shape \(4,\)"):
        diag_scale(M, left=np.ones(4))
    Mb = ss.SSS(rng.uniform(-1, 1, (2, 5)), rng.normal(size=(2, 5, 2)), rng.normal(size=(2, 5, 2)))
    Mc = ss.SSS(rng.uniform(-1, 1, (3, 5)), rng.normal(size=(3, 5, 2)), rng.normal(size=(3, 5, 2)))
    with pytest.raises(ValueError, match=r"batch.*M1 \(2,\), M2 \(3,\)"):
        Mb + Mc
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for @: 'SSS' and 'Causal'"):
        M @ ss.masks.Causal(5)
    grows = ss.SSS.from_log(np.full(5, 200.0), np.ones((5, 1)), np.ones((5, 1)))  # 1000 > 709.8
    for op in (lambda: grows + M, lambda: grows @ M, grows.rank, grows.compress,
               lambda: grows.solve(np.ones(5))):
        with pytest.raises(ValueError, match="log_a must keep every run"):
            op()


def test_gradients_flow_through_the_algebra():
    """Sums, products, solves and inverses are differentiable (float64 gradcheck)."""
    rng = np.random.default_rng(3)
    T, N = 5, 2

    def leaf(*shape):
        return torch.tensor(rng.normal(size=shape), requires_grad=True)

    a, B1, C1 = leaf(T), leaf(T, N), leaf(T, N)
    A2, B2, C2 = leaf(T, N, N), leaf(T, N), leaf(T, N)
    y = torch.tensor(rng.normal(size=(T, 2)))

    def f(a, B1, C1, A2, B2, C2):
        M1, M2 = ss.SSS(a, B1, C1), ss.SSS(0.5 * A2, B2, C2 + 2 * B2)
        return ((M1 + M2) @ M2).to_dense().sum() + M2.solve(y).sum() + M2.inverse().to_dense().sum()

    assert torch.autograd.gradcheck(f, (a, B1, C1, A2, B2, C2))

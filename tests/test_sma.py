"""sma and masked: linear == quadratic == the float64 dense definition, for every mask."""

import importlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import semisep as ss
from semisep.masks import Causal, Decay, Fourier, Toeplitz
from semisep.masks import ComplexMaskError
from semisep.sma import resolve_sma_algorithm
from semisep.testing import assert_close, assert_matches_dense, masks, shapes, to_numpy64
from semisep.testing.masks import KINDS
from test_masks import definition


def operands(rng, batch, T, S, N, P, convert):
    return tuple(convert(rng.normal(size=batch + shape)) for shape in ((T, N), (S, N), (S, P)))


def drawn_operands(data, L, backend, max_N, max_P):
    """Q, K, V for the mask ``L``: a drawn batch (none, or 2 x L's), N, P and seed."""
    T, S = L.shape[-2:]
    batch = data.draw(st.sampled_from([(), (2,) + tuple(L.shape[:-2])]))
    N, P = data.draw(st.integers(1, max_N)), data.draw(st.integers(1, max_P))
    convert = torch.tensor if backend == "torch" else np.asarray
    return operands(np.random.default_rng(data.draw(st.integers(0, 99))), batch, T, S, N, P,
                    convert)


def sma_definition(Q, K, V, dense):
    """``(L o Q K^T) V`` in float64, broadcasting the batch dimensions."""
    Q, K, V = to_numpy64(Q), to_numpy64(K), to_numpy64(V)
    return (dense * (Q @ K.swapaxes(-1, -2))) @ V


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_linear_equals_quadratic_equals_definition(backend, data):
    L = data.draw(masks(kinds=KINDS, backend=backend))
    Q, K, V = drawn_operands(data, L, backend, 4, 3)
    expected = sma_definition(Q, K, V, definition(L))
    complex_ = isinstance(L, Fourier)
    for algorithm in ("linear", "quadratic", "auto"):
        Y = ss.sma(Q, K, V, L, algorithm=algorithm, allow_complex=complex_)
        assert type(Y) is type(Q)
        assert_close(Y, expected, what=algorithm)
    W = ss.masked(L, Q, K, allow_complex=complex_)
    assert_close(W @ V, expected)
    assert_close(W.to_dense(), definition(L) * (to_numpy64(Q) @ to_numpy64(K).swapaxes(-1, -2)))


@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-5), ("bfloat16", 1e-2)])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_low_precision_within_tolerance(dtype, rtol, data):
    L = data.draw(masks(kinds=("causal", "decay", "toeplitz", "oness", "fourier"),
                        backend="torch", dtype=dtype))
    T, S = L.shape[-2:]
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    Q, K, V = operands(rng, (), T, S, 4, 3, lambda a: torch.tensor(a).to(getattr(torch, dtype)))
    expected = sma_definition(Q, K, V, definition(L))
    complex_ = isinstance(L, Fourier)
    for algorithm in ("linear", "quadratic"):
        Y = ss.sma(Q, K, V, L, algorithm=algorithm, allow_complex=complex_)
        assert Y.dtype == (torch.complex64 if complex_ else Q.dtype)
        assert_close(Y, expected, rtol=rtol, what=algorithm)


def test_heads_and_groups_broadcast():
    """Q, K, V of (batch, heads, T, .) with K shared by all heads and one decay per head."""
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(2, 3, 30, 4)), rng.normal(size=(2, 1, 30, 4)), rng.normal(
        size=(2, 3, 30, 5))
    L = Decay(np.array([0.3, 0.8, 0.99]), 30)
    expected = sma_definition(Q, K, V, definition(L))
    for algorithm in ("linear", "quadratic"):
        assert_close(ss.sma(Q, K, V, L, algorithm=algorithm), expected)


def test_linear_in_groups_of_value_columns(monkeypatch):
    """With a tiny LINEAR_BLOCK the columns of V run one or two at a time: same result."""
    rng = np.random.default_rng(0)
    Q, K, V = operands(rng, (2,), 20, 20, 3, 5, torch.tensor)
    L = Decay(torch.tensor([0.5, 0.9]), 20)
    expected = sma_definition(Q, K, V, definition(L))
    for block in (1, 2 * 20 * 3 * 2):
        monkeypatch.setattr(importlib.import_module("semisep.sma"), "LINEAR_BLOCK", block)
        assert_close(ss.sma(Q, K, V, L, algorithm="linear"), expected)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_linear_in_segments_carrying_the_state(backend, data):
    """Semiseparable masks run in short segments (T not a multiple), value groups of 1 to P."""
    L = data.draw(masks(kinds=("causal", "decay", "oness", "sss"), T=st.integers(2, 40),
                        backend=backend))
    T = L.shape[-2]
    Q, K, V = drawn_operands(data, L, backend, 3, 4)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(importlib.import_module("semisep.sma"), "LINEAR_SEGMENT",
                      data.draw(st.integers(1, T)))
        patch.setattr(importlib.import_module("semisep.sma"), "LINEAR_BLOCK",
                      data.draw(st.integers(1, 200)))
        Y = ss.sma(Q, K, V, L, algorithm="linear")
    assert_close(Y, sma_definition(Q, K, V, definition(L)))


# -- the automatic choice -------------------------------------------------------------------

def test_auto_rule():
    N = P = 64
    assert resolve_sma_algorithm("auto", Causal(16), 16, 16, N, P) == "quadratic"
    assert resolve_sma_algorithm("auto", Causal(4096), 4096, 4096, N, P) == "linear"
    for T, expected in ((4096, "quadratic"), (8192, "linear")):     # measured crossover: 8192
        assert resolve_sma_algorithm("auto", Toeplitz(np.ones(T)), T, T, N, P) == expected
    dense = ss.Dense(np.broadcast_to(1.0, (4096, 4096)))
    assert resolve_sma_algorithm("auto", dense, 4096, 4096, N, P) == "quadratic"
    with pytest.raises(ValueError, match="algorithm must be one of"):
        resolve_sma_algorithm("fast", dense, 4, 4, 1, 1)


# -- a user's mask: only the protocol -----------------------------------------------------------

class Banded:
    """Ones on the diagonal and ``width - 1`` sub-diagonals: not a StructuredMatrix subclass."""

    def __init__(self, T, width):
        self.shape, self.dtype, self.width = (T, T), np.dtype(np.float64), width

    def matmul(self, x):
        sums = np.cumsum(x, axis=-2)
        lagged = np.concatenate([np.zeros_like(sums[..., :self.width, :]),
                                 sums[..., :-self.width, :]], axis=-2)
        return sums - lagged

    def matmul_flops(self, m):
        return self.shape[0] * m

    def to_dense(self):
        return np.tri(self.shape[0]) - np.tri(self.shape[0], k=-self.width)

    @property
    def T(self):
        raise NotImplementedError


def test_users_mask_with_only_the_protocol():
    rng = np.random.default_rng(0)
    Q, K, V = operands(rng, (), 12, 12, 3, 2, np.asarray)
    L = Banded(12, 3)
    dense = np.array([[1.0 if 0 <= i - j < 3 else 0.0 for j in range(12)] for i in range(12)])
    expected = sma_definition(Q, K, V, dense)
    for algorithm in ("linear", "quadratic", "auto"):
        assert_close(ss.sma(Q, K, V, L, algorithm=algorithm), expected)
    assert_close(ss.masked(L, Q, K) @ V, expected)


# -- masked as a structured matrix ------------------------------------------------------------------

def test_masked_is_a_structured_matrix():
    rng = np.random.default_rng(0)
    Q, K, _ = operands(rng, (2,), 9, 6, 3, 1, np.asarray)
    L = Toeplitz(rng.normal(size=9), rng.normal(size=6))
    W = ss.masked(L, Q, K)
    assert W.shape == (2, 9, 6) and W.dtype == np.float64
    assert_matches_dense(W, definition(L) * (Q @ K.swapaxes(-1, -2)))
    assert_close(W.matmul(np.ones(6), algorithm="quadratic"), W.to_dense() @ np.ones(6))


# -- gradients (float64 gradcheck through both algorithms) -------------------------------------------

def _leaf(a):
    return torch.tensor(a, dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize("algorithm", ["linear", "quadratic"])
def test_gradients(algorithm):
    rng = np.random.default_rng(0)
    T, N, P = 6, 2, 2
    Q, K, V = (_leaf(rng.normal(size=s)) for s in ((T, N), (T, N), (T, P)))
    params = {
        "toeplitz alpha": (lambda p: Toeplitz(p), _leaf(rng.normal(size=T))),
        "decay gamma": (lambda p: Decay(p, T), _leaf([0.7])),
        "1-SS a": (lambda p: ss.OneSS(p), _leaf(rng.uniform(-1, 1, T))),
        "1-SS log_a": (lambda p: ss.OneSS.from_log(p), _leaf(-rng.uniform(0, 2, T))),
    }
    for name, (make, p) in params.items():
        def fn(p, Q, K, V, make=make):
            return ss.sma(Q, K, V, make(p), algorithm=algorithm)
        assert torch.autograd.gradcheck(fn, (p, Q, K, V)), name
    fourier = lambda Q, K, V: ss.sma(Q, K, V, Fourier(T), algorithm=algorithm,  # noqa: E731
                                     allow_complex=True)
    assert torch.autograd.gradcheck(fourier, (Q, K, V))


def test_gradients_reach_a_long_decay_in_float32():
    """Linear and quadratic gradients agree (float32, T beyond one scan block, per head)."""
    rng = np.random.default_rng(0)
    Q, K, V = (torch.tensor(rng.normal(size=s), dtype=torch.float32)
               for s in ((2, 150, 4), (2, 150, 4), (2, 150, 3)))
    grads = []
    for algorithm in ("linear", "quadratic"):
        gamma = torch.tensor([0.9, 0.99], requires_grad=True)
        ss.sma(Q, K, V, Decay(gamma, 150), algorithm=algorithm).square().sum().backward()
        grads.append(gamma.grad)
    assert_close(grads[0], grads[1].double(), rtol=1e-5)


def test_gradients_through_segments(monkeypatch):
    """float64 gradcheck of the segmented linear form: Decay gamma, 1-SS a, Q, K, V."""
    monkeypatch.setattr(importlib.import_module("semisep.sma"), "LINEAR_SEGMENT", 3)
    monkeypatch.setattr(importlib.import_module("semisep.sma"), "LINEAR_BLOCK", 8)
    rng = np.random.default_rng(0)
    T, N, P = 7, 2, 2
    Q, K, V = (_leaf(rng.normal(size=s)) for s in ((T, N), (T, N), (T, P)))
    for make, p in ((lambda p: Decay(p, T), _leaf([0.7, -0.4])),
                    (lambda p: ss.OneSS(p), _leaf(rng.uniform(-1, 1, T)))):
        assert torch.autograd.gradcheck(
            lambda p, Q, K, V, make=make: ss.sma(Q, K, V, make(p), algorithm="linear"),
            (p, Q, K, V))


# -- errors -----------------------------------------------------------------------------------

def test_complex_mask_needs_opt_in():
    Q = K = V = np.ones((4, 2))
    with pytest.raises(ComplexMaskError, match="allow_complex=True"):
        ss.sma(Q, K, V, Fourier(4))
    with pytest.raises(ComplexMaskError, match="complex128"):
        ss.masked(Fourier(4), Q, K)
    assert np.iscomplexobj(ss.sma(Q, K, V, Fourier(4), allow_complex=True))


@pytest.mark.parametrize("args, error, words", [
    ((np.ones((5, 3)), np.ones((5, 2)), np.ones((5, 1)), Causal(5)), ValueError,
     r"K must have shape \(..., S, 3\) \(N=3 from Q\), got shape \(5, 2\)"),
    ((np.ones((5, 3)), np.ones((5, 3)), np.ones((5, 1)), Causal(4)), ValueError,
     r"L must have shape \(..., 5, 5\) .* got shape \(4, 4\)"),
    ((np.ones((5, 3)), np.ones((6, 3)), np.ones((5, 1)), Causal(5, 6)), ValueError,
     r"V must have shape \(..., 6, P\) \(S=6 from K\), got shape \(5, 1\)"),
    ((np.ones(5), np.ones((5, 3)), np.ones((5, 1)), Causal(5)), ValueError,
     r"Q must have shape \(..., T, N\), got shape \(5,\)"),
    ((np.ones((2, 5, 3)), np.ones((3, 5, 3)), np.ones((5, 1)), Causal(5)), ValueError,
     "leading .* do not broadcast"),
    ((np.ones((5, 3)), np.ones((5, 3)), np.ones((5, 1)), "causal"), TypeError,
     "L must be a structured matrix"),
    ((np.ones((5, 3)) * 1j, np.ones((5, 3)), np.ones((5, 1)), Causal(5)), TypeError,
     "Q must be real"),
])
def test_bad_input_is_named(args, error, words):
    with pytest.raises(error, match=words):
        ss.sma(*args)


def test_bad_algorithm_and_backend():
    Q = K = V = np.ones((4, 2))
    with pytest.raises(ValueError, match="algorithm must be one of"):
        ss.sma(Q, K, V, Causal(4), algorithm="fft")
    with pytest.raises(ValueError, match="backend must be one of"):
        ss.sma(Q, K, V, Causal(4), backend="jax")
    assert isinstance(ss.sma(Q, K, V, Decay(0.5, 4), backend="torch"), torch.Tensor)


def test_inputs_never_modified():
    rng = np.random.default_rng(0)
    Q, K, V = operands(rng, (), 8, 8, 2, 2, np.asarray)
    alpha = rng.normal(size=8)
    before = [a.copy() for a in (Q, K, V, alpha)]
    for algorithm in ("linear", "quadratic"):
        ss.sma(Q, K, V, Toeplitz(alpha), algorithm=algorithm)
    for a, b in zip((Q, K, V, alpha), before):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=10, deadline=None)
@given(batch=shapes(max_dims=2))
def test_result_shape_broadcasts(batch):
    Q, K, V = np.ones(batch + (3, 2)), np.ones((3, 2)), np.ones((1,) * len(batch) + (3, 4))
    assert ss.sma(Q, K, V, Causal(3)).shape == batch + (3, 4)


def test_tensor_masks_are_dense_matrices():
    """A tensor L is Dense(L): .T swaps only its last two axes, its dtype is promoted."""
    rng = np.random.default_rng(0)
    L = np.tril(rng.uniform(size=(3, 4, 4)))
    Q, K, V = (rng.normal(size=(3, 4, 2)) for _ in range(3))
    ref = np.swapaxes(L * (Q @ np.swapaxes(K, -1, -2)), -1, -2) @ V
    Qt, Kt, Vt = (torch.tensor(a) for a in (Q, K, V))
    for Lt in (torch.tensor(L), torch.tensor(L, dtype=torch.float32)):
        assert_close(ss.masked(Lt, Qt, Kt).T @ Vt, ref, rtol=1e-6)
        for algorithm in ("linear", "quadratic"):
            y = ss.sma(Qt, Kt, Vt, Lt, algorithm=algorithm)
            assert y.dtype == torch.float64
            assert_close(y, (L * (Q @ np.swapaxes(K, -1, -2))) @ V, rtol=1e-6)


@pytest.mark.parametrize("algorithm", ["linear", "quadratic", "auto"])
def test_no_value_columns(algorithm):
    y = ss.sma(np.ones((5, 3)), np.ones((5, 3)), np.ones((2, 5, 0)), Causal(5), algorithm=algorithm)
    assert y.shape == (2, 5, 0)


def test_masked_product_takes_a_list_as_a_vector():
    W = ss.masked(Causal(5), np.ones((5, 3)), np.ones((5, 3)))
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert_close(W @ x, W.to_dense() @ np.array(x))
    with pytest.raises(ValueError, match=r"x must have shape \(5,\) or \(..., 5, P\)"):
        W @ [1.0, 2.0]

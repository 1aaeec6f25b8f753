"""The masks against their definitions: dense forms, products, transposes, gradients, errors."""

import numpy as np
import pytest
import scipy.linalg
import torch
from hypothesis import given, settings, strategies as st

import semisep as ss
from semisep.masks import Causal, Decay, Fourier, Toeplitz
from semisep.testing import (MaskTestMixin, assert_close, assert_matches_dense, dense_reference,
                             masks, to_numpy64)


def causal_definition(T, S, offset):
    return np.array([[1.0 if j <= i + offset else 0.0 for j in range(S)] for i in range(T)])


def decay_definition(gamma, T):
    gamma = to_numpy64(gamma)
    L = np.zeros(gamma.shape + (T, T))
    for i in range(T):
        for j in range(i + 1):
            L[..., i, j] = gamma ** (i - j)
    return L


def toeplitz_definition(alpha, alpha_upper=None):
    """By scipy, one batch entry at a time; the causal form has a zero first row."""
    alpha = to_numpy64(alpha)
    upper = np.zeros(alpha.shape[-1]) if alpha_upper is None else to_numpy64(alpha_upper)
    batch = np.broadcast_shapes(alpha.shape[:-1], upper.shape[:-1])
    alpha = np.broadcast_to(alpha, batch + alpha.shape[-1:])
    upper = np.broadcast_to(upper, batch + upper.shape[-1:])
    out = np.zeros(batch + (alpha.shape[-1], upper.shape[-1]))
    for idx in np.ndindex(*batch):
        out[idx] = scipy.linalg.toeplitz(alpha[idx], upper[idx])
    return out


def fourier_definition(T, inverse):
    return np.fft.ifft(np.eye(T), axis=0) if inverse else np.fft.fft(np.eye(T), axis=0)


def definition(L):
    """The float64 dense form of any mask ``masks()`` draws, from its parameters."""
    if isinstance(L, Causal):
        return causal_definition(*L.shape, L.offset)
    if isinstance(L, Decay):
        return decay_definition(L.gamma, L.shape[-1])
    if isinstance(L, Toeplitz):
        return toeplitz_definition(L.alpha, L.alpha_upper)
    if isinstance(L, Fourier):
        return fourier_definition(L.shape[-1], L.inverse)
    if isinstance(L, ss.OneSS):
        L = L.as_sss()
    if isinstance(L, ss.SSS):
        A = L.A if L.log_a is None else L.log_a
        return dense_reference(A, L.B, L.C, structure=L.structure, log=L.log_a is not None)
    return to_numpy64(L.to_dense())


# -- the mixin, once per mask ---------------------------------------------------------------

RNG = np.random.default_rng(1)
ALPHA, UPPER, GAMMAS = RNG.normal(size=(2, 9)), RNG.normal(size=6), np.array([0.0, 0.6, -0.95])


class TestCausalSquare(MaskTestMixin):
    def make_mask(self):
        return Causal(11)

    def make_dense(self):
        return causal_definition(11, 11, 0)


class TestCausalRectangularTorch(MaskTestMixin):
    def make_mask(self):
        return Causal(5, 9, offset=4, dtype=torch.float32)

    def make_dense(self):
        return causal_definition(5, 9, 4)


class TestDecayPerHead(MaskTestMixin):
    def make_mask(self):
        return Decay(GAMMAS, 70)                     # T over one block of the scan

    def make_dense(self):
        return decay_definition(GAMMAS, 70)


class TestToeplitzTwoSidedTorch(MaskTestMixin):
    def make_mask(self):
        return Toeplitz(torch.tensor(ALPHA), torch.tensor(UPPER))

    def make_dense(self):
        return toeplitz_definition(ALPHA, UPPER)


class TestFourierInverse(MaskTestMixin):
    def make_mask(self):
        return Fourier(12, inverse=True)

    def make_dense(self):
        return fourier_definition(12, True)


# -- random masks of every kind, both backends ----------------------------------------------

@pytest.mark.parametrize("backend", ["numpy", "torch"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_mask_matches_its_definition(backend, data):
    L = data.draw(masks(kinds=("causal", "decay", "toeplitz", "fourier"), backend=backend))
    assert_matches_dense(L, definition(L))
    x = data.draw(st.sampled_from([(3,), (2, 1)])) + L.shape[:-2] + (L.shape[-1], 2)
    x = np.random.default_rng(0).normal(size=x)
    x = torch.tensor(x) if backend == "torch" else x
    assert_close(L @ x, definition(L) @ to_numpy64(x))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_low_precision_within_tolerance(dtype, data):
    """float32 within 1e-5 and bfloat16 within 1e-2 of float64 on the same inputs."""
    L = data.draw(masks(kinds=("causal", "decay", "toeplitz"), backend="torch", dtype=dtype))
    x = torch.randn(L.shape[-1], 3, generator=torch.Generator().manual_seed(0)).to(
        getattr(torch, dtype))
    y = L @ x
    assert y.dtype == x.dtype
    assert_close(y, definition(L) @ to_numpy64(x), rtol=1e-5 if dtype == "float32" else 1e-2)


def test_decay_float32_long_sequence_keeps_precision():
    """Powers come from gamma ** k directly: float32 at T=8192 within 1e-5 of float64."""
    gamma = np.array([1 - 2.0**-5, 1 - 2.0**-9, 1 - 2.0**-13], dtype=np.float32)
    x = np.random.default_rng(0).normal(size=(3, 8192, 2)).astype(np.float32)
    got = Decay(torch.tensor(gamma), 8192) @ torch.tensor(x)
    expected = Decay(gamma.astype(np.float64), 8192) @ x.astype(np.float64)
    exact = np.empty_like(expected)         # the scan itself, in float64
    state = np.zeros((3, 2))
    for t in range(8192):
        state = gamma.astype(np.float64)[:, None] * state + x[:, t]
        exact[:, t] = state
    assert_close(expected, exact, rtol=1e-12)
    assert_close(got, exact, rtol=1e-5)


def test_fourier_inverse_undoes_forward_on_complex_input():
    x = np.random.default_rng(0).normal(size=(7, 2)) + 1j
    assert_close(Fourier(7, inverse=True) @ (Fourier(7) @ x), x)
    assert_close(Fourier(7) @ torch.tensor(x), np.fft.fft(x, axis=0))


def test_transposes_of_rectangular_masks():
    for L in (Causal(4, 7, offset=2), Causal(7, 4, offset=-1),
              Toeplitz(ALPHA[0], UPPER), Toeplitz(ALPHA)):
        assert_matches_dense(L.T, definition(L).swapaxes(-1, -2))


def test_one_ss_forms_of_causal_and_decay():
    assert_close(Causal(6).as_oness().to_dense(), causal_definition(6, 6, 0))
    assert_close(Decay(GAMMAS, 6).as_oness().to_dense(), decay_definition(GAMMAS, 6))
    with pytest.raises(ValueError, match="offset"):
        Causal(4, 5).as_oness()


# -- 1-SS masks continue from a state ----------------------------------------------------

def _ramp(L, T):
    """``a_t ... a_0`` for t < T: what the state before step 0 contributes to row t."""
    gamma = 1.0 if isinstance(L, Causal) else to_numpy64(L.gamma)[..., None]
    return np.asarray(gamma) ** np.arange(1, T + 1)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_state_carrying_product_matches_definition(backend, data):
    """``L @ x`` from a state h: ``y_t = (L x)_t + a_t ... a_0 h``; pieces chain to the whole."""
    L = data.draw(masks(kinds=("causal", "decay"), T=st.integers(1, 150), backend=backend)
                  .filter(lambda L: L.carries_state))
    T, m = L.shape[-1], data.draw(st.integers(1, 3))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    convert = torch.tensor if backend == "torch" else np.asarray
    x, h = convert(rng.normal(size=(T, m))), convert(rng.normal(size=(2,) + L.shape[:-2] + (1, m)))
    dense = definition(L)
    expected = dense @ to_numpy64(x) + _ramp(L, T)[..., :, None] * to_numpy64(h)
    y, final = L.matmul(x, initial_state=h, return_final_state=True)
    assert type(y) is type(x) and tuple(final.shape) == tuple(h.shape)
    assert_close(y, expected)
    assert_close(final, expected[..., -1:, :])
    vector, vector_final = L.matmul(x[:, 0], initial_state=h[..., 0], return_final_state=True)
    assert_close(vector, expected[..., 0])
    assert_close(vector_final, expected[..., -1:, 0])
    cut = data.draw(st.integers(1, T))
    head, state = L.leading(cut).matmul(x[:cut], return_final_state=True)
    if cut < T:
        tail = L.leading(T - cut).matmul(x[cut:], initial_state=state)
        head = np.concatenate([to_numpy64(head), to_numpy64(tail)], axis=-2)
    assert_close(head, dense @ to_numpy64(x))


def test_only_one_ss_masks_carry_a_state():
    x, h = np.ones((5, 2)), np.ones((1, 2))
    assert Causal(5).carries_state and Decay(0.5, 5).carries_state
    for L in (Causal(5, 6, offset=1), Causal(5, offset=-1), Toeplitz(np.ones(5)), Fourier(5)):
        assert not L.carries_state
        with pytest.raises(TypeError, match="initial_state and return_final_state need a mask "
                                            "that carries a state"):
            L.matmul(np.ones((L.shape[-1], 2)), initial_state=h)
    with pytest.raises(ValueError, match=r"initial_state must have shape \(..., 1, 2\), got shape "
                                         r"\(2, 2\)"):
        Decay(0.5, 5).matmul(x, initial_state=np.ones((2, 2)))
    with pytest.raises(ValueError, match="offset 0 has principal blocks"):
        Causal(4, 5).leading(2)
    with pytest.raises(ValueError, match="T must be an int >= 1"):
        Decay(0.5, 5).leading(0)


def test_masks_use_the_forced_backend():
    x = np.ones((5, 2))
    assert isinstance(Toeplitz(np.ones(5)).matmul(x, backend="torch"), torch.Tensor)
    with ss.use_backend("torch"):
        assert isinstance(Decay(0.5, 5) @ x, torch.Tensor)


# -- gradients (float64 gradcheck) ------------------------------------------------------------

def _leaf(a):
    return torch.tensor(a, dtype=torch.float64, requires_grad=True)


def test_gradients_reach_mask_parameters_and_input():
    """Toeplitz alpha (both sides), Decay gamma (per head, scalar; T over a block), x."""
    rng = np.random.default_rng(0)
    x = _leaf(rng.normal(size=(2, 70, 1)))
    checks = [
        (lambda alpha, x: Toeplitz(alpha) @ x, _leaf(rng.normal(size=(2, 70)))),
        (lambda gamma, x: Decay(gamma, 70) @ x, _leaf([0.0, -0.9])),
        (lambda gamma, x: Decay(gamma, 70) @ x, _leaf(0.97)),
    ]
    for fn, param in checks:
        assert torch.autograd.gradcheck(fn, (param, x), fast_mode=True)
    alpha, upper = _leaf(rng.normal(size=(2, 9))), _leaf(rng.normal(size=5))
    assert torch.autograd.gradcheck(lambda a, u, x: Toeplitz(a, u) @ x,
                                    (alpha, upper, _leaf(rng.normal(size=(5, 2)))))
    small = _leaf(rng.normal(size=(9, 2)))
    assert torch.autograd.gradcheck(lambda x: Causal(7, 9, offset=1) @ x, (small,))
    assert torch.autograd.gradcheck(lambda x: Fourier(9) @ x, (small,))


# -- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("make, error, words", [
    (lambda: Causal(0), ValueError, "T must be an int >= 1, got 0"),
    (lambda: Causal(3, 2.0), TypeError, "S must be an int"),
    (lambda: Causal(3, offset=0.5), TypeError, "offset must be an int"),
    (lambda: Causal(3, dtype=np.complex128), TypeError, "dtype must be a real floating"),
    (lambda: Decay(np.array([0.5j]), 4), TypeError, "gamma must be real"),
    (lambda: Decay(0.5, -1), ValueError, "T must be an int >= 1"),
    (lambda: Toeplitz(1.0), ValueError, r"alpha must have shape \(..., T\), got shape \(\)"),
    (lambda: Toeplitz(np.ones((2, 3)), np.ones((3, 4))), ValueError, "alpha .* alpha_upper"),
    (lambda: Toeplitz(np.zeros(0)), ValueError, r"alpha must have shape \(..., T\) with T >= 1"),
    (lambda: Toeplitz(np.ones(3), np.zeros(0)), ValueError, "alpha_upper .* with S >= 1"),
    (lambda: Fourier(4, dtype=np.float64), TypeError, "dtype must be a complex dtype"),
    (lambda: Fourier(4, inverse="yes"), TypeError, "inverse must be a bool"),
    (lambda: Causal(3) @ np.ones((4, 2)), ValueError, r"x must have shape \(3,\) or \(..., 3, m\)"),
    (lambda: Decay(np.ones(2) / 2, 3) @ np.ones((3, 3, 1)), ValueError, "mask .*x"),
    (lambda: Toeplitz(np.ones(3)) @ (np.ones((3, 1)) * 1j), TypeError, "x must be real"),
])
def test_bad_input_is_named(make, error, words):
    with pytest.raises(error, match=words):
        make()


def test_inputs_never_modified():
    alpha, x = np.ones(6), np.arange(12.0).reshape(6, 2)
    before = x.copy(), alpha.copy()
    Toeplitz(alpha).T @ x
    Decay(alpha[:1] / 2, 6) @ x
    Causal(6, offset=-2) @ x
    np.testing.assert_array_equal(x, before[0])
    np.testing.assert_array_equal(alpha, before[1])

"""Testing tools for masks: the ``masks()`` strategy and :class:`MaskTestMixin`.

``masks()`` draws semisep's masks and the other structured matrices that work
as masks. ``MaskTestMixin`` carries the property tests every mask must pass
(the linear_operator style): subclass it in a test class, give
``make_mask()`` and ``make_dense()`` (its float64 dense form written from the
definition), and the tests are inherited::

    class TestBanded(MaskTestMixin):
        def make_mask(self):
            return Banded(...)
        def make_dense(self):
            return ...          # numpy float64, (..., T, S)
"""

from __future__ import annotations

import numpy as np

from ..masks import Causal, Decay, Fourier, Toeplitz
from ..masks._base import is_complex_dtype
from ..matrix import Dense
from ..sma import sma
from .assertions import assert_close, assert_matches_dense, default_rtol
from .reference import to_numpy64

REAL_KINDS = ("causal", "decay", "toeplitz", "oness", "sss", "dense")
KINDS = REAL_KINDS + ("fourier",)

try:
    from hypothesis import strategies as st

    from .strategies import _convert, _strategy, one_ss, shapes, sss_matrices
except ImportError:  # hypothesis is a test extra; the mixin works without it
    st = None


def _dtype_object(backend: str, dtype: str, complex_: bool = False):
    """The numpy or torch dtype named ``dtype`` (its complex counterpart with ``complex_``)."""
    name = dtype
    if complex_:
        name = "complex128" if dtype == "float64" else "complex64"
    if backend == "torch":
        import torch

        return getattr(torch, name)
    return np.dtype(name)


if st is not None:
    @st.composite
    def _masks(draw, kinds, T, batch_shape, backend, dtype):
        kind = draw(_strategy(kinds) if isinstance(kinds, st.SearchStrategy)
                    else st.sampled_from(list(kinds)))
        T = draw(_strategy(T))
        batch = tuple(draw(_strategy(batch_shape)))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        other_side = draw(st.integers(1, 2 * T + 1))
        if kind == "causal":
            if draw(st.booleans()):
                return Causal(T, dtype=_dtype_object(backend, dtype))
            return Causal(T, other_side, offset=draw(st.integers(-T, other_side)),
                          dtype=_dtype_object(backend, dtype))
        if kind == "decay":
            gamma = rng.uniform(-1.0, 1.0, size=batch)
            if draw(st.booleans()):
                gamma[rng.random(size=batch) < 0.3] = 0.0
            if batch == () and draw(st.booleans()):
                return Decay(float(gamma), T)
            return Decay(_convert(gamma, backend, dtype), T)
        if kind == "toeplitz":
            alpha = _convert(rng.normal(size=batch + (T,)), backend, dtype)
            if draw(st.booleans()):
                return Toeplitz(alpha)
            return Toeplitz(alpha, _convert(rng.normal(size=(other_side,)), backend, dtype))
        if kind == "oness":
            return draw(one_ss(T=T, batch_shape=batch, backend=backend, dtype=dtype))
        if kind == "sss":
            return draw(sss_matrices(T=T, batch_shape=batch, backend=backend, dtype=dtype))
        if kind == "dense":
            return Dense(_convert(rng.normal(size=batch + (T, other_side)), backend, dtype))
        if kind == "fourier":
            return Fourier(T, inverse=draw(st.booleans()),
                           dtype=_dtype_object(backend, dtype, complex_=True))
        raise ValueError(f"kinds must be drawn from {KINDS}, got {kind!r}")


def masks(*, kinds=REAL_KINDS, T=None, batch_shape=None, backend: str = "numpy",
          dtype: str = "float64"):
    """A strategy of masks: semisep's masks and the structured matrices that act as masks.

    Parameters
    ----------
    kinds : sequence of str or strategy
        Drawn from ``"causal"`` (square, or rectangular with an offset),
        ``"decay"`` (gamma in ``[-1, 1]`` with zeros; scalar or per batch entry),
        ``"toeplitz"`` (one- or two-sided, maybe rectangular), ``"oness"``,
        ``"sss"``, ``"dense"`` and, only when asked for, ``"fourier"`` (complex).
    T : int or strategy of int
        The number of rows; ``integers(1, 20)`` when omitted. The columns S
        equal T except for the rectangular kinds.
    batch_shape : tuple or strategy of tuples
        Batch dimensions of the masks that hold arrays; ``shapes(max_dims=1)``.
    backend : {"numpy", "torch"}
    dtype : {"float64", "float32", "bfloat16", "float16"}
    """
    if st is None:
        raise ImportError("semisep.testing.masks needs hypothesis (pip install 'semisep[test]')")
    _convert(np.zeros(1), backend, dtype)        # the same checks of backend and dtype
    names = kinds if isinstance(kinds, st.SearchStrategy) else tuple(kinds)
    if not isinstance(names, st.SearchStrategy):
        unknown = [k for k in names if k not in KINDS]
        if unknown or not names:
            raise ValueError(f"kinds must be a non-empty selection of {KINDS}, got {kinds!r}")
    return _masks(names, st.integers(1, 20) if T is None else T,
                  shapes(max_dims=1) if batch_shape is None else batch_shape, backend, dtype)


class MaskTestMixin:
    """Property tests inherited by every mask test class (see the module docstring).

    Attributes
    ----------
    rtol : float or None
        Normwise relative tolerance; by default from the mask's dtype.
    seed : int
        Seed of the random right-hand sides.
    """

    rtol = None
    seed = 0

    def make_mask(self):
        """The mask under test."""
        raise NotImplementedError

    def make_dense(self):
        """Its dense form from the definition: a float64 (complex128) numpy ``(..., T, S)``."""
        raise NotImplementedError

    def _random(self, mask, shape, rng):
        """A standard normal array of ``shape``, of the mask's array type and real precision."""
        values = rng.normal(size=shape)
        own = mask.to_dense()
        if hasattr(own, "detach"):
            real = own.real.dtype if own.is_complex() else own.dtype
            return own.new_tensor(values).to(real)
        return values.astype(np.real(own).dtype)

    def _rtol(self, mask):
        return default_rtol(mask.dtype) if self.rtol is None else self.rtol

    def test_shape(self):
        mask, dense = self.make_mask(), self.make_dense()
        assert tuple(mask.shape) == dense.shape, (tuple(mask.shape), dense.shape)

    def test_matches_dense(self):
        """to_dense(), L @ x, x @ L and L.T against the definition."""
        mask = self.make_mask()
        assert_matches_dense(mask, self.make_dense(), rtol=self._rtol(mask), seed=self.seed)

    def test_vector_and_batched_products(self):
        """``L @ x``, ``x @ L`` and ``L.T @ x`` for vectors and batches of matrices."""
        mask, dense = self.make_mask(), self.make_dense()
        rng = np.random.default_rng(self.seed)
        T, S = dense.shape[-2:]
        batch = (2,) + dense.shape[:-2]
        rtol = self._rtol(mask)
        dense_T = np.swapaxes(dense, -1, -2)
        v, u = self._random(mask, (S,), rng), self._random(mask, (T,), rng)
        x, w = self._random(mask, batch + (S, 3), rng), self._random(mask, batch + (3, T), rng)
        z = self._random(mask, batch + (T, 3), rng)
        assert_close(mask @ v, dense @ to_numpy64(v), rtol=rtol, what="L @ vector")
        assert_close(mask @ x, dense @ to_numpy64(x), rtol=rtol, what="L @ batch")
        assert_close(u @ mask, to_numpy64(u) @ dense, rtol=rtol, what="vector @ L")
        assert_close(w @ mask, to_numpy64(w) @ dense, rtol=rtol, what="batch @ L")
        assert_close(mask.T @ u, dense_T @ to_numpy64(u), rtol=rtol, what="L.T @ vector")
        assert_close(mask.T @ z, dense_T @ to_numpy64(z), rtol=rtol, what="L.T @ batch")

    def test_input_unchanged(self):
        """Products from either side leave the caller's array as it was."""
        mask = self.make_mask()
        rng = np.random.default_rng(self.seed)
        T, S = mask.shape[-2:]
        for x, product in ((self._random(mask, (S, 2), rng), lambda a: mask @ a),
                           (self._random(mask, (2, T), rng), lambda a: a @ mask),
                           (self._random(mask, (T, 2), rng), lambda a: mask.T @ a)):
            before = to_numpy64(x).copy()
            product(x)
            np.testing.assert_array_equal(to_numpy64(x), before)

    def test_sma_linear_quadratic_dense(self):
        """sma by both algorithms equals ``(L o Q K^T) V`` with the dense definition."""
        mask, dense = self.make_mask(), self.make_dense()
        T, S = dense.shape[-2:]
        rng = np.random.default_rng(self.seed)
        Q, K, V = (self._random(mask, shape, rng) for shape in ((T, 3), (S, 3), (S, 2)))
        expected = (dense * (to_numpy64(Q) @ to_numpy64(K).T)) @ to_numpy64(V)
        complex_ = is_complex_dtype(mask.dtype)
        for algorithm in ("linear", "quadratic"):
            got = sma(Q, K, V, mask, algorithm=algorithm, allow_complex=complex_)
            assert_close(got, expected, rtol=self._rtol(mask), what=f"sma {algorithm}")

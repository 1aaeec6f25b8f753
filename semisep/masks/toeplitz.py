"""Toeplitz masks ``L[i, j] = k(i - j)``, multiplied by FFT in O(T log T)."""

from __future__ import annotations

import math

import numpy as np

from .._checks import as_array, broadcast_batch, check_min_ndim, shape_str
from ..backends import backend_of
from ._base import Mask


def toeplitz_dense(be, column, row=None):
    """The dense Toeplitz matrix with first ``column`` ``(..., T)`` and first ``row`` ``(..., S)``.

    ``L[..., i, j] = column[i - j]`` for ``i >= j`` and ``row[j - i]`` for
    ``j > i`` (``row[0]`` is not used, as in :func:`scipy.linalg.toeplitz`);
    with ``row`` None the upper part is zero and ``S = T``. Shape ``(..., T, S)``.
    """
    T = column.shape[-1]
    if row is None:
        S = T
        zeros = be.zeros(column.shape[:-1] + (T - 1,), like=column)
        kernel = be.concat([zeros, column], axis=-1)
    else:
        S = row.shape[-1]
        batch = be.broadcast_shapes(tuple(column.shape[:-1]), tuple(row.shape[:-1]))
        kernel = be.concat([be.broadcast_to(be.flip(row[..., 1:], -1), batch + (S - 1,)),
                            be.broadcast_to(column, batch + (T,))], axis=-1)
    lag = np.arange(T)[:, None] - np.arange(S)[None, :] + (S - 1)   # kernel[S - 1 + i - j]
    return kernel[..., be.asarray(lag, like=kernel)]


#: FFT work is counted at this many times its flops in ``matmul_flops``: on a CPU an FFT
#: runs at about half the speed of a matmul per flop (``benchmarks/sma_masks.py``).
FFT_WEIGHT = 2.0


def _fft_size(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _check_length(name: str, arr, side: str):
    if arr.shape[-1] < 1:
        raise ValueError(f"{name} must have shape (..., {side}) with {side} >= 1, "
                         f"got shape {shape_str(arr.shape)}")


class Toeplitz(Mask):
    """The Toeplitz mask with first column ``alpha`` and, optionally, first row ``alpha_upper``.

    ``L[..., i, j] = alpha[..., i - j]`` for ``i >= j``; above the diagonal
    ``alpha_upper[..., j - i]`` when given (two-sided, like
    ``scipy.linalg.toeplitz(alpha, alpha_upper)``; ``alpha_upper[0]`` is not
    used), else 0 (causal). Note that ``scipy.linalg.toeplitz(alpha)`` alone is
    symmetric; ``Toeplitz(alpha)`` is its lower triangle.

    Parameters
    ----------
    alpha : array, shape ``(..., T)``
        The coefficient of each lag ``i - j >= 0``; leading dimensions are batch
        (e.g. one kernel per head). A torch tensor with ``requires_grad`` is a
        learnable mask: gradients flow through the FFT.
    alpha_upper : array, shape ``(..., S)``, optional
        The coefficient of each lag ``j - i > 0``; gives an ``(..., T, S)`` mask.

    Notes
    -----
    ``L @ x`` is a linear convolution computed with real FFTs of length
    ``n``, the power of two ``>= T + S - 1``: O(n log n) work per column of
    ``x``, O(n m) extra memory. FFT rounding is normwise: the error is about
    ``eps log n`` times ``max|alpha| max|x|``, so entries much smaller than the
    largest ones carry a larger relative error than a direct sum would give.

    Examples
    --------
    >>> import numpy as np, semisep as ss
    >>> L = ss.masks.Toeplitz(np.array([1.0, 0.5, 0.25]))
    >>> L.to_dense()
    array([[1.  , 0.  , 0.  ],
           [0.5 , 1.  , 0.  ],
           [0.25, 0.5 , 1.  ]])
    """

    _algorithm = "fft"

    def __init__(self, alpha, alpha_upper=None):
        alpha = as_array("alpha", alpha)
        check_min_ndim("alpha", alpha, 1, "(..., T)")
        _check_length("alpha", alpha, "T")
        batches = {"alpha": alpha.shape[:-1]}
        if alpha_upper is not None:
            alpha_upper = as_array("alpha_upper", alpha_upper)
            check_min_ndim("alpha_upper", alpha_upper, 1, "(..., S)")
            _check_length("alpha_upper", alpha_upper, "S")
            batches["alpha_upper"] = alpha_upper.shape[:-1]
        self._batch = broadcast_batch(batches)
        self.alpha, self.alpha_upper = alpha, alpha_upper
        self._arrays = (alpha,) if alpha_upper is None else (alpha, alpha_upper)

    @property
    def shape(self):
        T = self.alpha.shape[-1]
        S = T if self.alpha_upper is None else self.alpha_upper.shape[-1]
        return self._batch + (T, S)

    @property
    def dtype(self):
        return backend_of(*self._arrays).result_dtype(*self._arrays)

    def to_dense(self):
        be = backend_of(*self._arrays)
        dtype = self.dtype
        column, row = (None if a is None else be.cast(be.asarray(a, like=self.alpha), dtype)
                       for a in (self.alpha, self.alpha_upper))
        return toeplitz_dense(be, column, row)

    @property
    def T(self):
        """``L^T``: the Toeplitz mask with column and row exchanged."""
        be = backend_of(*self._arrays)
        alpha = self.alpha
        if self.alpha_upper is None:
            lags = be.zeros(alpha.shape[:-1] + (alpha.shape[-1] - 1,), like=alpha)
        else:
            lags = be.asarray(self.alpha_upper, like=alpha)[..., 1:]
            batch = be.broadcast_shapes(tuple(alpha.shape[:-1]), tuple(lags.shape[:-1]))
            alpha = be.broadcast_to(alpha, batch + alpha.shape[-1:])
            lags = be.broadcast_to(lags, batch + lags.shape[-1:])
        column = be.concat([alpha[..., :1], be.cast(lags, alpha.dtype)], axis=-1)
        return Toeplitz(column, self.alpha)

    def matmul_flops(self, m):
        n = _fft_size(sum(self.shape[-2:]) - 1)
        return FFT_WEIGHT * m * (5 * n * math.log2(max(n, 2)) + 4 * n)

    def _apply(self, be, x):
        T, S = self.shape[-2:]
        n = _fft_size(T + S - 1)
        dtype = be.result_dtype(*(be.asarray(a, like=x) for a in self._arrays), x)
        compute = be.compute_dtype(dtype)
        alpha = be.cast(be.asarray(self.alpha, like=x), compute)
        parts = [alpha]
        if self.alpha_upper is not None:
            upper = be.cast(be.asarray(self.alpha_upper, like=x), compute)
            batch = be.broadcast_shapes(tuple(alpha.shape[:-1]), tuple(upper.shape[:-1]))
            parts = [be.broadcast_to(alpha, batch + (T,)),
                     be.zeros(batch + (n - T - S + 1,), like=alpha),
                     be.broadcast_to(be.flip(upper[..., 1:], -1), batch + (S - 1,))]
        kernel = be.concat(parts, axis=-1)                       # kernel[d mod n] = k(d)
        spectrum = be.rfft(kernel, n, -1)[..., :, None]
        y = be.irfft(spectrum * be.rfft(be.cast(x, compute), n, -2), n, -2)
        return be.cast(y[..., :T, :], dtype)

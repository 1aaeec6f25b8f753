"""The DFT matrix as a mask, multiplied by FFT."""

from __future__ import annotations

import math

import numpy as np

from .._checks import check_positive_int
from ._base import Mask, check_dtype, constant
from .toeplitz import FFT_WEIGHT


class Fourier(Mask):
    """The ``T x T`` discrete Fourier transform, ``L[i, j] = exp(-2 pi i * i j / T)``.

    Sign convention: numpy's (and torch's) forward transform, so
    ``Fourier(T) @ x == numpy.fft.fft(x, axis=-2)``. With ``inverse=True`` the
    matrix is the inverse transform ``exp(+2 pi i * i j / T) / T`` (numpy's
    ``ifft``), and ``Fourier(T, inverse=True) @ (Fourier(T) @ x) == x``.

    Parameters
    ----------
    T : int
    inverse : bool
    dtype : numpy or torch complex dtype
        The dtype of :meth:`to_dense` (a torch dtype gives a tensor). Products
        are complex of the precision of ``x`` (complex64 for float32 and for
        torch half-precision inputs; the numpy backend computes numpy float16
        in float64, so complex128).

    Notes
    -----
    The matrix is complex: :func:`semisep.sma` and :func:`semisep.masked`
    refuse it unless ``allow_complex=True``. ``x`` may be real or complex.
    ``L @ x`` is an FFT: O(T log T) work per column; the error is normwise,
    about ``eps log T`` times ``max|x|`` (times ``sqrt(T)``).

    Examples
    --------
    >>> import numpy as np, semisep as ss
    >>> x = np.arange(4.0)
    >>> np.allclose(ss.masks.Fourier(4) @ x, np.fft.fft(x))
    True
    """

    _algorithm = "fft"
    _complex_input = True

    def __init__(self, T: int, *, inverse: bool = False, dtype=np.complex128):
        self._T = check_positive_int("T", T)
        if not isinstance(inverse, (bool, np.bool_)):
            raise TypeError(f"inverse must be a bool, got {type(inverse).__name__} {inverse!r}")
        self.inverse = bool(inverse)
        self._dtype = check_dtype(dtype, "c")

    @property
    def shape(self):
        return (self._T, self._T)

    @property
    def dtype(self):
        return self._dtype

    def to_dense(self):
        T = self._T
        phase = np.outer(np.arange(T), np.arange(T)) % T        # exact angles for any T
        sign = 1.0 if self.inverse else -1.0
        dense = np.exp(sign * 2j * np.pi * phase / T) / (T if self.inverse else 1)
        return constant(dense, self._dtype)

    @property
    def T(self):
        """The DFT matrix is symmetric."""
        return self

    def matmul_flops(self, m):
        return FFT_WEIGHT * m * 5 * self._T * math.log2(max(self._T, 2))

    def _apply(self, be, x):
        if not be.is_complex(x):
            x = be.cast(x, be.compute_dtype(be.result_dtype(x)))
        transform = be.ifft if self.inverse else be.fft
        return transform(x, self._T, -2)

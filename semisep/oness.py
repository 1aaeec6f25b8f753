"""1-semiseparable (1-SS) matrices, ``cumprodsum`` and the stable ``segsum``.

``OneSS(a)`` is the ``T x T`` matrix ``L[..., j, i] = a_j a_{j-1} ... a_{i+1}``
for ``j >= i`` (1 on the diagonal), 0 above: the SSS matrix with scalar A and
``N = 1``, ``B = C = 1``. ``L @ x`` is the scan ``y_t = a_t y_{t-1} + x_t``
(:func:`cumprodsum`). With every ``a_t = 1`` it is the causal mask.
"""

from __future__ import annotations

from ._checks import as_array, check_min_ndim
from .algorithms.decays import segsum as _segsum
from .backends import Case, backend_of, select_backend
from .matrix import StructuredMatrix
from .sss import SSS


class OneSS(StructuredMatrix):
    """The 1-SS matrix of ``a`` (see the module docstring).

    Parameters
    ----------
    a : array, shape ``(..., T)``
        The coefficients, any real values.

    Examples
    --------
    >>> import numpy as np, semisep as ss
    >>> L = ss.OneSS(np.array([9.0, 0.5, 0.5]))
    >>> L.to_dense()
    array([[1.  , 0.  , 0.  ],
           [0.5 , 1.  , 0.  ],
           [0.25, 0.5 , 1.  ]])
    """

    def __init__(self, a):
        self._sss = self._make(SSS, as_array("a", a))

    @classmethod
    def from_log(cls, log_a) -> "OneSS":
        """The 1-SS matrix of ``a = exp(log_a)``; ``-inf`` is a reset."""
        self = cls.__new__(cls)
        self._sss = self._make(SSS.from_log, as_array("log_a", log_a))
        return self

    @staticmethod
    def _make(constructor, a) -> SSS:
        check_min_ndim("a", a, 1, "(..., T)")
        be = backend_of(a)
        dtype = be.result_dtype(a)
        ones = be.cast(be.ones((a.shape[-1], 1), like=be.cast(a, dtype)), dtype)
        return constructor(a, ones, ones, structure="scalar")

    @property
    def a(self):
        """The coefficients ``a`` (``exp(log_a)`` for a matrix made by :meth:`from_log`)."""
        return self._sss.A

    @property
    def log_a(self):
        return self._sss.log_a

    @property
    def shape(self):
        return self._sss.shape

    @property
    def dtype(self):
        return self._sss.dtype

    def matmul(self, x, **options):
        """``L @ x`` for ``x`` of shape ``(T,)`` or ``(..., T, P)``; options as :meth:`SSS.matmul`."""
        return self._sss.matmul(x, **options)

    def to_dense(self, **options):
        return self._sss.to_dense(**options)

    @property
    def T(self):
        return self._sss.T

    def as_sss(self) -> SSS:
        """This matrix as an :class:`SSS` with ``N = 1``."""
        return self._sss


def cumprodsum(a, x, **options):
    """The scan ``y_t = a_t y_{t-1} + x_t`` along the last axis (``y_{-1} = 0``): ``OneSS(a) @ x``.

    Parameters
    ----------
    a : array, shape ``(..., T)``
    x : array, shape ``(..., T)``, broadcasting with ``a``
    **options
        Passed to :meth:`SSS.matmul` (``algorithm``, ``chunk_size``, ``backend``).

    Returns
    -------
    y : array, shape ``(..., T)``

    Examples
    --------
    >>> import numpy as np, semisep as ss
    >>> ss.cumprodsum(np.array([0.0, 2.0, 2.0]), np.array([1.0, 1.0, 1.0]))
    array([1., 3., 7.])
    """
    x = as_array("x", x)
    check_min_ndim("x", x, 1, "(..., T)")
    return OneSS(a).matmul(x[..., None], **options)[..., 0]


def segsum(x, *, backend: str | None = None):
    """The segment sums ``S[..., i, j] = x_{j+1} + ... + x_i`` (``i >= j``), ``-inf`` above.

    ``exp(segsum(log_a)) == OneSS.from_log(log_a).to_dense()``.

    Parameters
    ----------
    x : array, shape ``(..., T)``
        Typically log-decays (``<= 0``; ``-inf`` allowed).
    backend : str, optional

    Returns
    -------
    S : array, shape ``(..., T, T)``

    Notes
    -----
    Stability: each entry is summed directly over its own segment (a running
    sum down each column), never as ``cumsum[i] - cumsum[j]``, so it is exact to
    rounding for any T and any magnitude; the difference of cumulative sums
    would lose ``|cumsum| * eps`` (about 3e-2 in fp32 at T=2048 with log-decays
    down to -1000). O(T^2) work and memory.
    """
    x = as_array("x", x)
    check_min_ndim("x", x, 1, "(..., T)")
    be = select_backend([x], Case("segsum"), backend)
    x = be.asarray(x)
    return _segsum(be, be.cast(x, be.result_dtype(x)))

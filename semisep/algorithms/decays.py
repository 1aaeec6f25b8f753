"""Sequences of transition coefficients and their 1-SS matrices, computed stably.

A sequence ``a_0, ..., a_{T-1}`` along the last axis is held either as log-decays
(``log_a``, from ``from_log`` constructors; ``-inf`` is a reset) or as the real
values of ``a`` (any sign, zeros allowed). Its 1-SS matrix is

    L[..., j, i] = a_j a_{j-1} ... a_{i+1}   for j >= i (1 on the diagonal), 0 above.

Both forms build ``L`` without dividing or subtracting: the log form sums the
log-decays of each segment directly (:func:`segsum`), the value form multiplies
the values of each segment directly (:func:`segprod`). Each entry is then exact
to rounding whatever ``T`` and ``|log a|``; a cumulative sum difference
``cs[j] - cs[i]`` would instead lose ``|cs|`` times machine epsilon.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..backends.base import Array, Backend


def _running(be: Backend, x: Array, fill: float, scan) -> Array:
    """``R[..., j, i] = scan(x_{j+1}, ..., x_i)`` for ``i > j``, else ``fill``; shape ``(..., T, T)``.

    Row ``j`` holds the running scan (sum or product) of ``x`` from ``j + 1``
    on, computed along the contiguous last axis; its transpose is the lower
    triangle the module docstring describes.
    """
    T = x.shape[-1]
    rows = be.broadcast_to(x[..., None, :], x.shape[:-1] + (T, T))
    strict_upper = ~be.tri(T, T, 0, like=x)
    return scan(be.where(strict_upper, rows, be.full((), fill, like=x)), axis=-1)


#: Stands for a ``-inf`` log-decay in :func:`_running_sums`: finite, so that a 0/1 mask can
#: multiply it, and still far below any sum that ``exp`` does not take to exactly 0.
RESET = -1e30


def _running_sums(be: Backend, x: Array) -> Array:
    """:func:`_running` sums (0 where ``i <= j``) for ``exp``, one cheap pass fewer.

    The strictly upper part is cut by multiplying with a 0/1 mask (which costs
    a fraction of a ``where`` over the broadcast rows); ``-inf`` entries are
    first replaced by :data:`RESET`, so that no ``-inf * 0`` arises and every
    segment holding a reset still sums to at most ``RESET``: ``exp`` gives the
    exact 0. Other sums are the same direct running sums as :func:`segsum`'s.
    """
    T = x.shape[-1]
    x = be.where(x == float("-inf"), be.full((), RESET, like=x), x)
    strict_upper = be.cast(~be.tri(T, T, 0, like=x), x.dtype)
    return be.cumsum(x[..., None, :] * strict_upper, axis=-1)


def segsum(be: Backend, x: Array) -> Array:
    """``S[..., i, j] = x_{j+1} + ... + x_i`` for ``i >= j`` (0 on the diagonal), ``-inf`` above.

    Each entry is a direct running sum over its own segment, never a
    difference of cumulative sums. ``-inf`` entries of ``x`` give ``-inf``
    sums, never NaN. Returned as a transposed view of a contiguous array.
    """
    T = x.shape[-1]
    sums = _running(be, x, 0.0, be.cumsum)
    upper = ~be.tri(T, T, -1, like=x)          # i >= j in the transposed (row) layout
    return be.where(upper, sums, be.full((), float("-inf"), like=x)).swapaxes(-1, -2)


def segprod(be: Backend, a: Array) -> Array:
    """``P[..., i, j] = a_{j+1} * ... * a_i`` for ``i >= j`` (1 on the diagonal), 0 above."""
    T = a.shape[-1]
    prods = _running(be, a, 1.0, be.cumprod)
    return be.where(~be.tri(T, T, -1, like=a), prods, be.full((), 0.0, like=a)).swapaxes(-1, -2)


@dataclass(frozen=True)
class Decays:
    """Transition coefficients along the last axis of ``data``.

    Attributes
    ----------
    data : array, shape ``(..., T)``
        Log-decays when ``log`` is True, else the values of ``a``.
    log : bool
        Which form ``data`` holds.
    """

    data: Array
    log: bool

    @property
    def identity(self) -> float:
        """The coefficient that changes nothing (``a = 1``) in this form."""
        return 0.0 if self.log else 1.0

    def values(self, be: Backend) -> Array:
        """The coefficients ``a`` themselves."""
        return be.exp(self.data) if self.log else self.data

    def matrix(self, be: Backend, *, masked: bool = True) -> Array:
        """The 1-SS matrix ``L`` of shape ``(..., T, T)`` (module docstring).

        With ``masked=False`` the entries above the diagonal are 1 instead of 0,
        one pass cheaper, for callers that multiply by a lower-triangular array.
        """
        if masked:
            return be.exp(segsum(be, self.data)) if self.log else segprod(be, self.data)
        if self.log:
            return be.exp(_running_sums(be, self.data)).swapaxes(-1, -2)
        return _running(be, self.data, 1.0, be.cumprod).swapaxes(-1, -2)

    def map(self, fn) -> "Decays":
        """The same form with ``fn`` applied to the data (reshapes, pads, slices)."""
        return Decays(fn(self.data), self.log)

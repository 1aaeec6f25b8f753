"""The causal mask: lower-triangular ones, whose product is a cumulative sum."""

from __future__ import annotations

import numpy as np

from .._checks import check_positive_int, shape_str
from ..matrix import Reversed
from ..oness import OneSS
from ._base import Mask, check_dtype, constant
from .decay import BLOCK, decay_scan


class Causal(Mask):
    """``L[i, j] = 1`` for ``j <= i + offset``, else 0: ``numpy.tri(T, S, offset)``.

    Parameters
    ----------
    T : int
        Rows (queries).
    S : int, optional
        Columns (keys); ``T`` when omitted.
    offset : int
        The diagonal that bounds the ones, as numpy's ``k``: with ``S > T`` and
        ``offset = S - T`` the ``T`` queries are the last ``T`` of ``S`` positions.
    dtype : numpy or torch dtype
        The dtype of :meth:`to_dense` (a torch dtype gives a tensor). Products
        follow the precision of ``x`` as its backend computes it (numpy:
        float32 stays float32, other dtypes give float64).

    Notes
    -----
    ``L @ x`` is a cumulative sum along the sequence axis, run as the blocked
    scan of :class:`~semisep.masks.Decay` with ``gamma = 1``
    (:func:`~semisep.masks.decay.decay_scan`): sums within blocks of
    :data:`~semisep.masks.decay.BLOCK` rows by one matmul with a triangle of
    ones, then the block totals by the same scan. That is O(BLOCK S m) work
    instead of O(S m), but it runs as BLAS matmuls and scales linearly in S,
    where ``cumsum`` along a strided axis of a wide ``x`` is slower than that
    and grows faster than S on the CPU (cache misses). The blocked sums also
    keep float32 rounding error to about ``(BLOCK + S / BLOCK) eps``. A square
    mask with offset 0 is 1-SS: its ``matmul`` can continue from a state
    (``initial_state``, ``return_final_state``; :attr:`carries_state`), and
    :meth:`leading` gives its principal blocks.

    Examples
    --------
    >>> import numpy as np, semisep as ss
    >>> ss.masks.Causal(3) @ np.array([1.0, 2.0, 3.0])
    array([1., 3., 6.])
    """

    _algorithm = "cumsum"

    def __init__(self, T: int, S: int | None = None, *, offset: int = 0, dtype=np.float64):
        self._T = check_positive_int("T", T)
        self._S = self._T if S is None else check_positive_int("S", S)
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
            raise TypeError(f"offset must be an int, got {type(offset).__name__} {offset!r}")
        self.offset = int(offset)
        self._dtype = check_dtype(dtype, "f")

    @property
    def shape(self):
        return (self._T, self._S)

    @property
    def dtype(self):
        return self._dtype

    def to_dense(self):
        return constant(np.tri(self._T, self._S, self.offset), self._dtype)

    @property
    def T(self):
        """``L^T``: the reversal ``J Causal(S, T, offset=T - S + offset) J``."""
        return Reversed(Causal(self._S, self._T, offset=self._T - self._S + self.offset,
                               dtype=self._dtype))

    def as_oness(self) -> OneSS:
        """The square mask with ``offset=0`` as a :class:`~semisep.OneSS` with every ``a_t = 1``."""
        if self._T != self._S or self.offset != 0:
            raise ValueError(f"only a square Causal mask with offset 0 is 1-SS, got shape "
                             f"{shape_str(self.shape)} and offset {self.offset}")
        ones = constant(np.ones(self._T), self._dtype)
        return OneSS(ones)

    @property
    def carries_state(self) -> bool:
        return self._T == self._S and self.offset == 0

    def leading(self, T: int) -> "Causal":
        """The leading ``T x T`` block of a square mask with offset 0 (every principal block)."""
        if not self.carries_state:
            raise ValueError(f"only a square Causal mask with offset 0 has principal blocks of "
                             f"its kind, got shape {shape_str(self.shape)} and offset {self.offset}")
        return Causal(T, dtype=self._dtype)

    def matmul_flops(self, m):
        return float(2 * self._S * min(BLOCK, self._S) * m)

    def _apply(self, be, x, initial_state=None):
        dtype = be.result_dtype(x)
        x = be.cast(x, be.compute_dtype(dtype))
        initial = None if initial_state is None else be.cast(initial_state, x.dtype)
        sums = decay_scan(be, be.ones((), like=x), x, initial=initial)   # the cumulative sums
        rows = np.clip(np.arange(self._T) + self.offset + 1, 0, self._S)  # sums kept by row i
        if np.array_equal(rows, np.arange(1, self._T + 1)):
            y = sums[..., :self._T, :]
        else:
            zero = be.zeros(sums.shape[:-2] + (1, sums.shape[-1]), like=sums)
            y = be.concat([zero, sums], axis=-2)[..., be.asarray(rows, like=sums), :]
        return be.cast(y, dtype)

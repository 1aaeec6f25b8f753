"""The decay mask of RetNet, ``L[i, j] = gamma^(i - j)``, multiplied by a blocked scan."""

from __future__ import annotations

import copy
import numbers

import numpy as np

from .._checks import as_array, check_positive_int
from ..backends import backend_of
from ..matrix import Reversed
from ..oness import OneSS
from ._base import Mask
from .toeplitz import toeplitz_dense

#: Block length of the scan: powers of gamma up to this length fill each block's matrix.
BLOCK = 64


def _powers(be, gamma, exponents: np.ndarray):
    """``gamma[..., None] ** exponents``, shape ``(..., len(exponents))``."""
    return be.power(gamma[..., None], be.cast(be.asarray(exponents, like=gamma), gamma.dtype))


def decay_scan(be, gamma, x, stride: int = 1, initial=None):
    """``y_t = g y_{t-1} + x_t`` along axis -2 of ``x`` ``(..., T, m)`` with ``g = gamma^stride``.

    ``y_{-1}`` is ``initial`` (``(..., 1, m)``), or zero when None. Blocks of
    ``BLOCK`` steps: inside a block ``y = D x`` with the block's Toeplitz
    matrix ``D[r, s] = g^(r - s)`` (one matmul for all blocks); block ``c``
    then adds ``g^(r + 1)`` times the state entering it, ``carry_c``. The
    carries are a scan of the same kind with ``g^BLOCK`` over ``y_{-1}`` and the
    ends of blocks ``0 .. nc-2`` (each block's own, before its carry is added),
    solved by recursion. Every power is ``gamma ** (stride * k)`` from
    ``gamma`` itself, so it is accurate to rounding. ``gamma`` has shape
    ``(...)`` (batch).
    """
    T, m = x.shape[-2], x.shape[-1]
    q = min(BLOCK, T)
    nc = -(-T // q)
    block = toeplitz_dense(be, _powers(be, gamma, stride * np.arange(q)))    # (..., q, q)
    xb = be.pad(x, axis=-2, after=nc * q - T)
    xb = xb.reshape(xb.shape[:-2] + (nc, q, m))
    y = block[..., None, :, :] @ xb                                          # (..., nc, q, m)
    if nc > 1 or initial is not None:
        batch = tuple(y.shape[:-3])
        if initial is None:
            carry = be.zeros(batch + (1, m), like=y)
        else:
            if tuple(initial.shape[:-2]) != batch:
                batch = tuple(be.broadcast_shapes(batch, tuple(initial.shape[:-2])))
            carry = be.broadcast_to(initial, batch + (1, m))
        if nc > 1:
            ends = be.broadcast_to(y[..., :-1, q - 1, :], batch + (nc - 1, m))
            carry = decay_scan(be, gamma, be.concat([carry, ends], axis=-2), stride * q)
        ramp = _powers(be, gamma, stride * np.arange(1, q + 1))              # (..., q)
        y = y + ramp[..., None, :, None] * carry[..., :, None, :]
    y = y.reshape(y.shape[:-3] + (nc * q, m))
    return y[..., :T, :]


class Decay(Mask):
    """The decay mask ``L[..., i, j] = gamma^(i - j)`` for ``i >= j``, else 0 (RetNet).

    Parameters
    ----------
    gamma : float or array, shape ``(...)``
        The decay: a scalar, or one per head (shape ``(H,)``, giving a mask of
        shape ``(H, T, T)``). Any real value: ``0`` gives the identity; ``|gamma|
        > 1`` grows, and the scan forms powers up to about ``gamma^(2T)``, which
        must stay finite. A Python number takes the precision of ``x``; a torch
        tensor with ``requires_grad`` is learnable.
    T : int
        The sequence length.

    Notes
    -----
    ``L @ x`` is the constant-decay scan ``y_t = gamma y_{t-1} + x_t``, run in
    blocks of :data:`BLOCK` (see :func:`decay_scan`): O(T BLOCK m) work for ``x``
    of shape ``(T, m)``, nearly all of it one batched matmul, and no Python loop
    over T. Powers come from ``gamma ** k`` directly, never from repeated
    products, so float32 keeps its precision at any T. The mask is 1-SS, so
    ``matmul`` can continue from a state (``initial_state``,
    ``return_final_state``; :attr:`carries_state`), and :meth:`leading` gives
    its principal blocks: together they run a long sequence segment by segment.

    Examples
    --------
    >>> import numpy as np, semisep as ss
    >>> ss.masks.Decay(0.5, 3).to_dense()
    array([[1.  , 0.  , 0.  ],
           [0.5 , 1.  , 0.  ],
           [0.25, 0.5 , 1.  ]])
    """

    _algorithm = "scan"

    def __init__(self, gamma, T: int):
        self._weak = isinstance(gamma, numbers.Real) and not isinstance(gamma, bool)
        self.gamma = as_array("gamma", gamma)
        self._T = check_positive_int("T", T)
        self._arrays = (self.gamma,)

    @property
    def shape(self):
        return tuple(self.gamma.shape) + (self._T, self._T)

    @property
    def dtype(self):
        return backend_of(self.gamma).result_dtype(self.gamma)

    def to_dense(self):
        be = backend_of(self.gamma)
        return toeplitz_dense(be, _powers(be, be.cast(self.gamma, self.dtype), np.arange(self._T)))

    @property
    def T(self):
        """``L^T = J L J`` (a Toeplitz matrix is persymmetric)."""
        return Reversed(self)

    def as_oness(self) -> OneSS:
        """The same matrix as a :class:`~semisep.OneSS` with every ``a_t = gamma``."""
        be = backend_of(self.gamma)
        return OneSS(be.broadcast_to(self.gamma[..., None], self.gamma.shape + (self._T,)))

    @property
    def carries_state(self) -> bool:
        return True

    def leading(self, T: int) -> "Decay":
        """The leading ``T x T`` block, which is every principal block of that size (Toeplitz)."""
        block = copy.copy(self)
        block._T = check_positive_int("T", T)
        return block

    def matmul_flops(self, m):
        return float(2 * self._T * min(BLOCK, self._T) * m)

    def _apply(self, be, x, initial_state=None):
        gamma = be.asarray(self.gamma, like=x)
        dtype = be.result_dtype(x) if self._weak else be.result_dtype(gamma, x)
        compute = be.compute_dtype(dtype)
        initial = None if initial_state is None else be.cast(initial_state, compute)
        y = decay_scan(be, be.cast(gamma, compute), be.cast(x, compute), initial=initial)
        return be.cast(y, dtype)

"""The protocol every structured matrix shares, and two plain members of it.

A structured matrix of shape ``(..., T, S)`` (batch dimensions first) has

* ``shape`` and ``dtype``;
* ``matmul(x)`` / ``M @ x`` for ``x`` of shape ``(S,)`` (a vector, as in numpy)
  or ``(..., S, P)``, giving ``(T,)`` or ``(..., T, P)``, by the matrix's own
  fast algorithm; ``x @ M`` (``__rmatmul__``) works for numpy arrays and torch
  tensors alike;
* ``to_dense()``, the ``(..., T, S)`` array;
* ``T``, the transpose, again a structured matrix.

A user's own mask needs only these to work everywhere semisep takes a matrix.
"""

from __future__ import annotations

from ._checks import as_array, check_min_ndim, is_torch, shape_str
from .backends import backend_of


class StructuredMatrix:
    """Base class of semisep's matrices (see the module docstring for the protocol)."""

    __array_ufunc__ = None      # numpy defers ``array @ M`` to ``M.__rmatmul__``
    __array_priority__ = 1000

    @property
    def shape(self) -> tuple:
        raise NotImplementedError

    @property
    def dtype(self):
        raise NotImplementedError

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def batch_shape(self) -> tuple:
        return tuple(self.shape[:-2])

    def matmul(self, x, **options):
        raise NotImplementedError

    def to_dense(self):
        raise NotImplementedError

    @property
    def T(self) -> "StructuredMatrix":
        raise NotImplementedError

    def __matmul__(self, other):
        if isinstance(other, StructuredMatrix):
            return NotImplemented
        return self.matmul(other)

    def __rmatmul__(self, other):
        """``other @ self`` computed as ``(self.T @ other^T)^T``."""
        if isinstance(other, StructuredMatrix):   # no product of the two: Python's TypeError
            return NotImplemented
        other = as_array("x", other)
        if other.ndim == 1:
            return self.T.matmul(other)
        return self.T.matmul(other.swapaxes(-1, -2)).swapaxes(-1, -2)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={shape_str(self.shape)}, dtype={self.dtype})"


class Dense(StructuredMatrix):
    """A plain array ``W`` of shape ``(..., T, S)`` seen as a structured matrix.

    ``matmul`` is the ordinary product, O(T S P), in the promoted dtype of ``W``
    and ``x`` (numpy's rules, or the torch backend's result dtype: a float32
    ``W`` times a float64 ``x`` is float64).
    """

    def __init__(self, W):
        W = as_array("W", W)
        check_min_ndim("W", W, 2, "(..., T, S)")
        self.W = W

    @property
    def shape(self):
        return tuple(self.W.shape)

    @property
    def dtype(self):
        return self.W.dtype

    def matmul(self, x):
        x = as_array("x", x)
        if not (is_torch(self.W) or is_torch(x)):
            return self.W @ x
        be = backend_of(self.W, x)   # torch's matmul does not promote: the backend's rule does
        W = be.asarray(self.W, like=x)
        x = be.asarray(x, like=W)
        dtype = be.result_dtype(W, x)
        return be.cast(W, dtype) @ be.cast(x, dtype)

    def to_dense(self):
        return self.W

    @property
    def T(self):
        return Dense(self.W.swapaxes(-1, -2))


class Reversed(StructuredMatrix):
    """``J M J``: the matrix ``M`` with the order of its rows and its columns reversed.

    The transpose of a causal (lower-triangular) semiseparable matrix is the
    reversal of another causal one; this wrapper runs that one's algorithm on
    the reversed input, so ``M.T @ x`` costs what ``M @ x`` costs.
    """

    def __init__(self, inner: StructuredMatrix):
        self.inner = inner

    @property
    def shape(self):
        return self.inner.shape

    @property
    def dtype(self):
        return self.inner.dtype

    def matmul(self, x, **options):
        x = as_array("x", x)
        be = backend_of(x)
        axis = -1 if x.ndim == 1 else -2
        out = self.inner.matmul(be.flip(x, axis), **options)
        if isinstance(out, tuple):     # (y, final_state) from return_final_state=True
            return (be.flip(out[0], axis),) + tuple(out[1:])
        return be.flip(out, axis)

    def to_dense(self, **options):
        dense = self.inner.to_dense(**options)
        be = backend_of(dense)
        return be.flip(be.flip(dense, -1), -2)

    @property
    def T(self):
        t = self.inner.T
        return t.inner if isinstance(t, Reversed) else Reversed(t)

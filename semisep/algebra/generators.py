"""The common ground of the algebra: generators read once, results built back as SSS.

Every operation reads its operands through a :class:`Workspace`: one backend
(chosen as everywhere in semisep, see :mod:`semisep.backends`), one compute
dtype, the batch dimensions broadcast, arrays never modified in place. The
arithmetic runs in the compute dtype (float32 for half-precision inputs); the
new B and C are stored in the operands' result dtype (what ``M.dtype``
reports), so a float32 product of float32 matrices stays float32, and a new A
in the compute dtype (transitions lose most to rounding: half-precision
layers keep them in float32 too).
"""

from __future__ import annotations

import numpy as np

from .._checks import broadcast_batch, check_decay_overflow, shape_str
from ..backends import Case, select_backend
from ..backends.base import Array
from ..sss import SSS

def as_sss(M) -> SSS | None:
    """``M`` as an :class:`SSS`: itself, the SSS form of a matrix with ``as_sss()`` (OneSS), else None."""
    if isinstance(M, SSS):
        return M
    to_sss = getattr(M, "as_sss", None)
    return to_sss() if callable(to_sss) else None


def require_sss(name: str, M) -> SSS:
    """``M`` as an :class:`SSS` (see :func:`as_sss`), or a TypeError naming ``name``."""
    sss = as_sss(M)
    if sss is None:
        raise TypeError(f"{name} must be an SSS matrix (or have as_sss(), like OneSS), got "
                        f"{type(M).__name__}; for a dense array use semisep.algebra.from_dense")
    return sss


def require_finite(be, name: str, array: Array) -> None:
    """A ValueError naming ``name`` unless every entry of ``array`` is finite (SVDs need it)."""
    if not np.isfinite(be.to_numpy(array)).all():
        raise ValueError(f"{name} must be finite (the rank sweeps take SVDs), got NaN or inf")


def raw_A(M: SSS) -> Array:
    """The transitions as given: log-decays for a matrix made by ``from_log``, else values."""
    return M.A if M.log_a is None else M.log_a


def check_same_length(name: str, M: SSS, other: SSS):
    if other.seq_len != M.seq_len:
        raise ValueError(f"{name} must have T={M.seq_len} like the left operand, got shape "
                         f"{shape_str(other.shape)}")


class Workspace:
    """One backend, dtype and batch shape for an operation on SSS matrices.

    Parameters
    ----------
    op : str
        The operation's name, for :class:`~semisep.backends.Case` and error messages.
    matrices : list of SSS (may be empty)
    arrays : list of arrays, optional
        Other inputs (right-hand sides, scalings); they take part in the choice of
        backend and dtype.
    batches : dict of name -> batch shape, optional
        Extra leading shapes to broadcast with the matrices' (for error messages).
    """

    def __init__(self, op: str, matrices, arrays=(), batches=None):
        given = [a for M in matrices for a in (raw_A(M), M.B, M.C)] + [a for a in arrays if a is not None]
        M0 = matrices[0] if matrices else None
        case = Case(op, structure="full" if M0 is None else M0.structure, algorithm="recurrent",
                    log_form=M0 is not None and M0.log_a is not None)
        self.be = be = select_backend(given, case, None)
        self.like = next((a for a in given if be.owns(a)), None)
        outputs = [be.asarray(a, like=self.like) for M in matrices for a in (M.B, M.C)]
        outputs += [be.asarray(a, like=self.like) for a in arrays if a is not None]
        self.out_dtype = be.result_dtype(*outputs)
        self.dtype = be.compute_dtype(self.out_dtype)
        named = {f"M{i + 1}" if len(matrices) > 1 else "M": M.batch_shape
                 for i, M in enumerate(matrices)}
        named.update(batches or {})
        self.batch = broadcast_batch(named)

    def array(self, x) -> Array:
        """``x`` on this backend, in the compute dtype."""
        return self.be.cast(self.be.asarray(x, like=self.like), self.dtype)

    def result(self, x) -> Array:
        """``x`` in the result dtype, for storing as B or C of an output SSS."""
        return self.be.cast(x, self.out_dtype)

    def batched(self, x, core: tuple) -> Array:
        """``x`` (compute dtype) broadcast to ``batch + core``."""
        return self.be.broadcast_to(self.array(x), self.batch + tuple(core))

    def eye(self, n: int) -> Array:
        """The ``(n, n)`` identity in the compute dtype."""
        be = self.be
        one = be.ones((n, n), like=self.array(0.0))
        on_diagonal = be.tri(n, n, 0, like=one) & ~be.tri(n, n, -1, like=one)
        return be.where(on_diagonal, one, 0 * one)

    def BC(self, M: SSS):
        """``(B, C)``, each ``batch + (T, N)``, compute dtype."""
        core = (M.seq_len, M.state_size)
        return self.batched(M.B, core), self.batched(M.C, core)

    def decays(self, M: SSS) -> Array:
        """Scalar or diagonal A as ``batch + (T, N)`` in its own form (log-decays or values)."""
        A = self.array(raw_A(M))
        if M.structure == "scalar":
            A = A[..., None]
        return self.be.broadcast_to(A, self.batch + (M.seq_len, M.state_size))

    def values(self, M: SSS) -> Array:
        """A's values (``exp(log_a)`` for a log form, checked against overflow first)."""
        if M.log_a is not None:
            check_decay_overflow("log_a", M.log_a, self.dtype,
                                 axis=-1 if M.structure == "scalar" else -2)
        return self.array(M.A)

    def full_A(self, M: SSS) -> Array:
        """A as values of shape ``batch + (T, N, N)`` whatever its structure."""
        T, N = M.seq_len, M.state_size
        A = self.values(M)
        if M.structure == "scalar":
            A = A[..., None, None] * self.eye(N)
        elif M.structure == "diagonal":
            A = A[..., None] * self.eye(N)
        return self.be.broadcast_to(A, self.batch + (T, N, N))


def block_diagonal(be, X: Array, Y: Array) -> Array:
    """``[[X, 0], [0, Y]]`` over the last two axes (same leading shape)."""
    lead = X.shape[:-2]
    top = be.concat([X, be.zeros(lead + (X.shape[-2], Y.shape[-1]), like=X)], axis=-1)
    bottom = be.concat([be.zeros(lead + (Y.shape[-2], X.shape[-1]), like=X), Y], axis=-1)
    return be.concat([top, bottom], axis=-2)


def stack_steps(ws: Workspace, As, Bs, Cs) -> SSS:
    """The full-A SSS whose step ``k`` has ``A_k`` ``(..., w_k, w_{k-1})``, ``B_k``, ``C_k`` ``(..., w_k)``.

    The widths ``w_k`` may differ from step to step; every step is padded with
    zeros to ``N = max_k w_k`` (zero rows and columns change no entry of the matrix).
    """
    be = ws.be
    N = max(b.shape[-1] for b in Bs)
    A = be.stack([be.pad(be.pad(a, axis=-2, after=N - a.shape[-2]), axis=-1, after=N - a.shape[-1])
                  for a in As], axis=-3)
    B = be.stack([be.pad(b, axis=-1, after=N - b.shape[-1]) for b in Bs], axis=-2)
    C = be.stack([be.pad(c, axis=-1, after=N - c.shape[-1]) for c in Cs], axis=-2)
    return SSS(A, ws.result(B), ws.result(C), structure="full")

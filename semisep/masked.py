"""``masked(L, Q, K)``: the structured matrix ``L o (Q K^T)`` of masked attention.

Its product with ``V`` is :func:`semisep.sma` (the linear algorithm by
default), its dense form the quadratic one. With a 1-SS mask it is an SSS
matrix with scalar A (the state space duality)::

    masked(OneSS(a), C, B) == SSS(a, B, C)      # (Q, K, V) = (C, B, x)

and :meth:`Masked.to_sss` returns that form. With an SSS mask
``L = SSS(A, b, c)`` of state size ``N_L`` it is an SSS matrix of state size
``N_L N`` (:func:`kron_sss`), since
``L[t, s] q_t^T k_s = (c_t (x) q_t)^T (A_t (x) I) ... (A_{s+1} (x) I) (b_s (x) k_s)``.
"""

from __future__ import annotations

from ._checks import as_columns
from .backends import backend_of
from .masks._base import is_complex_dtype
from .matrix import StructuredMatrix
from .oness import OneSS
from .sma import check_operands, sma, sma_scores
from .sss import SSS


class Masked(StructuredMatrix):
    """The ``(..., T, S)`` matrix ``W = L o Q K^T``, ``W[t, s] = L[t, s] sum_n Q[t, n] K[s, n]``.

    Build it with :func:`masked`; the arguments are as there.
    """

    def __init__(self, L, Q, K, *, allow_complex: bool = False):
        self.L, self.Q, self.K, _ = check_operands(L, Q, K, allow_complex=allow_complex)
        self.allow_complex = allow_complex

    @property
    def shape(self):
        be = backend_of(self.Q, self.K)
        batch = be.broadcast_shapes(tuple(self.L.shape[:-2]), tuple(self.Q.shape[:-2]),
                                    tuple(self.K.shape[:-2]))
        return tuple(batch) + (self.Q.shape[-2], self.K.shape[-2])

    @property
    def dtype(self):
        be = backend_of(self.Q, self.K)
        real = be.result_dtype(self.Q, self.K)
        return be.complex_dtype(real) if is_complex_dtype(self.L.dtype) else real

    def matmul(self, x, *, algorithm: str = "linear", backend: str | None = None):
        """``W @ x`` by :func:`semisep.sma` (``algorithm="linear"`` by default).

        Parameters
        ----------
        x : array, shape ``(S,)`` or ``(..., S, P)``
        algorithm : {"linear", "quadratic", "auto"}
        backend : str, optional
        """
        S = self.shape[-1]
        x2, vector = as_columns("x", x, S, of=f"a matrix of S={S} columns",
                                allow_complex=self.allow_complex)
        y = sma(self.Q, self.K, x2, self.L, algorithm=algorithm,
                allow_complex=self.allow_complex, backend=backend)
        return y[..., 0] if vector else y

    def to_dense(self, *, backend: str | None = None):
        """``L o Q K^T`` formed densely (the quadratic algorithm's matrix)."""
        return sma_scores(self.L, self.Q, self.K, allow_complex=self.allow_complex,
                          backend=backend)

    @property
    def T(self):
        """``W^T = L^T o K Q^T``."""
        return Masked(self.L.T, self.K, self.Q, allow_complex=self.allow_complex)

    def to_sss(self) -> SSS:
        """This matrix as an SSS: ``SSS(a, K, Q)`` when ``L`` is 1-SS (the duality).

        ``L`` may be a :class:`~semisep.OneSS` or a mask with ``as_oness()``
        (:class:`~semisep.masks.Decay`); a OneSS built by ``from_log`` gives
        ``SSS.from_log``. An :class:`~semisep.SSS` mask of state size ``N_L``
        gives :func:`kron_sss`'s form of state size ``N_L N``. The SSS form
        multiplies by the recurrent or chunked algorithms and carries a state,
        e.g. for decoding.
        """
        L = self.L.as_oness() if hasattr(self.L, "as_oness") else self.L
        if isinstance(L, SSS):
            return kron_sss(L, self.Q, self.K)
        if not isinstance(L, OneSS):
            raise TypeError(f"L must be 1-SS (a OneSS or a mask with as_oness()) or an SSS to "
                            f"give an SSS form, got {type(self.L).__name__}")
        if L.log_a is not None:
            return SSS.from_log(L.log_a, self.K, self.Q, structure="scalar")
        return SSS(L.a, self.K, self.Q, structure="scalar")


def kron_sss(L: SSS, Q, K) -> SSS:
    """``L o Q K^T`` for an SSS mask ``L = SSS(A, b, c)``, as an SSS of state size ``N_L N``.

    Parameters
    ----------
    L : SSS, shape ``(..., T, T)``, state size ``N_L``
    Q, K : array, shape ``(..., T, N)``
        Leading dimensions broadcast with L's.

    Returns
    -------
    SSS
        ``C'_t = c_t (x) q_t``, ``B'_s = b_s (x) k_s`` (index ``l N + n``) and
        ``A'_t = A_t (x) I_N`` in A's structure: a scalar stays scalar, a diagonal
        repeats each entry N times, a full A becomes ``kron(A_t, I_N)``; log-decays
        stay log-decays.

    Notes
    -----
    Its state ``(..., N_L N, P)`` is ``N_L`` states of the 1-SS case side by side.
    Forming it costs O(T N_L N) (full A: O(T (N_L N)^2) memory), and a product
    with it O(T N_L N P) by the recurrence (full A: O(T (N_L N)^2 P)).
    """
    be = backend_of(Q, K, L.B, L.C, L.A if L.log_a is None else L.log_a)
    like = next(v for v in (Q, K, L.B, L.C) if be.owns(v))
    A, b, c, Q, K = (be.asarray(v, like=like) for v in
                     (L.A if L.log_a is None else L.log_a, L.B, L.C, Q, K))
    N_L, N = L.state_size, Q.shape[-1]

    def kron(u, v):   # (..., T, N_L) (x) (..., T, N) -> (..., T, N_L N)
        uv = u[..., :, :, None] * v[..., :, None, :]
        return uv.reshape(uv.shape[:-2] + (N_L * N,))

    if L.structure == "diagonal":
        A = be.broadcast_to(A[..., None], A.shape + (N,)).reshape(A.shape[:-1] + (N_L * N,))
    elif L.structure == "full":
        one = be.ones((N, N), like=A)
        eye = be.where(be.tri(N, N, 0, like=one) & ~be.tri(N, N, -1, like=one), one, 0 * one)
        A = A[..., :, :, None, :, None] * eye[:, None, :]
        A = A.reshape(A.shape[:-4] + (N_L * N, N_L * N))
    make = SSS if L.log_a is None else SSS.from_log
    return make(A, kron(b, K), kron(c, Q), structure=L.structure)


def masked(L, Q, K, *, allow_complex: bool = False) -> Masked:
    """The structured matrix ``L o (Q K^T)`` of masked attention.

    Parameters
    ----------
    L : structured matrix or array, shape ``(..., T, S)``
        The mask (see :func:`semisep.sma`).
    Q : array, shape ``(..., T, N)``
    K : array, shape ``(..., S, N)``
    allow_complex : bool
        Accept a complex mask (the matrix is then complex); else
        :class:`~semisep.masks.ComplexMaskError`.

    Returns
    -------
    Masked
        ``masked(L, Q, K) @ V == sma(Q, K, V, L, algorithm="linear")``.

    Examples
    --------
    >>> import numpy as np, semisep as ss
    >>> rng = np.random.default_rng(0)
    >>> log_a, B, C = -rng.uniform(size=6), rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    >>> W = ss.masked(ss.OneSS.from_log(log_a), C, B)
    >>> np.allclose(W.to_dense(), ss.SSS.from_log(log_a, B, C).to_dense())
    True
    """
    return Masked(L, Q, K, allow_complex=allow_complex)

"""Sequentially semiseparable (SSS) matrices.

Definition (0-indexed, causal, lower-triangular), over T steps with state size N::

    M[..., j, i] = C_j^T A_j A_{j-1} ... A_{i+1} B_i    for j >= i, else 0.

The diagonal is ``C_j^T B_j``; ``A_0`` enters only through an initial state.
The same matrix is the recurrence ``h_t = A_t h_{t-1} + B_t x_t^T``,
``y_t = C_t^T h_t`` with ``h_{-1}`` the initial state (zero by default), so
``y = M x + (C_t^T A_t ... A_0 h_{-1})_t`` and the final state is ``h_{T-1}``.
States are ``(..., N, P)`` here (``(..., N)`` for a vector x).

Structure of A: scalar ``(..., T)`` (``A_t = a_t I``), diagonal ``(..., T, N)``,
full ``(..., T, N, N)``. B and C are ``(..., T, N)``. Leading dimensions
broadcast (numpy rules), e.g. B and C shared across heads.
"""

from __future__ import annotations

from ._checks import (as_array, as_columns, broadcast_batch, check_decay_overflow, check_min_ndim,
                      check_positive_int, check_trailing, dtype_names, shape_str)
from .algorithms import (DEFAULT_CHUNK_SIZE, Generators, SSSProblem, dense_matrix,
                         resolve_algorithm)
from .algorithms.decays import Decays
from .backends import Case, backend_of, select_backend
from .matrix import Reversed, StructuredMatrix

STRUCTURES = ("scalar", "diagonal", "full")


def _infer_structure(A, T: int, N: int, batch_rank: int) -> str:
    """Read A's structure from its trailing shape (module docstring)."""
    fits = {"scalar": A.ndim >= 1 and tuple(A.shape[-1:]) == (T,),
            "diagonal": A.ndim >= 2 and tuple(A.shape[-2:]) == (T, N),
            "full": A.ndim >= 3 and tuple(A.shape[-3:]) == (T, N, N)}
    core = {"scalar": 1, "diagonal": 2, "full": 3}
    found = [s for s, ok in fits.items() if ok]
    if len(found) > 1:   # prefer the reading whose batch rank matches B's
        same_rank = [s for s in found if A.ndim - core[s] == batch_rank]
        found = same_rank if len(same_rank) == 1 else found
    if len(found) == 1:
        return found[0]
    want = f"(..., {T}) scalar, (..., {T}, {N}) diagonal or (..., {T}, {N}, {N}) full"
    if not found:
        raise ValueError(f"A must have shape {want} (T={T}, N={N} from B), "
                         f"got shape {shape_str(A.shape)}")
    raise ValueError(f"A of shape {shape_str(A.shape)} reads as {' or '.join(found)}; "
                     f"pass structure= to choose")


class SSS(StructuredMatrix):
    """An SSS matrix ``M[j, i] = C_j^T A_j ... A_{i+1} B_i`` (see the module docstring).

    Parameters
    ----------
    A : array, shape ``(..., T)``, ``(..., T, N)`` or ``(..., T, N, N)``
        The transitions, as real values (any sign, zeros allowed).
    B, C : array, shape ``(..., T, N)``
    structure : {"scalar", "diagonal", "full"}, optional
        A's structure; read from its shape when omitted (an error if ambiguous).

    Notes
    -----
    Nothing is copied and the arrays are never modified. numpy arrays run on
    the numpy backend, torch tensors on torch (or triton for CUDA tensors);
    see :mod:`semisep.backends`.

    Examples
    --------
    >>> import numpy as np, semisep as ss
    >>> rng = np.random.default_rng(0)
    >>> T, N, P = 6, 3, 2
    >>> M = ss.SSS(rng.uniform(-1, 1, T), rng.normal(size=(T, N)), rng.normal(size=(T, N)))
    >>> x = rng.normal(size=(T, P))
    >>> np.allclose(M @ x, M.to_dense() @ x)
    True
    """

    def __init__(self, A, B, C, *, structure: str | None = None):
        self._init(A, B, C, structure, log=False)

    @classmethod
    def from_log(cls, log_a, B, C, *, structure: str | None = None) -> "SSS":
        """An SSS matrix with scalar or diagonal ``A = exp(log_a)``.

        Parameters
        ----------
        log_a : array, shape ``(..., T)`` or ``(..., T, N)``
            Log-decays; ``-inf`` is a reset (``a = 0``). SSD uses ``dt * A_h <= 0``.
            Positive ones are allowed; products whose consecutive sums overflow ``exp``
            in the compute dtype raise a ValueError (arrays in host memory).
        B, C : array, shape ``(..., T, N)``
        """
        self = cls.__new__(cls)
        self._init(log_a, B, C, structure, log=True)
        return self

    def _init(self, A, B, C, structure, log):
        a_name = "log_a" if log else "A"
        A, B, C = as_array(a_name, A), as_array("B", B), as_array("C", C)
        check_min_ndim("B", B, 2, "(..., T, N)")
        T, N = B.shape[-2], B.shape[-1]
        if T < 1:   # N = 0 is allowed: the zero matrix, e.g. what compress() makes of M - M
            raise ValueError(f"B must have shape (..., T, N) with T >= 1, "
                             f"got shape {shape_str(B.shape)}")
        check_trailing("C", C, (T, N), f"(..., {T}, {N}) like B")
        if structure is None:
            structure = _infer_structure(A, T, N, B.ndim - 2)
        elif structure not in STRUCTURES:
            raise ValueError(f"structure must be one of {STRUCTURES}, got {structure!r}")
        core = {"scalar": (T,), "diagonal": (T, N), "full": (T, N, N)}[structure]
        check_trailing(a_name, A, core, "(..., " + ", ".join(map(str, core)) + ")")
        if log and structure == "full":
            raise ValueError("from_log takes scalar or diagonal log-decays; for full A use SSS(A, B, C)")
        self._batch = broadcast_batch({a_name: A.shape[:A.ndim - len(core)],
                                       "B": B.shape[:-2], "C": C.shape[:-2]})
        self._A, self._B, self._C = A, B, C
        self._log = log
        self.structure = structure

    # -- the protocol -------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        T = self._B.shape[-2]
        return self._batch + (T, T)

    @property
    def dtype(self):
        return backend_of(self._A, self._B, self._C).result_dtype(self._B, self._C)

    @property
    def state_size(self) -> int:
        """N, the size of the state."""
        return self._B.shape[-1]

    @property
    def seq_len(self) -> int:
        """The number of steps (the side of the matrix)."""
        return self._B.shape[-2]

    @property
    def B(self):
        return self._B

    @property
    def C(self):
        return self._C

    @property
    def A(self):
        """The transitions' values (``exp(log_a)`` for a matrix made by :meth:`from_log`)."""
        return backend_of(self._A).exp(self._A) if self._log else self._A

    @property
    def log_a(self):
        """The log-decays given to :meth:`from_log`, or None for a matrix made from values."""
        return self._A if self._log else None

    def _generators(self, be, dtype, like) -> Generators:
        """The generators cast to ``dtype``, log-decays checked against overflow first."""
        A, B, C = (be.cast(be.asarray(v, like=like), dtype) for v in (self._A, self._B, self._C))
        if self.structure == "full":
            return Generators("full", None, A, B, C)
        data = A if self.structure == "scalar" else A.swapaxes(-1, -2)
        if self._log:
            check_decay_overflow("log_a", data, dtype)
        return Generators(self.structure, Decays(data, self._log), None, B, C)

    def matmul(self, x, *, algorithm: str = "auto", chunk_size: int | None = None,
               initial_state=None, return_final_state: bool = False, backend: str | None = None):
        """``y = M x`` (plus the initial state's contribution), by the chosen algorithm.

        Parameters
        ----------
        x : array, shape ``(T,)`` or ``(..., T, P)``
            Only a 1-D ``x`` is a vector (numpy's matmul convention).
        algorithm : {"auto", "recurrent", "quadratic", "chunked"}
            See :func:`semisep.algorithms.resolve_algorithm` for ``"auto"``.
        chunk_size : int, optional
            Q for ``"chunked"`` (default 64); T need not be a multiple of it.
        initial_state : array, shape ``(..., N, P)`` (``(..., N)`` for a vector x), optional
            ``h_{-1}``; zero when omitted.
        return_final_state : bool
            Also return ``h_{T-1}``, of shape ``(..., N, P)`` (``(..., N)``), in the
            compute dtype (float32 for half-precision inputs).
        backend : str, optional
            Force a backend (see :mod:`semisep.backends`).

        Returns
        -------
        y : array, shape like ``x`` broadcast with the batch of M
        final_state : array, only with ``return_final_state=True``

        Notes
        -----
        Costs: recurrent O(T N P) (full A: O(T N^2 P)); quadratic O(T^2 (N+P));
        chunked O(T Q (N + P) + T N P). fp32 results are within 1e-5 relative
        of float64 at any T for log-decays <= 0.
        """
        T, N = self.seq_len, self.state_size
        x2, vector = as_columns("x", x, T, of=f"a matrix of T={T}")
        if initial_state is not None:
            initial_state = as_array("initial_state", initial_state)
            if vector:
                check_trailing("initial_state", initial_state, (N,), f"(..., {N})")
                initial_state = initial_state[..., None]
            else:
                check_trailing("initial_state", initial_state, (N, x2.shape[-1]),
                               f"(..., {N}, {x2.shape[-1]})")
        batches = {"M": self._batch, "x": x2.shape[:-2]}
        if initial_state is not None:
            batches["initial_state"] = initial_state.shape[:-2]
        broadcast_batch(batches)

        be, like, x2, algorithm, chunk_size = self._matmul_plan(x2, initial_state, algorithm,
                                                                chunk_size, backend)
        out_dtype = be.result_dtype(be.asarray(self._B, like=like), be.asarray(self._C, like=like), x2)
        dtype = be.compute_dtype(out_dtype)
        gen = self._generators(be, dtype, like)
        init = None if initial_state is None else be.cast(be.asarray(initial_state, like=x2), dtype)
        problem = SSSProblem(gen, be.cast(x2, dtype), init, algorithm, chunk_size)
        y, h = be.sss_matmul(problem)
        y = be.cast(y, out_dtype)
        if vector:
            y, h = y[..., 0], h[..., 0]
        return (y, h) if return_final_state else y

    def _matmul_plan(self, x2, initial_state, algorithm: str, chunk_size, backend):
        """``(backend, like, x2 on it, algorithm, chunk_size)`` for :meth:`matmul`.

        ``x2`` is ``(..., T, P)``, already checked. Raises the named error for a bad
        ``chunk_size`` or ``algorithm``, or a ``backend`` that cannot run the product
        or take ``x2``.
        """
        chunk_size = DEFAULT_CHUNK_SIZE if chunk_size is None else check_positive_int(
            "chunk_size", chunk_size)
        algorithm = resolve_algorithm(algorithm, self.structure, self.seq_len, chunk_size)
        case = Case("sss_matmul", self.structure, algorithm, self._log,
                    dtypes=dtype_names(self._B, self._C, x2),
                    sizes=(("N", self.state_size), ("P", x2.shape[-1])))
        be = select_backend([self._A, self._B, self._C, x2, initial_state], case, backend)
        like = next((v for v in (self._B, x2, self._C, self._A) if be.owns(v)), None)
        return be, like, be.asarray(x2, like=like), algorithm, chunk_size

    def to_dense(self, *, backend: str | None = None):
        """The dense ``(..., T, T)`` matrix, formed by the quadratic algorithm."""
        case = Case("to_dense", self.structure, "quadratic", self._log)
        be = select_backend([self._A, self._B, self._C], case, backend)
        like = next((v for v in (self._B, self._C, self._A) if be.owns(v)), None)
        out_dtype = be.result_dtype(be.asarray(self._B, like=like), be.asarray(self._C, like=like))
        M = dense_matrix(be, self._generators(be, be.compute_dtype(out_dtype), like))
        return be.cast(be.broadcast_to(M, self.shape), out_dtype)

    @property
    def T(self) -> StructuredMatrix:
        """The transpose: upper-triangular (anti-causal), as the reversal of a causal SSS.

        ``M^T = J M' J`` with ``M' = SSS(A', flip(C), flip(B))`` and
        ``A'_t = A_{T-t}^T`` for ``t >= 1`` (``A'_0``, unused by the matrix, is the
        identity), so its product runs the scan backwards at the cost of a forward one.
        """
        be = backend_of(self._A, self._B, self._C)
        axis = {"scalar": -1, "diagonal": -2, "full": -3}[self.structure]
        A = self._A
        if self.structure == "full":
            A = A.swapaxes(-1, -2)
        rest = be.flip(A[(Ellipsis, slice(1, None)) + (slice(None),) * (-1 - axis)], axis)
        lead_shape = list(A.shape)
        lead_shape[axis] = 1
        lead = be.full(tuple(lead_shape), 0.0 if self._log else 1.0, like=A)
        if self.structure == "full":           # the identity, not a matrix of ones
            N = A.shape[-1]
            eye = be.tri(N, N, 0, like=A) & ~be.tri(N, N, -1, like=A)
            lead = be.where(eye, lead, be.full((), 0.0, like=A))
        A_new = be.concat([lead, rest], axis=axis)
        B_new, C_new = be.flip(self._C, -2), be.flip(self._B, -2)
        make = SSS.from_log if self._log else SSS
        return Reversed(make(A_new, B_new, C_new, structure=self.structure))

    # -- the algebra (semisep.algebra holds the bodies) ---------------------------
    def __add__(self, other):
        from .algebra import add
        return add(self, other)

    def __radd__(self, other):
        from .algebra.generators import as_sss
        other = as_sss(other)
        return NotImplemented if other is None else other.__add__(self)

    def __sub__(self, other):
        from .algebra import add
        return add(self, other, sign=-1.0)

    def __rsub__(self, other):
        from .algebra.generators import as_sss
        other = as_sss(other)
        return NotImplemented if other is None else other.__sub__(self)

    def __mul__(self, alpha):
        """``M * alpha`` for a real scalar (see :func:`semisep.algebra.scale`)."""
        if isinstance(alpha, StructuredMatrix):
            return NotImplemented
        from .algebra import scale
        return scale(self, alpha)

    __rmul__ = __mul__

    def __neg__(self):
        return self * -1.0

    def __matmul__(self, other):
        """``M @ x`` for an array (:meth:`matmul`); ``M1 @ M2`` for SSS-like matrices, an SSS."""
        if isinstance(other, StructuredMatrix):
            from .algebra import multiply
            return multiply(self, other)
        return self.matmul(other)

    def __rmatmul__(self, other):
        if isinstance(other, StructuredMatrix):
            from .algebra.generators import as_sss
            other = as_sss(other)
            return NotImplemented if other is None else other.__matmul__(self)
        return super().__rmatmul__(other)

    def __getitem__(self, key) -> "SSS":
        """The principal block ``M[i:j, i:j]`` as an SSS (see :func:`semisep.algebra.principal_block`)."""
        from .algebra import principal_block
        return principal_block(self, key)

    def diagonal(self):
        """The diagonal ``C_t^T B_t``, shape ``(..., T)``."""
        from .algebra import diagonal
        return diagonal(self)

    def solve(self, y):
        """``x`` with ``M x = y`` by forward substitution (see :func:`semisep.algebra.solve`)."""
        from .algebra import solve
        return solve(self, y)

    def inverse(self) -> "SSS":
        """``M^{-1}`` as an SSS of state size N + 1 (see :func:`semisep.algebra.inverse`)."""
        from .algebra import inverse
        return inverse(self)

    def rank(self, *, rtol=None, atol=None):
        """The semiseparable rank from the generators (see :func:`semisep.algebra.rank`)."""
        from .algebra import rank
        return rank(self, rtol=rtol, atol=atol)

    def compress(self, *, rtol=None, atol=None) -> "SSS":
        """An SSS form of minimal state size (see :func:`semisep.algebra.compress`)."""
        from .algebra import compress
        return compress(self, rtol=rtol, atol=atol)

    def blocks(self, chunk_size: int | None = None):
        """The chunked block decomposition (see :class:`semisep.algebra.SSSBlocks`)."""
        from .algebra import SSSBlocks
        return SSSBlocks(self, chunk_size)

    @classmethod
    def from_dense(cls, dense, *, rtol=None, atol=None) -> "SSS":
        """An SSS form (full A) of minimal state size of a lower-triangular matrix.

        See :func:`semisep.algebra.from_dense`.
        """
        from .algebra import from_dense
        return from_dense(dense, rtol=rtol, atol=atol)

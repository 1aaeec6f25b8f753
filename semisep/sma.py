"""Structured masked attention (SMA): ``Y = (L o Q K^T) V`` for any structured mask ``L``.

In index form ``Y[t, p] = sum_s L[t, s] (sum_n Q[t, n] K[s, n]) V[s, p]``, the
4-way contraction ``(TN, SN, SP, TS -> TP)``. Two orders of evaluation:

* **quadratic**: form ``W = L o Q K^T`` (``T x S``), then ``Y = W V``:
  O(T S (N + P)) work, O(T S) memory; uses only ``L.to_dense()``.
* **linear**: ``Z = V (x) K`` (``S x P x N``), ``H = L @ Z`` by the mask's own
  fast product along ``S`` (``P N`` columns), ``Y[t, p] = sum_n Q[t, n] H[t, p, n]``:
  O((S + T) P N) work plus the mask's product on ``P N`` columns. The columns
  of V are taken in groups so that ``Z`` and ``H`` hold about
  :data:`LINEAR_BLOCK` entries at a time: extra memory O(max(T, S) N g) for
  groups of ``g`` columns, not O((S + T) P N). Semiseparable masks run in
  segments of :data:`LINEAR_SEGMENT` steps carrying their state, extra memory
  O(LINEAR_SEGMENT N g).

``algorithm="auto"`` compares the two estimates (:func:`resolve_sma_algorithm`).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from ._checks import as_array, broadcast_batch, check_min_ndim, is_torch, shape_str
from .algorithms import DEFAULT_CHUNK_SIZE
from .backends import Case, select_backend, use_backend
from .masks._base import ComplexMaskError, Mask, is_complex_dtype
from .matrix import Dense, Reversed, StructuredMatrix
from .oness import OneSS
from .sss import SSS

ALGORITHMS = ("auto", "linear", "quadratic")

#: Entries of ``Z = V (x) K`` the linear algorithm forms per pass (4 MiB in float32).
LINEAR_BLOCK = 2**20

#: Steps per segment when the linear algorithm runs a semiseparable mask segment by segment.
LINEAR_SEGMENT = 1024


def as_mask(L):
    """``L`` if it has the mask protocol, ``Dense(L)`` for a real array, else a TypeError.

    numpy arrays and torch tensors are always arrays here: a tensor happens to
    carry ``shape``, ``dtype``, ``matmul`` and ``to_dense``, but its ``.T``
    reverses every axis, not the last two.
    """
    if isinstance(L, StructuredMatrix):
        return L
    if not (is_torch(L) or isinstance(L, np.ndarray)) and all(
            hasattr(L, name) for name in ("shape", "dtype", "matmul", "to_dense")):
        return L
    if is_torch(L) or hasattr(L, "__array__"):
        L = as_array("L", L)
        check_min_ndim("L", L, 2, "(..., T, S)")
        return Dense(L)
    raise TypeError(f"L must be a structured matrix (shape, dtype, matmul, to_dense) or an "
                    f"array of shape (..., T, S), got {type(L).__name__}")


def check_operands(L, Q, K, V=None, *, allow_complex: bool = False):
    """Validate the operands of SMA; returns ``(L, Q, K, V)`` with ``L`` as a mask.

    Q is ``(..., T, N)``, K ``(..., S, N)``, V ``(..., S, P)``, L ``(..., T, S)``;
    leading dimensions broadcast. A complex L needs ``allow_complex``.
    """
    L = as_mask(L)
    Q, K = as_array("Q", Q), as_array("K", K)
    check_min_ndim("Q", Q, 2, "(..., T, N)")
    T, N = Q.shape[-2:]
    check_min_ndim("K", K, 2, f"(..., S, {N})")
    if K.shape[-1] != N:
        raise ValueError(f"K must have shape (..., S, {N}) (N={N} from Q), "
                         f"got shape {shape_str(K.shape)}")
    S = K.shape[-2]
    if len(L.shape) < 2 or tuple(L.shape[-2:]) != (T, S):
        raise ValueError(f"L must have shape (..., {T}, {S}) (T={T} from Q, S={S} from K), "
                         f"got shape {shape_str(L.shape)}")
    batches = {"L": tuple(L.shape[:-2]), "Q": Q.shape[:-2], "K": K.shape[:-2]}
    if V is not None:
        V = as_array("V", V)
        check_min_ndim("V", V, 2, f"(..., {S}, P)")
        if V.shape[-2] != S:
            raise ValueError(f"V must have shape (..., {S}, P) (S={S} from K), "
                             f"got shape {shape_str(V.shape)}")
        batches["V"] = V.shape[:-2]
    broadcast_batch(batches)
    if is_complex_dtype(L.dtype) and not allow_complex:
        raise ComplexMaskError(f"L is complex (dtype {L.dtype}), so the result would be complex; "
                               "pass allow_complex=True to get a complex result")
    return L, Q, K, V


def mask_matmul_flops(L, m: int) -> float:
    """Estimated work of ``L @ x`` for ``x`` of shape ``(S, m)``, per batch entry.

    ``L.matmul_flops(m)`` when the mask defines it; semisep's own 1-SS and SSS
    matrices by their chunked algorithm; anything else as a dense product.
    """
    while isinstance(L, Reversed):
        L = L.inner
    if hasattr(L, "matmul_flops"):
        return float(L.matmul_flops(m))
    T, S = L.shape[-2:]
    if isinstance(L, OneSS):
        L = L.as_sss()
    if isinstance(L, SSS):
        N = L.state_size
        if L.structure == "full":
            return float(2 * T * N * N * m)
        q = min(DEFAULT_CHUNK_SIZE, T)
        return float(2 * T * (q * (N + m) + N * m))
    return float(2 * T * S * m)


def resolve_sma_algorithm(algorithm: str, L, T: int, S: int, N: int, P: int) -> str:
    """The algorithm ``"auto"`` stands for, or ``algorithm`` itself once checked.

    The rule compares work estimates per batch entry:

    * linear: ``2 S P N`` (``Z``) + ``mask_matmul_flops(L, P N)`` + ``2 T P N`` (``Y``);
    * quadratic: ``2 T S (N + P) + T S`` (``Q K^T``, the mask, ``W V``).

    ``"linear"`` when its estimate is lower, else ``"quadratic"``. A mask
    without ``matmul_flops`` counts as dense (``2 T S m``), so it always runs
    quadratic.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {list(ALGORITHMS)}, got {algorithm!r}")
    if algorithm != "auto":
        return algorithm
    linear = 2 * S * P * N + mask_matmul_flops(L, P * N) + 2 * T * P * N
    quadratic = 2 * T * S * (N + P) + T * S
    return "linear" if linear < quadratic else "quadratic"


def _in_dtype(be, x, dtype):
    """``x`` cast to ``dtype``, or to its complex counterpart when ``x`` is complex."""
    return be.cast(x, be.complex_dtype(dtype) if be.is_complex(x) else dtype)


def value_group(batch: int, T: int, S: int, N: int, P: int) -> int:
    """How many columns of V the linear algorithm takes per pass.

    ``g`` columns hold ``Z`` and ``H`` of ``batch * max(T, S) * g * N`` entries;
    ``g`` is the largest that keeps that near :data:`LINEAR_BLOCK` (at least 1).
    """
    return max(1, min(P, LINEAR_BLOCK // max(1, batch * max(T, S) * N)))


def _semiseparable(L):
    """``L`` as a mask whose products continue from a state, or None.

    A :class:`OneSS` as its :class:`SSS`; an :class:`SSS`; a mask that
    :attr:`~semisep.masks.Mask.carries_state` (a square ``Causal`` with
    offset 0, ``Decay``). Each has principal blocks of its own kind.
    """
    if isinstance(L, OneSS):
        return L.as_sss()
    if isinstance(L, SSS) or (isinstance(L, Mask) and L.carries_state):
        return L
    return None


def _segment(M, start: int, stop: int):
    """The principal block ``M[start:stop, start:stop]`` of :func:`_semiseparable`'s ``M``.

    An SSS block with scalar or diagonal A comes with its chunk factors formed
    (:meth:`SSS.blocks`), once for all the value groups of the segment.
    """
    if not isinstance(M, SSS):
        return M.leading(stop - start)
    block = M[..., start:stop, start:stop]
    return block if block.structure == "full" else block.blocks(DEFAULT_CHUNK_SIZE)


def _pass(be, L, Q, K, part, *, carry: bool = False, initial_state=None):
    """One pass of the linear algorithm over the columns ``part`` of V ``(..., S, g)``.

    ``Z = part (x) K``, ``H = L @ Z``, ``Y = contract(Q, H)``; returns ``Y``
    ``(..., T, g)`` and, with ``carry``, the final state of ``L``'s product
    started from ``initial_state`` (None: zero), else None.
    """
    g, N = part.shape[-1], K.shape[-1]
    Z = part[..., :, :, None] * K[..., :, None, :]                  # (..., S, g, N)
    Z = Z.reshape(Z.shape[:-2] + (g * N,))
    if carry:
        H, state = L.matmul(Z, initial_state=initial_state, return_final_state=True)
    else:
        H, state = L.matmul(Z), None
    H = _in_dtype(be, be.asarray(H, like=Q), Q.dtype)
    H = H.reshape(H.shape[:-1] + (g, N))
    return be.einsum("...tn,...tpn->...tp", be.cast(Q, H.dtype), H), state


def linear(be, L, Q, K, V):
    """``Y`` by the linear algorithm (module docstring); arrays already in the compute dtype.

    The columns of V are independent, so they are taken in groups of
    :func:`value_group`: ``Z`` and ``H`` then stay near :data:`LINEAR_BLOCK`
    entries, in cache, instead of ``T P N``. A semiseparable mask (``Causal``,
    ``Decay``, ``OneSS``, ``SSS``) runs in segments of :data:`LINEAR_SEGMENT`
    steps, each value group carrying its state (``N_L x g N``, ``N_L`` the
    mask's state size) from one segment to the next: the groups are then as
    wide at any T as at ``T = LINEAR_SEGMENT``, every segment does the same
    work, and the time grows linearly in T. Other masks take every group over
    the whole sequence (narrower groups as T grows).
    """
    T, (S, P), N = Q.shape[-2], V.shape[-2:], K.shape[-1]
    if P == 0:          # no value columns to take in groups: the empty product of the scores
        return quadratic(be, L, Q, K, V)
    batch = math.prod(be.broadcast_shapes(tuple(L.shape[:-2]), tuple(Q.shape[:-2]),
                                          tuple(K.shape[:-2]), tuple(V.shape[:-2])))
    M = _semiseparable(L)
    if M is None:
        g = value_group(batch, T, S, N, P)
        outs = [_pass(be, L, Q, K, V[..., start:start + g])[0] for start in range(0, P, g)]
        return outs[0] if len(outs) == 1 else be.concat(outs, axis=-1)
    length = min(T, LINEAR_SEGMENT)
    g = value_group(batch, length, length, N, P)
    groups = range(0, P, g)
    states = [None] * len(groups)
    rows = []
    for t0 in range(0, T, length):
        t1 = min(t0 + length, T)
        block = _segment(M, t0, t1)
        cols = []
        for i, p0 in enumerate(groups):
            y, states[i] = _pass(be, block, Q[..., t0:t1, :], K[..., t0:t1, :],
                                 V[..., t0:t1, p0:p0 + g], carry=True, initial_state=states[i])
            cols.append(y)
        rows.append(cols[0] if len(cols) == 1 else be.concat(cols, axis=-1))
    return rows[0] if len(rows) == 1 else be.concat(rows, axis=-2)


def scores(be, L, Q, K):
    """``W = L o Q K^T`` of shape ``(..., T, S)``, by ``L.to_dense()``."""
    dense = _in_dtype(be, be.asarray(L.to_dense(), like=Q), Q.dtype)
    return be.cast(Q @ K.swapaxes(-1, -2), dense.dtype) * dense


def quadratic(be, L, Q, K, V):
    """``Y = (L o Q K^T) V``; arrays already in the compute dtype."""
    W = scores(be, L, Q, K)
    return W @ be.cast(V, W.dtype)


def _prepare(arrays, op: str, algorithm: str, backend: str | None):
    """The backend, the arrays in its compute dtype, and the output dtype."""
    be = select_backend(arrays, Case(op, algorithm=algorithm, log_form=False), backend)
    like = next((a for a in arrays if be.owns(a)), None)
    arrays = [be.asarray(a, like=like) for a in arrays]
    out = be.result_dtype(*arrays)
    compute = be.compute_dtype(out)
    return be, [be.cast(a, compute) for a in arrays], out


def _forced(backend: str | None):
    """``use_backend(backend)`` around the mask's own work, when a backend is forced."""
    return contextlib.nullcontext() if backend is None else use_backend(backend)


def _finish(be, y, out):
    return be.cast(y, be.complex_dtype(out) if be.is_complex(y) else out)


def sma(Q, K, V, L, *, algorithm: str = "auto", allow_complex: bool = False,
        backend: str | None = None):
    """Structured masked attention ``Y = (L o Q K^T) V``.

    Parameters
    ----------
    Q : array, shape ``(..., T, N)``
        Queries (C in SSM terms).
    K : array, shape ``(..., S, N)``
        Keys (B in SSM terms).
    V : array, shape ``(..., S, P)``
        Values (x in SSM terms).
    L : structured matrix or array, shape ``(..., T, S)``
        The mask: a :mod:`semisep.masks` mask, a :class:`~semisep.OneSS`,
        :class:`~semisep.SSS`, :class:`~semisep.Dense`, a plain array, or any
        object with the protocol (``shape``, ``dtype``, ``matmul`` along S,
        ``to_dense``). Leading dimensions of all four broadcast.
    algorithm : {"auto", "linear", "quadratic"}
        See the module docstring for the two and :func:`resolve_sma_algorithm`
        for ``"auto"``.
    allow_complex : bool
        Accept a complex mask and return a complex result; without it a complex
        mask raises :class:`ComplexMaskError`.
    backend : str, optional
        Force a backend; it then also runs the mask's product.

    Returns
    -------
    Y : array, shape ``(..., T, P)``
        Of the promoted dtype of Q, K and V (complex of that precision for a
        complex mask).

    Notes
    -----
    Costs: linear O((S + T) P N) plus the mask's product on ``P N`` columns
    (a blocked cumsum, scan or FFT), extra memory about :data:`LINEAR_BLOCK`
    entries (more when one column of V needs more); quadratic O(T S (N + P)),
    memory O(T S). Half-precision inputs are computed in float32. Gradients
    flow (torch) to Q, K, V and to the mask's own tensors (Toeplitz ``alpha``,
    Decay ``gamma``, OneSS ``a``).

    Examples
    --------
    >>> import numpy as np, semisep as ss
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    >>> L = ss.masks.Decay(0.9, 5)
    >>> Y = ss.sma(Q, K, V, L, algorithm="linear")
    >>> np.allclose(Y, (L.to_dense() * (Q @ K.T)) @ V)
    True
    """
    L, Q, K, V = check_operands(L, Q, K, V, allow_complex=allow_complex)
    T, N = Q.shape[-2:]
    S, P = V.shape[-2:]
    algorithm = resolve_sma_algorithm(algorithm, L, T, S, N, P)
    be, (Q, K, V), out = _prepare([Q, K, V], "sma", algorithm, backend)
    run = linear if algorithm == "linear" else quadratic
    with _forced(backend):
        return _finish(be, run(be, L, Q, K, V), out)


def sma_scores(L, Q, K, *, allow_complex: bool = False, backend: str | None = None):
    """The dense attention matrix ``L o Q K^T``, shape ``(..., T, S)`` (arguments as :func:`sma`)."""
    L, Q, K, _ = check_operands(L, Q, K, allow_complex=allow_complex)
    be, (Q, K), out = _prepare([Q, K], "sma_scores", "quadratic", backend)
    with _forced(backend):
        return _finish(be, scores(be, L, Q, K), out)

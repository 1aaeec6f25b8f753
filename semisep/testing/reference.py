"""float64 references built from the definitions, for tests (slow on purpose: plain loops).

``dense_reference`` evaluates ``M[j, i] = C_j^T A_j ... A_{i+1} B_i`` as the
chain of products it is; ``recurrence_reference`` runs
``h_t = A_t h_{t-1} + B_t x_t^T``, ``y_t = C_t^T h_t``. Neither shares code
with the algorithms they check.
"""

from __future__ import annotations

import itertools

import numpy as np


def to_numpy64(x) -> np.ndarray:
    """A float64 (or complex128) numpy copy of an array or tensor."""
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        return (x.cdouble() if x.is_complex() else x.double()).numpy()
    x = np.asarray(x)
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def _structure(A, T, N, structure):
    if structure is not None:
        return structure
    if A.shape[-3:] == (T, N, N) and A.ndim >= 3:
        return "full"
    if A.shape[-2:] == (T, N) and A.ndim >= 2:
        return "diagonal"
    return "scalar"


def _step(A_k, structure):
    """The map ``v -> A_k v`` for one step."""
    if structure == "full":
        return lambda v: A_k @ v
    return lambda v: A_k * v


def _generators(A, B, C, structure, log):
    A, B, C = to_numpy64(A), to_numpy64(B), to_numpy64(C)
    if log:
        A = np.exp(A)
    T, N = B.shape[-2:]
    structure = _structure(A, T, N, structure)
    core = {"scalar": 1, "diagonal": 2, "full": 3}[structure]
    batch = np.broadcast_shapes(A.shape[:A.ndim - core], B.shape[:-2], C.shape[:-2])
    A = np.broadcast_to(A, batch + A.shape[A.ndim - core:])
    B = np.broadcast_to(B, batch + (T, N))
    C = np.broadcast_to(C, batch + (T, N))
    return A, B, C, structure, batch


def dense_reference(A, B=None, C=None, *, structure: str | None = None,
                    log: bool = False) -> np.ndarray:
    """The dense ``(..., T, T)`` float64 SSS matrix, entry by entry from the definition.

    Parameters
    ----------
    A : array ``(..., T)``, ``(..., T, N)`` or ``(..., T, N, N)``, or an SSS / OneSS matrix
        Values (or log-decays with ``log``). Given a matrix object alone,
        its own generators and structure are used: ``dense_reference(M)``.
    B, C : array ``(..., T, N)``
    structure : str, optional
        Read from the shape when omitted (scalar unless the trailing shape fits);
        pass it when the shape is ambiguous, e.g. scalar A of shape ``(N, T)`` with ``T == N``.
    """
    if B is None and C is None and (hasattr(A, "structure") or hasattr(A, "as_sss")):
        M = A.as_sss() if hasattr(A, "as_sss") else A
        A, B, C, structure, log = M.A, M.B, M.C, M.structure, False
    elif B is None or C is None:
        raise TypeError("dense_reference takes (A, B, C) arrays or one SSS/OneSS matrix")
    A, B, C, structure, batch = _generators(A, B, C, structure, log)
    T = B.shape[-2]
    M = np.zeros(batch + (T, T))
    for idx in itertools.product(*[range(s) for s in batch]):
        for i in range(T):
            v = B[idx + (i,)].copy()
            for j in range(i, T):
                if j > i:
                    v = _step(A[idx + (j,)], structure)(v)
                M[idx + (j, i)] = C[idx + (j,)] @ v
    return M


def recurrence_reference(A, B, C, x, *, initial_state=None, structure: str | None = None,
                         log: bool = False):
    """``(y, h_{T-1})`` of the recurrence, float64, for ``x`` ``(..., T, P)``.

    ``initial_state`` is ``(..., N, P)``; zero when omitted. The batch dimensions
    of the generators, ``x`` and ``initial_state`` broadcast.
    """
    A, B, C, structure, batch = _generators(A, B, C, structure, log)
    x = to_numpy64(x)
    T, N, P = B.shape[-2], B.shape[-1], x.shape[-1]
    h0 = None if initial_state is None else to_numpy64(initial_state)
    batch = np.broadcast_shapes(batch, x.shape[:-2], () if h0 is None else h0.shape[:-2])
    h0 = np.zeros(batch + (N, P)) if h0 is None else np.broadcast_to(h0, batch + (N, P))
    A = np.broadcast_to(A, batch + A.shape[len(A.shape) - {"scalar": 1, "diagonal": 2,
                                                           "full": 3}[structure]:])
    B, C = np.broadcast_to(B, batch + (T, N)), np.broadcast_to(C, batch + (T, N))
    x = np.broadcast_to(x, batch + (T, P))
    y = np.zeros(batch + (T, P))
    hT = np.zeros(batch + (N, P))
    for idx in itertools.product(*[range(s) for s in batch]):
        h = h0[idx].copy()
        for t in range(T):
            a = A[idx + (t,)]
            h = a @ h if structure == "full" else (a[:, None] if structure == "diagonal" else a) * h
            h = h + np.outer(B[idx + (t,)], x[idx + (t,)])
            y[idx + (t,)] = C[idx + (t,)] @ h
        hT[idx] = h
    return y, hT

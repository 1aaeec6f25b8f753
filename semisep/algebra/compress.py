"""Compression of an SSS matrix to its minimal state size, from its generators.

Write ``H_k = M[k:, :k+1] = O_k R_k`` for the Hankel block at cut ``k``, with the
observability matrix ``O_k`` (rows ``C_j^T A_j ... A_{k+1}``, ``j >= k``) and the
reachability matrix ``R_k`` (columns ``A_k ... A_{i+1} B_i``, ``i <= k``). The
minimal state size at cut ``k`` is ``rank H_k``; the minimal N of an SSS form is
the largest of these, the *semiseparable rank*. Two sweeps of small dense
factorizations find it without forming M:

1. forward (:func:`orthonormalize_reachability`): an LQ factorization of
   ``[A_k X_{k-1}, B_k]`` per step changes the state basis so that every
   ``R_k`` has orthonormal rows (the matrix is unchanged);
2. backward (:func:`truncate_observability`): then ``H_k`` and
   ``G_k = [C_k^T; Y_{k+1} A_{k+1}]`` (``(1 + N) x N``) have the same singular
   values; an SVD of ``G_k`` gives them, and keeping those above the tolerance
   (:mod:`semisep.algebra.tolerance`) makes every ``O_k`` orthonormal and the
   state at cut ``k`` of size ``rank H_k``.

Cost: O(T N^3) work (two or three sweeps of ``(N + 1) x N`` QR/SVD), O(T N^2)
memory, nothing of size T x T. Each dropped singular value ``s`` perturbs M by
at most ``s`` in the 2-norm per cut (the classical square-root balanced
truncation bound), so a tolerance of ``T eps`` changes nothing beyond rounding.
The result has full A, zero-padded where a cut needs fewer than N states, and
``A_0 = 0`` (the compressed form describes the matrix, not an initial state).
"""

from __future__ import annotations

import numpy as np

from ..sss import SSS
from .generators import Workspace, require_finite, require_sss, stack_steps
from .tolerance import check_tolerances, threshold


def orthonormalize_reachability(be, A, B, C):
    """Sweep 1 over full ``A`` ``(..., T, N, N)``, ``B``, ``C`` ``(..., T, N)``.

    Returns lists over steps of ``A_k`` ``(..., w_k, w_{k-1})``, ``B_k`` and
    ``C_k`` ``(..., w_k)``, ``w_k = min(N, k + 1)``, of the same matrix with
    orthonormal reachability matrices.
    """
    As, Bs, Cs = [], [], []
    X = None                                        # the old state = X @ the new state
    for k in range(B.shape[-2]):
        Bk = B[..., k, :, None]
        Z = Bk if X is None else be.concat([A[..., k, :, :] @ X, Bk], axis=-1)
        Q, R = be.qr(Z.swapaxes(-1, -2))            # Z = R^T Q^T
        As.append(Q.swapaxes(-1, -2)[..., :, :-1])
        Bs.append(Q[..., -1, :])
        Cs.append((R @ C[..., k, :, None])[..., 0])
        X = R.swapaxes(-1, -2)
    return As, Bs, Cs


def truncate_observability(be, As, Bs, Cs, tol=None):
    """Sweep 2 over the output of sweep 1, keeping singular values above ``tol``.

    Parameters
    ----------
    tol : numpy array of the batch shape, optional
        Absolute tolerance per matrix; None keeps every direction (to read the
        singular values).

    Returns
    -------
    As, Bs, Cs : lists over steps, the state at cut ``k`` of size ``r_k``
    singular_values : list over cuts of numpy arrays ``(..., s_k)``, descending,
        the singular values of ``H_k``.
    """
    T = len(Bs)
    outA, outB, outC, svs = [None] * T, [None] * T, [None] * T, [None] * T
    Y = None                                        # the new state = Y @ the old state
    for k in reversed(range(T)):
        G = Cs[k][..., None, :]
        if Y is not None:
            G = be.concat([G, Y @ As[k + 1]], axis=-2)
        U, S, Vh = be.svd(G)
        svs[k] = be.to_numpy(S)
        r = S.shape[-1]
        if tol is not None:
            keep = svs[k] > np.asarray(tol)[..., None]
            r = int(keep.sum(axis=-1).max(initial=0))
            mask = be.cast(be.asarray(keep[..., :r], like=S), S.dtype)
            S = S[..., :r] * mask
            U = U[..., :, :r] * mask[..., None, :]
        U, Y = U[..., :, :r], S[..., :r, None] * Vh[..., :r, :]
        outC[k] = U[..., 0, :]
        if k + 1 < T:
            outA[k + 1] = U[..., 1:, :]
        outB[k] = (Y @ Bs[k][..., None])[..., 0]
    outA[0] = Y @ As[0]
    return outA, outB, outC, svs


def reachable_form(M: SSS):
    """``(workspace, steps)``: M's generators after sweep 1 (the same matrix)."""
    ws = Workspace("sss_compress", [M])
    A, (B, C) = ws.full_A(M), ws.BC(M)
    for name, array in (("M.A", A), ("M.B", B), ("M.C", C)):
        require_finite(ws.be, name, array)
    return ws, orthonormalize_reachability(ws.be, A, B, C)


def hankel_singular_values(ws: Workspace, steps) -> list:
    """The singular values of every Hankel block ``H_k``: numpy arrays ``(..., s_k)`` over ``k``."""
    return truncate_observability(ws.be, *steps)[3]


def s_max(singular_values) -> np.ndarray:
    """The largest singular value over the cuts, per matrix of the batch."""
    return np.max(np.stack([np.max(s, axis=-1, initial=0.0) for s in singular_values], axis=-1),
                  axis=-1)


def compress(M: SSS, *, rtol=None, atol=None) -> SSS:
    """An SSS form of M with the minimal state size within the tolerance (full A).

    Parameters
    ----------
    M : SSS
    rtol, atol : float, optional
        See :mod:`semisep.algebra.tolerance`: singular values of the Hankel blocks
        above ``max(atol, rtol * s_max)`` are kept.

    Returns
    -------
    SSS with full A and ``N = max_k rank M[k:, :k+1]`` (the largest over a batch).

    Notes
    -----
    O(T N^3) work, O(T N^2) memory, no T x T matrix (module docstring): two sweeps
    when ``atol`` alone is given, three otherwise (one to find ``s_max``).
    """
    M = require_sss("M", M)
    check_tolerances(rtol, atol)
    ws, steps = reachable_form(M)
    if rtol is None and atol is not None and atol > 0:
        tol = np.full(ws.batch, float(atol))
    else:
        tol = threshold(s_max(hankel_singular_values(ws, steps)), rtol, atol, M.seq_len, ws.dtype)
    return compress_steps(ws, steps, tol)


def compress_steps(ws: Workspace, steps, tol) -> SSS:
    """Truncate the output of sweep 1 at ``tol`` (per matrix) and build the SSS."""
    As, Bs, Cs, _ = truncate_observability(ws.be, *steps, tol=tol)
    return stack_steps(ws, As, Bs, Cs)

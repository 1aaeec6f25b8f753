"""An SSS form of a dense lower-triangular matrix, of minimal state size.

One forward sweep over the cuts builds a realization whose reachability
matrices have orthonormal rows. Suppose ``H_{k-1} = M[k-1:, :k] = G_{k-1} V_{k-1}^T``
with ``V_{k-1}`` orthonormal (``k x w``). Then

    H_k = [G_{k-1}[1:], M[k:, k]] diag(V_{k-1}^T, 1) = Z_k diag(V_{k-1}^T, 1),

so ``H_k`` and ``Z_k`` (``(T - k) x (w + 1)``) have the same singular values.
An SVD ``Z_k = U S W^T`` truncated to the values above the tolerance gives the
step: ``[A_k, B_k] = W^T`` (orthonormal rows), ``G_k = U S`` and ``C_k^T = G_k[0]``.
A truncation at one cut perturbs the blocks of the later cuts by up to what
it dropped, so the sweep drops only what lies below the rounding level: the
default tolerance ``T eps s_max`` (or the requested one, if smaller), with
``s_max`` the running maximum (:mod:`semisep.algebra.tolerance`). The singular
values it records are then those of every ``H_k`` to rounding, and the ranks
are counted afterwards at the requested tolerance; :func:`from_dense` truncates
at that tolerance in the backward sweep of :mod:`semisep.algebra.compress`.

Cost: O(T^2 r^2) for the forward sweep (SVDs of ``(T - k) x (r + 1)``, r the
semiseparable rank at the rounding level, which is T/2 at most) and O(T r^3)
for the backward one; O(T^2) memory (M itself).
"""

from __future__ import annotations

import numpy as np

from .._checks import as_array, check_min_ndim, shape_str
from ..sss import SSS
from .compress import truncate_observability
from .generators import Workspace, require_finite, stack_steps
from .tolerance import check_tolerances, counts, threshold


def dense_workspace(dense):
    """``(workspace, M in the compute dtype)`` for a dense ``(..., T, T)`` argument named ``dense``."""
    dense = as_array("dense", dense)
    check_min_ndim("dense", dense, 2, "(..., T, T)")
    if dense.shape[-1] != dense.shape[-2] or dense.shape[-1] == 0:
        raise ValueError(f"dense must be a square matrix of shape (..., T, T) with T >= 1, "
                         f"got shape {shape_str(dense.shape)}")
    ws = Workspace("sss_from_dense", [], arrays=[dense], batches={"dense": dense.shape[:-2]})
    D = ws.array(dense)
    require_finite(ws.be, "the lower triangle of dense", ws.be.where(
        ws.be.tri(D.shape[-1], D.shape[-1], 0, like=D), D, ws.be.full((), 0.0, like=D)))
    return ws, D


def hankel_sweep(be, D, rtol, atol, dtype):
    """The forward sweep (module docstring) over ``D`` ``(..., T, T)``.

    Returns
    -------
    steps : (As, Bs, Cs), lists over steps, ``A_k`` ``(..., w_k, w_{k-1})``
    singular_values : list over cuts of numpy arrays ``(..., s_k)``, those of ``H_k``
    tol : numpy array of the batch shape, the final absolute tolerance
    """
    T = D.shape[-1]
    G = be.zeros(D.shape[:-2] + (T + 1, 0), like=D)      # rows k-1.. of H_{k-1} V_{k-1}
    running = np.zeros(D.shape[:-2])
    As, Bs, Cs, svs = [], [], [], []
    for k in range(T):
        Z = be.concat([G[..., 1:, :], D[..., k:, k:k + 1]], axis=-1)
        U, S, Wh = be.svd(Z)
        svs.append(be.to_numpy(S))
        running = np.maximum(running, svs[-1][..., 0])
        rounding = np.minimum(threshold(running, rtol, atol, T, dtype),
                              threshold(running, None, None, T, dtype))
        keep = svs[-1] > rounding[..., None]
        r = int(keep.sum(axis=-1).max(initial=0))
        mask = be.cast(be.asarray(keep[..., :r], like=S), S.dtype)
        G = U[..., :, :r] * (S[..., None, :r] * mask[..., None, :])
        step = Wh[..., :r, :] * mask[..., :, None]
        As.append(step[..., :, :-1])
        Bs.append(step[..., :, -1])
        Cs.append(G[..., 0, :])
    return (As, Bs, Cs), svs, threshold(running, rtol, atol, T, dtype)


def dense_ranks(dense, rtol, atol):
    """``(ranks per cut (..., T), dense in compute dtype, workspace, steps, tol)`` of a dense matrix."""
    check_tolerances(rtol, atol)
    ws, D = dense_workspace(dense)
    steps, svs, tol = hankel_sweep(ws.be, D, rtol, atol, ws.dtype)
    return np.stack([counts(s, tol) for s in svs], axis=-1), D, ws, steps, tol


def strict_upper_max(be, D) -> np.ndarray:
    """``max |D[i, j]|`` over ``j > i`` per matrix (0 for T = 1)."""
    T = D.shape[-1]
    upper = be.where(be.tri(T, T, 0, like=D), 0 * D, be.abs(D))
    return np.max(be.to_numpy(upper), axis=(-2, -1))


def from_dense(dense, *, rtol=None, atol=None) -> SSS:
    """An SSS form (full A) of a lower-triangular matrix, of minimal state size.

    Parameters
    ----------
    dense : array, shape ``(..., T, T)``
        Lower triangular within the tolerance (an SSS matrix is causal).
    rtol, atol : float, optional
        See :mod:`semisep.algebra.tolerance`.

    Returns
    -------
    SSS with full A and ``N = semiseparable_rank(dense)`` (the largest over a batch);
    ``A_0 = 0``.

    Raises
    ------
    ValueError
        If ``dense`` is not square or has entries above the diagonal beyond the tolerance.

    Notes
    -----
    O(T^2 r^2 + T r^3) work for semiseparable rank r (module docstring).
    """
    _, D, ws, steps, tol = dense_ranks(dense, rtol, atol)
    upper = strict_upper_max(ws.be, D)
    if not np.all(upper <= tol):      # NaN above the diagonal fails too
        raise ValueError(f"dense must be lower triangular (an SSS matrix is causal): it has "
                         f"entries up to {float(np.max(upper)):.3g} above the diagonal, beyond "
                         f"the tolerance {float(np.min(tol)):.3g}")
    As, Bs, Cs, _ = truncate_observability(ws.be, *steps, tol=tol)
    return stack_steps(ws, As, Bs, Cs)

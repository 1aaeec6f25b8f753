"""Solving with an SSS matrix and inverting it, in SSS form.

A causal SSS matrix is lower triangular with diagonal ``d_t = C_t^T B_t``; it is
invertible exactly when every ``d_t != 0``.

* :func:`solve` is forward substitution run as the recurrence
  ``x_t = (y_t - C_t^T A_t h_{t-1}) / d_t``, ``h_t = A_t h_{t-1} + B_t x_t``:
  O(T N P) work for scalar and diagonal A, O(T N^2 P) for full A, O(N P) memory.
  Like any triangular substitution it is backward stable; the forward error
  grows with the conditioning of M (e.g. with small ``|d_t|``).
* :func:`inverse` writes that recurrence as an SSS matrix of state size ``N + 1``
  (full A): with ``hat A_t = A_t - B_t C_t^T A_t / d_t`` and
  ``hat B_t = B_t / d_t``, the state ``g_t = [h_{t-1}; y_t]`` evolves by
  ``A'_t = [[hat A_{t-1}, hat B_{t-1}], [0, 0]]``, ``B'_t = [0; 1]``, and
  ``x_t = C'_t^T g_t`` with ``C'_t = [-A_t^T C_t / d_t; 1 / d_t]``. O(T N^2)
  work (O(T N^3) for full A).

Why ``N + 1`` is the minimum: by the nullity theorem the Hankel block
``W[k:, :k+1]`` of ``W = M^{-1}`` has rank ``1 + rank M[k+1:, :k]``, and the
strictly lower block ``M[k+1:, :k] = O_{k+1} A_{k+1} A_k R_{k-1}`` has rank N for
generic generators (T >= 2N + 1). The strictly lower part of the inverse has
rank N like M's; the extra 1 is the diagonal, which this SSS form carries in
its state. When M's strictly lower blocks have rank below N (zero A, a
non-minimal M), ``M.inverse().compress()`` reaches the smaller minimum.
"""

from __future__ import annotations

import numpy as np

from .._checks import as_columns, shape_str
from ..sss import SSS
from .generators import Workspace, require_sss


class SingularMatrixError(np.linalg.LinAlgError):
    """An SSS matrix with a zero diagonal entry was solved with or inverted.

    A subclass of :class:`numpy.linalg.LinAlgError` (hence of ValueError).
    """


def _nonzero_diagonal(ws: Workspace, M: SSS, B, C, what: str):
    """``d_t = C_t^T B_t`` ``(..., T)``, or SingularMatrixError naming the first zero."""
    be = ws.be
    d = be.sum(B * C, axis=-1)
    zero = d == 0
    if be.any(zero):
        where = np.argwhere(be.to_numpy(zero))[0]
        at = f"t={int(where[-1])}" + (f" of batch element {tuple(int(i) for i in where[:-1])}"
                                      if len(where) > 1 else "")
        raise SingularMatrixError(
            f"{what} needs every diagonal entry M[t, t] = C_t^T B_t to be nonzero, "
            f"got M[t, t] = 0 at {at} (M of shape {shape_str(M.shape)} is singular)")
    return d


def _transition(structure: str, A, t: int, h):
    """``A_t h`` for a state ``h`` ``(..., N, P)`` and A's values in its structure."""
    if structure == "scalar":
        return A[..., t, None, None] * h
    if structure == "diagonal":
        return A[..., t, :, None] * h
    return A[..., t, :, :] @ h


def solve(M: SSS, y):
    """The solution ``x`` of ``M x = y``, by forward substitution.

    Parameters
    ----------
    M : SSS, shape ``(..., T, T)``
        Every diagonal entry ``C_t^T B_t`` must be nonzero.
    y : array, shape ``(T,)`` or ``(..., T, P)``
        Only a 1-D ``y`` is a vector (numpy's matmul convention).

    Returns
    -------
    x : array, shape like ``y`` broadcast with M's batch

    Raises
    ------
    SingularMatrixError
        If some ``C_t^T B_t == 0`` (the message names the first such ``t``).

    Notes
    -----
    O(T N P) work for scalar and diagonal A, O(T N^2 P) for full A; sequential in T.
    """
    M = require_sss("M", M)
    T = M.seq_len
    y2, vector = as_columns("y", y, T, of=f"a matrix of T={T}")
    ws = Workspace("sss_solve", [M], arrays=[y2], batches={"y": y2.shape[:-2]})
    be = ws.be
    B, C = ws.BC(M)
    d = _nonzero_diagonal(ws, M, B, C, "solve")
    A = ws.values(M)
    y2 = be.broadcast_to(ws.array(y2), ws.batch + tuple(y2.shape[-2:]))
    h = be.zeros(ws.batch + (M.state_size, y2.shape[-1]), like=y2)
    xs = []
    for t in range(T):
        Ah = _transition(M.structure, A, t, h) if t > 0 else h
        x_t = (y2[..., t, :] - (C[..., t, None, :] @ Ah)[..., 0, :]) / d[..., t, None]
        h = Ah + B[..., t, :, None] * x_t[..., None, :]
        xs.append(x_t)
    x = ws.result(be.stack(xs, axis=-2))
    return x[..., 0] if vector else x


def inverse(M: SSS) -> SSS:
    """``M^{-1}`` as an SSS matrix of state size ``N + 1`` with full A (module docstring).

    Raises
    ------
    SingularMatrixError
        If some ``C_t^T B_t == 0``.

    Notes
    -----
    O(T N^2) work for scalar and diagonal A (O(T N^3) for full A). ``A'_0`` is zero:
    the result describes the matrix, not an initial state of M's recurrence.
    """
    M = require_sss("M", M)
    ws = Workspace("sss_inverse", [M])
    be = ws.be
    B, C = ws.BC(M)
    d = _nonzero_diagonal(ws, M, B, C, "inverse")
    A = ws.full_A(M)
    CA = (C[..., None, :] @ A)[..., 0, :] / d[..., None]                   # A_t^T C_t / d_t
    A_hat = A - B[..., :, None] * CA[..., None, :]
    B_hat = B / d[..., None]
    T, N = M.seq_len, M.state_size
    step = be.concat([be.concat([A_hat, B_hat[..., None]], axis=-1),
                      be.zeros(ws.batch + (T, 1, N + 1), like=A)], axis=-2)
    A_new = be.concat([be.zeros(ws.batch + (1, N + 1, N + 1), like=A), step[..., :-1, :, :]],
                      axis=-3)
    B_new = be.concat([be.zeros(ws.batch + (T, N), like=A), be.ones(ws.batch + (T, 1), like=A)],
                      axis=-1)
    C_new = be.concat([-CA, 1 / d[..., None]], axis=-1)
    return SSS(A_new, ws.result(B_new), ws.result(C_new), structure="full")

"""The quadratic algorithm: form ``M`` (``T x T``) and multiply.

For scalar and diagonal A this is the chunked algorithm with one chunk
(``M = L o C B^T``, O(T^2 (N + P)) work). For full A the products
``A_j ... A_{i+1} B_i`` are propagated row by row, O(T^2 N^2) work.
"""

from __future__ import annotations

from dataclasses import replace

from ..backends.base import Backend
from .chunked import chunked
from .problem import Generators, SSSProblem


def dense_matrix(be: Backend, g: Generators, *, with_propagators: bool = False):
    """The dense ``(..., T, T)`` matrix of ``g``.

    With ``with_propagators`` (full A only) also return ``K`` ``(..., T, N, N)``,
    ``K_j = A_j ... A_0``, and ``R`` ``(..., T, N)``, ``R_i = A_{T-1} ... A_{i+1} B_i``.
    """
    if g.structure == "scalar":
        return (g.C @ g.B.swapaxes(-1, -2)) * g.decays.matrix(be)
    if g.structure == "diagonal":
        return be.einsum("...jn,...in,...nji->...ji", g.C, g.B, g.decays.matrix(be))
    T = g.T
    batch = be.broadcast_shapes(g.A_full.shape[:-3], g.B.shape[:-2], g.C.shape[:-2])
    B = be.broadcast_to(g.B, tuple(batch) + tuple(g.B.shape[-2:]))   # every row of one batch
    rows, Ks = [], []
    R = K = None
    for j in range(T):
        A_j, B_j = g.A_full[..., j, :, :], B[..., j, None, :]
        R = B_j if R is None else be.concat([R @ A_j.swapaxes(-1, -2), B_j], axis=-2)
        rows.append(be.pad((g.C[..., j, None, :] @ R.swapaxes(-1, -2))[..., 0, :],
                           axis=-1, after=T - j - 1))
        K = A_j if K is None else A_j @ K
        Ks.append(K)
    M = be.stack(rows, axis=-2)
    if with_propagators:
        return M, be.stack(Ks, axis=-3), R
    return M


def quadratic(be: Backend, p: SSSProblem):
    """Form the matrix and multiply; returns ``(y (..., T, P), h_{T-1} (..., N, P))``."""
    if p.gen.structure != "full":
        return chunked(be, replace(p, chunk_size=p.gen.T))
    M, K, R = dense_matrix(be, p.gen, with_propagators=True)
    y = M @ p.x
    final = R.swapaxes(-1, -2) @ p.x
    if p.initial_state is not None:
        y = y + be.einsum("...jn,...jnm,...mp->...jp", p.gen.C, K, p.initial_state)
        final = final + K[..., -1, :, :] @ p.initial_state
    return y, final

"""The recurrent algorithm: ``h_t = A_t h_{t-1} + B_t x_t^T``, ``y_t = C_t^T h_t``.

O(T N P) work for scalar and diagonal A, O(T N^2 P) for full A, O(N P) extra
memory; sequential in T.
"""

from __future__ import annotations

from ..backends.base import Backend
from .problem import SSSProblem


def recurrent(be: Backend, p: SSSProblem):
    """Run ``p`` step by step; returns ``(y (..., T, P), h_{T-1} (..., N, P))``."""
    g, x = p.gen, p.x
    h = p.initial_state
    if h is None:
        h = be.zeros(p.batch_shape(be) + (g.N, x.shape[-1]), like=x)
    a = None if g.decays is None else g.decays.values(be)
    ys = []
    for t in range(g.T):
        if g.structure == "scalar":
            h = a[..., t, None, None] * h
        elif g.structure == "diagonal":
            h = a[..., :, t, None] * h
        else:
            h = g.A_full[..., t, :, :] @ h
        h = h + g.B[..., t, :, None] * x[..., t, None, :]
        ys.append((g.C[..., t, None, :] @ h)[..., 0, :])
    return be.stack(ys, axis=-2), h

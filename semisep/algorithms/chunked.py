"""The chunked (SSD) algorithm for scalar and diagonal A.

Split T into ``nc = ceil(T / Q)`` chunks of ``Q`` steps (the last one padded
with ``a = 1``, ``B = C = x = 0``, which changes nothing). Within chunk ``c``
write ``L_c`` for its 1-SS matrix and extend the chunk by one leading
coefficient ``a = 1`` standing for "before the chunk"; the extended 1-SS
matrix ``Lx`` (``(Q+1) x (Q+1)``) holds every decay the algorithm needs:

* ``L_c = Lx[1:, 1:]``, the decays inside the chunk;
* ``from_start[j] = Lx[j+1, 0] = a_j ... a_0``, from the chunk's start to ``j``;
* ``to_end[i] = Lx[Q, i+1] = a_{Q-1} ... a_{i+1}``, from ``i`` to the chunk's end;
* ``total = Lx[Q, 0]``, across the whole chunk.

Then the four steps of the SSD algorithm:

1. diagonal blocks: ``Y_diag = (L_c o C B^T) x`` (quadratic within the chunk);
2. chunk states: ``S_c = sum_i to_end[i] B_i x_i^T``;
3. state passing: ``H_c = total_c H_{c-1} + S_c``, ``H_{-1} = h_{-1}``, a
   1-SS product of length ``nc`` over the chunks (run as a scan);
4. state to output: ``Y_off[j] = from_start[j] C_j^T H_{c-1}``.

Cost: O(T Q (N + P) + T N P) work for scalar A (``N`` times the decay work for
diagonal A), nearly all in batched matmuls; extra memory O(T Q + nc N P).
Every decay comes from :meth:`Decays.matrix`, so it is exact to rounding at any
T: no cumulative sums are subtracted.
"""

from __future__ import annotations

from ..backends.base import Backend
from .problem import SSSProblem


def chunked(be: Backend, p: SSSProblem):
    """Run ``p`` by chunks of ``p.chunk_size``; returns ``(y (..., T, P), h_{T-1} (..., N, P))``."""
    g, x = p.gen, p.x
    if g.structure not in ("scalar", "diagonal"):
        raise ValueError(f"the chunked algorithm needs scalar or diagonal A, got {g.structure} A")
    T, N, P = g.T, g.N, x.shape[-1]
    Q = min(p.chunk_size, T)
    nc = -(-T // Q)
    pad = nc * Q - T

    def chunks(arr):  # (..., T, k) -> (..., nc, Q, k)
        arr = be.pad(arr, axis=-2, after=pad)
        return arr.reshape(arr.shape[:-2] + (nc, Q, arr.shape[-1]))

    Bc, Cc, xc = chunks(g.B), chunks(g.C), chunks(x)

    def extend(d):  # (..., T) -> (..., nc, Q + 1), a leading identity per chunk
        d = be.pad(d, axis=-1, after=pad, value=g.decays.identity)
        d = d.reshape(d.shape[:-1] + (nc, Q))
        lead = be.full(d.shape[:-1] + (1,), g.decays.identity, like=d)
        return be.concat([lead, d], axis=-1)

    Lx = g.decays.map(extend).matrix(be)        # (..., [N,] nc, Q+1, Q+1)
    L, from_start, to_end, total = Lx[..., 1:, 1:], Lx[..., 1:, 0], Lx[..., -1, 1:], Lx[..., -1, 0]

    if g.structure == "scalar":
        y = ((Cc @ Bc.swapaxes(-1, -2)) * L) @ xc
        states = (Bc * to_end[..., None]).swapaxes(-1, -2) @ xc          # (..., nc, N, P)
    else:
        y = be.einsum("...cjn,...cin,...ncji->...cji", Cc, Bc, L) @ xc
        states = be.einsum("...nci,...cin,...cip->...cnp", to_end, Bc, xc)

    h = p.initial_state
    if h is None:
        h = be.zeros(p.batch_shape(be) + (N, P), like=x)
    starts = []
    for c in range(nc):
        starts.append(h)
        decay = total[..., c, None, None] if g.structure == "scalar" else total[..., :, c, None]
        h = decay * h + states[..., c, :, :]
    H = be.stack(starts, axis=-3)                                          # (..., nc, N, P)

    if g.structure == "scalar":
        y = y + (Cc * from_start[..., None]) @ H
    else:
        y = y + be.einsum("...ncj,...cjn,...cnp->...cjp", from_start, Cc, H)
    y = y.reshape(y.shape[:-3] + (nc * Q, P))
    return y[..., :T, :], h

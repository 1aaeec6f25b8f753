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
   1-SS product of length ``nc`` over the chunks, run as a scan (:func:`pass_states`);
4. state to output: ``Y_off[j] = from_start[j] C_j^T H_{c-1}``.

Cost: O(T Q (N + P) + T N P) work for scalar A (``N`` times the decay work for
diagonal A), nearly all in batched matmuls; extra memory O(T Q + nc N P).
Every decay comes from :meth:`Decays.matrix`, so it is exact to rounding at any
T: no cumulative sums are subtracted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..backends.base import Array, Backend
from .decays import Decays
from .problem import Generators, SSSProblem


@dataclass(frozen=True)
class ChunkFactors:
    """The chunked decomposition of an SSS matrix with scalar or diagonal A.

    With ``K = 1`` for scalar A and ``K = N`` for diagonal A:

    Attributes
    ----------
    seq_len : int
        T (the chunks cover ``nc * Q >= T`` padded steps).
    diag : array ``(..., nc, Q, Q)``
        The diagonal blocks ``L_c o C B^T`` (step 1).
    right : array ``(..., nc, Q, N)``
        ``to_end[i] * B_i``: chunk states ``S_c = right_c^T x_c`` (step 2).
    total : array ``(..., nc, K)``
        The decay across each chunk: state passing ``H_c = total_c H_{c-1} + S_c`` (step 3).
    left : array ``(..., nc, Q, N)``
        ``from_start[j] * C_j``: ``Y_off = left_c H_{c-1}`` (step 4).
    """

    seq_len: int
    diag: Array
    right: Array
    total: Array
    left: Array


def chunk_factors(be: Backend, g: Generators, chunk_size: int) -> ChunkFactors:
    """The factors of ``g`` over chunks of ``min(chunk_size, T)`` steps (module docstring)."""
    if g.structure not in ("scalar", "diagonal"):
        raise ValueError(f"the chunked algorithm needs scalar or diagonal A, got {g.structure} A")
    T = g.T
    Q = min(chunk_size, T)
    nc = -(-T // Q)
    pad = nc * Q - T

    def chunks(arr):  # (..., T, k) -> (..., nc, Q, k)
        arr = be.pad(arr, axis=-2, after=pad)
        return arr.reshape(arr.shape[:-2] + (nc, Q, arr.shape[-1]))

    Bc, Cc = chunks(g.B), chunks(g.C)

    def extend(d):  # (..., T) -> (..., nc, Q + 1), a leading identity per chunk
        d = be.pad(d, axis=-1, after=pad, value=g.decays.identity)
        d = d.reshape(d.shape[:-1] + (nc, Q))
        lead = be.full(d.shape[:-1] + (1,), g.decays.identity, like=d)
        return be.concat([lead, d], axis=-1)

    # Lx is 1 above its diagonal: the causal mask goes on C B^T instead (once per group).
    Lx = g.decays.map(extend).matrix(be, masked=False)   # (..., [N,] nc, Q+1, Q+1)
    L, from_start, to_end, total = Lx[..., 1:, 1:], Lx[..., 1:, 0], Lx[..., -1, 1:], Lx[..., -1, 0]
    causal, zero = be.tri(Q, Q, 0, like=Bc), be.full((), 0.0, like=Bc)

    if g.structure == "scalar":
        diag = be.where(causal, Cc @ Bc.swapaxes(-1, -2), zero) * L
        return ChunkFactors(T, diag, Bc * to_end[..., None], total[..., None],
                            Cc * from_start[..., None])
    diag = be.where(causal, be.einsum("...cjn,...cin,...ncji->...cji", Cc, Bc, L), zero)
    return ChunkFactors(T, diag, Bc * be.moveaxis(to_end, -3, -1), be.moveaxis(total, -2, -1),
                        Cc * be.moveaxis(from_start, -3, -1))


def apply_chunk_factors(be: Backend, f: ChunkFactors, x: Array, initial_state: Array | None):
    """``y = M x`` from the factors; returns ``(y (..., T, P), h_{T-1} (..., N, P))``.

    ``x`` is ``(..., T, P)``; ``initial_state`` ``(..., N, P)`` or None (zero).
    """
    nc, Q, N = f.diag.shape[-3], f.diag.shape[-1], f.right.shape[-1]
    T, P = f.seq_len, x.shape[-1]
    x = be.pad(x, axis=-2, after=nc * Q - T)
    xc = x.reshape(x.shape[:-2] + (nc, Q, P))
    y = f.diag @ xc
    states = f.right.swapaxes(-1, -2) @ xc                                 # (..., nc, N, P)

    shapes = [states.shape[:-3], f.total.shape[:-2]]
    if initial_state is not None:
        shapes.append(initial_state.shape[:-2])
    batch = tuple(be.broadcast_shapes(*[tuple(s) for s in shapes]))
    h0 = be.zeros(batch + (N, P), like=x) if initial_state is None else \
        be.broadcast_to(initial_state, batch + (N, P))
    starts, final = pass_states(be, f.total, states, h0)

    y = y + f.left @ starts
    y = y.reshape(y.shape[:-3] + (nc * Q, P))
    return y[..., :T, :], final


#: State passing runs densely (one matmul) while ``nc * (entries of one chunk state)`` stays
#: under this, else as a scan: a scan step costs about what a matmul of this size does.
DENSE_PASSING_LIMIT = 2**19


def pass_states(be: Backend, total: Array, states: Array, h0: Array):
    """Step 3: ``H_c = total_c H_{c-1} + S_c`` for every chunk, ``H_{-1} = h0``.

    ``total`` is ``(..., nc, K)`` (``K = 1`` for scalar A, ``N`` for diagonal A),
    ``states`` ``(..., nc, N, P)``, ``h0`` ``(..., N, P)``; returns the states
    entering each chunk, ``H_{-1} .. H_{nc-2}`` ``(..., nc, N, P)``, and the
    final ``H_{nc-1}``.

    This is the 1-SS product of length ``nc`` over the chunks. Large states
    run it as a scan, which reads and writes each chunk state once; many small
    ones (e.g. a 1-SS mask, ``N = 1``) as one matmul with the ``(nc + 1)^2``
    1-SS matrix of the chunk decays (exact products, :meth:`Decays.matrix`),
    which saves ``nc`` Python steps for ``O(nc^2 N P)`` work
    (:data:`DENSE_PASSING_LIMIT`).
    """
    nc, K = total.shape[-2], total.shape[-1]
    N, P = states.shape[-2], states.shape[-1]
    if nc * math.prod(states.shape[:-3]) * N * P > DENSE_PASSING_LIMIT:
        h, starts = h0, []
        for c in range(nc):
            starts.append(h)
            h = total[..., c, :, None] * h + states[..., c, :, :]
        return be.stack(starts, axis=-3), h
    width = N * P // K                          # state entries sharing one decay

    def per_decay(arr):  # (..., m, N, P) -> (..., K, m, width)
        return be.moveaxis(arr.reshape(arr.shape[:-2] + (K, width)), -2, -3)

    first = be.ones(total.shape[:-2] + (1, K), like=total)
    L = Decays(be.moveaxis(be.concat([first, total], axis=-2), -1, -2), log=False).matrix(be)
    batch = tuple(be.broadcast_shapes(tuple(states.shape[:-3]), tuple(h0.shape[:-2])))
    h0 = be.broadcast_to(h0, batch + (N, P))
    states = be.broadcast_to(states, batch + tuple(states.shape[-3:]))
    H = L @ be.concat([per_decay(h0[..., None, :, :]), per_decay(states)], axis=-2)
    H = be.moveaxis(H, -3, -2).reshape(H.shape[:-3] + (nc + 1, N, P))   # H_{-1} .. H_{nc-1}
    return H[..., :-1, :, :], H[..., -1, :, :]


#: Steps per segment: longer sequences run segment by segment, carrying the state.
SEGMENT_STEPS = 2048


def chunked(be: Backend, p: SSSProblem):
    """Run ``p`` by chunks of ``p.chunk_size``; returns ``(y (..., T, P), h_{T-1} (..., N, P))``.

    Sequences longer than :data:`SEGMENT_STEPS` run in segments of whole chunks,
    each starting from the state the previous one ended with: the temporaries
    stay O(SEGMENT_STEPS Q) whatever T, so time stays linear in T.
    """
    T = p.gen.T
    Q = min(p.chunk_size, T)
    segment = max(1, SEGMENT_STEPS // Q) * Q
    ys, h = [], p.initial_state
    for start in range(0, T, segment):
        stop = min(start + segment, T)
        y, h = apply_chunk_factors(be, chunk_factors(be, p.gen.steps(start, stop), Q),
                                   p.x[..., start:stop, :], h)
        ys.append(y)
    return (ys[0] if len(ys) == 1 else be.concat(ys, axis=-2)), h

"""A design probe, not part of the library: the SSD forward's factored loop written in Gluon
(Triton's lower-level dialect, ``triton.experimental.gluon``), so that its dots run
asynchronously (benchmarks/NOTES.md, session s19). Run by ``run_gfwd.py`` on the H200.

Scope: one program per (b, h, block of P columns of p), chunks of Q = 64, n = 64, bf16, T a
multiple of Q, the pre-pass's decay rows (``dec``, ``etot`` of
:func:`semisep.backends.triton.decays.ssd_decays_kernel`), every chunk factorable (the
benchmark's decays), D per head, no z / h0 / seq_idx. The math is
:func:`semisep.backends.triton.kernels.ssd_fwd_kernel`'s factored loop with the state carried
as ``S^T`` (n, p):

    u = x dt exp(-l)           G = lower(C B^T)
    y = exp(l) (C S^T + G u) + D x
    S^T <- exp(l_end) (S^T + B^T u)

Triton 3.6's ``tl.dot`` waits for each product before the next statement (its pipeliner makes
a dot asynchronous only where the loop uses its result solely as the next iteration's
accumulator), so the four dots of a chunk run one after another. Here they are issued
asynchronously (``warpgroup_mma(is_async=True)``) in the order ``C B^T``, ``C S^T``, then
``B^T u`` once u is in shared memory, and waited for one at a time (``warpgroup_mma_wait``):
the mask of G overlaps the last two, the state's update the last. x, B and C come by TMA into
a ring of ``STAGES`` buffers, y leaves by TMA.

``PIPE=1`` carries the ``G u`` product across the loop's back edge and finishes the chunk's y
in the next iteration, behind that one's first two dots. ptxas then serializes every wgmma
(its C7514 "non wgmma instructions reading accumulator registers ... between start and end
of the pipeline stage"), so it is slower per dot; kept to show that.

Written against the Gluon API of Triton 3.6 (the device's); Triton 3.9 renamed
``tma.async_copy_global_to_shared`` to ``tma.async_load``.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_init, warpgroup_mma_wait)


@gluon.jit
def _load_chunk(x_desc, b_desc, c_desc, bar, xs, bs, cs, row, xcol, bcol, nbytes: gl.constexpr):
    mbarrier.expect(bar, nbytes)
    tma.async_copy_global_to_shared(x_desc, [row, xcol], bar, xs)
    tma.async_copy_global_to_shared(b_desc, [row, bcol], bar, bs)
    tma.async_copy_global_to_shared(c_desc, [row, bcol], bar, cs)


@gluon.jit
def _put_y(y_desc, y_s, yacc, e_in, xs, Dv, row, col, mma: gl.constexpr, HAS_D: gl.constexpr):
    """y of one chunk from its accumulated products: rows scaled by exp(l), D x added, then a
    TMA store (after the previous one has left y_s)."""
    yv = yacc * e_in[:, None]
    if HAS_D:
        yv = yv + xs.load(mma).to(gl.float32) * Dv
    tma.store_wait(pendings=0)
    y_s.store(yv.to(y_desc.dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(y_desc, [row, col], y_s)


@gluon.jit
def gfwd_kernel(x_desc, b_desc, c_desc, y_desc, dec_ptr, etot_ptr, D_ptr, hT_ptr,
                T, H, G, NC, PT,
                Q: gl.constexpr, P: gl.constexpr, N: gl.constexpr, STAGES: gl.constexpr,
                HAS_D: gl.constexpr, PIPE: gl.constexpr = 0):
    NPB = PT // P
    pid = gl.program_id(0)
    pb = pid % NPB
    b = pid // NPB // H
    h = pid // NPB % H
    grp = h // (H // G)
    BH = gl.num_programs(0) // NPB
    bh = (b * H + h).to(gl.int64)
    TP = NC * Q

    # one warpgroup; the accumulators of (Q or n) x P products and of the Q x Q one
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                  instr_shape=[16, P, 16])
    mmaq: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                   instr_shape=[16, Q, 16])
    dotA: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    blk: gl.constexpr = gl.BlockedLayout([1, 8], [32 // (P // 8), P // 8], [4, 1], [1, 0])
    dtype: gl.constexpr = x_desc.dtype
    sl: gl.constexpr = x_desc.layout

    x_s = gl.allocate_shared_memory(dtype, [STAGES, Q, P], sl)
    b_s = gl.allocate_shared_memory(dtype, [STAGES, Q, N], b_desc.layout)
    c_s = gl.allocate_shared_memory(dtype, [STAGES, Q, N], c_desc.layout)
    u_s = gl.allocate_shared_memory(dtype, [Q, P], sl)
    S_s = gl.allocate_shared_memory(dtype, [N, P], sl)        # the state entering the chunk
    y_s = gl.allocate_shared_memory(dtype, [Q, P], y_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)

    row0 = b * T
    xcol = h * PT + pb * P
    nbytes: gl.constexpr = 2 * Q * (P + 2 * N)
    for s in gl.static_range(STAGES - 1):
        if s < NC:
            _load_chunk(x_desc, b_desc, c_desc, bars.index(s), x_s.index(s), b_s.index(s),
                        c_s.index(s), row0 + s * Q, xcol, grp * N, nbytes)

    S = gl.zeros([N, P], gl.float32, mma)
    S_s.store(S.to(dtype))
    fence_async_shared()
    zero = gl.zeros([Q, P], gl.float32, mma)
    zq = gl.zeros([Q, Q], gl.float32, mmaq)
    rows = gl.arange(0, Q, layout=gl.SliceLayout(1, mma))
    rows_b = gl.arange(0, Q, layout=gl.SliceLayout(1, blk))
    lower = (gl.arange(0, Q, layout=gl.SliceLayout(1, mmaq))[:, None]
             >= gl.arange(0, Q, layout=gl.SliceLayout(0, mmaq))[None, :])
    Dv = 0.0
    if HAS_D:
        Dv = gl.load(D_ptr + h).to(gl.float32)
    acc = warpgroup_mma_init(zero)
    e_in_prev = gl.full([Q], 1.0, gl.float32, gl.SliceLayout(1, mma))

    for c in range(NC):
        slot = c % STAGES
        t0 = c * Q
        f = (gl.load(dec_ptr + bh * TP + t0 + rows_b)                     # dt exp(-l)
             * gl.load(dec_ptr + (5 * BH + bh) * TP + t0 + rows_b))
        e_in = gl.load(dec_ptr + (3 * BH + bh) * TP + t0 + rows)            # exp(l)
        e_tot = gl.load(etot_ptr + bh * NC + c)                               # exp(l_end)
        mbarrier.wait(bars.index(slot), (c // STAGES) & 1)
        xs = x_s.index(slot)
        bs = b_s.index(slot)
        cs = c_s.index(slot)
        Gm = warpgroup_mma(cs, bs.permute((1, 0)), zq, use_acc=False, is_async=True)
        accS = warpgroup_mma(cs, S_s, zero, use_acc=False, is_async=True)
        if PIPE == 1:
            # the previous chunk's y while this chunk's first dots run
            yacc = warpgroup_mma_wait(num_outstanding=2, deps=(acc,))
            if c > 0:
                _put_y(y_desc, y_s, yacc, e_in_prev, x_s.index((c + STAGES - 1) % STAGES), Dv,
                       row0 + t0 - Q, xcol, mma, HAS_D)
        nxt = c + STAGES - 1
        if nxt < NC:
            ns = nxt % STAGES
            _load_chunk(x_desc, b_desc, c_desc, bars.index(ns), x_s.index(ns), b_s.index(ns),
                        c_s.index(ns), row0 + nxt * Q, xcol, grp * N, nbytes)
        u_s.store((xs.load(blk).to(gl.float32) * f[:, None]).to(dtype))
        fence_async_shared()
        S = warpgroup_mma(bs.permute((1, 0)), u_s, S, is_async=True)
        Gm = warpgroup_mma_wait(num_outstanding=2, deps=(Gm,))
        W = gl.convert_layout(gl.where(lower, Gm, 0.0).to(dtype), dotA)
        acc = warpgroup_mma(W, u_s, accS, is_async=True)
        S = warpgroup_mma_wait(num_outstanding=1, deps=(S,))
        S = S * e_tot
        S_s.store(S.to(dtype))
        if PIPE == 1:
            fence_async_shared()
            e_in_prev = e_in
        else:
            yacc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            fence_async_shared()
            _put_y(y_desc, y_s, yacc, e_in, xs, Dv, row0 + t0, xcol, mma, HAS_D)
    if PIPE == 1:
        yacc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        if NC > 0:
            _put_y(y_desc, y_s, yacc, e_in_prev, x_s.index((NC + STAGES - 1) % STAGES), Dv,
                   row0 + NC * Q - Q, xcol, mma, HAS_D)
    tma.store_wait(pendings=0)
    # the final state, (b, H, PT, N) fp32, from S^T (N, P)
    offs_n = gl.arange(0, N, layout=gl.SliceLayout(1, mma))
    offs_p = gl.arange(0, P, layout=gl.SliceLayout(0, mma))
    gl.store(hT_ptr + bh * PT * N + (pb * P + offs_p[None, :]) * N + offs_n[:, None], S)
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(s))

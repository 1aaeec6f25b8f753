"""A design probe, not part of the library: the backward's forward sweep (its factored loop)
in Gluon, its five products per chunk asynchronous, as ``gluon_fwd.py`` does for the forward
(benchmarks/NOTES.md, s19 next steps). Not yet run on a GPU; ``run_gsweeps.py`` holds it to
:func:`semisep.backends.triton.kernels.ssd_bwd_fwdsweep_kernel` on the H200.

Scope: one program per (b, h), p = n = Q = 64, bf16, T a multiple of 64, one span from a zero
state, every chunk factorable, no seq_idx, dB / dC / dD added atomically, D per head. Per
chunk, with ``u = x dt exp(-l)``, ``G = C B^T``, ``M = dy u^T`` (module docstring of
:mod:`semisep.backends.triton.kernels` for w)::

    states[c] = S (the state entering the chunk, bf16)     S <- exp(l_end) (S + u^T B)
    P = exp(l) o strict_lower(G o M)                       dC += exp(l) (lower(M) B + dy S)
    w = exp(l) rowsum((dy S) o C) + rowsum(P) - colsum(P)  dD += sum(dy o x)

Products issued asynchronously in the order ``C B^T``, ``dy u^T``, ``dy S``, ``u^T B`` (u made
and stored before), then ``lower(M) B`` on top of ``dy S``; P's sums, w and the state's update
run while later products do. Written against Triton 3.6's Gluon API (TMA copies as
``async_copy_*``).
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)

from semisep.backends.triton.gluon_fwd import _chunk_rows


@gluon.jit
def _load_chunk(x_desc, dy_desc, b_desc, c_desc, bar, xs, dys, bs, cs, row, xcol, bcol,
                nbytes: gl.constexpr):
    mbarrier.expect(bar, nbytes)
    tma.async_copy_global_to_shared(x_desc, [row, xcol], bar, xs)
    tma.async_copy_global_to_shared(dy_desc, [row, xcol], bar, dys)
    tma.async_copy_global_to_shared(b_desc, [row, bcol], bar, bs)
    tma.async_copy_global_to_shared(c_desc, [row, bcol], bar, cs)


@gluon.jit
def gfwdsweep_kernel(x_desc, dy_desc, b_desc, c_desc, st_desc, dec_ptr, etot_ptr, dC_ptr,
                     w_ptr, dD_ptr, T, H, G, NC,
                     Q: gl.constexpr, P: gl.constexpr, N: gl.constexpr,
                     STAGES: gl.constexpr, HAS_D: gl.constexpr):
    pid = gl.program_id(0)
    b = pid // H
    h = pid % H
    grp = h // (H // G)
    BH = gl.num_programs(0)
    bh = (b * H + h).to(gl.int64)

    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                  instr_shape=[16, 64, 16])
    dotA: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    rows_l: gl.constexpr = gl.SliceLayout(1, mma)
    cols_l: gl.constexpr = gl.SliceLayout(0, mma)
    dtype: gl.constexpr = x_desc.dtype
    sl: gl.constexpr = x_desc.layout

    x_s = gl.allocate_shared_memory(dtype, [STAGES, Q, P], sl)
    dy_s = gl.allocate_shared_memory(dtype, [STAGES, Q, P], sl)
    b_s = gl.allocate_shared_memory(dtype, [STAGES, Q, N], b_desc.layout)
    c_s = gl.allocate_shared_memory(dtype, [STAGES, Q, N], c_desc.layout)
    u_s = gl.allocate_shared_memory(dtype, [Q, P], sl)
    S_s = gl.allocate_shared_memory(dtype, [P, N], st_desc.layout)   # the state entering
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)

    row0 = b * T
    nbytes: gl.constexpr = 2 * Q * (2 * P + 2 * N)
    for s in gl.static_range(STAGES - 1):
        if s < NC:
            _load_chunk(x_desc, dy_desc, b_desc, c_desc, bars.index(s), x_s.index(s),
                        dy_s.index(s), b_s.index(s), c_s.index(s), row0 + s * Q, h * P,
                        grp * N, nbytes)

    S = gl.zeros([P, N], gl.float32, mma)
    S_s.store(S.to(dtype))
    fence_async_shared()
    zero = gl.zeros([Q, Q], gl.float32, mma)
    rows = gl.arange(0, Q, layout=rows_l)
    cols = gl.arange(0, Q, layout=cols_l)
    rows_b = gl.arange(0, Q, layout=gl.SliceLayout(1, blk))
    lower = rows[:, None] >= cols[None, :]
    strict = rows[:, None] > cols[None, :]
    dD_acc = gl.zeros([Q], gl.float32, gl.SliceLayout(1, blk))
    dC_base = dC_ptr + (b.to(gl.int64) * T * G + grp) * N
    dC_off = rows[:, None] * (G * N) + gl.arange(0, N, layout=cols_l)[None, :]
    w_base = w_ptr + bh * T

    for c in range(NC):
        slot = c % STAGES
        t0 = c * Q
        f, e_in, e_tot = _chunk_rows(dec_ptr, etot_ptr, bh, BH, NC, c, t0, rows_b, rows)
        mbarrier.wait(bars.index(slot), (c // STAGES) & 1)
        xs = x_s.index(slot)
        dys = dy_s.index(slot)
        bs = b_s.index(slot)
        cs = c_s.index(slot)
        xr = xs.load(blk).to(gl.float32)
        u_s.store((xr * f[:, None]).to(dtype))
        if HAS_D:
            dD_acc += gl.sum(dys.load(blk).to(gl.float32) * xr, axis=1)
        fence_async_shared()
        Gm = warpgroup_mma(cs, bs.permute((1, 0)), zero, use_acc=False, is_async=True)
        Mu = warpgroup_mma(dys, u_s.permute((1, 0)), zero, use_acc=False, is_async=True)
        dCs = warpgroup_mma(dys, S_s, zero, use_acc=False, is_async=True)
        S = warpgroup_mma(u_s.permute((1, 0)), bs, S, is_async=True)
        # the state entering this chunk to the states' buffer (S_s is read by dy S too)
        tma.async_copy_shared_to_global(st_desc, [((b * H + h) * NC + c) * P, 0], S_s)
        nxt = c + STAGES - 1
        if nxt < NC:
            ns = nxt % STAGES
            _load_chunk(x_desc, dy_desc, b_desc, c_desc, bars.index(ns), x_s.index(ns),
                        dy_s.index(ns), b_s.index(ns), c_s.index(ns), row0 + nxt * Q, h * P,
                        grp * N, nbytes)
        Gm, Mu = warpgroup_mma_wait(num_outstanding=2, deps=(Gm, Mu))
        Ml = gl.convert_layout(gl.where(lower, Mu, 0.0).to(dtype), dotA)
        Pm = gl.where(strict, Gm * Mu, 0.0) * e_in[:, None]
        rowP = gl.sum(Pm, axis=1)
        colP = gl.convert_layout(gl.sum(Pm, axis=0), rows_l)
        dCs = warpgroup_mma_wait(num_outstanding=1, deps=(dCs,))
        r1off = gl.sum(dCs * cs.load(mma).to(gl.float32), axis=1) * e_in
        gl.store(w_base + t0 + rows, r1off + rowP - colP)
        dC = warpgroup_mma(Ml, bs, dCs, is_async=True)
        S = warpgroup_mma_wait(num_outstanding=1, deps=(S,))
        S = S * e_tot
        tma.store_wait(pendings=0)              # the state's copy has left S_s
        S_s.store(S.to(dtype))
        dC = warpgroup_mma_wait(num_outstanding=0, deps=(dC,))
        fence_async_shared()
        gl.atomic_add(dC_base + t0 * (G * N) + dC_off, dC * e_in[:, None], sem="relaxed")
    tma.store_wait(pendings=0)
    if HAS_D:
        gl.atomic_add(dD_ptr + h, gl.sum(dD_acc, axis=0), sem="relaxed")
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(s))

"""A design probe, not part of the library: the backward's reverse sweep (its factored loop)
in Gluon, its seven products per chunk asynchronous (benchmarks/NOTES.md, s19 next steps).
Not yet run on a GPU; ``run_gsweeps.py`` holds it to
:func:`semisep.backends.triton.kernels.ssd_bwd_revsweep_kernel`.

Scope: one program per (b, h), p = n = Q = 64, bf16, T a multiple of 64, one span, no final
state gradient, every chunk factorable, no seq_idx, dt given (no bias, no softplus: the
pre-pass's slope row is read anyway), D per head, dB and the dA / d dt_bias sums added
atomically, ``E_ON_C`` (the chunk decays on C). Per chunk, last first, with the adjoint dS
leaving it (the library kernel's docstring has the terms)::

    cross = exp(l_end) <dS, S_in>        dS <- dy^T (e_in C) + exp(l_end) dS
    G^T = B (e_in C)^T, M^T = xs dy^T    st = B (exp(l_end) dS)^T
    acc = lower^T(G^T) dy + st           dx = exp(-l) dt acc + D dy
    dB = (lower^T(M^T) (e_in C) + xs (exp(l_end) dS)) exp(-l)
    dla = (suffix(w) + prefix_excl(r2off) + cross) keep, r2off = rowsum(x o st) dt exp(-l)
    ddt = (rowsum(acc o x) exp(-l) + A dla) sig

The five products that need only the chunk's tiles and the adjoint's scaled copy are issued
together (``B (e_in C)^T``, ``B dS^T``, ``xs dy^T``, ``xs dS``, the adjoint's update), then
``lower^T(G^T) dy`` on top of ``B dS^T`` and ``lower^T(M^T) (e_in C)`` on top of ``xs dS``;
the masks, r2off, dx, dla and ddt run while later products do. x, dy, B and C come by TMA into a
ring, the stored state S_in by TMA one chunk ahead; dx leaves by TMA. Triton 3.6's Gluon API.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)

from gfwdsweep import _load_chunk

from semisep.backends.triton.kernels import _kahan_add


@gluon.jit
def _add(a, b):
    return a + b


@gluon.jit
def _load_state(st_desc, bar, ss, srow, nbytes: gl.constexpr):
    mbarrier.expect(bar, nbytes)
    tma.async_copy_global_to_shared(st_desc, [srow, 0], bar, ss)


@gluon.jit
def grevsweep_kernel(x_desc, dy_desc, b_desc, c_desc, st_desc, dx_desc, dec_ptr, etot_ptr,
                     w_ptr, A_ptr, D_ptr, dB_ptr, ddt_ptr, dsum_ptr, T, H, G, NC,
                     Q: gl.constexpr, P: gl.constexpr, N: gl.constexpr,
                     STAGES: gl.constexpr, HAS_D: gl.constexpr):
    pid = gl.program_id(0)
    b = pid // H
    h = pid % H
    grp = h // (H // G)
    BH = gl.num_programs(0)
    bh = (b * H + h).to(gl.int64)
    TP = NC * Q

    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                  instr_shape=[16, 64, 16])
    dotA: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    rows_l: gl.constexpr = gl.SliceLayout(1, mma)
    cols_l: gl.constexpr = gl.SliceLayout(0, mma)
    rows_b: gl.constexpr = gl.SliceLayout(1, blk)
    vec: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])     # for the scans
    dtype: gl.constexpr = x_desc.dtype
    sl: gl.constexpr = x_desc.layout

    x_s = gl.allocate_shared_memory(dtype, [STAGES, Q, P], sl)
    dy_s = gl.allocate_shared_memory(dtype, [STAGES, Q, P], sl)
    b_s = gl.allocate_shared_memory(dtype, [STAGES, Q, N], b_desc.layout)
    c_s = gl.allocate_shared_memory(dtype, [STAGES, Q, N], c_desc.layout)
    si_s = gl.allocate_shared_memory(dtype, [P, N], st_desc.layout)     # S_in, one ahead
    xs_s = gl.allocate_shared_memory(dtype, [Q, P], sl)          # bf16(x dt)
    cv_s = gl.allocate_shared_memory(dtype, [Q, N], sl)          # bf16(e_in C)
    dsx_s = gl.allocate_shared_memory(dtype, [P, N], sl)         # bf16(exp(l_end) dS)
    dx_s = gl.allocate_shared_memory(dtype, [Q, P], dx_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)
    si_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(si_bar, count=1)

    row0 = b * T
    srow0 = (b * H + h) * NC * P
    nbytes: gl.constexpr = 2 * (2 * Q * P + 2 * Q * N)
    for s in gl.static_range(STAGES - 1):
        if s < NC:
            c = NC - 1 - s
            _load_chunk(x_desc, dy_desc, b_desc, c_desc, bars.index(s), x_s.index(s),
                        dy_s.index(s), b_s.index(s), c_s.index(s), row0 + c * Q, h * P,
                        grp * N, nbytes)
    if NC > 0:
        _load_state(st_desc, si_bar, si_s, srow0 + (NC - 1) * P, 2 * P * N)

    dS = gl.zeros([P, N], gl.float32, mma)
    zero = gl.zeros([Q, Q], gl.float32, mma)
    rows = gl.arange(0, Q, layout=rows_l)
    cols = gl.arange(0, Q, layout=cols_l)
    rows_b = gl.arange(0, Q, layout=rows_b)
    low_t = cols[None, :] >= rows[:, None]          # [j, i]: i >= j
    A_h = gl.load(A_ptr + h).to(gl.float32)
    Dv = 0.0
    if HAS_D:
        Dv = gl.load(D_ptr + h).to(gl.float32)
    dA_acc = gl.sum(gl.zeros([Q], gl.float32, rows_l), axis=0)
    dA_err = dA_acc
    db_acc = dA_acc
    db_err = dA_acc
    dB_base = dB_ptr + (b.to(gl.int64) * T * G + grp) * N
    dB_off = rows[:, None] * (G * N) + gl.arange(0, N, layout=cols_l)[None, :]

    for i in range(NC):
        c = NC - 1 - i
        slot = i % STAGES
        t0 = c * Q
        dtv = gl.load(dec_ptr + bh * TP + t0 + rows)
        inv = gl.load(dec_ptr + (5 * BH + bh) * TP + t0 + rows)
        dtv_b = gl.load(dec_ptr + bh * TP + t0 + rows_b)
        e_in_b = gl.load(dec_ptr + (3 * BH + bh) * TP + t0 + rows_b)
        keep = gl.load(dec_ptr + (6 * BH + bh) * TP + t0 + rows)
        sig = gl.load(dec_ptr + (7 * BH + bh) * TP + t0 + rows)
        e_tot = gl.load(etot_ptr + bh * NC + c)
        w = gl.load(w_ptr + bh * T + t0 + rows)
        mbarrier.wait(bars.index(slot), (i // STAGES) & 1)
        xs_t = x_s.index(slot)
        dys = dy_s.index(slot)
        bs = b_s.index(slot)
        cs = c_s.index(slot)
        xs_s.store((xs_t.load(blk).to(gl.float32) * dtv_b[:, None]).to(dtype))
        cv_s.store((cs.load(blk).to(gl.float32) * e_in_b[:, None]).to(dtype))
        mbarrier.wait(si_bar, i & 1)
        cross = gl.sum(gl.sum(dS * si_s.load(mma).to(gl.float32), axis=1), axis=0) * e_tot
        gl.thread_barrier()                     # every thread has read S_in: the next one
        if i + 1 < NC:
            _load_state(st_desc, si_bar, si_s, srow0 + (c - 1) * P, 2 * P * N)
        dS = dS * e_tot
        dsx_s.store(dS.to(dtype))
        fence_async_shared()
        Gt = warpgroup_mma(bs, cv_s.permute((1, 0)), zero, use_acc=False, is_async=True)
        st = warpgroup_mma(bs, dsx_s.permute((1, 0)), zero, use_acc=False, is_async=True)
        Mt = warpgroup_mma(xs_s, dys.permute((1, 0)), zero, use_acc=False, is_async=True)
        nxt = i + STAGES - 1
        if nxt < NC:
            ns = nxt % STAGES
            cn = NC - 1 - nxt
            _load_chunk(x_desc, dy_desc, b_desc, c_desc, bars.index(ns), x_s.index(ns),
                        dy_s.index(ns), b_s.index(ns), c_s.index(ns), row0 + cn * Q, h * P,
                        grp * N, nbytes)
        Gt, st = warpgroup_mma_wait(num_outstanding=1, deps=(Gt, st))
        r2off = gl.sum(xs_t.load(mma).to(gl.float32) * st, axis=1) * (dtv * inv)
        WG = gl.convert_layout(gl.where(low_t, Gt, 0.0).to(dtype), dotA)
        acc = warpgroup_mma(WG, dys, st, is_async=True)
        xd = warpgroup_mma(xs_s, dsx_s, zero, use_acc=False, is_async=True)
        Mt = warpgroup_mma_wait(num_outstanding=2, deps=(Mt,))
        WM = gl.convert_layout(gl.where(low_t, Mt, 0.0).to(dtype), dotA)
        dB = warpgroup_mma(WM, cv_s, xd, is_async=True)
        dS = warpgroup_mma(dys.permute((1, 0)), cv_s, dS, is_async=True)
        r2v = gl.convert_layout(r2off, vec)
        suf = (gl.associative_scan(gl.convert_layout(w, vec), 0, _add, reverse=True)
               + (gl.associative_scan(r2v, 0, _add) - r2v))
        suf = gl.convert_layout(suf, rows_l)
        dla = (suf + cross) * keep
        acc = warpgroup_mma_wait(num_outstanding=2, deps=(acc,))
        xdx = gl.sum(acc * xs_t.load(mma).to(gl.float32), axis=1) * inv
        dx = acc * (inv * dtv)[:, None]
        if HAS_D:
            dx = dx + dys.load(mma).to(gl.float32) * Dv
        tma.store_wait(pendings=0)              # the previous chunk's dx has left dx_s
        dx_s.store(dx.to(dtype))
        ddt = (xdx + A_h * dla) * sig
        dA_acc, dA_err = _kahan_add(dA_acc, dA_err, gl.sum(dla * dtv, axis=0))
        db_acc, db_err = _kahan_add(db_acc, db_err, gl.sum(ddt, axis=0))
        gl.store(ddt_ptr + (row0 + t0 + rows).to(gl.int64) * H + h, ddt)
        dB = warpgroup_mma_wait(num_outstanding=1, deps=(dB,))
        dS = warpgroup_mma_wait(num_outstanding=0, deps=(dS,))
        fence_async_shared()
        tma.async_copy_shared_to_global(dx_desc, [row0 + t0, h * P], dx_s)
        gl.atomic_add(dB_base + t0 * (G * N) + dB_off, dB * inv[:, None], sem="relaxed")
    tma.store_wait(pendings=0)
    gl.atomic_add(dsum_ptr + h, dA_acc, sem="relaxed")
    gl.atomic_add(dsum_ptr + H + h, db_acc, sem="relaxed")
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(s))
    mbarrier.invalidate(si_bar)

"""The backward's two factored sweeps in Gluon, for Hopper (sm_90): their dots run
asynchronously.

These kernels compute what the factored loops of :func:`.kernels.ssd_bwd_fwdsweep_kernel` and
:func:`.kernels.ssd_bwd_revsweep_kernel` compute (that module's docstring has the terms), for
one block of 64 of the state's columns, the programs whose chunks all decay by more than
``decays.FACTOR_MIN``; the Triton kernels' exact loops run the other programs, as beside
their own factored launches. As in :mod:`.gluon_fwd`: Triton 3.6 waits for each ``tl.dot``
before its next statement; here the products that need only a chunk's tiles are issued
together and the masks, sums and scalings run while later ones do; x, dy, B, C (and, in the
reverse sweep, the stored state) arrive by TMA into a ring of buffers.

Forward sweep, per chunk, with ``u = x dt exp(-l)``, ``G = C B^T``, ``M = dy u^T``::

    states[c] = S (the state entering the chunk, bf16)     S <- exp(l_end) (S + u^T B)
    P = exp(l) o strict_lower(G o M)                       dC += exp(l) (lower(M) B + dy S)
    w = exp(l) rowsum((dy S) o C) + rowsum(P) - colsum(P)  dD += sum(dy o x)

Products in the order ``C B^T``, ``dy u^T``, ``dy S``, ``u^T B``, then ``lower(M) B`` on top of
``dy S``. Reverse sweep, per chunk, last first, with the adjoint dS leaving it and
``xs = x dt``, ``cv = exp(l) C`` (the chunk decays on C, ``E_ON_C``)::

    cross = exp(l_end) <dS, S_in>        dS <- dy^T cv + exp(l_end) dS
    G^T = B cv^T, M^T = xs dy^T          st = B (exp(l_end) dS)^T
    acc = lower^T(G^T) dy + st           dx = exp(-l) dt acc + D dy   (+ dx so far: ACC_DX)
    dB = (lower^T(M^T) cv + xs (exp(l_end) dS)) exp(-l)
    dla = (suffix(w) + prefix_excl(r2off) + cross) keep, r2off = rowsum(x o st) dt exp(-l)
    ddt = (rowsum(acc o x) exp(-l) + A dla) sig

Products: ``B cv^T``, ``B dS^T``, ``xs dy^T``, then ``lower^T(G^T) dy`` on ``B dS^T``,
``xs dS``, ``lower^T(M^T) cv`` on it and the adjoint's update. dC, dB, dD and the per-head
sums of dA and d dt_bias (compensated running sums) are added atomically, as the Triton
kernels' ``ATOMIC`` form does. H200 (benchmarks/NOTES.md, s21): at b=8, T=16K, h=32, p=n=64,
bf16, 0.956 / 1.412 ms against 1.161 / 1.606 for the Triton kernels' two launches, their
results within 1.4e-7 (dx 1.1e-5: the atomic sums' order).

The pre-pass's rows are read a chunk ahead: the forward sweep holds the next chunk's in
registers (their product ``dt exp(-l)`` taken where it is used), the reverse sweep copies its
six rows (dt, exp(l), exp(-l), keep, sig and the forward sweep's w) into shared memory with
the chunk's tiles (``cp.async``, each thread arriving on the ring's barrier when its copies
land) and reads each where it is used; loaded where used, each chunk waited a DRAM latency
for them (H200 s23-6, one run: fwd+bwd at 16K 2.943 -> 2.877 ms at N = 64, 5.804 -> 5.572
at N = 128, with dt's and exp(l)'s rows copied; all six, s24-2 / s24-3: N = 64 16K
2.91-2.97 -> 2.77-2.84 ms).

Where (:func:`eligible`): sm_90, bf16 inputs, dy and stored states, p = 64, chunks of 64, T a
multiple of 64, calls of at least ``AT_LEAST`` = 2^27 (b h T n; smaller ones are bound by the
host) with b h T and T g n below 2^31 (the kernels' int32 row offsets), blocks of 64 of the
state's columns (n a multiple of 64), one span, no initial state or its gradient, no d(final
state), no seq_idx, dt given (with or without its bias and softplus), D per head or none,
atomic sums (not under ``torch.use_deterministic_algorithms``) and calls launched as two
kernels; ``SEMISEP_TRITON_GLUON=0`` turns it off with the forward's. The interpreter cannot
run Gluon: the CPU tests hold the backward's launches to float64 twins of both kernels,
written from this docstring, and compile both for sm_90 to check their SASS
(``tests/triton/test_gluon_bwd.py``); ``benchmarks/gpu_ssd.py --gluon-checks`` holds them to
the Triton kernels and to float64 on the GPU (H200 s22-4: dB, dC within 1.2e-5 of the Triton
kernels', dA, dD, d dt_bias within 7e-8, dx and ddt equal; s22-1, in one run: fwd+bwd at
16K 3.454 -> 2.965 ms at N = 64, 6.642 -> 5.824 at N = 128).
"""

from __future__ import annotations

import torch

from .gluon_fwd import _FACTOR_MIN, gluon, switched_on
from .gluon_launch import launch

if gluon is not None:
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.language.nvidia.ampere import async_copy

    from .gluon_fwd import _barrier, _cp_async, _factorable_g, _tma_load, _tma_store
    from .kernels import _kahan_add
# the smallest call (b h T n) given to these kernels: below, a forward and backward is bound
# by the host, where they save nothing and their launches cost more (H200 s22-3, N = 64,
# T = 4K: host 1.02 ms against a device time of 0.77; the Triton kernels' 0.94 / 0.90)
AT_LEAST = 2 ** 27


if gluon is not None:
    # both sweeps' register layouts: a 64 x 64 tile of one warpgroup's wgmma accumulator, its
    # row and column vectors, an operand A in registers, and a blocked tile for loads
    _MMA = gl.constexpr(gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                  instr_shape=[16, 64, 16]))
    _DOT_A = gl.constexpr(gl.DotOperandLayout(operand_index=0, parent=_MMA.value, k_width=2))
    _BLK = gl.constexpr(gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0]))
    _ROWS = gl.constexpr(gl.SliceLayout(1, _MMA.value))
    _COLS = gl.constexpr(gl.SliceLayout(0, _MMA.value))

    @gluon.jit
    def _add(a, b):
        return a + b

    @gluon.jit
    def _load_chunk(x_desc, dy_desc, b_desc, c_desc, bar, xs, dys, bs, cs, row, xcol, bcol,
                    nbytes: gl.constexpr):
        """Chunk rows ``row..`` of x, dy (columns ``xcol..``), B and C (``bcol..``) by TMA
        into one slot of the ring, signalling ``bar``."""
        mbarrier.expect(bar, nbytes)
        _tma_load(x_desc, [row, xcol], bar, xs)
        _tma_load(dy_desc, [row, xcol], bar, dys)
        _tma_load(b_desc, [row, bcol], bar, bs)
        _tma_load(c_desc, [row, bcol], bar, cs)

    @gluon.jit
    def _chunk_rows(dec_ptr, etot_ptr, bh, BH, NC, c, rows_x, rows_y):
        """Chunk ``c``'s pre-pass rows (:func:`.decays._pre_rows`' arrays): ``dt`` and
        ``exp(-l)`` at the chunk's positions ``rows_x``, ``exp(l)`` at ``rows_y`` (each in its
        vector's layout) and ``exp(l_end)``; the last chunk's for ``c >= NC`` (prefetches past
        the end). The caller multiplies ``dt exp(-l)`` where it uses it: a product here would
        wait for the loads (ncu s24-2: 22 % of the forward's samples on it). Copied into
        shared memory beside the tiles instead, as the forward does (gluon_fwd._load_rows), the
        sweep was no faster (H200 s25-2: fwd+bwd N = 64 16K 2.85 / 3.03 against 2.78 / 2.82)."""
        c = gl.minimum(c, NC - 1)
        TP = NC * rows_x.shape[0]
        t0 = c * rows_x.shape[0]
        dtv = gl.load(dec_ptr + bh * TP + t0 + rows_x)
        inv = gl.load(dec_ptr + (5 * BH + bh) * TP + t0 + rows_x)
        e_in = gl.load(dec_ptr + (3 * BH + bh) * TP + t0 + rows_y)
        return dtv, inv, e_in, gl.load(etot_ptr + bh * NC + c)

    @gluon.jit
    def _fwdsweep_chunks(x_desc, dy_desc, b_desc, c_desc, st_desc, dec_ptr, etot_ptr, dC_ptr,
                         w_ptr, dD_ptr, b, h, grp, bh, BH, T, H, G, NC, C0,
                         Q: gl.constexpr, P: gl.constexpr, N: gl.constexpr, NT: gl.constexpr,
                         STAGES: gl.constexpr, HAS_D: gl.constexpr):
        """The forward sweep's loop over the chunks of one program (module docstring)."""
        mma: gl.constexpr = _MMA
        dotA: gl.constexpr = _DOT_A
        blk: gl.constexpr = _BLK
        rows_l: gl.constexpr = _ROWS
        cols_l: gl.constexpr = _COLS
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
        bcol = grp * NT + C0
        nbytes: gl.constexpr = 2 * Q * (2 * P + 2 * N)
        for s in gl.static_range(STAGES - 1):
            if s < NC:
                _load_chunk(x_desc, dy_desc, b_desc, c_desc, bars.index(s), x_s.index(s),
                            dy_s.index(s), b_s.index(s), c_s.index(s), row0 + s * Q, h * P,
                            bcol, nbytes)

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
        # dC is (b, T, G, NT) from the block's first column
        dC_base = dC_ptr + (b.to(gl.int64) * T * G + grp) * NT
        dC_off = rows[:, None] * (G * NT) + gl.arange(0, N, layout=cols_l)[None, :]
        w_base = w_ptr + bh * T

        # the decay rows a chunk ahead (loaded where used they cost the forward a DRAM latency
        # a chunk, ncu s23-4; this sweep's gain is in s23-6's figures with the reverse one's)
        da, ia, ea, ta = _chunk_rows(dec_ptr, etot_ptr, bh, BH, NC, 0, rows_b, rows)
        for c in range(NC):
            slot = c % STAGES
            t0 = c * Q
            dtv, inv, e_in, e_tot = da, ia, ea, ta
            da, ia, ea, ta = _chunk_rows(dec_ptr, etot_ptr, bh, BH, NC, c + 1, rows_b, rows)
            mbarrier.wait(bars.index(slot), (c // STAGES) & 1)
            xs = x_s.index(slot)
            dys = dy_s.index(slot)
            bs = b_s.index(slot)
            cs = c_s.index(slot)
            xr = xs.load(blk).to(gl.float32)
            u_s.store((xr * (dtv * inv)[:, None]).to(dtype))
            if HAS_D:
                dD_acc += gl.sum(dys.load(blk).to(gl.float32) * xr, axis=1)
            fence_async_shared()
            Gm = warpgroup_mma(cs, bs.permute((1, 0)), zero, use_acc=False, is_async=True)
            Mu = warpgroup_mma(dys, u_s.permute((1, 0)), zero, use_acc=False, is_async=True)
            dCs = warpgroup_mma(dys, S_s, zero, use_acc=False, is_async=True)
            S = warpgroup_mma(u_s.permute((1, 0)), bs, S, is_async=True)
            # the state entering this chunk to the states' buffer (S_s is read by dy S too)
            _tma_store(st_desc, [((b * H + h) * NC + c) * P, 0], S_s)
            nxt = c + STAGES - 1
            if nxt < NC:
                ns = nxt % STAGES
                _load_chunk(x_desc, dy_desc, b_desc, c_desc, bars.index(ns), x_s.index(ns),
                            dy_s.index(ns), b_s.index(ns), c_s.index(ns), row0 + nxt * Q,
                            h * P, bcol, nbytes)
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
            gl.atomic_add(dC_base + t0 * (G * NT) + dC_off, dC * e_in[:, None], sem="relaxed")
        tma.store_wait(pendings=0)
        if HAS_D:
            gl.atomic_add(dD_ptr + h, gl.sum(dD_acc, axis=0), sem="relaxed")
        for s in gl.static_range(STAGES):
            mbarrier.invalidate(bars.index(s))

    @gluon.jit
    def ssd_bwd_fwdsweep_gluon_kernel(x_desc, dy_desc, b_desc, c_desc, st_desc, dec_ptr,
                                      etot_ptr, dC_ptr, w_ptr, dD_ptr, T, H, G, NC, C0,
                                      Q: gl.constexpr, P: gl.constexpr, N: gl.constexpr,
                                      NT: gl.constexpr,
                                      STAGES: gl.constexpr, HAS_D: gl.constexpr,
                                      FACTOR_MIN: gl.constexpr):
        """Grid ``(b * H,)``: a program per (b, h); x, dy as (b T, H P) and B, C as
        (b T, G NT) tensor descriptors of 64 x 64 blocks (the block's columns from C0), the
        states (b H NC P, N); dC (b, T, G, NT) fp32 from the block's first column, w
        (b H, T), dD (H,) fp32."""
        pid = gl.program_id(0)
        b = pid // H
        h = pid % H
        bh = pid.to(gl.int64)
        if _factorable_g(etot_ptr, bh, NC, FACTOR_MIN):
            _fwdsweep_chunks(x_desc, dy_desc, b_desc, c_desc, st_desc, dec_ptr, etot_ptr,
                             dC_ptr, w_ptr, dD_ptr, b, h, h // (H // G), bh,
                             gl.num_programs(0), T, H, G, NC, C0, Q, P, N, NT, STAGES, HAS_D)

    @gluon.jit
    def _load_rows(dec_ptr, w_ptr, bh, BH, TP, t0, rw, base, bar):
        """The reverse sweep's rows at the chunk's positions from ``t0`` into ``rw``'s rows
        ``base..base + 5`` by asynchronous copies: the pre-pass's dt, exp(l), exp(-l), keep and
        sig (rows 0, 3, 5, 6, 7 of ``dec``) and the forward sweep's w, each thread's arriving on
        ``bar`` when its copies have landed (``bar`` counts one arrival a thread)."""
        pos = gl.arange(0, rw.shape[1], layout=gl.BlockedLayout([1], [32], [gl.num_warps()],
                                                                  [0]))
        _cp_async(rw.index(base), dec_ptr + bh * TP + t0 + pos)
        _cp_async(rw.index(base + 1), dec_ptr + (3 * BH + bh) * TP + t0 + pos)
        _cp_async(rw.index(base + 2), dec_ptr + (5 * BH + bh) * TP + t0 + pos)
        _cp_async(rw.index(base + 3), dec_ptr + (6 * BH + bh) * TP + t0 + pos)
        _cp_async(rw.index(base + 4), dec_ptr + (7 * BH + bh) * TP + t0 + pos)
        _cp_async(rw.index(base + 5), w_ptr + bh * TP + t0 + pos)       # w is (b H, T = TP)
        async_copy.mbarrier_arrive(bar, increment_count=False)

    @gluon.jit
    def _revsweep_chunks(x_desc, dy_desc, b_desc, c_desc, st_desc, dx_desc, dec_ptr, etot_ptr,
                         w_ptr, A_ptr, D_ptr, dB_ptr, ddt_ptr, dsum_ptr, b, h, grp, bh, BH,
                         T, H, G, NC, C0, Q: gl.constexpr, P: gl.constexpr,
                         N: gl.constexpr, NT: gl.constexpr, STAGES: gl.constexpr,
                         HAS_D: gl.constexpr, ACC_DX: gl.constexpr):
        """The reverse sweep's loop over the chunks of one program (module docstring)."""
        mma: gl.constexpr = _MMA
        dotA: gl.constexpr = _DOT_A
        blk: gl.constexpr = _BLK
        rows_l: gl.constexpr = _ROWS
        cols_l: gl.constexpr = _COLS
        vec: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])     # for the scans
        dtype: gl.constexpr = x_desc.dtype
        sl: gl.constexpr = x_desc.layout
        TP = NC * Q

        x_s = gl.allocate_shared_memory(dtype, [STAGES, Q, P], sl)
        dy_s = gl.allocate_shared_memory(dtype, [STAGES, Q, P], sl)
        b_s = gl.allocate_shared_memory(dtype, [STAGES, Q, N], b_desc.layout)
        c_s = gl.allocate_shared_memory(dtype, [STAGES, Q, N], c_desc.layout)
        si_s = gl.allocate_shared_memory(dtype, [P, N], st_desc.layout)     # S_in, one ahead
        xs_s = gl.allocate_shared_memory(dtype, [Q, P], sl)          # bf16(x dt)
        cv_s = gl.allocate_shared_memory(dtype, [Q, N], sl)          # bf16(e_in C)
        dsx_s = gl.allocate_shared_memory(dtype, [P, N], sl)         # bf16(exp(l_end) dS)
        dx_s = gl.allocate_shared_memory(dtype, [Q, P], dx_desc.layout)
        # the chunk's decay rows and w beside its tiles
        R: gl.constexpr = 6                 # rows a chunk (_load_rows)
        rw_s = gl.allocate_shared_memory(gl.float32, [STAGES * R, Q],
                                         gl.SwizzledSharedLayout(1, 1, 1, [0]))
        bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            # the TMA's expect, and each thread's copies of the rows (_load_rows)
            mbarrier.init(bars.index(s), count=1 + gl.num_warps() * 32)
        si_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(si_bar, count=1)
        dx_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(dx_bar, count=1)

        row0 = b * T
        bcol = grp * NT + C0
        srow0 = (b * H + h) * NC * P     # int32: TMA's coordinates
        nbytes: gl.constexpr = 2 * (2 * Q * P + 2 * Q * N)
        for s in gl.static_range(STAGES - 1):
            if s < NC:
                c = NC - 1 - s
                _load_rows(dec_ptr, w_ptr, bh, BH, TP, c * Q, rw_s, s * R, bars.index(s))
                _load_chunk(x_desc, dy_desc, b_desc, c_desc, bars.index(s), x_s.index(s),
                            dy_s.index(s), b_s.index(s), c_s.index(s), row0 + c * Q, h * P,
                            bcol, nbytes)
        if NC > 0:
            mbarrier.expect(si_bar, 2 * P * N)
            _tma_load(st_desc, [srow0 + (NC - 1) * P, 0], si_bar, si_s)

        dS = gl.zeros([P, N], gl.float32, mma)
        zero = gl.zeros([Q, Q], gl.float32, mma)
        rows = gl.arange(0, Q, layout=rows_l)
        cols = gl.arange(0, Q, layout=cols_l)
        low_t = cols[None, :] >= rows[:, None]          # [j, i]: i >= j
        A_h = gl.load(A_ptr + h).to(gl.float32)
        Dv = 0.0
        if HAS_D:
            Dv = gl.load(D_ptr + h).to(gl.float32)
        dA_acc = gl.sum(gl.zeros([Q], gl.float32, rows_l), axis=0)
        dA_err = dA_acc
        db_acc = dA_acc
        db_err = dA_acc
        # dB is (b, T, G, NT) from the block's first column
        dB_base = dB_ptr + (b.to(gl.int64) * T * G + grp) * NT
        dB_off = rows[:, None] * (G * NT) + gl.arange(0, N, layout=cols_l)[None, :]

        e_tot_n = gl.load(etot_ptr + bh * NC + NC - 1)
        for i in range(NC):
            c = NC - 1 - i
            slot = i % STAGES
            t0 = c * Q
            if ACC_DX:
                # the blocks before this one's dx of the chunk into dx_s, once the previous
                # chunk's dx has left it
                tma.store_wait(pendings=0)
                mbarrier.expect(dx_bar, 2 * Q * P)
                _tma_load(dx_desc, [row0 + t0, h * P], dx_bar, dx_s)
            e_tot = e_tot_n
            e_tot_n = gl.load(etot_ptr + bh * NC + gl.maximum(c - 1, 0))
            mbarrier.wait(bars.index(slot), (i // STAGES) & 1)
            xs_t = x_s.index(slot)
            dys = dy_s.index(slot)
            bs = b_s.index(slot)
            cs = c_s.index(slot)
            rb = slot * R
            dtv_b = rw_s.index(rb).load(gl.SliceLayout(1, blk))
            e_in_b = rw_s.index(rb + 1).load(gl.SliceLayout(1, blk))
            xs_s.store((xs_t.load(blk).to(gl.float32) * dtv_b[:, None]).to(dtype))
            cv_s.store((cs.load(blk).to(gl.float32) * e_in_b[:, None]).to(dtype))
            mbarrier.wait(si_bar, i & 1)
            cross = gl.sum(gl.sum(dS * si_s.load(mma).to(gl.float32), axis=1), axis=0) * e_tot
            _barrier()                              # every thread has read S_in: the next one
            if i + 1 < NC:
                mbarrier.expect(si_bar, 2 * P * N)
                _tma_load(st_desc, [srow0 + (c - 1) * P, 0], si_bar, si_s)
            dS = dS * e_tot
            dsx_s.store(dS.to(dtype))
            fence_async_shared()
            Gt = warpgroup_mma(bs, cv_s.permute((1, 0)), zero, use_acc=False, is_async=True)
            st = warpgroup_mma(bs, dsx_s.permute((1, 0)), zero, use_acc=False, is_async=True)
            Mt = warpgroup_mma(xs_s, dys.permute((1, 0)), zero, use_acc=False, is_async=True)
            nxt = i + STAGES - 1
            if nxt < NC:
                ns = nxt % STAGES
                _load_rows(dec_ptr, w_ptr, bh, BH, TP, (NC - 1 - nxt) * Q, rw_s, ns * R,
                           bars.index(ns))
                _load_chunk(x_desc, dy_desc, b_desc, c_desc, bars.index(ns), x_s.index(ns),
                            dy_s.index(ns), b_s.index(ns), c_s.index(ns),
                            row0 + (NC - 1 - nxt) * Q, h * P, bcol, nbytes)
            Gt, st = warpgroup_mma_wait(num_outstanding=1, deps=(Gt, st))
            dtv = rw_s.index(rb).load(rows_l)
            inv = rw_s.index(rb + 2).load(rows_l)
            r2off = gl.sum(xs_t.load(mma).to(gl.float32) * st, axis=1) * (dtv * inv)
            WG = gl.convert_layout(gl.where(low_t, Gt, 0.0).to(dtype), dotA)
            acc = warpgroup_mma(WG, dys, st, is_async=True)
            xd = warpgroup_mma(xs_s, dsx_s, zero, use_acc=False, is_async=True)
            Mt = warpgroup_mma_wait(num_outstanding=2, deps=(Mt,))
            WM = gl.convert_layout(gl.where(low_t, Mt, 0.0).to(dtype), dotA)
            dB = warpgroup_mma(WM, cv_s, xd, is_async=True)
            dS = warpgroup_mma(dys.permute((1, 0)), cv_s, dS, is_async=True)
            r2v = gl.convert_layout(r2off, vec)
            w = rw_s.index(rb + 5).load(vec)
            suf = (gl.associative_scan(w, 0, _add, reverse=True)
                   + (gl.associative_scan(r2v, 0, _add) - r2v))
            suf = gl.convert_layout(suf, rows_l)
            dla = (suf + cross) * rw_s.index(rb + 3).load(rows_l)
            acc = warpgroup_mma_wait(num_outstanding=2, deps=(acc,))
            xdx = gl.sum(acc * xs_t.load(mma).to(gl.float32), axis=1) * inv
            dx = acc * (inv * dtv)[:, None]
            if HAS_D:
                dx = dx + dys.load(mma).to(gl.float32) * Dv
            if ACC_DX:
                mbarrier.wait(dx_bar, i & 1)
                dx = dx + dx_s.load(mma).to(gl.float32)
            else:
                tma.store_wait(pendings=0)          # the previous chunk's dx has left dx_s
            dx_s.store(dx.to(dtype))
            ddt = (xdx + A_h * dla) * rw_s.index(rb + 4).load(rows_l)
            dA_acc, dA_err = _kahan_add(dA_acc, dA_err, gl.sum(dla * dtv, axis=0))
            db_acc, db_err = _kahan_add(db_acc, db_err, gl.sum(ddt, axis=0))
            gl.store(ddt_ptr + (row0 + t0 + rows).to(gl.int64) * H + h, ddt)
            dB = warpgroup_mma_wait(num_outstanding=1, deps=(dB,))
            dS = warpgroup_mma_wait(num_outstanding=0, deps=(dS,))
            fence_async_shared()
            _tma_store(dx_desc, [row0 + t0, h * P], dx_s)
            gl.atomic_add(dB_base + t0 * (G * NT) + dB_off, dB * inv[:, None], sem="relaxed")
        tma.store_wait(pendings=0)
        gl.atomic_add(dsum_ptr + h, dA_acc, sem="relaxed")
        gl.atomic_add(dsum_ptr + H + h, db_acc, sem="relaxed")
        for s in gl.static_range(STAGES):
            mbarrier.invalidate(bars.index(s))
        mbarrier.invalidate(si_bar)
        mbarrier.invalidate(dx_bar)

    @gluon.jit
    def ssd_bwd_revsweep_gluon_kernel(x_desc, dy_desc, b_desc, c_desc, st_desc, dx_desc,
                                      dec_ptr, etot_ptr, w_ptr, A_ptr, D_ptr, dB_ptr, ddt_ptr,
                                      dsum_ptr, T, H, G, NC, C0,
                                      Q: gl.constexpr, P: gl.constexpr, N: gl.constexpr,
                                      NT: gl.constexpr, STAGES: gl.constexpr,
                                      HAS_D: gl.constexpr, ACC_DX: gl.constexpr,
                                      FACTOR_MIN: gl.constexpr):
        """Grid ``(b * H,)``: a program per (b, h); descriptors as the forward sweep's, dx's as
        x's; w (b H, T) and the states from the forward sweep; dB (b, T, G, NT) fp32 from the
        block's first column, ddt (b, T, H) fp32, dsum (2, H) fp32 (dA's and d dt_bias's
        sums)."""
        pid = gl.program_id(0)
        b = pid // H
        h = pid % H
        bh = pid.to(gl.int64)
        if _factorable_g(etot_ptr, bh, NC, FACTOR_MIN):
            _revsweep_chunks(x_desc, dy_desc, b_desc, c_desc, st_desc, dx_desc, dec_ptr,
                             etot_ptr, w_ptr, A_ptr, D_ptr, dB_ptr, ddt_ptr, dsum_ptr, b, h,
                             h // (H // G), bh, gl.num_programs(0), T, H, G, NC, C0, Q, P,
                             N, NT, STAGES, HAS_D, ACC_DX)


def eligible(x, B, C, dy, st_dtype, D, h0, seq_idx, dhT, has_dt, Q, spans, blocks, atomic,
             capability=None) -> bool:
    """Whether the backward's factored sweep launches run these kernels (module docstring):
    x, B, C (in x's dtype) and dy as the launcher passes them (contiguous), ``st_dtype`` the
    stored states' dtype, ``blocks`` the plan's ``(first column, width, forward sweep
    Options, reverse sweep Options)``, ``atomic`` whether the sums are atomic,
    ``capability`` the device's (read from x's device when None)."""
    b, T, h, p = x.shape
    if not (x.is_cuda and x.dtype == torch.bfloat16 and B.dtype == torch.bfloat16
            and dy.dtype == torch.bfloat16 and st_dtype == torch.bfloat16 and p == 64
            and Q == 64 and T % 64 == 0 and b * h * T * B.shape[3] >= AT_LEAST
            and b * h * T < 2 ** 31 and T * B.shape[2] * B.shape[3] < 2 ** 31    # int32 offsets
            and spans == 1 and atomic and has_dt
            and h0 is None and dhT is None and seq_idx is None
            and (D is None or D.dim() == 1)):
        return False
    for _, width, fwd_opts, rev_opts in blocks:
        if width != 64 or len(fwd_opts) != 2 or len(rev_opts) != 2:
            return False
        f, r = fwd_opts[0].kwargs, rev_opts[0].kwargs
        # one program a (b, h): its w and dt gradient are the only partials
        if not (f["FACTORED"] and r["FACTORED"] and r["E_ON_C"] and f["BP"] == r["BP"] == 64):
            return False
    if any(t.data_ptr() % 16 for t in (x, B, C, dy)):                   # TMA's alignment
        return False
    return switched_on(x, capability)


def launch_fwdsweep(x, dy, B, C, c0, dec, etot, dC, w, dD, states):
    """Launch :func:`ssd_bwd_fwdsweep_gluon_kernel` for the block of columns from ``c0``:
    x, dy (b, T, h, 64), B, C (b, T, g, n) in bf16, contiguous; dC (b, T, g, n) fp32 from
    column c0 (a flat view), w (b h, T) fp32, dD (h,) fp32 or None, states
    (b, h, T / 64, 64, 64) bf16."""
    b, T, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    rows, nc = b * T, T // 64
    views = ((x, rows, h * p), (dy, rows, h * p), (B, rows, g * n), (C, rows, g * n),
             (states, b * h * nc * p, 64))
    args = (dec, etot, dC, w, dD if dD is not None else w, T, h, g, nc, c0)
    consts = dict(Q=64, P=64, N=64, NT=n, STAGES=2, HAS_D=dD is not None,
                  FACTOR_MIN=_FACTOR_MIN)
    launch(ssd_bwd_fwdsweep_gluon_kernel, (b * h, 1, 1), views, args, consts, x.device)


def launch_revsweep(x, dy, B, C, c0, dec, etot, states, w, A, D, dx, dB, ddt, dsum):
    """Launch :func:`ssd_bwd_revsweep_gluon_kernel` for the block of columns from ``c0``
    (:func:`launch_fwdsweep`'s arguments; dB like dC, ddt (b, T, h) fp32, dsum (2, h) fp32,
    A (h,), D (h,) or None (given to the first block only), dx bf16 like x: written by the
    first block, added to by the others)."""
    b, T, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    rows, nc = b * T, T // 64
    views = ((x, rows, h * p), (dy, rows, h * p), (B, rows, g * n), (C, rows, g * n),
             (states, b * h * nc * p, 64), (dx, rows, h * p))
    args = (dec, etot, w, A, D if D is not None else A, dB, ddt, dsum, T, h, g, nc, c0)
    consts = dict(Q=64, P=64, N=64, NT=n, STAGES=2, HAS_D=D is not None, ACC_DX=c0 > 0,
                  FACTOR_MIN=_FACTOR_MIN)
    launch(ssd_bwd_revsweep_gluon_kernel, (b * h, 1, 1), views, args, consts, x.device)

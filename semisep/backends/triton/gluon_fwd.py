"""The forward's factored loop in Gluon, for Hopper (sm_90): its dots run asynchronously.

Gluon (``triton.experimental.gluon``) is Triton's lower-level dialect: layouts, shared memory,
``wgmma`` and TMA are explicit. This kernel computes what :func:`.kernels.ssd_fwd_kernel`'s
factored loop computes (with its state carried as ``S^T``, (n, p)), for the programs whose
chunks all decay by more than ``decays.FACTOR_MIN`` (:func:`.decays._factorable`), from the
pre-pass's decay rows; the Triton kernel's exact loop runs the other programs, as it does
beside its own factored launch. Per chunk, with ``u = x dt exp(-l)`` and
``G = lower(C B^T)``::

    y = exp(l) (C S^T + G u) + D x          S^T <- exp(l_end) (S^T + B^T u)

Why: Triton 3.6 makes a ``tl.dot`` asynchronous only where a loop uses its result solely as
the next iteration's accumulator, so the Triton kernel waits for each of a chunk's four
products before its next statement. Here ``C B^T`` and ``C S^T`` are issued, u is made and
stored while they run, ``B^T u`` is issued, G is masked once ``C B^T`` is done (as packed
bf16 pairs ANDed with mask words, :func:`_masked_g`), and ``G u`` runs while the state is
updated; x, B and C arrive by TMA into a ring of buffers, the chunk's decay rows by
asynchronous copies beside them, and y leaves by TMA; x is read from shared memory once, for
u and for ``D x``. At n = 128, B, C and the state are held in two halves of 64 columns. H200
(benchmarks/NOTES.md, b=8, T=16K, h=32, p=64, bf16): at n = 64 0.52 against 0.62 ms for the
kernel (s19), the forward 0.555 -> 0.50 ms with the pre-pass once the rows were read ahead
(s23), 0.475 -> 0.442 with the rows in the ring, x read once and a ring of 3 (s25), 0.44 ->
0.41 with the pre-pass's two factored rows for a forward that autograd does not record
(``W_ROWS``, s26-2), and on an H100 the kernel 0.437 -> 0.429 with G masked once u is stored
(s32); at n = 128 the forward 0.954 -> 0.629 ms (s24-1, against the Triton kernel's chunks of
32 with GRAM), and on an H100 0.58 -> 0.56 with G masked by mask words (s34).

Where (:func:`eligible`): a CUDA device of compute capability 9.0, bf16, n = 64 or 128 (the
launcher plans an n = 128 call in chunks of 64 for it, :func:`wants_chunks_of_64`), p a
multiple of 64, chunks of 64 with T a multiple of 64, every program's chunks factorable or
not (the split above), D per head or none, no z, no seq_idx, no initial state, and calls
launched as two kernels (above ``config.ONE_LAUNCH_AT_MOST``); ``SEMISEP_TRITON_GLUON=0``
turns it off. Elsewhere the Triton kernel runs. The two gave the same y and final state bit
for bit on the H200 (the same operations in the same order); ``benchmarks/gpu_ssd.py
--gluon-checks`` holds them to each other and to float64 there.
The interpreter cannot run Gluon: on the CPU the tests compile this kernel for sm_90 and
check that its products stay asynchronous in the SASS (``tests/triton/test_gluon_fwd.py``).
"""

from __future__ import annotations

import torch

from .config import _env, _interpret
from .decays import gdc_launch_dependents, gdc_wait
from .gluon_launch import capability as device_capability
from .gluon_launch import launch

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.language.nvidia.ampere import async_copy
except ImportError:     # a Triton without Gluon's Hopper API: the Triton kernels only
    gluon = None

Q_GLUON = 64         # chunk length, state columns and block of p of this kernel
N_GLUON = 64
_FACTOR_MIN = 2.0 ** -64     # decays.FACTOR_MIN
# the chunks in the ring of x, B and C, by n: at n = 64 a ring of 3 (100632 B of shared
# memory, still two CTAs an SM) once the decay rows came with the tiles, 0.456-0.462 -> 0.442
# ms at 16K (H200 s25-4; no faster while the rows were loaded into registers, s19 and s24-1);
# at n = 128 a ring of 3 leaves one CTA an SM (s24-1: 0.729 against 0.629 ms)
STAGES = {N_GLUON: 3, 2 * N_GLUON: 2}


if gluon is not None:
    # Triton 3.9 renamed the TMA copies (3.6: async_copy_global_to_shared / _shared_to_global)
    # and the CTA's barrier (3.6: thread_barrier)
    _tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
    _tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
    _barrier = getattr(gl, "thread_barrier", None) or gl.barrier
    # and the asynchronous copy (3.6: async_copy_global_to_shared)
    _cp_async = getattr(async_copy, "async_load", None) or async_copy.async_copy_global_to_shared

    @gluon.jit
    def _load_chunk(x_desc, b_desc, c_desc, bar, xs, b_s, c_s, k, row, xcol, bcol,
                    H2: gl.constexpr, HALVES: gl.constexpr, nbytes: gl.constexpr):
        """Chunk rows ``row..`` of x (columns ``xcol..``) into ``xs`` and of B and C (columns
        ``bcol..``, in ``HALVES`` boxes of ``H2`` columns) into slots ``k..`` of ``b_s`` and
        ``c_s``, by TMA, signalling ``bar``."""
        mbarrier.expect(bar, nbytes)
        _tma_load(x_desc, [row, xcol], bar, xs)
        for i in gl.static_range(HALVES):
            _tma_load(b_desc, [row, bcol + i * H2], bar, b_s.index(k + i))
            _tma_load(c_desc, [row, bcol + i * H2], bar, c_s.index(k + i))

    @gluon.jit
    def _factorable_g(etot_ptr, bh, NC, FACTOR_MIN: gl.constexpr):
        """Whether every chunk of row ``bh`` of the chunk decays exceeds FACTOR_MIN:
        :func:`.decays._factorable`, whose ``tl.arange`` without a layout Gluon refuses."""
        lay: gl.constexpr = gl.BlockedLayout([8], [32], [4], [0])
        offs = gl.arange(0, 1024, layout=lay)
        row = etot_ptr + bh * NC
        least = gl.min(gl.load(row + offs, mask=offs < NC, other=1.0), axis=0)
        for c0 in range(1024, NC, 1024):
            e = gl.load(row + c0 + offs, mask=c0 + offs < NC, other=1.0)
            least = gl.minimum(least, gl.min(e, axis=0))
        return least > FACTOR_MIN

    @gluon.jit
    def _load_rows(dec_ptr, bh, BH, TP, t0, rd, ri, re, bar, W_ROWS: gl.constexpr):
        """The pre-pass's rows dt, exp(-l) and exp(l) (rows 0, 5 and 3 of ``dec``; with
        W_ROWS ``w = dt exp(-l)`` and exp(l), rows 0 and 1, ``ri`` unused) at the chunk's
        positions from ``t0`` into the buffers ``rd``, ``ri``, ``re`` (one a row: in one
        buffer Triton's barrier analysis puts a CTA barrier between every two copies) by
        asynchronous copies, each thread arriving on ``bar`` when its copies have landed
        (``bar`` counts one arrival a thread beside the TMA's expect)."""
        pos = gl.arange(0, rd.shape[0], layout=gl.BlockedLayout([1], [32], [gl.num_warps()],
                                                                  [0]))
        _cp_async(rd, dec_ptr + bh * TP + t0 + pos)
        if W_ROWS:
            _cp_async(re, dec_ptr + (BH + bh) * TP + t0 + pos)
        else:
            _cp_async(ri, dec_ptr + (5 * BH + bh) * TP + t0 + pos)
            _cp_async(re, dec_ptr + (3 * BH + bh) * TP + t0 + pos)
        async_copy.mbarrier_arrive(bar, increment_count=False)

    @gluon.jit
    def _masked_g(Gm, keep):
        """``lower(G)`` in bf16, from the fp32 product G and ``keep``, an int16 tile of G's
        layout: -1 (all bits) on and below the diagonal, 0 above. Each pair of G's entries is
        rounded into one 32-bit word of two bf16 and ANDed with the pair of ``keep``'s
        words: 16 conversions and 16 ANDs a thread against 32 compares, 32 selects and 16
        conversions for ``where(lower, G, 0)``, whose mask LLVM moves past the rounding
        (then ptxas rounds G as soon as the next chunk's loads are issued, waiting there for
        both first products, before x is read: SASS, Triton 3.6). A plain AND of int16
        tiles LLVM makes a select again, hence the inline PTX. Proxy (Triton 3.6, n = 64):
        from G's wait to ``G u``'s issue 82 -> 31 instructions, 232 -> 220 registers; H100
        (benchmarks/NOTES.md s34, T = 16K) the forward at n = 64 unchanged (0.46 ms), at
        n = 128 0.57-0.59 -> 0.56-0.58; y bit for bit."""
        return gl.inline_asm_elementwise(
            "{ cvt.rn.bf16x2.f32 $0, $2, $1; and.b32 $0, $0, $3; }", "=r,r,r,r", [Gm, keep],
            dtype=gl.bfloat16, is_pure=True, pack=2)

    @gluon.jit
    def _chunks(x_desc, b_desc, c_desc, y_desc, dec_ptr, etot_ptr, hT_ptr, Dv, b, h, grp, pb,
                bh, BH, T, NC, PT, Q: gl.constexpr, P: gl.constexpr, N: gl.constexpr,
                STAGES: gl.constexpr, HAS_D: gl.constexpr, W_ROWS: gl.constexpr):
        """The loop over the chunks of one program (module docstring). B, C and the state
        ``S^T`` are held in ``HALVES = N / 64`` blocks of 64 columns (at N = 128: a TMA box of
        64 bf16 columns is the 128-byte swizzle's width), so that ``C B^T`` and ``C S^T`` are
        one product of K = 64 per half and the state's update one product per half. W_ROWS:
        the pre-pass wrote the factored loop's rows only (:data:`.decays.PRE_FACTORED`)."""
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                      instr_shape=[16, P, 16])
        mmaq: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, Q, 16])
        dotA: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
        dtype: gl.constexpr = x_desc.dtype
        sl: gl.constexpr = x_desc.layout
        H2: gl.constexpr = 64             # the columns of a half
        HALVES: gl.constexpr = N // H2

        TP = NC * Q
        x_s = gl.allocate_shared_memory(dtype, [STAGES, Q, P], sl)
        b_s = gl.allocate_shared_memory(dtype, [HALVES * STAGES, Q, H2], b_desc.layout)
        c_s = gl.allocate_shared_memory(dtype, [HALVES * STAGES, Q, H2], c_desc.layout)
        u_s = gl.allocate_shared_memory(dtype, [Q, P], sl)
        S_s = gl.allocate_shared_memory(dtype, [HALVES, H2, P], sl)   # the state entering
        if HALVES == 1:
            y_s = gl.allocate_shared_memory(dtype, [Q, P], y_desc.layout)
        else:
            # y leaves from u's buffer: with a buffer of its own the N = 128 kernel takes
            # 116240 B of shared memory, past the 115712 that two CTAs an SM allow
            y_s = u_s
        # the chunk's decay rows beside its tiles (_load_rows)
        rl: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
        rd_s = gl.allocate_shared_memory(gl.float32, [STAGES, Q], rl)
        ri_s = gl.allocate_shared_memory(gl.float32, [STAGES, Q], rl)
        re_s = gl.allocate_shared_memory(gl.float32, [STAGES, Q], rl)
        bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            # the TMA's expect, and each thread's copies of the rows
            mbarrier.init(bars.index(s), count=1 + gl.num_warps() * 32)

        row0 = b * T
        xcol = h * PT + pb * P
        nbytes: gl.constexpr = 2 * Q * (P + 2 * N)
        for s in gl.static_range(STAGES - 1):
            if s < NC:
                _load_rows(dec_ptr, bh, BH, TP, s * Q, rd_s.index(s), ri_s.index(s),
                           re_s.index(s), bars.index(s), W_ROWS)
                _load_chunk(x_desc, b_desc, c_desc, bars.index(s), x_s.index(s), b_s, c_s,
                            HALVES * s, row0 + s * Q, xcol, grp * N, H2, HALVES, nbytes)

        S0 = gl.zeros([H2, P], gl.float32, mma)
        S_s.index(0).store(S0.to(dtype))
        if HALVES == 2:
            S1 = gl.zeros([H2, P], gl.float32, mma)
            S_s.index(1).store(S1.to(dtype))
        fence_async_shared()
        zero = gl.zeros([Q, P], gl.float32, mma)
        zq = gl.zeros([Q, Q], gl.float32, mmaq)
        lower = (gl.arange(0, Q, layout=gl.SliceLayout(1, mmaq))[:, None]
                 >= gl.arange(0, Q, layout=gl.SliceLayout(0, mmaq))[None, :])
        keep = gl.where(lower, -1, 0).to(gl.int16)          # G's mask words (_masked_g)
        # the decay rows arrive with the chunk's tiles (loaded into registers, even two chunks
        # ahead, each chunk waited for them: ncu s23-4, s24-4, 13-15 % of the samples); the
        # chunk's total decay, a scalar, is loaded a chunk ahead, once the state has taken
        # the current one
        e_tot = gl.load(etot_ptr + bh * NC)
        for c in range(NC):
            slot = c % STAGES
            t0 = c * Q
            mbarrier.wait(bars.index(slot), (c // STAGES) & 1)
            xs = x_s.index(slot)
            b0 = b_s.index(HALVES * slot)
            c0 = c_s.index(HALVES * slot)
            Gm = warpgroup_mma(c0, b0.permute((1, 0)), zq, use_acc=False, is_async=True)
            if HALVES == 2:
                b1 = b_s.index(2 * slot + 1)
                c1 = c_s.index(2 * slot + 1)
                Gm = warpgroup_mma(c1, b1.permute((1, 0)), Gm, is_async=True)
            acc = warpgroup_mma(c0, S_s.index(0), zero, use_acc=False, is_async=True)
            if HALVES == 2:
                acc = warpgroup_mma(c1, S_s.index(1), acc, is_async=True)
            nxt = c + STAGES - 1
            if nxt < NC:
                ns = nxt % STAGES
                _load_rows(dec_ptr, bh, BH, TP, nxt * Q, rd_s.index(ns), ri_s.index(ns),
                           re_s.index(ns), bars.index(ns), W_ROWS)
                _load_chunk(x_desc, b_desc, c_desc, bars.index(ns), x_s.index(ns), b_s, c_s,
                            HALVES * ns, row0 + nxt * Q, xcol, grp * N, H2, HALVES, nbytes)
            # x read from shared memory once, in the products' layout, for u and for D x
            xm = xs.load(mma)
            w = rd_s.index(slot).load(gl.SliceLayout(1, mma))
            if not W_ROWS:
                w = w * ri_s.index(slot).load(gl.SliceLayout(1, mma))      # dt exp(-l)
            if HALVES == 2:
                tma.store_wait(pendings=0)      # the previous chunk's y has left u's buffer
            u_s.store((xm.to(gl.float32) * w[:, None]).to(dtype))
            fence_async_shared()
            S0 = warpgroup_mma(b0.permute((1, 0)), u_s, S0, is_async=True)
            if HALVES == 2:
                S1 = warpgroup_mma(b1.permute((1, 0)), u_s, S1, is_async=True)
            # in flight: C B^T and C S^T (HALVES groups each), then the state's HALVES; exp(l)
            # read before G's wait (read after it: 229 registers against 220, SASS s35)
            e_in = re_s.index(slot).load(gl.SliceLayout(1, mma))
            Gm = warpgroup_mma_wait(num_outstanding=2 * HALVES, deps=(Gm,))
            acc = warpgroup_mma(gl.convert_layout(_masked_g(Gm, keep), dotA), u_s, acc,
                                is_async=True)
            if HALVES == 2:
                S0, S1 = warpgroup_mma_wait(num_outstanding=1, deps=(S0, S1))
                S1 = S1 * e_tot
                S_s.index(1).store(S1.to(dtype))
            else:
                S0 = warpgroup_mma_wait(num_outstanding=1, deps=(S0,))
            S0 = S0 * e_tot
            S_s.index(0).store(S0.to(dtype))
            e_tot = gl.load(etot_ptr + bh * NC + gl.minimum(c + 1, NC - 1))
            yv = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            yv = yv * e_in[:, None]
            if HAS_D:
                yv = yv + xm.to(gl.float32) * Dv
            if HALVES == 1:
                tma.store_wait(pendings=0)      # the previous chunk's y has left y_s
            y_s.store(yv.to(dtype))
            fence_async_shared()                # for y's copy and the next chunk's S^T
            _tma_store(y_desc, [row0 + t0, xcol], y_s)
        tma.store_wait(pendings=0)
        # the final state, (b, H, PT, N) fp32, from the halves of S^T (N, P)
        offs_n = gl.arange(0, H2, layout=gl.SliceLayout(1, mma))
        offs_p = gl.arange(0, P, layout=gl.SliceLayout(0, mma))
        out = hT_ptr + bh * PT * N + (pb * P + offs_p[None, :]) * N + offs_n[:, None]
        gl.store(out, S0)
        if HALVES == 2:
            gl.store(out + H2, S1)
        for s in gl.static_range(STAGES):
            mbarrier.invalidate(bars.index(s))

    @gluon.jit
    def ssd_fwd_gluon_kernel(x_desc, b_desc, c_desc, y_desc, dec_ptr, etot_ptr, D_ptr, hT_ptr,
                             T, H, G, NC, PT,
                             Q: gl.constexpr, P: gl.constexpr, N: gl.constexpr,
                             STAGES: gl.constexpr, HAS_D: gl.constexpr,
                             FACTOR_MIN: gl.constexpr, W_ROWS: gl.constexpr,
                             PDL: gl.constexpr):
        """Grid ``(b * H * PT / P,)``: a program per (b, h, block of P of the PT columns of
        p); x, y as (b T, H PT) and B, C as (b T, G N) tensor descriptors of (Q, P) and (Q, N)
        blocks; ``dec``, ``etot`` the pre-pass's rows (W_ROWS: its ``PRE_FACTORED`` rows);
        hT (b, H, PT, N) fp32. PDL: launched as a programmatic dependent launch (:func:`pdl`):
        wait for the pre-pass to finish before reading its rows, then let the exact launch
        after this one start (both no-ops without the launch attribute)."""
        if PDL:
            gdc_wait()
            gdc_launch_dependents()
        NPB = PT // P
        pid = gl.program_id(0)
        pb = pid % NPB
        b = pid // NPB // H
        h = pid // NPB % H
        bh = (b * H + h).to(gl.int64)
        Dv = 0.0
        if HAS_D:
            Dv = gl.load(D_ptr + h).to(gl.float32)
        if _factorable_g(etot_ptr, bh, NC, FACTOR_MIN):
            _chunks(x_desc, b_desc, c_desc, y_desc, dec_ptr, etot_ptr, hT_ptr, Dv, b, h,
                    h // (H // G), pb, bh, gl.num_programs(0) // NPB, T, NC, PT, Q, P, N,
                    STAGES, HAS_D, W_ROWS)


def switched_on(x, capability=None) -> bool:
    """Whether the Gluon kernels (this module's and :mod:`.gluon_bwd`'s) may run on the CUDA
    tensor ``x``'s device: this Triton has Gluon's Hopper API, the interpreter is off,
    ``SEMISEP_TRITON_GLUON`` is not 0 and the device is sm_90 (``capability``: the device's,
    read from x's device when None)."""
    return (gluon is not None and _env("SEMISEP_TRITON_GLUON", "1") == "1" and not _interpret()
            and (capability or device_capability(x.device)) == (9, 0))


def _shapes_ok(x, B, D, z, h0, seq_idx, capability):
    """What :func:`eligible` asks of the call itself (not of its plan)."""
    b, T, h, p = x.shape
    return (x.is_cuda and x.dtype == torch.bfloat16 and B.shape[3] in (N_GLUON, 2 * N_GLUON)
            and p % Q_GLUON == 0 and T % Q_GLUON == 0 and T > 0 and z is None
            and h0 is None and seq_idx is None and (D is None or D.dim() == 1)
            and switched_on(x, capability))


def wants_chunks_of_64(x, B, D, z, h0, seq_idx, capability=None) -> bool:
    """Whether the launcher should plan an n = 128 forward in chunks of 64 without GRAM (its
    default there is chunks of 32 with GRAM), which this kernel then takes."""
    return B.shape[3] == 2 * N_GLUON and _shapes_ok(x, B, D, z, h0, seq_idx, capability)


def eligible(x, B, C, D, z, h0, seq_idx, Q, fwd_opts, capability=None) -> bool:
    """Whether a forward's factored launch runs this kernel (module docstring): x, B, C as the
    launcher passes them (contiguous, B and C in x's dtype), ``fwd_opts`` the Triton launches
    its plan holds (two: a factored and an exact one), ``capability`` the device's (read from
    x's device when None)."""
    if not (Q == Q_GLUON and B.dtype == torch.bfloat16 and len(fwd_opts) == 2
            and fwd_opts[0].kwargs["FACTORED"] and not fwd_opts[0].kwargs["GRAM"]
            and not fwd_opts[0].kwargs["SPANS"]):
        return False
    if x.data_ptr() % 16 or B.data_ptr() % 16 or C.data_ptr() % 16:     # TMA's alignment
        return False
    return _shapes_ok(x, B, D, z, h0, seq_idx, capability)


def pdl() -> bool:
    """Whether the forward's launches around this kernel are programmatic dependent launches
    (``SEMISEP_TRITON_PDL=1``; off by default): the pre-pass lets this kernel launch once its
    programs have all started, this kernel's programs wait for it to finish
    (``griddepcontrol.wait``) and let the exact launch after it start, whose programs wait
    for this one. Each hides a launch's latency and its programs' start behind the tail of
    the kernel before it. Never under the interpreter, which has no such launch. Off because
    it bought nothing where it was meant to (H100, NOTES s32-1, N = 64, medians of three):
    the forward at 4K 0.124 -> 0.121 ms, at 16K 0.465 -> 0.468, and 0.460 -> 0.469 with G
    masked late (s32's ``LATE_G``, since the kernel's only form); nor the pair pre-pass ->
    this kernel alone (s38: 0.454-0.461 against 0.454-0.456)."""
    return _env("SEMISEP_TRITON_PDL", "0") == "1" and not _interpret()


#: The least ``b h T`` whose forward runs the exact launch on a side stream by default
#: (:func:`exact_aside`): 2^22, T = 16K at b = 8, h = 32, where the device time (0.40-0.45 ms)
#: dwarfs the stream switches and waits on the host (+0.02-0.03 ms a call on the H100
#: machine's host, s38), which cost more than they save where the host sets the pace (8K).
EXACT_ASIDE_AT_LEAST = 2 ** 22


def exact_aside(size: int) -> bool:
    """Whether the forward's exact launch, whose programs for the (b, h) pairs this kernel
    takes only read their chunk decays and return, runs on a side stream beside this kernel
    instead of after it, for a call of ``size = b h T``: a 2 us kernel and a launch gap off
    the critical path (H100, s38, N = 64 16K: 0.451 -> 0.448 ms, medians of three, y bit for
    bit; the host +0.02-0.03 ms). ``SEMISEP_TRITON_EXACT_ASIDE=1`` / ``0`` forces it on /
    off; else from :data:`EXACT_ASIDE_AT_LEAST`."""
    knob = _env("SEMISEP_TRITON_EXACT_ASIDE")
    return size >= EXACT_ASIDE_AT_LEAST if knob is None else knob == "1"


def launch_fwd(x, B, C, D, dec, etot, y, hT, w_rows, pdl=False):
    """Launch :func:`ssd_fwd_gluon_kernel` into ``y`` and ``hT`` (x, B, C contiguous, B and C
    in x's dtype), with a ring of :data:`STAGES` chunks; ``w_rows``: ``dec`` holds the
    pre-pass's ``PRE_FACTORED`` rows (else all of them); ``pdl``: as a programmatic dependent
    launch (:func:`pdl`)."""
    b, T, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    rows = b * T
    views = ((x, rows, h * p), (B, rows, g * n), (C, rows, g * n), (y, rows, h * p))
    args = (dec, etot, D if D is not None else hT, hT, T, h, g, T // Q_GLUON, p)
    consts = dict(Q=Q_GLUON, P=64, N=n, STAGES=STAGES[n], HAS_D=D is not None,
                  FACTOR_MIN=_FACTOR_MIN, W_ROWS=w_rows, PDL=pdl)
    launch(ssd_fwd_gluon_kernel, (b * h * (p // 64), 1, 1), views, args, consts, x.device,
           pdl=pdl)

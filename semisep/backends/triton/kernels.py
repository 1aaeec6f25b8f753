"""Triton kernels of the chunked SSD (forward, backward) and the decode step.

One program owns one (batch, head, block of the head dimension p) and walks
the chunks of the sequence in order, carrying the state ``S`` (p, n) in fp32
registers: x is read once and y written once, no chunk states go to memory.
The rows of ``S`` (indexed by p) evolve independently, so splitting p over
programs is exact.

Per chunk of ``Q`` steps (local positions i, j), with l the chunk-local
cumulative log-decay::

    G_ij = C_i . B_j,  L_ij = exp(l_i - l_j) (i >= j, else 0)
    y    = (G o L) xs + exp(l) * (C S^T)
    S   <- exp(l_end) S + (xs * exp(l_end - l))^T B

Decays: the log-decays are clamped at ``-CLAMP`` (a reset ``-inf`` becomes
``-CLAMP``; any segment holding one has ``exp <= exp(-CLAMP) = 0`` in fp32, so the
result is unchanged), scaled to base 2 and summed within the chunk in fp64.
The fp64 prefix sums are split into ``hi + lo`` fp32 pairs, and
``l_i - l_j = (hi_i - hi_j) + (lo_i - lo_j)`` is then correct to fp32 rounding
of the segment sum itself, for any magnitude: no cancellation, no NaN.

Factored loops: where every chunk of a (batch, head) decays by more than ``FACTOR_MIN``
(2^-64), ``L = diag(exp(l)) 1_lower diag(exp(-l))`` and ``exp(l_end - l) = exp(l_end) exp(-l)``
are products of fp32 normals, so each sweep scales its operands by ``exp(-l)`` / ``exp(l)`` once
and masks ``G`` or ``M`` to the lower triangle instead of forming a Q x Q decay tile. The other
(batch, head) pairs (resets, extreme decays, float16 inputs) run the exact loop. Each sweep is
launched once per loop kind and a program runs in the launch its chunk decays pick
(:func:`_skip`).

Backward: a decay pre-pass (on by default); two sweeps, each recomputing what it needs:

* forward sweep (carries S): ``dC = (M o L) B + exp(l) (dy S_in)`` with ``M = dy xs^T``,
  ``dz`` (recomputing y), ``dD``, ``w_t = r1off_t + rowP_t - colP_t`` (below) and the state
  after each chunk (bf16 for bf16 inputs, fp32 for fp32);
* reverse sweep (carries the adjoint dS (p, n)):
  ``dxs = (G o L)^T dy + exp(l_end - l) (B dS^T)``,
  ``dB = (M o L)^T C + exp(l_end - l) (xs dS)``,
  ``dS <- exp(l_end) dS + (dy exp(l))^T C``; at the start dS is d(initial state).

The log-decay gradient is chunk-local, never a running sum over the sequence:
``dla_t = sum_{i >= t > j in the chunk} P_ij + sum_{i >= t} (r1off - r2off)_i + <dS_out, S_out>``
with ``P = G o L o M`` (fp32, strictly lower), ``r1off_i = dy_i . exp(l_i) S_in C_i`` and
``r2off_j = xs_j . exp(l_end - l_j) dS B_j``: the pairs inside the chunk that straddle t, those
entering or leaving the chunk, and all that cross its end, the last from the two states at that
boundary. The first sum is ``sum_{i >= t} (rowP - colP)_i`` (row and column sums of P), which
the forward sweep folds into ``w`` (it has G and M; the reverse sweep, the one short of
registers, then forms no P tile).
"""

from __future__ import annotations

import triton
import triton.language as tl

FACTOR_MIN = tl.constexpr(2.0 ** -64)  # chunks decaying less than this are factored
CLAMP = 128.0          # |log-decay| beyond which exp(...) is 0 in fp32 anyway
LOG2E = 1.4426950408889634


@triton.jit
def _softplus(v):
    # softplus(v) = max(v, 0) + log1p(exp(-|v|)), log1p by the w = 1 + u trick
    u = tl.exp(-tl.abs(v))
    w = 1.0 + u
    lp = tl.where(w == 1.0, u, tl.log(w) * u / (w - 1.0))
    return tl.maximum(v, 0.0) + lp


@triton.jit
def _chunk_decays(dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64, h, H, T, t,
                  HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
                  HAS_SEQ: tl.constexpr, CLAMP_C: tl.constexpr):
    """For positions ``t`` (int64, Q): ``(dt, la2, hi, lo, tot, keep, sig)``.

    dt: the factor on x (1 without dt); la2: clamped log2-decays (0 past T);
    hi + lo: their chunk-local inclusive prefix sums; tot: the chunk's sum (fp64);
    keep: 1 where the log-decay is not clamped (its gradient passes) and t < T, else 0;
    sig: d dt / d raw dt (the softplus' sigmoid, or 1).
    """
    mask_t = t < T
    raw = tl.load(dt_ptr + (b64 * T + t) * H + h, mask=mask_t, other=0.0).to(tl.float32)
    if HAS_DT:
        if HAS_DTB:
            raw += tl.load(dtb_ptr + h).to(tl.float32)
        if DT_SOFTPLUS:
            dtv = _softplus(raw)
            sig = tl.sigmoid(raw)
        else:
            dtv = raw
            sig = tl.full(raw.shape, 1.0, tl.float32)
        la = dtv * tl.load(A_ptr + h).to(tl.float32)
    else:
        dtv = tl.full(raw.shape, 1.0, tl.float32)
        sig = dtv
        la = raw
    if HAS_SEQ:
        s_cur = tl.load(seq_ptr + b64 * T + t, mask=mask_t, other=0)
        s_prev = tl.load(seq_ptr + b64 * T + t - 1, mask=mask_t & (t > 0), other=0)
        la = tl.where((t > 0) & (s_cur != s_prev), float("-inf"), la)
    keep = tl.where(mask_t & (la >= -CLAMP_C), 1.0, 0.0)
    la = tl.maximum(la, -CLAMP_C)
    la = tl.where(mask_t, la, 0.0)
    la2 = la * 1.4426950408889634
    l64 = tl.cumsum(la2.to(tl.float64), axis=0)
    hi = l64.to(tl.float32)
    lo = (l64 - hi.to(tl.float64)).to(tl.float32)
    tot = tl.sum(la2.to(tl.float64), axis=0)
    return dtv, la2, hi, lo, tot, keep, sig


@triton.jit
def _decays_all(PRE: tl.constexpr, dec_ptr, etot_ptr, BH, NC, c,
                dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64, h, H, T, t,
                HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
                HAS_SEQ: tl.constexpr, CLAMP_C: tl.constexpr):
    """``(dtv, hi, lo, e_in, to_end, e_tot, inv)`` for the positions ``t`` of chunk ``c``.

    PRE: loaded from the arrays of :func:`ssd_decays_kernel` (coalesced, prefetchable);
    else computed here. e_in = exp(l_i), to_end = exp(l_end - l_i), e_tot = exp(l_end),
    inv = exp(-l_i) (used only when the chunk's total decay keeps it finite, see _L_tile).
    """
    if PRE:
        # rows of length NC * Q: the padded tail of the last chunk holds the continuation
        # (log-decay 0), never a fill value that would break the prefix sums' monotonicity
        bh64 = b64 * H + h
        TP = NC * t.shape[0]
        dtv = tl.load(dec_ptr + bh64 * TP + t)
        hi = tl.load(dec_ptr + (BH + bh64) * TP + t)
        lo = tl.load(dec_ptr + (2 * BH + bh64) * TP + t)
        e_in = tl.load(dec_ptr + (3 * BH + bh64) * TP + t)
        to_end = tl.load(dec_ptr + (4 * BH + bh64) * TP + t)
        inv = tl.load(dec_ptr + (5 * BH + bh64) * TP + t)
        e_tot = tl.load(etot_ptr + bh64 * NC + c)
    else:
        dtv, la2, hi, lo, tot, _, _ = _chunk_decays(
            dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64, h, H, T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB,
            HAS_SEQ, CLAMP_C)
        e_in = tl.exp2(hi + lo)
        to_end = tl.exp2((tot - hi.to(tl.float64)).to(tl.float32) - lo)
        e_tot = tl.exp2(tot.to(tl.float32))
        inv = tl.exp2(tl.minimum(-(hi + lo), 126.0))
    return dtv, hi, lo, e_in, to_end, e_tot, inv


@triton.jit
def _L_tile(hi, lo, e_in, inv, e_tot, offs_q, TRANSPOSED: tl.constexpr,
            FACTOR: tl.constexpr = True):
    """The chunk's decay tile L[i, j] = exp(l_i - l_j) (i >= j), or its transpose.

    When the chunk's total decay is above 2^-100 every exp(l_i) and exp(-l_j) is a normal
    fp32 number and L = exp(l_i) * exp(-l_j) (2 roundings, no exponential per entry);
    otherwise (strong decay, resets) the exact per-entry form of _decay_tile.
    """
    if FACTOR and e_tot > 7.888609052210118e-31:
        if TRANSPOSED:
            L = tl.where(offs_q[None, :] >= offs_q[:, None], inv[:, None] * e_in[None, :], 0.0)
        else:
            L = tl.where(offs_q[:, None] >= offs_q[None, :], e_in[:, None] * inv[None, :], 0.0)
    else:
        L = _decay_tile(hi, lo, offs_q, TRANSPOSED)
    return L


@triton.jit
def ssd_decays_kernel(dt_ptr, A_ptr, dtb_ptr, seq_ptr, dec_ptr, etot_ptr, T, H,
                      HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
                      HAS_SEQ: tl.constexpr, Q: tl.constexpr, CLAMP_C: tl.constexpr,
                      GRAD_ROWS: tl.constexpr = True):
    """The per-position decay data of every chunk, once, for the sweeps (grid (chunks, b*h)):
    rows 0-5 for every sweep, rows 6-7 (clamp mask, softplus slope) for the backward's
    (``GRAD_ROWS``)."""
    c = tl.program_id(0)
    bh = tl.program_id(1)
    BH = tl.num_programs(1)
    NC = tl.num_programs(0)
    b64 = (bh // H).to(tl.int64)
    h = bh % H
    t = c * Q + tl.arange(0, Q).to(tl.int64)
    dtv, hi, lo, e_in, to_end, e_tot, inv = _decays_all(False, dec_ptr, etot_ptr, BH, NC, c,
                                                   dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64, h, H,
                                                   T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ,
                                                   CLAMP_C)
    bh64 = b64 * H + h
    TP = NC * Q
    tl.store(dec_ptr + bh64 * TP + t, dtv)
    tl.store(dec_ptr + (BH + bh64) * TP + t, hi)
    tl.store(dec_ptr + (2 * BH + bh64) * TP + t, lo)
    tl.store(dec_ptr + (3 * BH + bh64) * TP + t, e_in)
    tl.store(dec_ptr + (4 * BH + bh64) * TP + t, to_end)
    tl.store(dec_ptr + (5 * BH + bh64) * TP + t, inv)
    tl.store(etot_ptr + bh64 * NC + c, e_tot)
    if GRAD_ROWS:
        _, _, _, _, _, keep, sig = _chunk_decays(dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64, h, H, T,
                                                 t, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ,
                                                 CLAMP_C)
        tl.store(dec_ptr + (6 * BH + bh64) * TP + t, keep)
        tl.store(dec_ptr + (7 * BH + bh64) * TP + t, sig)


@triton.jit
def _dt_grad_factors(PRE: tl.constexpr, dec_ptr, BH, NC, dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64,
                     h, H, T, t, HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr,
                     HAS_DTB: tl.constexpr, HAS_SEQ: tl.constexpr, CLAMP_C: tl.constexpr):
    """``(keep, sig)`` of :func:`_chunk_decays` for positions ``t``: from the pre-pass's rows
    6 and 7, or computed."""
    if PRE:
        TP = NC * t.shape[0]
        bh64 = b64 * H + h
        keep = tl.load(dec_ptr + (6 * BH + bh64) * TP + t)
        sig = tl.load(dec_ptr + (7 * BH + bh64) * TP + t)
    else:
        _, _, _, _, _, keep, sig = _chunk_decays(dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64, h, H, T,
                                                 t, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ,
                                                 CLAMP_C)
    return keep, sig


@triton.jit
def _decay_tile(hi, lo, offs_q, TRANSPOSED: tl.constexpr):
    """``L[i, j] = exp2(l_i - l_j)`` for i >= j, else 0 (or its transpose)."""
    if TRANSPOSED:
        seg = (hi[None, :] - hi[:, None]) + (lo[None, :] - lo[:, None])
        keep = offs_q[None, :] >= offs_q[:, None]
    else:
        seg = (hi[:, None] - hi[None, :]) + (lo[:, None] - lo[None, :])
        keep = offs_q[:, None] >= offs_q[None, :]
    seg = tl.where(keep, seg, float("-inf"))
    return tl.exp2(seg)


@triton.jit
def _skip(etot_ptr, pid_bh, NC, FAST: tl.constexpr, FACTORED: tl.constexpr):
    """Whether this program belongs to the other launch (see :func:`ssd_fwd_kernel`): its row
    of the pre-pass's chunk decays ``etot`` says whether every chunk is above FACTOR_MIN."""
    skip = False
    if FAST:
        row = etot_ptr + pid_bh.to(tl.int64) * NC
        offs = tl.arange(0, 1024)
        least = tl.min(tl.load(row + offs, mask=offs < NC, other=1.0), axis=0)
        for c0 in range(1024, NC, 1024):
            e = tl.load(row + c0 + offs, mask=c0 + offs < NC, other=1.0)
            least = tl.minimum(least, tl.min(e, axis=0))
        skip = (least > FACTOR_MIN) != FACTORED
    return skip


@triton.jit
def _program(H, G):
    """``(pid_p, pid_bh, b, h, group)`` of a sweep's program (grid ``(p-blocks, b * H)``);
    ``b`` in int64, for the offsets."""
    pid_p = tl.program_id(0)
    pid_bh = tl.program_id(1)
    h = pid_bh % H
    return pid_p, pid_bh, (pid_bh // H).to(tl.int64), h, h // (H // G)


@triton.jit
def _state_tile(b64, h, H, P, N, offs_p, offs_n, TRANSPOSED: tl.constexpr = False):
    """``(offsets, mask)`` of this program's block of a (b, H, P, N) state, as a (p, n) tile
    or (``TRANSPOSED``) an (n, p) one."""
    if TRANSPOSED:
        off = ((b64 * H + h) * P + offs_p[None, :]) * N + offs_n[:, None]
        mask = (offs_p < P)[None, :] & (offs_n < N)[:, None]
    else:
        off = ((b64 * H + h) * P + offs_p[:, None]) * N + offs_n[None, :]
        mask = (offs_p < P)[:, None] & (offs_n < N)[None, :]
    return off, mask


@triton.jit
def _slot(pid_p, pid_bh):
    """This program's row among the per-(p-block, b, h) rows of w, dsum (int64)."""
    return pid_p.to(tl.int64) * tl.num_programs(1) + pid_bh


@triton.jit
def _state_rows(st_ptr, b64, h, H, NC, P, N, offs_p, offs_n, STATE_EVERY: tl.constexpr):
    """``(row0, loc)``: where this (b, h)'s stored chunk states start (one per chunk, or per
    two with ``STATE_EVERY=2``) and this program's block within one."""
    row0 = st_ptr + (b64 * H + h) * tl.cdiv(NC, STATE_EVERY) * P * N
    return row0, offs_p[:, None] * N + offs_n[None, :]


@triton.jit
def _start(ptr, b64, i, T, W, D):
    """Where slot ``i`` of batch entry ``b`` starts in a (b, T, W, D) array (x: W = H, D = P;
    B, C: W = G, D = N); rows t then lie ``W * D`` apart (see :func:`_tile`)."""
    return ptr + (b64 * T * W + i) * D


@triton.jit
def _tile(base, t, stride, offs):
    """Pointers to rows ``t`` (``stride`` apart) and columns ``offs`` from ``base``."""
    return base + t[:, None] * stride + offs[None, :]


@triton.jit
def _ld(ptrs, mask, EVEN: tl.constexpr):
    """Load a tile of a chunk: unmasked when ``EVEN`` (whole chunks, whole p and n blocks)."""
    if EVEN:
        v = tl.load(ptrs)
    else:
        v = tl.load(ptrs, mask=mask, other=0.0)
    return v


@triton.jit
def _st(ptrs, v, mask, EVEN: tl.constexpr):
    """Store a tile of a chunk: unmasked when ``EVEN`` (see :func:`_ld`)."""
    if EVEN:
        tl.store(ptrs, v)
    else:
        tl.store(ptrs, v, mask=mask)


@triton.jit
def _chunk_inputs(x_base, B_base, C_base, t, T, H, G, P, N, offs_p, offs_n, EVEN: tl.constexpr):
    """``(mask_t, m_tp, m_tn, x, B, C)``: the masks and the x, B, C tiles of positions ``t``
    (the masks go unused, and so cost nothing, when ``EVEN``)."""
    mask_t = t < T
    m_tp = mask_t[:, None] & (offs_p < P)[None, :]
    m_tn = mask_t[:, None] & (offs_n < N)[None, :]
    x = _ld(_tile(x_base, t, H * P, offs_p), m_tp, EVEN)
    Bt = _ld(_tile(B_base, t, G * N, offs_n), m_tn, EVEN)
    Ct = _ld(_tile(C_base, t, G * N, offs_n), m_tn, EVEN)
    return mask_t, m_tp, m_tn, x, Bt, Ct


@triton.jit
def _load_D(D_ptr, h, P, offs_p, D_PER_P: tl.constexpr):
    """The skip weight, fp32: a row over p (D of shape (H, P)) or the head's scalar."""
    # one return statement: Triton 3.6 checks every return of a function for one type
    if D_PER_P:
        Dv = tl.load(D_ptr + h * P + offs_p, mask=offs_p < P, other=0.0)
    else:
        Dv = tl.load(D_ptr + h)
    return Dv.to(tl.float32)


@triton.jit
def _plus_D(acc, v, Dv, D_PER_P: tl.constexpr):
    """``acc + v D`` for a tile ``v`` (rows t, columns p) and ``Dv`` from :func:`_load_D`."""
    if D_PER_P:
        out = acc + v * Dv[None, :]
    else:
        out = acc + v * Dv
    return out


@triton.jit
def _grad_rows(ptr, pid_p, b64, h, grp, T, H, G, N, ATOMIC: tl.constexpr):
    """``(base, row stride)`` of a B or C gradient. ATOMIC: the fp32 (b, T, G, N) buffer
    that the heads and p-blocks add into; else this program's fp32 partial in
    (p-blocks, b, T, H, N)."""
    if ATOMIC:
        base = _start(ptr, b64, grp, T, G, N)
        stride = G * N
    else:
        pb_b = pid_p.to(tl.int64) * (tl.num_programs(1) // H) + b64
        base = ptr + (pb_b * T * H + h) * N
        stride = H * N
    return base, stride


@triton.jit
def _put_grad(ptrs, v, mask, ATOMIC: tl.constexpr, EVEN: tl.constexpr):
    """Add (ATOMIC, relaxed) or store a B or C gradient tile at :func:`_grad_rows`'s rows."""
    if ATOMIC:
        if EVEN:
            tl.atomic_add(ptrs, v, sem="relaxed")
        else:
            tl.atomic_add(ptrs, v, mask=mask, sem="relaxed")
    else:
        _st(ptrs, v, mask, EVEN)


@triton.jit
def _kahan_add(total, err, v):
    """``(total, err)`` after adding ``v`` to a compensated (Kahan) sum."""
    y = v - err
    t = total + y
    return t, (t - total) - y


@triton.jit
def _state_nt(S, STATE_T: tl.constexpr):
    """The state as an (n, p) tile, from its (n, p) (``STATE_T``) or (p, n) form."""
    if STATE_T:
        out = S
    else:
        out = tl.trans(S)
    return out


@triton.jit
def _state_update(S, u, Bt, STATE_T: tl.constexpr, PREC: tl.constexpr):
    """``S + u^T B`` in the state's form (``STATE_T``: ``S^T + B^T u``)."""
    if STATE_T:
        out = tl.dot(tl.trans(Bt), u, S, input_precision=PREC)
    else:
        out = tl.dot(tl.trans(u), Bt, S, input_precision=PREC)
    return out


@triton.jit
def ssd_fwd_kernel(
    x_ptr, dt_ptr, A_ptr, dtb_ptr, B_ptr, C_ptr, D_ptr, z_ptr, h0_ptr, seq_ptr,
    dec_ptr, etot_ptr,
    y_ptr, hT_ptr,
    T, H, G, P, N,
    HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
    HAS_D: tl.constexpr, D_PER_P: tl.constexpr, HAS_Z: tl.constexpr, HAS_H0: tl.constexpr,
    HAS_SEQ: tl.constexpr, STORE_HT: tl.constexpr,
    Q: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
    CLAMP_C: tl.constexpr, PRE: tl.constexpr = False, FACTOR: tl.constexpr = True,
    FAST: tl.constexpr = False, FACTORED: tl.constexpr = False, EVEN: tl.constexpr = False,
    UNROLL: tl.constexpr = 1, STATE_T: tl.constexpr = True,
):
    """The forward sweep. UNROLL: chunks per loop iteration (an experiment: more independent
    work in view of the scheduler, benchmarks/NOTES.md).

    FAST (needs PRE): the kernel is launched twice, FACTORED and not, and each program runs
    in the launch that matches whether every chunk of its (b, h) decays by more than
    FACTOR_MIN. FACTORED: the decay tile is
    ``L = diag(exp(l)) 1_lower diag(exp(-l))`` and ``exp(l_end - l) = exp(l_end) exp(-l)``,
    so one scaled copy of x, ``u = xs exp(-l)``, serves both products and no Q x Q decay
    tile is formed. (A per-chunk branch around the dots instead defeats Triton's pipelining.)

    STATE_T: the state is carried transposed, ``S^T`` (n, p), and every dot takes its operands
    as loaded or computed, or a loaded tile transposed. Triton 3.6 on sm_90 miscompiled the
    (p, n) form's dots on transposed register tiles when p came in blocks of 32 (H200 run 19:
    wrong y, illegal addresses); the (p, n) form stays for n > 64 with p in blocks of 64,
    where it spills less (run 20: 1.20 against 1.52 ms at N = 128, T = 16K).
    """
    pid_p, pid_bh, b64, h, grp = _program(H, G)
    if _skip(etot_ptr, pid_bh, tl.cdiv(T, Q), FAST, FACTORED):
        return
    offs_q = tl.arange(0, Q)
    offs_p = pid_p * BP + tl.arange(0, BP)
    offs_n = tl.arange(0, BN)
    dtype = x_ptr.dtype.element_ty

    x_base = _start(x_ptr, b64, h, T, H, P)
    y_base = _start(y_ptr, b64, h, T, H, P)
    z_base = _start(z_ptr, b64, h, T, H, P)
    B_base = _start(B_ptr, b64, grp, T, G, N)
    C_base = _start(C_ptr, b64, grp, T, G, N)
    st_off, st_mask = _state_tile(b64, h, H, P, N, offs_p, offs_n, STATE_T)

    if HAS_H0:
        S = tl.load(h0_ptr + st_off, mask=st_mask, other=0.0).to(tl.float32)
    elif STATE_T:
        S = tl.zeros((BN, BP), dtype=tl.float32)
    else:
        S = tl.zeros((BP, BN), dtype=tl.float32)
    if HAS_D:
        Dv = _load_D(D_ptr, h, P, offs_p, D_PER_P)

    n_chunks = tl.cdiv(T, Q)
    for c in tl.range(0, n_chunks, loop_unroll_factor=UNROLL):
        t = c * Q + offs_q.to(tl.int64)
        dtv, hi, lo, e_in, to_end, e_tot, inv = _decays_all(
            PRE, dec_ptr, etot_ptr, tl.num_programs(1), n_chunks, c, dt_ptr, A_ptr, dtb_ptr,
            seq_ptr, b64, h, H, T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ, CLAMP_C)
        mask_t, m_tp, m_tn, x, Bt, Ct = _chunk_inputs(x_base, B_base, C_base, t, T, H, G, P, N,
                                                      offs_p, offs_n, EVEN)
        Gm = tl.dot(Ct, tl.trans(Bt), input_precision=PREC)
        acc = tl.dot(Ct, _state_nt(S, STATE_T).to(dtype), input_precision=PREC)
        if FACTORED:
            u = (x.to(tl.float32) * (dtv * inv)[:, None]).to(dtype)
            W = tl.where(offs_q[:, None] >= offs_q[None, :], Gm, 0.0).to(dtype)
            acc = tl.dot(W, u, acc, input_precision=PREC) * e_in[:, None]
            S = _state_update(S, u, Bt, STATE_T, PREC) * e_tot
        else:
            if HAS_DT:
                xs = (x.to(tl.float32) * dtv[:, None]).to(dtype)
            else:
                xs = x
            W = (Gm * _L_tile(hi, lo, e_in, inv, e_tot, offs_q, False, FACTOR)).to(dtype)
            acc = tl.dot(W, xs, acc * e_in[:, None], input_precision=PREC)
            xd = (x.to(tl.float32) * (dtv * to_end)[:, None]).to(dtype)
            S = _state_update(S * e_tot, xd, Bt, STATE_T, PREC)
        if HAS_D:
            acc = _plus_D(acc, x.to(tl.float32), Dv, D_PER_P)
        if HAS_Z:
            zz = _ld(_tile(z_base, t, H * P, offs_p), m_tp, EVEN).to(tl.float32)
            acc = acc * zz * tl.sigmoid(zz)
        _st(_tile(y_base, t, H * P, offs_p), acc.to(dtype), m_tp, EVEN)

    if STORE_HT:
        tl.store(hT_ptr + st_off, S.to(hT_ptr.dtype.element_ty), mask=st_mask)


@triton.jit
def ssd_bwd_fwdsweep_kernel(
    x_ptr, dt_ptr, A_ptr, dtb_ptr, B_ptr, C_ptr, D_ptr, z_ptr, h0_ptr, seq_ptr, dy_ptr,
    dec_ptr, etot_ptr,
    dhT_ptr,
    dC_ptr, w_ptr, dz_ptr, dD_ptr, st_ptr,
    T, H, G, P, N, NPB,
    HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
    HAS_D: tl.constexpr, D_PER_P: tl.constexpr, HAS_Z: tl.constexpr, HAS_H0: tl.constexpr,
    HAS_SEQ: tl.constexpr, HAS_DHT: tl.constexpr,
    Q: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
    CLAMP_C: tl.constexpr, PRE: tl.constexpr = False, FACTOR: tl.constexpr = True,
    ATOMIC: tl.constexpr = False, FAST: tl.constexpr = False, FACTORED: tl.constexpr = False,
    EVEN: tl.constexpr = False, STATE_EVERY: tl.constexpr = 1,
):
    """Forward sweep of the backward: dC (partial or added in place), dz, dD partial,
    ``w = r1off + rowP - colP`` (module docstring), and the state after each chunk (for
    <dS_out, S_out>), or with ``STATE_EVERY=2`` after each odd chunk only (half the memory;
    the reverse sweep redoes the other step).
    FAST, FACTORED: as in :func:`ssd_fwd_kernel`."""
    pid_p, pid_bh, b64, h, grp = _program(H, G)
    if _skip(etot_ptr, pid_bh, tl.cdiv(T, Q), FAST, FACTORED):
        return
    offs_q = tl.arange(0, Q)
    offs_p = pid_p * BP + tl.arange(0, BP)
    offs_n = tl.arange(0, BN)
    mask_p = offs_p < P
    dtype = x_ptr.dtype.element_ty

    x_base = _start(x_ptr, b64, h, T, H, P)
    dy_base = _start(dy_ptr, b64, h, T, H, P)
    z_base = _start(z_ptr, b64, h, T, H, P)
    dz_base = _start(dz_ptr, b64, h, T, H, P)
    B_base = _start(B_ptr, b64, grp, T, G, N)
    C_base = _start(C_ptr, b64, grp, T, G, N)
    dC_base, dC_rs = _grad_rows(dC_ptr, pid_p, b64, h, grp, T, H, G, N, ATOMIC)
    w_base = w_ptr + _slot(pid_p, pid_bh) * T
    st_off, st_mask = _state_tile(b64, h, H, P, N, offs_p, offs_n)
    NC = tl.cdiv(T, Q)
    st_row0, st_loc = _state_rows(st_ptr, b64, h, H, NC, P, N, offs_p, offs_n, STATE_EVERY)

    if HAS_H0:
        S = tl.load(h0_ptr + st_off, mask=st_mask, other=0.0).to(tl.float32)
    else:
        S = tl.zeros((BP, BN), dtype=tl.float32)
    if HAS_D:
        Dv = _load_D(D_ptr, h, P, offs_p, D_PER_P)
        dD_acc = tl.zeros((BP,), dtype=tl.float32)

    for c in range(0, NC):
        t = c * Q + offs_q.to(tl.int64)
        dtv, hi, lo, e_in, to_end, e_tot, inv = _decays_all(
            PRE, dec_ptr, etot_ptr, tl.num_programs(1), NC, c, dt_ptr, A_ptr, dtb_ptr,
            seq_ptr, b64, h, H, T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ, CLAMP_C)
        mask_t, m_tp, m_tn, x, Bt, Ct = _chunk_inputs(x_base, B_base, C_base, t, T, H, G, P, N,
                                                      offs_p, offs_n, EVEN)
        dyo = _ld(_tile(dy_base, t, H * P, offs_p), m_tp, EVEN).to(tl.float32)
        if HAS_DT:
            xs = (x.to(tl.float32) * dtv[:, None]).to(dtype)
        else:
            xs = x
        if FACTORED:
            # L_ij = e_in_i inv_j: with u = xs inv, (G o L) xs = e_in (G_lower u) and
            # (M o L) B = e_in ((dy u^T)_lower B)
            u = (x.to(tl.float32) * (dtv * inv)[:, None]).to(dtype)
        else:
            L = _L_tile(hi, lo, e_in, inv, e_tot, offs_q, False, FACTOR)
        Gm = tl.dot(Ct, tl.trans(Bt), input_precision=PREC)
        if HAS_Z:
            zz = _ld(_tile(z_base, t, H * P, offs_p), m_tp, EVEN).to(tl.float32)
            sz = tl.sigmoid(zz)
            # recompute y (pre-gate) for dz
            yv = tl.dot(Ct, tl.trans(S.to(dtype)), input_precision=PREC)
            if FACTORED:
                Wl = tl.where(offs_q[:, None] >= offs_q[None, :], Gm, 0.0).to(dtype)
                yv = tl.dot(Wl, u, yv, input_precision=PREC) * e_in[:, None]
            else:
                yv = tl.dot((Gm * L).to(dtype), xs, yv * e_in[:, None], input_precision=PREC)
            if HAS_D:
                yv = _plus_D(yv, x.to(tl.float32), Dv, D_PER_P)
            dz = dyo * yv * sz * (1.0 + zz * (1.0 - sz))
            _st(_tile(dz_base, t, H * P, offs_p), dz.to(dz_ptr.dtype.element_ty), m_tp, EVEN)
            dyp = dyo * zz * sz
        else:
            dyp = dyo
        if HAS_D:
            dD_acc += tl.sum(dyp * x.to(tl.float32), axis=0)
        dyc = dyp.to(dtype)
        dCs = tl.dot(dyc, S.to(dtype), input_precision=PREC)          # dy_i S, before e_in
        # P = G o L o M (fp32, strictly lower: the diagonal crosses nothing)
        strict = offs_q[:, None] > offs_q[None, :]
        if FACTORED:
            Mu = tl.dot(dyc, tl.trans(u), input_precision=PREC)      # dy_i . xs_j inv_j
            Pm = tl.where(strict, Gm * Mu, 0.0) * e_in[:, None]
            Ml = tl.where(offs_q[:, None] >= offs_q[None, :], Mu, 0.0).to(dtype)
            dC = tl.dot(Ml, Bt, dCs, input_precision=PREC) * e_in[:, None]
        else:
            M = tl.dot(dyc, tl.trans(xs), input_precision=PREC)
            Pm = tl.where(strict, Gm * L * M, 0.0)
            dC = tl.dot((M * L).to(dtype), Bt, dCs * e_in[:, None], input_precision=PREC)
        # w_t = r1off_t + sum_j P_tj - sum_i P_it: the pairs entering the chunk at t
        # (r1off_i = dy_i . exp(l_i) S_in C_i) and those inside it that start before or end at t
        w = (tl.sum(dCs * Ct.to(tl.float32), axis=1) * e_in + tl.sum(Pm, axis=1)
             - tl.sum(Pm, axis=0))
        _put_grad(_tile(dC_base, t, dC_rs, offs_n), dC, m_tn, ATOMIC, EVEN)
        _st(w_base + t, w, mask_t, EVEN)
        if FACTORED:
            S = tl.dot(tl.trans(u), Bt, S, input_precision=PREC) * e_tot
        else:
            xd = (xs.to(tl.float32) * to_end[:, None]).to(dtype)
            S = tl.dot(tl.trans(xd), Bt, S * e_tot, input_precision=PREC)
        if STATE_EVERY == 1:
            _st(st_row0 + c * (P * N) + st_loc, S.to(st_ptr.dtype.element_ty), st_mask, EVEN)
        else:   # the state after each odd chunk, in slot c // 2
            odd_rows = (offs_p * 0 + c % 2) == 1      # a tensor (c may be a Python int)
            tl.store(st_row0 + (c // 2) * (P * N) + st_loc, S.to(st_ptr.dtype.element_ty),
                     mask=st_mask & odd_rows[:, None])

    if HAS_D:
        tl.store(dD_ptr + (b64 * H + h) * P + offs_p, dD_acc, mask=mask_p)


@triton.jit
def ssd_bwd_revsweep_kernel(
    x_ptr, dt_ptr, A_ptr, dtb_ptr, B_ptr, C_ptr, D_ptr, z_ptr, h0_ptr, seq_ptr, dy_ptr, dhT_ptr,
    dec_ptr, etot_ptr,
    st_ptr, w_ptr,
    dx_ptr, dB_ptr, ddt_ptr, dsum_ptr, dh0_ptr,
    T, H, G, P, N, NPB,
    HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
    HAS_D: tl.constexpr, D_PER_P: tl.constexpr, HAS_Z: tl.constexpr,
    HAS_SEQ: tl.constexpr, HAS_DHT: tl.constexpr, STORE_DH0: tl.constexpr,
    Q: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
    CLAMP_C: tl.constexpr, PRE: tl.constexpr = False, FACTOR: tl.constexpr = True,
    ATOMIC: tl.constexpr = False, FAST: tl.constexpr = False, FACTORED: tl.constexpr = False,
    EVEN: tl.constexpr = False, HAS_H0: tl.constexpr = False, STATE_EVERY: tl.constexpr = 1,
    DA_ROWS: tl.constexpr = False,
):
    """dx, dB, d h0 and the gradient of the raw dt (or log_a), each partial over p-blocks.
    FAST, FACTORED: as in :func:`ssd_fwd_kernel`.

    ``dla_t = sum_{i >= t in the chunk} (w - r2off)_i + <dS_out, S_out>``: the pairs
    (s < t <= t') inside the chunk plus all that cross the chunk's end, the latter from the
    two states at that boundary (no long running sums, no drift). Written to ``ddt``
    (p-blocks, b, T, H): ``keep dla`` (log_a given), or, with dt,
    ``sig (x . dxs + A keep dla)``; ``dsum`` (2, p-blocks, b H) gets this program's sums of
    ``keep dla dt`` (for dA) and of its ddt (for d dt_bias), compensated running sums over
    the chunks (a store per chunk instead cost the loop 15 %, H200 run 21). DA_ROWS (an
    experiment: no reduction in the loop): ``dsum`` is laid out as ``ddt`` and gets
    ``keep dla dt`` per position, and torch sums it and ddt. The chain rule of ``dt -> dt A``,
    the softplus and the clamp is linear in the two sums, so partials over p-blocks add up.
    STATE_EVERY=2: the forward sweep kept the state after odd chunks only; after an even chunk
    it is one step of the recurrence from the one before (or from h0), redone here.
    """
    pid_p, pid_bh, b64, h, grp = _program(H, G)
    if _skip(etot_ptr, pid_bh, tl.cdiv(T, Q), FAST, FACTORED):
        return
    offs_q = tl.arange(0, Q)
    offs_p = pid_p * BP + tl.arange(0, BP)
    offs_n = tl.arange(0, BN)
    dtype = x_ptr.dtype.element_ty

    x_base = _start(x_ptr, b64, h, T, H, P)
    dx_base = _start(dx_ptr, b64, h, T, H, P)
    dy_base = _start(dy_ptr, b64, h, T, H, P)
    z_base = _start(z_ptr, b64, h, T, H, P)
    B_base = _start(B_ptr, b64, grp, T, G, N)
    C_base = _start(C_ptr, b64, grp, T, G, N)
    dB_base, dB_rs = _grad_rows(dB_ptr, pid_p, b64, h, grp, T, H, G, N, ATOMIC)
    w_base = w_ptr + _slot(pid_p, pid_bh) * T
    pb_b = pid_p.to(tl.int64) * (tl.num_programs(1) // H) + b64
    ddt_base = ddt_ptr + pb_b * T * H + h
    NC = tl.cdiv(T, Q)
    if HAS_DT:
        A_h = tl.load(A_ptr + h).to(tl.float32)
        # compensated running sums of dA's and d dt_bias's terms (one per chunk)
        dA_acc = tl.full((), 0.0, tl.float32)
        dA_err = tl.full((), 0.0, tl.float32)
        ddtb_acc = tl.full((), 0.0, tl.float32)
        ddtb_err = tl.full((), 0.0, tl.float32)
    st_off, st_mask = _state_tile(b64, h, H, P, N, offs_p, offs_n)
    st_row0, st_loc = _state_rows(st_ptr, b64, h, H, NC, P, N, offs_p, offs_n, STATE_EVERY)

    if HAS_DHT:
        dS = tl.load(dhT_ptr + st_off, mask=st_mask, other=0.0).to(tl.float32)
    else:
        dS = tl.zeros((BP, BN), dtype=tl.float32)
    if HAS_D:
        Dv = _load_D(D_ptr, h, P, offs_p, D_PER_P)

    for i in range(0, NC):
        c = NC - 1 - i
        t = c * Q + offs_q.to(tl.int64)
        dtv, hi, lo, e_in, to_end, e_tot, inv = _decays_all(
            PRE, dec_ptr, etot_ptr, tl.num_programs(1), NC, c, dt_ptr, A_ptr, dtb_ptr,
            seq_ptr, b64, h, H, T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ, CLAMP_C)
        mask_t, m_tp, m_tn, x, Bt, Ct = _chunk_inputs(x_base, B_base, C_base, t, T, H, G, P, N,
                                                      offs_p, offs_n, EVEN)
        dyo = _ld(_tile(dy_base, t, H * P, offs_p), m_tp, EVEN).to(tl.float32)
        if HAS_Z:
            zz = _ld(_tile(z_base, t, H * P, offs_p), m_tp, EVEN).to(tl.float32)
            dyp = dyo * zz * tl.sigmoid(zz)
        else:
            dyp = dyo
        dyc = dyp.to(dtype)
        xf = x.to(tl.float32)
        if HAS_DT:
            xs = (xf * dtv[:, None]).to(dtype)
        else:
            xs = x
        Gt = tl.dot(Bt, tl.trans(Ct), input_precision=PREC)   # Gt[j, i] = C_i . B_j
        # dxs = acc * rs (rows scaled once, with dt, for dx)
        if FACTORED:
            # L_ij = e_in_i inv_j, to_end_j = e_tot inv_j: with v = dy e_in (also the dS
            # update's operand) every term is inv_j times a product of unscaled tiles
            low = offs_q[None, :] >= offs_q[:, None]
            v = (dyp * e_in[:, None]).to(dtype)
            Mvt = tl.dot(xs, tl.trans(v), input_precision=PREC)  # Mvt[j, i] = e_in_i M_ij
            dSe = (dS * e_tot).to(dtype)
            st = tl.dot(Bt, tl.trans(dSe), input_precision=PREC)
            rs = inv
            # x dt in fp32: matching the states exactly would take u's rounding (dA, d dt_bias
            # ~10 % closer on float16 with mild decays) for +9 % instructions in this loop
            r2off = tl.sum(xf * st, axis=1) * (dtv * rs)
            acc = tl.dot(tl.where(low, Gt, 0.0).to(dtype), v, st, input_precision=PREC)
            dB = tl.dot(tl.where(low, Mvt, 0.0).to(dtype), Ct,
                        tl.dot(xs, dSe, input_precision=PREC),
                        input_precision=PREC) * inv[:, None]
        else:
            Lt = _L_tile(hi, lo, e_in, inv, e_tot, offs_q, True, FACTOR)   # Lt[j, i] = L[i, j]
            Mt = tl.dot(xs, tl.trans(dyc), input_precision=PREC)  # Mt[j, i] = dy_i . xs_j
            GL = Gt * Lt
            dSc = dS.to(dtype)
            dxs_st = tl.dot(Bt, tl.trans(dSc), input_precision=PREC) * to_end[:, None]
            rs = tl.full((Q,), 1.0, tl.float32)
            # the rounded xs, the one the stored states were built from: the leaving pairs
            # then cancel those in <dS_out, S_out> more closely (float16 on the CPU: d dt 7 %,
            # dA and d dt_bias ~15 % closer to float64 than with x dt in fp32)
            r2off = tl.sum(xs.to(tl.float32) * dxs_st, axis=1)
            acc = tl.dot(GL.to(dtype), dyc, dxs_st, input_precision=PREC)
            dB = tl.dot((Mt * Lt).to(dtype), Ct,
                        tl.dot(xs, dSc, input_precision=PREC) * to_end[:, None],
                        input_precision=PREC)
        w = _ld(w_base + t, mask_t, EVEN)
        if STATE_EVERY == 1:
            S_out = _ld(st_row0 + c * (P * N) + st_loc, st_mask, EVEN).to(tl.float32)
        else:
            # the kept state at or before the end of chunk c (slot -1: the initial state)
            odd = (c % 2) == 1
            k = (c + 1) // 2 - 1
            kept = (offs_p * 0 + k) >= 0                 # a tensor (c may be a Python int)
            S_out = tl.load(st_row0 + k * (P * N) + st_loc, mask=st_mask & kept[:, None],
                            other=0.0).to(tl.float32)
            if HAS_H0:
                S_out += tl.load(h0_ptr + st_off, mask=st_mask & (kept == 0)[:, None],
                                 other=0.0).to(tl.float32)
            # after an even chunk: the forward sweep's own step (its operands, zero when odd)
            step = tl.where(odd, 0.0, 1.0)
            if FACTORED:
                u = (xf * (dtv * inv * step)[:, None]).to(dtype)
                S_out = tl.dot(tl.trans(u), Bt, S_out, input_precision=PREC) * tl.where(
                    odd, 1.0, e_tot)
            else:
                xd = (xs.to(tl.float32) * (to_end * step)[:, None]).to(dtype)
                S_out = tl.dot(tl.trans(xd), Bt, S_out * tl.where(odd, 1.0, e_tot),
                               input_precision=PREC)
        cross = tl.sum(tl.sum(dS * S_out, axis=1), axis=0)
        # the pairs straddling t: inside the chunk and entering it (w, from the forward
        # sweep), leaving it (r2off), and crossing its end (<dS_out, S_out>)
        suf = tl.cumsum(w - r2off, axis=0, reverse=True)
        keep, sig = _dt_grad_factors(PRE, dec_ptr, tl.num_programs(1), NC, dt_ptr, A_ptr,
                                     dtb_ptr, seq_ptr, b64, h, H, T, t, HAS_DT, DT_SOFTPLUS,
                                     HAS_DTB, HAS_SEQ, CLAMP_C)
        dla = (suf + cross) * keep
        if HAS_DT:
            ddt = (tl.sum(acc * xf, axis=1) * rs + A_h * dla) * sig
            if DA_ROWS:
                _st(dsum_ptr + pb_b * T * H + h + t * H, dla * dtv, mask_t, EVEN)
            else:
                dA_acc, dA_err = _kahan_add(dA_acc, dA_err, tl.sum(dla * dtv, axis=0))
                ddtb_acc, ddtb_err = _kahan_add(ddtb_acc, ddtb_err, tl.sum(ddt, axis=0))
        else:
            ddt = dla
        _st(ddt_base + t * H, ddt, mask_t, EVEN)
        _put_grad(_tile(dB_base, t, dB_rs, offs_n), dB, m_tn, ATOMIC, EVEN)
        dx = acc * (rs * dtv)[:, None]
        if HAS_D:
            dx = _plus_D(dx, dyp, Dv, D_PER_P)
        _st(_tile(dx_base, t, H * P, offs_p), dx.to(dx_ptr.dtype.element_ty), m_tp, EVEN)
        if FACTORED:
            dS = tl.dot(tl.trans(v), Ct, dS * e_tot, input_precision=PREC)
        else:
            dyd = (dyp * e_in[:, None]).to(dtype)
            dS = tl.dot(tl.trans(dyd), Ct, dS * e_tot, input_precision=PREC)

    if STORE_DH0:
        tl.store(dh0_ptr + st_off, dS.to(dh0_ptr.dtype.element_ty), mask=st_mask)
    if HAS_DT and not DA_ROWS:
        tl.store(dsum_ptr + _slot(pid_p, pid_bh), dA_acc)
        tl.store(dsum_ptr + NPB * tl.num_programs(1) + _slot(pid_p, pid_bh), ddtb_acc)


@triton.jit
def ssd_decode_kernel(
    state_ptr, x_ptr, dt_ptr, A_ptr, dtb_ptr, B_ptr, C_ptr, D_ptr, z_ptr, y_ptr,
    H, G, P, N,
    HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
    HAS_D: tl.constexpr, D_PER_P: tl.constexpr, HAS_Z: tl.constexpr,
    BP: tl.constexpr, BN: tl.constexpr, CLAMP_C: tl.constexpr,
):
    """One token: ``S <- exp(la) S + xs B^T`` in place, ``y = S C (+ D x) (* silu z)``."""
    pid_p, pid_bh, b64, h, grp = _program(H, G)
    offs_p = pid_p * BP + tl.arange(0, BP)
    offs_n = tl.arange(0, BN)
    mask_p = offs_p < P
    mask_n = offs_n < N
    raw = tl.load(dt_ptr + b64 * H + h).to(tl.float32)
    if HAS_DT:
        if HAS_DTB:
            raw += tl.load(dtb_ptr + h).to(tl.float32)
        if DT_SOFTPLUS:
            dtv = _softplus(raw)
        else:
            dtv = raw
        la = dtv * tl.load(A_ptr + h).to(tl.float32)
    else:
        dtv = 1.0
        la = raw
    la = tl.maximum(la, -CLAMP_C)
    decay = tl.exp(la)
    xo = b64 * H * P + h * P + offs_p
    x = tl.load(x_ptr + xo, mask=mask_p, other=0.0).to(tl.float32)
    Bv = tl.load(B_ptr + (b64 * G + grp) * N + offs_n, mask=mask_n, other=0.0).to(tl.float32)
    Cv = tl.load(C_ptr + (b64 * G + grp) * N + offs_n, mask=mask_n, other=0.0).to(tl.float32)
    st_off, st_mask = _state_tile(b64, h, H, P, N, offs_p, offs_n)
    S = tl.load(state_ptr + st_off, mask=st_mask, other=0.0).to(tl.float32)
    S = S * decay + (x * dtv)[:, None] * Bv[None, :]
    tl.store(state_ptr + st_off, S.to(state_ptr.dtype.element_ty), mask=st_mask)
    y = tl.sum(S * Cv[None, :], axis=1)
    if HAS_D:
        y += x * _load_D(D_ptr, h, P, offs_p, D_PER_P)
    if HAS_Z:
        zz = tl.load(z_ptr + xo, mask=mask_p, other=0.0).to(tl.float32)
        y = y * zz * tl.sigmoid(zz)
    tl.store(y_ptr + xo, y.to(y_ptr.dtype.element_ty), mask=mask_p)

"""The decays of the chunked SSD's Triton kernels (:mod:`.kernels`), chunk by chunk.

The log-decays (``log_a``, or ``dt * A`` from the raw ``dt`` with its bias and softplus) are
clamped at ``-CLAMP`` (a reset ``-inf`` becomes ``-CLAMP``; any segment holding one has
``exp <= exp(-CLAMP) = 0`` in fp32, so the result is unchanged), scaled to base 2 and summed
within the chunk in fp64. The fp64 prefix sums are split into ``hi + lo`` fp32 pairs, and
``l_i - l_j = (hi_i - hi_j) + (lo_i - lo_j)`` is then correct to fp32 rounding of the segment
sum itself, for any magnitude: no cancellation, no NaN.

:func:`ssd_decays_kernel` (the pre-pass) writes them once per call; the sweeps read them with
:func:`_decays_all`, or compute them in place (``PRE=False``, an experiment). A (batch, head)
whose chunks all decay by less than ``FACTOR_MIN`` runs the sweeps' factored loops
(:func:`_factorable`, :func:`_runs`).
"""

from __future__ import annotations

import triton
import triton.language as tl

FACTOR_MIN = tl.constexpr(2.0 ** -64)  # chunks decaying less than this are factored
CLAMP = 128.0          # |log-decay| beyond which exp(...) is 0 in fp32 anyway


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
def _factorable(etot_ptr, pid_bh, NC, FAST: tl.constexpr):
    """Whether every chunk of this program's (b, h) decays by more than FACTOR_MIN (its row of
    the pre-pass's chunk decays ``etot``): the factored loops' condition. True without FAST
    (:func:`_runs` then ignores it)."""
    if not FAST:
        return True
    row = etot_ptr + pid_bh.to(tl.int64) * NC
    offs = tl.arange(0, 1024)
    least = tl.min(tl.load(row + offs, mask=offs < NC, other=1.0), axis=0)
    for c0 in range(1024, NC, 1024):
        e = tl.load(row + c0 + offs, mask=c0 + offs < NC, other=1.0)
        least = tl.minimum(least, tl.min(e, axis=0))
    return least > FACTOR_MIN


@triton.jit
def _runs(factorable, FAST: tl.constexpr, F: tl.constexpr):
    """Whether a program runs loop kind F (1: factored, 0: exact). With FAST both kinds are
    launched (one launch per kind, or one holding both) and a program runs the kind its chunk
    decays pick (``factorable``, from :func:`_factorable`); else the one launched."""
    go = True
    if FAST:
        go = factorable == (F == 1)
    return go

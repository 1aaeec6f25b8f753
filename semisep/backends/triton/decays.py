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
(:func:`_factorable`, :func:`_runs`). What the pre-pass writes, and a sweep's ``PRE`` reads:
``PRE_ALL`` (every row, ``True``), or for a forward that autograd does not record and without
``seq_idx``, ``PRE_FACTORED``: the factored loop's two rows only, ``w = dt exp(-l)`` and
``exp(l)`` (a third of the writes), the exact loop then computing its own decays.

Segments (with ``seq_idx``, ``HAS_SEQ``): a reset (a clamped log-decay: a sequence boundary,
``-inf``, or below ``-CLAMP``) at position r ends the segment before it, and the decays across
it are 0. Within a chunk, ``seg_i`` counts the resets at or before i and ``ls_i`` is the
cumulative log-decay from the start of i's segment (0 at a reset): ``L_ij = exp(ls_i - ls_j)``
where ``seg_i == seg_j`` (i >= j), else 0, the state entering the chunk reaches the positions
of segment 0 (``exp(l_i) = exp(ls_i) [seg_i == 0]``) and the state leaving it takes those of the
last one (``exp(l_end - l_j) = exp(ls_end - ls_j) [seg_j == seg_end]``). The factored loops
then run on ``exp(+-ls)`` wherever each chunk's ``min_i exp(ls_i)`` is above ``FACTOR_MIN``,
resets or not (:func:`_segments`); the rows of a chunk without a reset are the unsegmented ones.
"""

from __future__ import annotations

import triton
import triton.language as tl

try:    # programmatic dependent launch (sm_90): Tritons since 3.3; where the Gluon kernels run
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:     # an older Triton: no Gluon kernels, and these are never traced
    gdc_launch_dependents = gdc_wait = None

FACTOR_MIN = tl.constexpr(2.0 ** -64)  # chunks decaying less than this are factored
CLAMP = 128.0          # |log-decay| beyond which exp(...) is 0 in fp32 anyway
# the pre-pass's rows (a sweep's PRE, the pre-pass's ROWS): none, all, the factored loop's
PRE_NONE = tl.constexpr(0)
PRE_ALL = tl.constexpr(1)
PRE_FACTORED = tl.constexpr(2)


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
    """For positions ``t`` (int64, (Q,)) of head ``h``, or of heads ``h`` (1, heads) at
    positions ``t`` (Q, 1): ``(dt, la2, hi, lo, tot, keep, sig)``, each (Q,) or (Q, heads),
    ``tot`` one per head: :func:`_decays_of` the raw values loaded here, with seq_idx's
    sequence boundaries as resets (HAS_SEQ) and the positions past T as log-decay 0.
    """
    mask_t = t < T
    raw = tl.load(dt_ptr + (b64 * T + t) * H + h, mask=mask_t, other=0.0).to(tl.float32)
    reset = mask_t        # unused without HAS_SEQ
    if HAS_SEQ:
        s_cur = tl.load(seq_ptr + b64 * T + t, mask=mask_t, other=0)
        s_prev = tl.load(seq_ptr + b64 * T + t - 1, mask=mask_t & (t > 0), other=0)
        reset = (t > 0) & (s_cur != s_prev)
    return _decays_of(raw, mask_t, reset, A_ptr, dtb_ptr, h, HAS_DT, DT_SOFTPLUS, HAS_DTB,
                      HAS_SEQ, CLAMP_C)


@triton.jit
def _decays_of(raw, valid, reset, A_ptr, dtb_ptr, h,
               HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
               HAS_RESET: tl.constexpr, CLAMP_C: tl.constexpr):
    """:func:`_chunk_decays` of a chunk's raw dt (or log_a) values ``raw`` (fp32), from
    position 0 of the chunk on along axis 0: ``valid`` marks the positions before T (the
    others count as log-decay 0); with HAS_RESET, ``reset`` those that a sequence boundary
    resets.

    dt: the factor on x (1 without dt); la2: clamped log2-decays (0 where not valid);
    hi + lo: their chunk-local inclusive prefix sums; tot: the chunk's sum (fp64);
    keep: 1 where the log-decay is not clamped (its gradient passes) and valid, else 0;
    sig: d dt / d raw dt (the softplus' sigmoid, or 1). Apart from the load so that a
    kernel holding the raw values elsewhere can call it (planned: the Gluon forward, on
    values it copied into shared memory; benchmarks/NOTES.md, s28).
    """
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
    if HAS_RESET:
        la = tl.where(reset, float("-inf"), la)
    keep = tl.where(valid & (la >= -CLAMP_C), 1.0, 0.0)
    la = tl.maximum(la, -CLAMP_C)
    la = tl.where(valid, la, 0.0)
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
    inv = exp(-l_i) (used only when the chunk's total decay keeps it finite, see _L_tile;
    with HAS_SEQ and PRE, exp(-ls_i), which is the same in a chunk without a reset).
    With ``PRE_FACTORED`` (for a factored loop without HAS_SEQ) dtv is ``w = dt exp(-l)``
    and inv is 1, so that the loop's ``dtv * inv`` is w exactly; hi, lo and to_end are 0.
    """
    if PRE:
        dtv, hi, lo, e_in, to_end, e_tot, inv = _pre_rows(dec_ptr, etot_ptr, BH, NC, c, b64, h,
                                                          H, t, PRE)
    else:
        dtv, la2, hi, lo, tot, _, _ = _chunk_decays(
            dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64, h, H, T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB,
            HAS_SEQ, CLAMP_C)
        e_in, to_end, e_tot, inv = _exps(la2, hi, lo, tot)
    return dtv, hi, lo, e_in, to_end, e_tot, inv


@triton.jit
def _pre_rows(dec_ptr, etot_ptr, BH, NC, c, b64, h, H, t, PRE: tl.constexpr = PRE_ALL):
    """:func:`_decays_all`'s ``(dtv, hi, lo, e_in, to_end, e_tot, inv)`` of chunk ``c`` at
    positions ``t``, loaded from :func:`ssd_decays_kernel`'s arrays of rows ``PRE`` (the
    loads of the rows a caller leaves unused are compiled away)."""
    # rows of length NC * Q: the padded tail of the last chunk holds the continuation
    # (log-decay 0), never a fill value that would break the prefix sums' monotonicity
    bh64 = b64 * H + h
    TP = NC * t.shape[0]
    # the loads in the rows' order (e_tot first put 16 B more on the reverse sweep's stack,
    # Triton 3.6 proxy)
    dtv = tl.load(dec_ptr + bh64 * TP + t)          # with PRE_FACTORED w = dt exp(-l)
    if PRE == PRE_FACTORED:
        e_in = tl.load(dec_ptr + (BH + bh64) * TP + t)
        hi = tl.zeros(dtv.shape, tl.float32)
        lo = hi
        to_end = hi
        inv = hi + 1.0
    else:
        hi = tl.load(dec_ptr + (BH + bh64) * TP + t)
        lo = tl.load(dec_ptr + (2 * BH + bh64) * TP + t)
        e_in = tl.load(dec_ptr + (3 * BH + bh64) * TP + t)
        to_end = tl.load(dec_ptr + (4 * BH + bh64) * TP + t)
        inv = tl.load(dec_ptr + (5 * BH + bh64) * TP + t)
    e_tot = tl.load(etot_ptr + bh64 * NC + c)
    return dtv, hi, lo, e_in, to_end, e_tot, inv


@triton.jit
def _e_ahead(dec_ptr, etot_ptr, BH, NC, c, b64, h, H, offs_q, PRE: tl.constexpr = PRE_ALL):
    """``(e_in, e_tot)`` of chunk ``min(c, NC - 1)`` from the pre-pass, for a sweep to load one
    chunk ahead (``PREFETCH``; the clamp keeps the load past the last chunk, whose values go
    unused, in bounds without a mask): Triton 3.6 copies ahead only the loads that feed a
    dot, and these two scale results (H200 ncu s18-2: the forward sweep of the backward
    waited 13 % of its samples on them)."""
    c = tl.minimum(c, NC - 1)
    _, _, _, e_in, _, e_tot, _ = _pre_rows(dec_ptr, etot_ptr, BH, NC, c, b64, h, H,
                                           c * offs_q.shape[0] + offs_q.to(tl.int64), PRE)
    return e_in, e_tot


@triton.jit
def _exps(la2, hi, lo, tot):
    """``(e_in, to_end, e_tot, inv)`` of :func:`_decays_all` from :func:`_chunk_decays`'s
    log2-decays, their prefix sums ``hi + lo`` and the chunk's sum ``tot``."""
    e_in = tl.exp2(hi + lo)
    # exp(l_end - l_i) from the fp64 sum of the later log-decays (tot - l_i, with tot
    # broadcast over a (Q, heads) block, fails Triton 3.6's layout pass for sm_90)
    l64 = la2.to(tl.float64)
    to_end = tl.exp2((tl.cumsum(l64, axis=0, reverse=True) - l64).to(tl.float32))
    e_tot = tl.exp2(tot.to(tl.float32))
    inv = tl.exp2(tl.minimum(-(hi + lo), 126.0))
    return e_in, to_end, e_tot, inv


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
def _restart_add(f1, v1, f2, v2):
    """The combine of a sum that restarts at flagged positions (for tl.associative_scan)."""
    return f1 | f2, tl.where(f2 != 0, v2, v1 + v2)


@triton.jit
def _grad_row0(HAS_SEQ: tl.constexpr):
    """The first of the two rows (clamp mask, softplus slope) that only the backward reads:
    after the segment rows (HAS_SEQ)."""
    return 8 if HAS_SEQ else 6


@triton.jit
def ssd_decays_kernel(dt_ptr, A_ptr, dtb_ptr, seq_ptr, dec_ptr, etot_ptr, T, H,
                      HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
                      HAS_SEQ: tl.constexpr, Q: tl.constexpr, CLAMP_C: tl.constexpr,
                      HB: tl.constexpr, GRAD_ROWS: tl.constexpr = True,
                      ROWS: tl.constexpr = PRE_ALL, TRIGGER: tl.constexpr = False):
    """The per-position decay data of every chunk, once, for the sweeps: grid (chunks,
    b * H / HB), a program per chunk and block of HB heads (HB divides H), so that each of
    its rows of dt (b, T, H) is read whole.

    Rows of ``dec`` (each (b*h, chunks*Q), fp32): 0-5 ``dtv, hi, lo, e_in, to_end, inv`` of
    :func:`_decays_all`; with HAS_SEQ 6-7 ``exp(ls)`` and ``seg`` (module docstring; row 5 is
    then ``exp(-ls)``); then, with ``GRAD_ROWS``, the backward's clamp mask and softplus slope
    (:func:`_grad_row0`). With ``ROWS=PRE_FACTORED`` (no HAS_SEQ, no GRAD_ROWS) only
    ``w = dtv inv`` and ``e_in``, rows 0-1. ``etot`` (1, or 3 with HAS_SEQ, b*h, chunks):
    ``exp(l_end)``, then ``exp(ls_end)`` and ``min_i exp(ls_i)`` (:func:`_factorable`).
    TRIGGER (sm_90): let a kernel launched after this one as a programmatic dependent launch
    (the Gluon forward) start once every program here has started; it waits for this one to
    finish before reading what this one writes."""
    if TRIGGER:
        gdc_launch_dependents()
    c = tl.program_id(0)
    pid = tl.program_id(1)
    NC = tl.num_programs(0)
    BH = tl.num_programs(1) * HB
    b64 = (pid // (H // HB)).to(tl.int64)
    heads = (pid % (H // HB)) * HB + tl.arange(0, HB)
    h = heads[None, :]
    t = c * Q + tl.arange(0, Q).to(tl.int64)[:, None]
    dtv, la2, hi, lo, tot, keep, sig = _chunk_decays(dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64, h,
                                                     H, T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB,
                                                     HAS_SEQ, CLAMP_C)
    e_in, to_end, e_tot, inv = _exps(la2, hi, lo, tot)
    bh64 = b64 * H + h                   # (1, HB): the rows' (b, h) index
    bhc = b64 * H + heads                # (HB,): the chunk decays'
    TP = NC * Q
    tl.store(etot_ptr + bhc * NC + c, e_tot)
    if ROWS == PRE_FACTORED:
        # the product the factored loop forms (dtv * inv), so that its u is the same bit for bit
        tl.store(dec_ptr + bh64 * TP + t, dtv * inv)
        tl.store(dec_ptr + (BH + bh64) * TP + t, e_in)
    else:
        if HAS_SEQ:
            reset = ((t < T) & (keep == 0.0)).to(tl.int32)
            seg = tl.cumsum(reset, axis=0)
            _, ls = tl.associative_scan(
                (reset, tl.where(reset != 0, 0.0, la2).to(tl.float64)), 0, _restart_add)
            ls = ls.to(tl.float32)
            e_s = tl.exp2(ls)
            inv = tl.exp2(tl.minimum(-ls, 126.0))
            last = (tl.arange(0, Q) == Q - 1)[:, None]
            tl.store(dec_ptr + (6 * BH + bh64) * TP + t, e_s)
            tl.store(dec_ptr + (7 * BH + bh64) * TP + t, seg.to(tl.float32))
            tl.store(etot_ptr + (BH + bhc) * NC + c, tl.sum(tl.where(last, e_s, 0.0), axis=0))
            tl.store(etot_ptr + (2 * BH + bhc) * NC + c, tl.min(e_s, axis=0))
        tl.store(dec_ptr + bh64 * TP + t, dtv)
        tl.store(dec_ptr + (BH + bh64) * TP + t, hi)
        tl.store(dec_ptr + (2 * BH + bh64) * TP + t, lo)
        tl.store(dec_ptr + (3 * BH + bh64) * TP + t, e_in)
        tl.store(dec_ptr + (4 * BH + bh64) * TP + t, to_end)
        tl.store(dec_ptr + (5 * BH + bh64) * TP + t, inv)
        if GRAD_ROWS:
            r0 = _grad_row0(HAS_SEQ)
            tl.store(dec_ptr + (r0 * BH + bh64) * TP + t, keep)
            tl.store(dec_ptr + ((r0 + 1) * BH + bh64) * TP + t, sig)


@triton.jit
def _segments(HAS_SEQ: tl.constexpr, dec_ptr, etot_ptr, BH, NC, c, b64, h, H, t, e_in, e_tot):
    """``(seg, e_w, e_tot_w)`` of chunk ``c`` at positions ``t`` for a factored loop: with
    HAS_SEQ from the pre-pass, the resets at or before each position, ``exp(ls)`` and
    ``exp(ls_end)`` (module docstring), with which the loop masks its lower triangles to
    ``seg_i == seg_j`` (:func:`_lower`), the entering state to segment 0 (:func:`_seg0`) and
    the leaving one to the last segment (:func:`_leaving`); else ``(e_in, e_in, e_tot)``
    (``seg`` unused)."""
    if HAS_SEQ:
        bh64 = b64 * H + h
        TP = NC * t.shape[0]
        e_w = tl.load(dec_ptr + (6 * BH + bh64) * TP + t)
        seg = tl.load(dec_ptr + (7 * BH + bh64) * TP + t)
        e_tot_w = tl.load(etot_ptr + (BH + bh64) * NC + c)
    else:
        seg = e_in
        e_w = e_in
        e_tot_w = e_tot
    return seg, e_w, e_tot_w


@triton.jit
def _seg0(v, seg, HAS_SEQ: tl.constexpr):
    """The rows of ``v`` (one per position) in segment 0 of the chunk, the others 0 (HAS_SEQ);
    else ``v``."""
    if HAS_SEQ:
        v = tl.where((seg == 0)[:, None], v, 0.0)
    return v


@triton.jit
def _leaving(v, to_end, e_tot_w, HAS_SEQ: tl.constexpr):
    """The rows of ``v`` (one per position) in the chunk's last segment (``exp(l_end - l_j) >
    0``: no reset after j) times ``e_tot_w``, the others 0 (HAS_SEQ); else ``v``."""
    if HAS_SEQ:
        v = v * tl.where(to_end > 0.0, e_tot_w, 0.0)[:, None]
    return v


@triton.jit
def _lower(offs_q, seg, HAS_SEQ: tl.constexpr, STRICT: tl.constexpr = False,
           TRANSPOSED: tl.constexpr = False):
    """The pairs (i, j) of a chunk's factored tiles, ``i >= j`` (``i > j``: STRICT) and, with
    HAS_SEQ, ``seg_i == seg_j``; indexed [i, j], or [j, i] (TRANSPOSED)."""
    if TRANSPOSED:
        rows, cols = offs_q[None, :], offs_q[:, None]
    else:
        rows, cols = offs_q[:, None], offs_q[None, :]
    if STRICT:
        pairs = rows > cols
    else:
        pairs = rows >= cols
    if HAS_SEQ:
        if TRANSPOSED:
            pairs = pairs & (seg[None, :] == seg[:, None])
        else:
            pairs = pairs & (seg[:, None] == seg[None, :])
    return pairs


@triton.jit
def _dt_grad_factors(PRE: tl.constexpr, dec_ptr, BH, NC, dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64,
                     h, H, T, t, HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr,
                     HAS_DTB: tl.constexpr, HAS_SEQ: tl.constexpr, CLAMP_C: tl.constexpr):
    """``(keep, sig)`` of :func:`_chunk_decays` for positions ``t``: from the pre-pass's last
    two rows (:func:`_grad_row0`), or computed."""
    if PRE:
        TP = NC * t.shape[0]
        bh64 = b64 * H + h
        r0 = _grad_row0(HAS_SEQ)
        keep = tl.load(dec_ptr + (r0 * BH + bh64) * TP + t)
        sig = tl.load(dec_ptr + ((r0 + 1) * BH + bh64) * TP + t)
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
def _factorable(etot_ptr, pid_bh, NC, FAST: tl.constexpr, HAS_SEQ: tl.constexpr = False):
    """Whether every chunk of this program's (b, h) decays by more than FACTOR_MIN: the
    factored loops' condition, from the pre-pass's chunk decays (``exp(l_end)``, or with
    HAS_SEQ the least ``exp(ls_i)`` of each chunk, so that chunks with resets pass; the
    sweeps' grid, axis 1 = b * h, locates that row). True without FAST (:func:`_runs` then
    ignores it)."""
    if not FAST:
        return True
    row = etot_ptr + pid_bh.to(tl.int64) * NC
    if HAS_SEQ:
        row += 2 * tl.num_programs(1).to(tl.int64) * NC
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

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

Decays (:mod:`.decays`): clamped, summed per chunk in fp64 and split into fp32 ``hi + lo``;
the addressing and tile helpers are in :mod:`.tiles`.

Factored loops: where every chunk of a (batch, head) decays by more than ``decays.FACTOR_MIN``
(2^-64), ``L = diag(exp(l)) 1_lower diag(exp(-l))`` and ``exp(l_end - l) = exp(l_end) exp(-l)``
are products of fp32 normals, so each sweep scales its operands by ``exp(-l)`` / ``exp(l)`` once
and masks ``G`` or ``M`` to the lower triangle instead of forming a Q x Q decay tile. With
``seq_idx`` (HAS_SEQ) the same holds per segment of a chunk (:mod:`.decays`): the decays
restart at each reset, the triangles are masked to pairs of one segment, the entering state
reaches the first segment and the leaving one takes the last (whose step is the exact loop's),
so packed sequences keep the factored loops. The other (batch, head) pairs (resets without
``seq_idx``, extreme decays, float16 inputs) run the exact loop. Each sweep is
launched once per loop kind and a program runs in the launch its chunk decays pick
(:func:`.decays._runs`), or (``ONE_LAUNCH``, the default for small calls,
:func:`.config._launches`) once with both loops, each program running the one its chunk
decays pick.

The backward runs in spans where its stored states would exceed 1.5 times x's elements
(:func:`.config.span_steps`): the forward writes the state entering each span after the first
(``SPANS``), and the two sweep kernels run, last span first, a launch each per span
(``SPANNED``: over chunks ``[C0, C1)``, the states in a buffer of ``NCS`` chunks) from that
state and from the adjoint the span after it left. In one span they run over the whole call.
The state's columns (indexed by n) evolve independently too, and y is the sum of their
blocks' outputs: for n > 64 the launchers run the backward in blocks of 64 columns, one after
another (:func:`.config.state_block`), the reverse sweep adding its dx to the blocks' before
it (``ACC_DX``: dx is linear in the blocks' y). The sweeps know no z: with z their dy is
``dy silu(z)``, made with dz by one elementwise pass before them (:mod:`.gate`).
A sweep takes the N columns of its block out of rows of NS: the pointers to B, C, their
gradients and the (b, h, p, NS) states (h0, the checkpoints, the adjoint carry, d final
state, d h0) start at the block's first column; the stored chunk states are the block's
own, N wide.

Backward: a decay pre-pass (on by default); two sweeps, each recomputing what it needs:

* forward sweep (carries S): ``dC = (M o L) B + exp(l) (dy S_in)`` with ``M = dy xs^T``,
  ``dD``, ``w_t = r1off_t + rowP_t - colP_t`` (below) and the state entering
  each chunk (bf16 for bf16 inputs, fp32 for fp32);
* reverse sweep (carries the adjoint dS (p, n)):
  ``dxs = (G o L)^T dy + exp(l_end - l) (B dS^T)``,
  ``dB = (M o L)^T C + exp(l_end - l) (xs dS)``,
  ``dS <- exp(l_end) dS + (dy exp(l))^T C``; at the start dS is d(initial state).

The log-decay gradient is chunk-local, never a running sum over the sequence:
``dla_t = sum_{i >= t > j in the chunk} P_ij + sum_{i >= t} r1off_i + sum_{j < t} r2off_j
+ exp(l_end) <dS_out, S_in>`` with ``P = G o L o M`` (fp32, strictly lower),
``r1off_i = dy_i . exp(l_i) S_in C_i`` and ``r2off_j = xs_j . exp(l_end - l_j) dS B_j``: the
pairs inside the chunk that straddle t, those entering and those leaving the chunk, and all
that cross it, the last from the state entering it and the adjoint leaving it. Each term is a
sum of the products it differentiates and none cancels another (the earlier form,
``<dS_out, S_out>`` with a suffix sum of ``-r2off``, cancelled the leaving pairs against the
rounded stored state). The first sum is ``sum_{i >= t} (rowP - colP)_i`` (row and column sums
of P), which the forward sweep folds into ``w`` (it has G and M; the reverse sweep, the one
short of registers, then forms no P tile).
"""

from __future__ import annotations

import triton
import triton.language as tl

from .decays import (PRE_FACTORED, PRE_NONE, _decays_all, _dt_grad_factors, _e_ahead,
                     _factorable, _L_tile, _leaving, _lower, _runs, _seg0, _segments,
                     _softplus, gdc_wait)
from .gate import _sigmoid
from .tiles import (_chunk_inputs, _grad_rows, _io_starts, _ld, _load_D, _offsets, _plus_D,
                    _program, _put_grad, _slot, _slot_offset, _st, _start, _state_nt,
                    _state_rows, _state_tile, _state_update, _tile, _when)


@triton.jit
def _kahan_add(total, err, v):
    """``(total, err)`` after adding ``v`` to a compensated (Kahan) sum."""
    y = v - err
    t = total + y
    return t, (t - total) - y


@triton.jit
def _dD_terms(dy, x, D_PER_P: tl.constexpr):
    """A chunk's terms of dD = sum_t dy_t x_t: per p (D_PER_P; a sum over the chunk's rows),
    else per row (the sums over p; the caller adds them up after its loop). A sum over the
    rows of a tile crosses the warps through shared memory each chunk, a sum over each row's
    p stays within a warp: Triton 3.6 proxy, forward sweep 1587 -> 1439 instructions a
    chunk, 72 -> 0 B of stack (benchmarks/NOTES.md s17)."""
    return tl.sum(dy.to(tl.float32) * x.to(tl.float32), axis=0 if D_PER_P else 1)


@triton.constexpr_function
def _stages(F, EXACT_STAGES):
    """The chunk loop's pipeline stages: the launch's (None), or for the exact loop (F = 0)
    ``EXACT_STAGES`` where it is set (not 0). An experiment (``SEMISEP_TRITON_FWD`` / ``_BWD``
    field): in a one-launch sweep the exact loop's pipelining costs the factored loop shared
    memory loads and spills (Triton 3.6 proxy, benchmarks/NOTES.md s10)."""
    return EXACT_STAGES if F == 0 and EXACT_STAGES else None


@triton.jit
def ssd_fwd_kernel(
    x_ptr, dt_ptr, A_ptr, dtb_ptr, B_ptr, C_ptr, D_ptr, z_ptr, h0_ptr, seq_ptr,
    dec_ptr, etot_ptr, gl_ptr,
    y_ptr, yu_ptr, hT_ptr, ck_ptr,
    T, H, G, P, N, PER, SLOT,
    HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
    HAS_D: tl.constexpr, D_PER_P: tl.constexpr, HAS_Z: tl.constexpr, HAS_H0: tl.constexpr,
    HAS_SEQ: tl.constexpr, STORE_HT: tl.constexpr,
    Q: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
    CLAMP_C: tl.constexpr, PRE: tl.constexpr = False, FACTOR: tl.constexpr = True,
    FAST: tl.constexpr = False, FACTORED: tl.constexpr = False, EVEN: tl.constexpr = False,
    UNROLL: tl.constexpr = 1, STATE_T: tl.constexpr = True, GRAM: tl.constexpr = False,
    WIDE: tl.constexpr = False, ONE_LAUNCH: tl.constexpr = False,
    EXACT_STAGES: tl.constexpr = 0, SPANS: tl.constexpr = False, STORE_YU: tl.constexpr = False,
    FAST_GATE: tl.constexpr = False, PREFETCH: tl.constexpr = False,
    PDL_WAIT: tl.constexpr = False,
):
    """The forward sweep. With z and ``STORE_YU`` the ungated y (D's term included) goes to
    ``yu`` too, in x's dtype: the backward's dz (``dy y silu'(z)``) takes it rather than
    recomputing y (H200 s16-1: z cost the n = 64 backward 2.4 ms at 16K); FAST_GATE: the
    approximate sigmoid (:func:`.gate._sigmoid`). PRE: the pre-pass's rows
    (:data:`.decays.PRE_ALL`, or ``PRE_FACTORED``: the factored loop's only, the exact loop
    computing its decays as without PRE). PREFETCH (needs PRE): ``e_in`` and
    ``e_tot``, which scale results and so are not copied ahead by the pipeliner, loaded one
    chunk ahead (:func:`.decays._e_ahead`; also in :func:`ssd_bwd_fwdsweep_kernel`; not in
    the reverse sweep, at 255 registers, where the same cost 136-312 B of stack in the
    Triton 3.6 proxy). UNROLL: chunks per loop iteration (an
    experiment: more independent work in view of the scheduler, benchmarks/NOTES.md).

    FAST (needs PRE): the kernel is launched twice, FACTORED and not, and each program runs
    in the launch that matches whether every chunk of its (b, h) decays by more than
    FACTOR_MIN; with ONE_LAUNCH once, holding both loops (F = 0 and 1 below). FACTORED: the
    decay tile is
    ``L = diag(exp(l)) 1_lower diag(exp(-l))`` and ``exp(l_end - l) = exp(l_end) exp(-l)``,
    so one scaled copy of x, ``u = xs exp(-l)``, serves both products and no Q x Q decay
    tile is formed. (A per-chunk branch around the dots instead defeats Triton's pipelining.)

    STATE_T: the state is carried transposed, ``S^T`` (n, p), and every dot takes its operands
    as loaded or computed, or a loaded tile transposed. Triton 3.6 on sm_90 miscompiled the
    (p, n) form's dots on transposed register tiles when p came in blocks of 32 (H200 run 19:
    wrong y, illegal addresses); the (p, n) form stays for n > 64 with p in blocks of 64,
    where it spills less (run 20: 1.20 against 1.52 ms at N = 128, T = 16K).

    GRAM (with FACTORED): the heads of a group share ``lower(C B^T)`` of each chunk, which
    :func:`ssd_gram_kernel` wrote once to ``gl`` (b, G, chunks, Q, Q); the loop loads it
    (prefetched, straight into shared memory) instead of a dot, a mask and a conversion.
    WIDE: a (b, group)'s tiles hold 2^31 elements or more (int64 offsets within them).

    SPANS: in spans of ``PER`` chunks, the state after each span but the last goes to ``ck``
    (fp32 (b, H, P, N) slots ``SLOT`` elements apart), for the backward's spans
    (:func:`ssd_bwd_fwdsweep_kernel`).

    PDL_WAIT (sm_90): launched as a programmatic dependent launch after the Gluon forward
    (:mod:`.gluon_fwd`), each program first waits for that kernel to finish (the pre-pass's
    rows, which this one reads, were visible before that kernel let this one launch).
    """
    if PDL_WAIT:
        gdc_wait()
    pid_p, pid_bh, b64, h, grp = _program(H, G)
    n_chunks = tl.cdiv(T, Q)
    factorable = _factorable(etot_ptr, pid_bh, n_chunks, FAST, HAS_SEQ)
    # one loop, the launch's FACTORED (F), or with ONE_LAUNCH both (F = 0, 1: the exact and the
    # factored loop), each program running the one its chunk decays pick
    for F in tl.static_range(0 if ONE_LAUNCH else FACTORED, 2 if ONE_LAUNCH else FACTORED + 1):
        if _runs(factorable, FAST, F):
            # the exact loop computes its own decays where the pre-pass wrote the factored
            # loop's rows only
            PRE_F: tl.constexpr = PRE_NONE if F == 0 and PRE == PRE_FACTORED else PRE
            PREFETCH_F: tl.constexpr = PREFETCH and PRE_F != PRE_NONE
            offs_q, offs_p, offs_n = _offsets(pid_p, Q, BP, BN)
            dtype = x_ptr.dtype.element_ty

            x_base, y_base, B_base, C_base = _io_starts(x_ptr, y_ptr, B_ptr, C_ptr, b64, h,
                                                        grp, T, H, G, P, N)
            z_base = _start(z_ptr, b64, h, T, H, P)
            yu_base = _start(yu_ptr, b64, h, T, H, P)
            st_off, st_mask = _state_tile(b64, h, H, P, N, N, offs_p, offs_n, STATE_T)

            if HAS_H0:
                S = tl.load(h0_ptr + st_off, mask=st_mask, other=0.0).to(tl.float32)
            elif STATE_T:
                S = tl.zeros((BN, BP), dtype=tl.float32)
            else:
                S = tl.zeros((BP, BN), dtype=tl.float32)
            if HAS_D:
                Dv = _load_D(D_ptr, h, P, offs_p, D_PER_P)
            if GRAM:
                gl_base = gl_ptr + (b64 * G + grp) * n_chunks * (Q * Q)

            # in spans (SPANS), else one (a loop of one trip, which the compiler removes)
            if SPANS:
                n_spans = tl.cdiv(n_chunks, PER)
            else:
                n_spans = 1
            for k in range(0, n_spans):
                if SPANS:
                    c_end = tl.minimum(k * PER + PER, n_chunks)
                else:
                    c_end = n_chunks
                if PREFETCH_F:
                    e_in_nx, e_tot_nx = _e_ahead(dec_ptr, etot_ptr, tl.num_programs(1),
                                                 n_chunks, k * PER, b64, h, H, offs_q, PRE_F)
                for c in tl.range(k * PER, c_end, loop_unroll_factor=UNROLL,
                                  num_stages=_stages(F, EXACT_STAGES)):
                    t = c * Q + offs_q.to(tl.int64)
                    dtv, hi, lo, e_in, to_end, e_tot, inv = _decays_all(
                        PRE_F, dec_ptr, etot_ptr, tl.num_programs(1), n_chunks, c, dt_ptr,
                        A_ptr, dtb_ptr, seq_ptr, b64, h, H, T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB,
                        HAS_SEQ, CLAMP_C)
                    if PREFETCH_F:
                        e_in, e_tot = e_in_nx, e_tot_nx
                        e_in_nx, e_tot_nx = _e_ahead(dec_ptr, etot_ptr, tl.num_programs(1),
                                                     n_chunks, c + 1, b64, h, H, offs_q, PRE_F)
                    mask_t, m_tp, m_tn, x, Bt, Ct = _chunk_inputs(
                        x_base, B_base, C_base, t, T, H, G, P, N, N, offs_p, offs_n, EVEN)
                    if HAS_Z:
                        # issued before the dots, for its latency to pass behind them (no dot
                        # takes it, so the pipeliner does not copy it ahead)
                        zz = _ld(_tile(z_base, t, H * P, offs_p), m_tp, EVEN)
                    if not (F and GRAM):
                        Gm = tl.dot(Ct, tl.trans(Bt), input_precision=PREC)
                    acc = tl.dot(Ct, _state_nt(S, STATE_T).to(dtype), input_precision=PREC)
                    if F:
                        seg, e_w, _ = _segments(HAS_SEQ, dec_ptr, etot_ptr, tl.num_programs(1),
                                                n_chunks, c, b64, h, H, t, e_in, e_tot)
                        u = (x.to(tl.float32) * (dtv * inv)[:, None]).to(dtype)
                        if GRAM:
                            W = tl.load(_tile(gl_base + _slot_offset(c, Q * Q, WIDE), offs_q, Q,
                                              offs_q))
                            if HAS_SEQ:
                                W = tl.where(_lower(offs_q, seg, HAS_SEQ), W, 0.0)
                        else:
                            W = tl.where(_lower(offs_q, seg, HAS_SEQ), Gm, 0.0).to(dtype)
                        acc = tl.dot(W, u, _seg0(acc, seg, HAS_SEQ), input_precision=PREC)
                        acc = acc * e_w[:, None]
                        if HAS_SEQ:
                            # the leaving state takes the last segment only: the exact loop's step
                            xd = (x.to(tl.float32) * (dtv * to_end)[:, None]).to(dtype)
                            S = _state_update(S * e_tot, xd, Bt, STATE_T, PREC)
                        else:
                            S = _state_update(S, u, Bt, STATE_T, PREC) * e_tot
                    else:
                        if HAS_DT:
                            xs = (x.to(tl.float32) * dtv[:, None]).to(dtype)
                        else:
                            xs = x
                        L = _L_tile(hi, lo, e_in, inv, e_tot, offs_q, False, FACTOR)
                        W = (Gm * L).to(dtype)
                        acc = tl.dot(W, xs, acc * e_in[:, None], input_precision=PREC)
                        xd = (x.to(tl.float32) * (dtv * to_end)[:, None]).to(dtype)
                        S = _state_update(S * e_tot, xd, Bt, STATE_T, PREC)
                    if HAS_D:
                        acc = _plus_D(acc, x.to(tl.float32), Dv, D_PER_P)
                    if HAS_Z:
                        zz = zz.to(tl.float32)
                        if STORE_YU:
                            _st(_tile(yu_base, t, H * P, offs_p), acc.to(dtype), m_tp, EVEN)
                        acc = acc * zz * _sigmoid(zz, FAST_GATE)
                    _st(_tile(y_base, t, H * P, offs_p), acc.to(dtype), m_tp, EVEN)
                if SPANS and k < n_spans - 1:
                    tl.store(ck_ptr + tl.cast(k, tl.int64) * SLOT + st_off,
                             S.to(ck_ptr.dtype.element_ty), mask=st_mask)

            if STORE_HT:
                tl.store(hT_ptr + st_off, S.to(hT_ptr.dtype.element_ty), mask=st_mask)


@triton.jit
def ssd_gram_kernel(B_ptr, C_ptr, gl_ptr, T, G, N, Q: tl.constexpr, BN: tl.constexpr,
                    PREC: tl.constexpr):
    """``gl[b, g, c] = lower(C_c B_c^T)`` (i >= j, else 0) in B's dtype, for every chunk of
    every (batch, group): grid ``(chunks, b * G)``; rows past T are zero."""
    c = tl.program_id(0)
    pid = tl.program_id(1)
    b64 = (pid // G).to(tl.int64)
    grp = pid % G
    offs_q = tl.arange(0, Q)
    offs_n = tl.arange(0, BN)
    t = c * Q + offs_q.to(tl.int64)
    m_tn = (t < T)[:, None] & (offs_n < N)[None, :]
    Bt = _ld(_tile(_start(B_ptr, b64, grp, T, G, N), t, G * N, offs_n), m_tn, False)
    Ct = _ld(_tile(_start(C_ptr, b64, grp, T, G, N), t, G * N, offs_n), m_tn, False)
    out = gl_ptr + (pid.to(tl.int64) * tl.num_programs(0) + c) * (Q * Q)
    Gm = tl.dot(Ct, tl.trans(Bt), input_precision=PREC)
    W = tl.where(offs_q[:, None] >= offs_q[None, :], Gm, 0.0)
    tl.store(_tile(out, offs_q, Q, offs_q), W.to(gl_ptr.dtype.element_ty))


@triton.jit
def _bwd_state_step(S, u, rs, e_tot, Bt, FACTORED: tl.constexpr, PREC: tl.constexpr):
    """The state after a chunk, ``exp(l_end) S + (x dt exp(l_end - l))^T B``, from ``u``:
    ``x dt exp(-l)`` (FACTORED, rounded to x's dtype) or x with ``rs = dt exp(l_end - l)``
    (the product rounded once, as the forward rounds it)."""
    if FACTORED:
        out = tl.dot(tl.trans(u), Bt, S, input_precision=PREC) * e_tot
    else:
        xd = (u.to(tl.float32) * rs[:, None]).to(u.dtype)
        out = tl.dot(tl.trans(xd), Bt, S * e_tot, input_precision=PREC)
    return out


@triton.jit
def ssd_bwd_fwdsweep_kernel(
    x_ptr, dt_ptr, A_ptr, dtb_ptr, B_ptr, C_ptr, D_ptr, h0_ptr, ck_ptr, seq_ptr, dy_ptr,
    dec_ptr, etot_ptr,
    dC_ptr, w_ptr, dD_ptr, st_ptr,
    T, H, G, P, N, NS, C0, C1, NCS, k, SLOT,
    HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
    HAS_D: tl.constexpr, D_PER_P: tl.constexpr, HAS_H0: tl.constexpr,
    HAS_SEQ: tl.constexpr,
    Q: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
    CLAMP_C: tl.constexpr, PRE: tl.constexpr = False, FACTOR: tl.constexpr = True,
    ATOMIC: tl.constexpr = False, FAST: tl.constexpr = False, FACTORED: tl.constexpr = False,
    EVEN: tl.constexpr = False, WIDE: tl.constexpr = False, ONE_LAUNCH: tl.constexpr = False,
    EXACT_STAGES: tl.constexpr = 0, SPANNED: tl.constexpr = False,
    PREFETCH: tl.constexpr = False,
):
    """Forward sweep of the backward, its first launch: with ``SPANNED`` over span ``k``,
    chunks ``[C0, C1)``, from the state entering it (``h0`` for span 0, else the forward's
    checkpoint ``k - 1`` in ``ck``, slots ``SLOT`` apart); else over the whole call from h0,
    the span arguments unread. dC and dD (partials, or added in place with ATOMIC),
    ``w = r1off + rowP - colP`` (module
    docstring), and the state entering each chunk (for ``<dS_out, S_in>`` in the reverse
    sweep) in slot ``c - C0`` of ``NCS``. FAST, FACTORED, ONE_LAUNCH: as in
    :func:`ssd_fwd_kernel`; WIDE: a (b, h)'s stored states hold 2^31 elements or more.
    ``D_ptr`` is unread (dD needs dy and x only; the launch shares its inputs with the
    reverse sweep's)."""
    pid_p, pid_bh, b64, h, grp = _program(H, G)
    NC = tl.cdiv(T, Q)
    if not SPANNED:
        C0, C1, NCS, k = 0, NC, NC, 0
    factorable = _factorable(etot_ptr, pid_bh, NC, FAST, HAS_SEQ)
    # as in ssd_fwd_kernel
    for F in tl.static_range(0 if ONE_LAUNCH else FACTORED, 2 if ONE_LAUNCH else FACTORED + 1):
        if _runs(factorable, FAST, F):
            offs_q, offs_p, offs_n = _offsets(pid_p, Q, BP, BN)
            mask_p = offs_p < P
            dtype = x_ptr.dtype.element_ty

            x_base, dy_base, B_base, C_base = _io_starts(x_ptr, dy_ptr, B_ptr, C_ptr, b64, h,
                                                         grp, T, H, G, P, NS)
            dC_base, dC_rs = _grad_rows(dC_ptr, pid_p, b64, h, grp, T, H, G, NS, ATOMIC)
            w_base = w_ptr + _slot(pid_p, pid_bh) * T
            st_off, st_mask = _state_tile(b64, h, H, P, N, NS, offs_p, offs_n)
            st_row0, st_loc = _state_rows(st_ptr, b64, h, H, NCS, P, N, offs_p, offs_n)

            NARROW: tl.constexpr = BN <= 64
            # the checkpoint, or (span 0) h0 or zeros: masked loads, no branch
            S = tl.load(ck_ptr + tl.cast(k - 1, tl.int64) * SLOT + st_off,
                        mask=_when(st_mask, 0, k), other=0.0).to(tl.float32)
            if HAS_H0:
                S += tl.load(h0_ptr + st_off, mask=_when(st_mask, k, 1),
                             other=0.0).to(tl.float32)
            if HAS_D:
                dD_acc = tl.zeros((BP,) if D_PER_P else (Q,), dtype=tl.float32)

            if PREFETCH:
                e_in_nx, e_tot_nx = _e_ahead(dec_ptr, etot_ptr, tl.num_programs(1), NC, C0, b64,
                                             h, H, offs_q)
            for c in tl.range(C0, C1, num_stages=_stages(F, EXACT_STAGES)):
                t = c * Q + offs_q.to(tl.int64)
                dtv, hi, lo, e_in, to_end, e_tot, inv = _decays_all(
                    PRE, dec_ptr, etot_ptr, tl.num_programs(1), NC, c, dt_ptr, A_ptr, dtb_ptr,
                    seq_ptr, b64, h, H, T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ, CLAMP_C)
                if PREFETCH:
                    e_in, e_tot = e_in_nx, e_tot_nx
                    e_in_nx, e_tot_nx = _e_ahead(dec_ptr, etot_ptr, tl.num_programs(1), NC, c + 1,
                                                 b64, h, H, offs_q)
                mask_t, m_tp, m_tn, x, Bt, Ct = _chunk_inputs(
                    x_base, B_base, C_base, t, T, H, G, P, N, NS, offs_p, offs_n, EVEN)
                dyt = _ld(_tile(dy_base, t, H * P, offs_p), m_tp, EVEN)
                # the exact loop rounds no x dt before a product: dy x^T takes dt on its columns
                # in fp32, its state's step rounds x dt exp(l_end - l) once (CPU emulation,
                # benchmarks/probe/da_rounding.py: a bf16(x dt) operand made dA's error up to
                # 2.7x that of the cotangent's own rounding)
                dt_to_end = dtv * to_end
                if F:
                    # L_ij = e_in_i inv_j: with u = xs inv, (G o L) xs = e_in (G_lower u) and
                    # (M o L) B = e_in ((dy u^T)_lower B); with segments e_w = exp(ls) for
                    # e_in, the triangles masked to the segments, and the state's step exact
                    seg, e_w, _ = _segments(HAS_SEQ, dec_ptr, etot_ptr, tl.num_programs(1), NC,
                                            c, b64, h, H, t, e_in, e_tot)
                    u = (x.to(tl.float32) * (dtv * inv)[:, None]).to(dtype)
                    if HAS_SEQ:
                        us = x
                    else:
                        us = u
                else:
                    L = _L_tile(hi, lo, e_in, inv, e_tot, offs_q, False, FACTOR)
                    us = x
                STEP_F: tl.constexpr = F and not HAS_SEQ   # _bwd_state_step's form
                # The order keeps few fp32 tiles live at once (Triton 3.6, sm_90,
                # benchmarks/NOTES.md): P and its sums before dy S, whose row sums are taken before
                # the dC dot accumulates into it; with n <= 64 (NARROW) the state is stored and its
                # update issued first (one fp32 S live: 272 -> 72 B of stack), with n = 128 after
                # the other dots (384 -> 120).
                if NARROW:
                    _st(st_row0 + _slot_offset(c - C0, P * N, WIDE) + st_loc,
                        S.to(st_ptr.dtype.element_ty), st_mask, EVEN)
                Gm = tl.dot(Ct, tl.trans(Bt), input_precision=PREC)
                Sb = S.to(dtype)
                if NARROW:
                    S = _bwd_state_step(S, us, dt_to_end, e_tot, Bt, STEP_F, PREC)
                else:
                    _st(st_row0 + _slot_offset(c - C0, P * N, WIDE) + st_loc,
                        S.to(st_ptr.dtype.element_ty), st_mask, EVEN)
                # P = G o L o M (fp32, strictly lower: the diagonal crosses nothing)
                if F:
                    Mu = tl.dot(dyt, tl.trans(u), input_precision=PREC)      # dy_i . xs_j inv_j
                    Ml = tl.where(_lower(offs_q, seg, HAS_SEQ), Mu, 0.0).to(dtype)
                else:
                    M = tl.dot(dyt, tl.trans(x), input_precision=PREC) * dtv[None, :]
                    Ml = (M * L).to(dtype)
                if HAS_D and not NARROW:
                    dD_acc += _dD_terms(dyt, x, D_PER_P)
                if F:
                    Pm = tl.where(_lower(offs_q, seg, HAS_SEQ, True), Gm * Mu, 0.0) * e_w[:, None]
                else:
                    Pm = tl.where(offs_q[:, None] > offs_q[None, :], Gm * L * M, 0.0)
                rowP = tl.sum(Pm, axis=1)
                colP = tl.sum(Pm, axis=0)
                dCs = tl.dot(dyt, Sb, input_precision=PREC)          # dy_i S, before e_in
                # w_t = r1off_t + sum_j P_tj - sum_i P_it: the pairs entering the chunk at t
                # (r1off_i = dy_i . exp(l_i) S_in C_i) and those inside it that start before or end
                # at t
                r1off = tl.sum(dCs * Ct.to(tl.float32), axis=1) * e_in
                if HAS_D and NARROW:
                    dD_acc += _dD_terms(dyt, x, D_PER_P)
                _st(w_base + t, r1off + rowP - colP, mask_t, EVEN)
                if not NARROW:
                    S = _bwd_state_step(S, us, dt_to_end, e_tot, Bt, STEP_F, PREC)
                if F:
                    dC = tl.dot(Ml, Bt, _seg0(dCs, seg, HAS_SEQ), input_precision=PREC)
                    dC = dC * e_w[:, None]
                else:
                    dC = tl.dot(Ml, Bt, dCs * e_in[:, None], input_precision=PREC)
                _put_grad(_tile(dC_base, t, dC_rs, offs_n), dC, m_tn, ATOMIC, EVEN)

            if HAS_D:
                if ATOMIC:
                    # added over the batch into dD's (H, P) or (H,) fp32 buffer
                    if D_PER_P:
                        tl.atomic_add(dD_ptr + h * P + offs_p, dD_acc, mask=mask_p, sem="relaxed")
                    else:
                        tl.atomic_add(dD_ptr + h, tl.sum(dD_acc, axis=0), sem="relaxed")
                elif D_PER_P:
                    tl.store(dD_ptr + (b64 * H + h) * P + offs_p, dD_acc, mask=mask_p)
                else:
                    # the program's total in the first slot of its p-block, zeros in the others
                    tl.store(dD_ptr + (b64 * H + h) * P + offs_p,
                             tl.where(offs_p == pid_p * BP, tl.sum(dD_acc, axis=0), 0.0),
                             mask=mask_p)


@triton.jit
def ssd_bwd_revsweep_kernel(
    x_ptr, dt_ptr, A_ptr, dtb_ptr, B_ptr, C_ptr, D_ptr, seq_ptr, dy_ptr, dhT_ptr,
    carry_ptr, dec_ptr, etot_ptr,
    st_ptr, w_ptr,
    dx_ptr, dB_ptr, ddt_ptr, dsum_ptr, dh0_ptr,
    T, H, G, P, N, NS, NPB, C0, C1, NCS, k, NSPAN,
    HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
    HAS_D: tl.constexpr, D_PER_P: tl.constexpr,
    HAS_SEQ: tl.constexpr, HAS_DHT: tl.constexpr, STORE_DH0: tl.constexpr,
    Q: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
    CLAMP_C: tl.constexpr, PRE: tl.constexpr = False, FACTOR: tl.constexpr = True,
    ATOMIC: tl.constexpr = False, FAST: tl.constexpr = False, FACTORED: tl.constexpr = False,
    EVEN: tl.constexpr = False, WIDE: tl.constexpr = False, E_ON_C: tl.constexpr = False,
    ONE_LAUNCH: tl.constexpr = False, EXACT_STAGES: tl.constexpr = 0,
    SPANNED: tl.constexpr = False, ACC_DX: tl.constexpr = False,
):
    """Reverse sweep of the backward, its second launch: with ``SPANNED`` over span ``k`` of
    ``NSPAN``, chunks ``[C0, C1)``, from the adjoint leaving it (d final state for the last
    span, else ``carry``, where the span after it left it) to the one entering it (``carry``,
    or d h0 for span 0); else over the whole call, the span arguments unread. dx, dB, d h0
    and the gradient of the raw dt (or log_a), each partial over p-blocks; with ``ACC_DX``
    dx is added to what ``dx_ptr`` holds (a block of the state's columns after the first).
    ``dy`` is the gradient of the SSD's own output: with z, ``dy silu(z)`` from the gate pass
    (:mod:`.gate`), so that the dots here take a loaded tile (the gate computed here cost this
    loop 1713 of its 3220 instructions, Triton 3.6 proxy).
    FAST, FACTORED, ONE_LAUNCH, WIDE: as in :func:`ssd_bwd_fwdsweep_kernel`; E_ON_C: the chunk
    decays ``e_in`` scale C rather than dy in ``dy^T diag(e_in) C`` and its relatives (the same
    products; chosen where C's tile is not larger than dy's).

    ``dla_t = sum_{i >= t} w_i + sum_{j < t} r2off_j + exp(l_end) <dS_out, S_in>``: the
    pairs (s < t <= t') inside the chunk and entering it (``w``, from the forward sweep),
    leaving it, and crossing it (from the stored state entering the chunk and the adjoint
    leaving it): no long running sums, no drift, no cancellation. Written to ``ddt``
    (p-blocks, b, T, H): ``keep dla`` (log_a given), or, with dt,
    ``sig (x . dxs + A keep dla)``; ``dsum`` (2, p-blocks, b H), or with ATOMIC (2, H) added
    into, gets this program's sums of
    ``keep dla dt`` (for dA) and of its ddt (for d dt_bias), compensated running sums over
    the chunks (a store per chunk instead cost the loop 15 %, H200 run 21; dA's terms per
    position summed by torch cost 1.3 % at T = 16K, 2026-12-01 run 3). The chain rule of
    ``dt -> dt A``, the softplus and the clamp is linear in the two sums, so partials over
    p-blocks add up.
    """
    pid_p, pid_bh, b64, h, grp = _program(H, G)
    NC = tl.cdiv(T, Q)
    if not SPANNED:
        C0, C1, NCS, k, NSPAN = 0, NC, NC, 0, 1
    factorable = _factorable(etot_ptr, pid_bh, NC, FAST, HAS_SEQ)
    # as in ssd_fwd_kernel
    for F in tl.static_range(0 if ONE_LAUNCH else FACTORED, 2 if ONE_LAUNCH else FACTORED + 1):
        if _runs(factorable, FAST, F):
            offs_q, offs_p, offs_n = _offsets(pid_p, Q, BP, BN)
            dtype = x_ptr.dtype.element_ty

            # no z: dy is the gated one where the call has z (the gate pass made it)
            x_base, dy_base, B_base, C_base = _io_starts(x_ptr, dy_ptr, B_ptr, C_ptr, b64, h,
                                                         grp, T, H, G, P, NS)
            dx_base = _start(dx_ptr, b64, h, T, H, P)
            dB_base, dB_rs = _grad_rows(dB_ptr, pid_p, b64, h, grp, T, H, G, NS, ATOMIC)
            w_base = w_ptr + _slot(pid_p, pid_bh) * T
            pb_b = pid_p.to(tl.int64) * (tl.num_programs(1) // H) + b64
            ddt_base = ddt_ptr + pb_b * T * H + h
            if HAS_DT:
                A_h = tl.load(A_ptr + h).to(tl.float32)
                # compensated running sums of dA's and d dt_bias's terms (one per chunk)
                dA_acc = tl.full((), 0.0, tl.float32)
                dA_err = tl.full((), 0.0, tl.float32)
                ddtb_acc = tl.full((), 0.0, tl.float32)
                ddtb_err = tl.full((), 0.0, tl.float32)
            st_off, st_mask = _state_tile(b64, h, H, P, N, NS, offs_p, offs_n)
            st_row0, st_loc = _state_rows(st_ptr, b64, h, H, NCS, P, N, offs_p, offs_n)

            dS = tl.load(carry_ptr + st_off, mask=_when(st_mask, k, NSPAN - 1),
                         other=0.0).to(tl.float32)
            if HAS_DHT:
                dS += tl.load(dhT_ptr + st_off, mask=_when(st_mask, NSPAN - 2, k),
                              other=0.0).to(tl.float32)
            if HAS_D:
                Dv = _load_D(D_ptr, h, P, offs_p, D_PER_P)

            for i in tl.range(0, C1 - C0, num_stages=_stages(F, EXACT_STAGES)):
                c = C1 - 1 - i
                t = c * Q + offs_q.to(tl.int64)
                dtv, hi, lo, e_in, to_end, e_tot, inv = _decays_all(
                    PRE, dec_ptr, etot_ptr, tl.num_programs(1), NC, c, dt_ptr, A_ptr, dtb_ptr,
                    seq_ptr, b64, h, H, T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ, CLAMP_C)
                mask_t, m_tp, m_tn, x, Bt, Ct = _chunk_inputs(
                    x_base, B_base, C_base, t, T, H, G, P, N, NS, offs_p, offs_n, EVEN)
                dyt = _ld(_tile(dy_base, t, H * P, offs_p), m_tp, EVEN)
                # the loads that no dot takes (so the pipeliner does not copy them ahead) are issued
                # first, for their latency to pass behind the dots (H200 s7-3: 1.78 -> 1.58 ms at
                # T = 16K, where w, keep and sig had been loaded just before their use)
                S_in = _ld(st_row0 + _slot_offset(c - C0, P * N, WIDE) + st_loc, st_mask, EVEN)
                w = _ld(w_base + t, mask_t, EVEN)
                if ACC_DX:
                    dx_in = _ld(_tile(dx_base, t, H * P, offs_p), m_tp, EVEN)
                keep, sig = _dt_grad_factors(PRE, dec_ptr, tl.num_programs(1), NC, dt_ptr, A_ptr,
                                             dtb_ptr, seq_ptr, b64, h, H, T, t, HAS_DT, DT_SOFTPLUS,
                                             HAS_DTB, HAS_SEQ, CLAMP_C)
                xf = x.to(tl.float32)
                # the factored loop's x dt (the exact loop takes x and dt apart; made where used,
                # the sweep's stack moves by -16 to +32 B across its variants, Triton 3.6 proxy)
                if HAS_DT:
                    xs = (xf * dtv[:, None]).to(dtype)
                else:
                    xs = x
                # The order keeps few 64 x 64 fp32 tiles live at once (Triton 3.6, sm_90: 360 -> 48
                # B of stack, benchmarks/NOTES.md): first all that reads the adjoint leaving the
                # chunk (cross, its bf16 copy) and its update issued, so one fp32 dS is live; then
                # dx; then the dla / ddt row; dB last.
                cross = tl.sum(tl.sum(dS * S_in.to(tl.float32), axis=1), axis=0) * e_tot
                if F:
                    # with segments e_w = exp(ls) for e_in (module docstring of .decays)
                    seg, e_w, e_tot_w = _segments(HAS_SEQ, dec_ptr, etot_ptr, tl.num_programs(1),
                                                  NC, c, b64, h, H, t, e_in, e_tot)
                else:
                    e_w = e_in
                # dy^T diag(e_in) C as dyv^T Cv. E_ON_C: Cv = e_in C, and every dot takes the loaded
                # dy tile itself, which the pipeliner then copies ahead asynchronously (a computed
                # operand is loaded where it is used: the loop's longest wait, H200 ncu s7-1)
                if E_ON_C:
                    dyv = dyt
                    Cv = (Ct.to(tl.float32) * e_w[:, None]).to(dtype)
                else:
                    dyv = (dyt.to(tl.float32) * e_w[:, None]).to(dtype)
                    Cv = Ct
                # dxs = acc * rs (rows scaled once, with dt, for dx)
                if F:
                    # L_ij = e_in_i inv_j, to_end_j = e_tot inv_j: every term is inv_j times a
                    # product of unscaled tiles and dyv, Cv (one of which carries e_in)
                    # (with segments: the adjoint carried through the chunk takes dy from
                    # segment 0; the leaving state's terms, from the unscaled adjoint, the rows
                    # of the last segment times exp(ls_end))
                    low = _lower(offs_q, seg, HAS_SEQ, False, True)
                    if HAS_SEQ:
                        dSx = dS.to(dtype)
                        dS = tl.dot(tl.trans(_seg0(dyv, seg, True)), Cv, dS * e_tot,
                                    input_precision=PREC)
                    else:
                        dS = dS * e_tot
                        dSx = dS.to(dtype)
                        dS = tl.dot(tl.trans(dyv), Cv, dS, input_precision=PREC)
                    Gt = tl.dot(Bt, tl.trans(Cv), input_precision=PREC)   # Gt[j, i] = Cv_i . B_j
                    WG = tl.where(low, Gt, 0.0).to(dtype)
                    st = _leaving(tl.dot(Bt, tl.trans(dSx), input_precision=PREC), to_end,
                                  e_tot_w, HAS_SEQ)
                    rs = inv
                    r2off = tl.sum(xf * st, axis=1) * (dtv * rs)
                    acc = tl.dot(WG, dyv, st, input_precision=PREC)
                else:
                    # Lt[j, i] = L[i, j]
                    Lt = _L_tile(hi, lo, e_in, inv, e_tot, offs_q, True, FACTOR)
                    dSx = dS.to(dtype)
                    dS = tl.dot(tl.trans(dyv), Cv, dS * e_tot, input_precision=PREC)
                    Gt = tl.dot(Bt, tl.trans(Ct), input_precision=PREC)   # Gt[j, i] = C_i . B_j
                    WG = (Gt * Lt).to(dtype)
                    st = tl.dot(Bt, tl.trans(dSx), input_precision=PREC) * to_end[:, None]
                    rs = tl.full((Q,), 1.0, tl.float32)
                    r2off = tl.sum(xf * st, axis=1) * dtv      # x and dt apart, as the forward sweep
                    acc = tl.dot(WG, dyt, st, input_precision=PREC)
                xdx = tl.sum(acc * xf, axis=1) * rs
                dx = acc * (rs * dtv)[:, None]
                if HAS_D:
                    dx = _plus_D(dx, dyt.to(tl.float32), Dv, D_PER_P)
                if ACC_DX:
                    dx += dx_in.to(tl.float32)
                _st(_tile(dx_base, t, H * P, offs_p), dx.to(dx_ptr.dtype.element_ty), m_tp, EVEN)
                if F:
                    Mt = tl.dot(xs, tl.trans(dyv), input_precision=PREC)  # Mt[j, i] = dyv_i . xs_j
                    WM = tl.where(low, Mt, 0.0).to(dtype)
                else:
                    # Mt[j, i] = dy_i . x_j dt_j
                    Mt = tl.dot(x, tl.trans(dyt), input_precision=PREC) * dtv[:, None]
                    WM = (Mt * Lt).to(dtype)
                # the pairs straddling t: inside the chunk and entering it (w, from the forward
                # sweep), leaving it (r2off), and crossing it (exp(l_end) <dS_out, S_in>)
                suf = tl.cumsum(w, axis=0, reverse=True) + (tl.cumsum(r2off, axis=0) - r2off)
                dla = (suf + cross) * keep
                if HAS_DT:
                    ddt = (xdx + A_h * dla) * sig
                    dA_acc, dA_err = _kahan_add(dA_acc, dA_err, tl.sum(dla * dtv, axis=0))
                    ddtb_acc, ddtb_err = _kahan_add(ddtb_acc, ddtb_err, tl.sum(ddt, axis=0))
                else:
                    ddt = dla
                _st(ddt_base + t * H, ddt, mask_t, EVEN)
                if F:
                    dB = tl.dot(WM, Cv, _leaving(tl.dot(xs, dSx, input_precision=PREC), to_end,
                                                 e_tot_w, HAS_SEQ), input_precision=PREC)
                    dB = dB * inv[:, None]
                else:
                    dB = tl.dot(WM, Ct, tl.dot(x, dSx, input_precision=PREC)
                                * (dtv * to_end)[:, None], input_precision=PREC)
                _put_grad(_tile(dB_base, t, dB_rs, offs_n), dB, m_tn, ATOMIC, EVEN)

            tl.store(carry_ptr + st_off, dS.to(carry_ptr.dtype.element_ty),
                     mask=_when(st_mask, 0, k))
            if STORE_DH0:
                tl.store(dh0_ptr + st_off, dS.to(dh0_ptr.dtype.element_ty),
                         mask=_when(st_mask, k, 1))
            if HAS_DT:
                if ATOMIC:
                    # added over p-blocks and the batch into dsum (2, H)
                    tl.atomic_add(dsum_ptr + h, dA_acc, sem="relaxed")
                    tl.atomic_add(dsum_ptr + H + h, ddtb_acc, sem="relaxed")
                else:
                    tl.store(dsum_ptr + _slot(pid_p, pid_bh), dA_acc)
                    tl.store(dsum_ptr + NPB * tl.num_programs(1) + _slot(pid_p, pid_bh), ddtb_acc)


@triton.jit
def ssd_decode_kernel(
    state_ptr, x_ptr, dt_ptr, A_ptr, dtb_ptr, B_ptr, C_ptr, D_ptr, z_ptr, y_ptr,
    H, G, P, N,
    HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
    HAS_D: tl.constexpr, D_PER_P: tl.constexpr, HAS_Z: tl.constexpr,
    BP: tl.constexpr, BN: tl.constexpr, CLAMP_C: tl.constexpr, FAST_GATE: tl.constexpr = False,
):
    """One token: ``S <- exp(la) S + xs B^T`` in place, ``y = S C (+ D x) (* silu z)``;
    FAST_GATE as in :func:`ssd_fwd_kernel`."""
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
    st_off, st_mask = _state_tile(b64, h, H, P, N, N, offs_p, offs_n)
    S = tl.load(state_ptr + st_off, mask=st_mask, other=0.0).to(tl.float32)
    S = S * decay + (x * dtv)[:, None] * Bv[None, :]
    tl.store(state_ptr + st_off, S.to(state_ptr.dtype.element_ty), mask=st_mask)
    y = tl.sum(S * Cv[None, :], axis=1)
    if HAS_D:
        y += x * _load_D(D_ptr, h, P, offs_p, D_PER_P)
    if HAS_Z:
        zz = tl.load(z_ptr + xo, mask=mask_p, other=0.0).to(tl.float32)
        y = y * zz * _sigmoid(zz, FAST_GATE)
    tl.store(y_ptr + xo, y.to(y_ptr.dtype.element_ty), mask=mask_p)

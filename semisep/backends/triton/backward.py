"""The backward of the chunked SSD: one light reverse sweep, then every chunk in parallel.

The forward stores the state entering every ``SUB``-th chunk (:func:`.kernels.ssd_fwd_kernel`,
``STORE_ST``); :func:`ssd_bwd_adjoint_kernel` walks the chunks backwards carrying only the
adjoint state and stores it at the same boundaries; :func:`ssd_bwd_chunk_kernel` then owns one
(group of ``SUB`` chunks, batch, head, block of p) and computes all of its gradients from the
two states at its ends, with no carried state: the grid holds every chunk at once.

Per chunk (local positions i, j; ``l`` the chunk-local cumulative log-decay; ``S_in`` the state
entering the chunk, ``dS`` the adjoint of the one leaving it; states are (p, n))::

    G_ij = C_i . B_j,   L_ij = exp(l_i - l_j) (i >= j, else 0),   M_ij = dy_i . xs_j
    dxs  = (G o L)^T dy + exp(l_end - l) (B dS^T)
    dB   = (M o L)^T C  + exp(l_end - l) (xs dS)
    dC   = (M o L) B    + exp(l) (dy S_in)
    dla_t = sum_{i >= t > j} P_ij + sum_{i >= t} r1_i + sum_{j < t} r2_j + exp(l_end) <dS, S_in>

with ``P = G o L o M``, ``r1_i = exp(l_i) dy_i . (S_in C_i)`` (pairs entering the chunk) and
``r2_j = exp(l_end - l_j) xs_j . (dS B_j)`` (pairs leaving it). Every term of dla is a sum of
the products it differentiates, none a difference of long running sums: no drift at any T.
The adjoint recurrence is ``dS(c - 1) = exp(l_end(c)) dS(c) + (dy_c exp(l))^T C_c``, starting
from d(final state); the one before chunk 0 is d(initial state).

With ``SUB = 2`` only every other boundary is stored (half the memory): the chunk kernel redoes
the state step over its first chunk and the adjoint step over its second, one dot each. The
decay pre-pass then covers a whole number of chunk pairs (a phantom chunk past T decays by 1
and has zero inputs, so it changes nothing).

dB and dC are added in place over heads and p-blocks (fp32 atomics), or per (p-block, head)
under ``torch.use_deterministic_algorithms``; the dt, dA, dt_bias and D gradients come back as
per-position (or per-chunk) partials over p-blocks that torch sums.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .decays import FACTOR_MIN, _decays_all, _dt_grad_factors, _L_tile
from .tiles import _ld, _load_D, _plus_D, _program, _st, _start, _state_tile, _tile


@triton.jit
def ssd_bwd_adjoint_kernel(
    dy_ptr, z_ptr, C_ptr, dt_ptr, A_ptr, dtb_ptr, seq_ptr, dec_ptr, etot_ptr, dhT_ptr,
    dst_ptr, dh0_ptr,
    T, H, G, P, N, NCP,
    HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
    HAS_Z: tl.constexpr, HAS_SEQ: tl.constexpr, HAS_DHT: tl.constexpr, STORE_DH0: tl.constexpr,
    Q: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
    CLAMP_C: tl.constexpr, PRE: tl.constexpr, SUB: tl.constexpr, EVEN: tl.constexpr,
):
    """The adjoint state leaving every ``SUB``-th chunk group, ``dst[b, h, s] = dS(s SUB +
    SUB - 1)`` ((p, n) in memory), and d(initial state). Carried as ``dS^T`` (n, p), so the
    update ``C^T v`` takes a loaded tile transposed and a computed one as it is.

    ``NCP`` chunks (a multiple of SUB; those past T have zero dy and decay 1)."""
    pid_p, pid_bh, b64, h, grp = _program(H, G)
    offs_q = tl.arange(0, Q)
    offs_p = pid_p * BP + tl.arange(0, BP)
    offs_n = tl.arange(0, BN)
    dtype = C_ptr.dtype.element_ty
    dy_base = _start(dy_ptr, b64, h, T, H, P)
    z_base = _start(z_ptr, b64, h, T, H, P)
    C_base = _start(C_ptr, b64, grp, T, G, N)
    st_off, st_mask = _state_tile(b64, h, H, P, N, offs_p, offs_n, True)
    loc, _m = _state_tile(0, 0, H, P, N, offs_p, offs_n, True)
    row0 = dst_ptr + (b64 * H + h) * (NCP // SUB) * P * N
    if HAS_DHT:
        dS = tl.load(dhT_ptr + st_off, mask=st_mask, other=0.0).to(tl.float32)
    else:
        dS = tl.zeros((BN, BP), dtype=tl.float32)
    for i in range(0, NCP):
        c = NCP - 1 - i
        if SUB == 1:
            tl.store(row0 + c * (P * N) + loc, dS.to(dst_ptr.dtype.element_ty), mask=st_mask)
        else:
            last = (offs_p * 0 + c % SUB) == SUB - 1     # a tensor (c may be a Python int)
            tl.store(row0 + (c // SUB) * (P * N) + loc, dS.to(dst_ptr.dtype.element_ty),
                     mask=st_mask & last[None, :])
        t = c * Q + offs_q.to(tl.int64)
        _, _, _, e_in, _, e_tot, _ = _decays_all(
            PRE, dec_ptr, etot_ptr, tl.num_programs(1), NCP, c, dt_ptr, A_ptr, dtb_ptr,
            seq_ptr, b64, h, H, T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ, CLAMP_C)
        mask_t = t < T
        m_tp = mask_t[:, None] & (offs_p < P)[None, :]
        m_tn = mask_t[:, None] & (offs_n < N)[None, :]
        dyp = _ld(_tile(dy_base, t, H * P, offs_p), m_tp, EVEN).to(tl.float32)
        if HAS_Z:
            zz = _ld(_tile(z_base, t, H * P, offs_p), m_tp, EVEN).to(tl.float32)
            dyp = dyp * zz * tl.sigmoid(zz)
        Ct = _ld(_tile(C_base, t, G * N, offs_n), m_tn, EVEN)
        v = (dyp * e_in[:, None]).to(dtype)
        dS = tl.dot(tl.trans(Ct), v, dS * e_tot, input_precision=PREC)
    if STORE_DH0:
        tl.store(dh0_ptr + st_off, dS.to(dh0_ptr.dtype.element_ty), mask=st_mask)


@triton.jit
def _chunk_skip(etot_ptr, b64, h0, H, NCP, c, HPP, FAST: tl.constexpr, FACTORED: tl.constexpr):
    """Whether this chunk kernel program belongs to the other launch: it runs FACTORED iff
    chunk ``c`` of each of its heads decays by more than FACTOR_MIN (see .decays._skip)."""
    skip = False
    if FAST:
        least = tl.full((), 1.0, tl.float32)
        for k in range(0, HPP):
            least = tl.minimum(least, tl.load(etot_ptr + (b64 * H + h0 + k) * NCP + c))
        skip = (least > FACTOR_MIN) != FACTORED
    return skip


@triton.jit
def ssd_bwd_chunk_kernel(
    x_ptr, dt_ptr, A_ptr, dtb_ptr, B_ptr, C_ptr, D_ptr, z_ptr, seq_ptr, dy_ptr,
    dec_ptr, etot_ptr, st_ptr, dst_ptr,
    dx_ptr, dz_ptr, dB_ptr, dC_ptr, ddt_ptr, dsum_ptr, dD_ptr,
    T, H, G, P, N, NCP, BH, HS,
    HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
    HAS_D: tl.constexpr, D_PER_P: tl.constexpr, HAS_Z: tl.constexpr, HAS_SEQ: tl.constexpr,
    Q: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
    CLAMP_C: tl.constexpr, PRE: tl.constexpr, FACTOR: tl.constexpr, EVEN: tl.constexpr,
    NPB: tl.constexpr, FAST: tl.constexpr = False, FACTORED: tl.constexpr = False,
):
    """All gradients of chunk ``c`` for the heads ``hs * HPP .. (hs + 1) * HPP - 1`` of one
    (b, group), ``HPP = (H / G) / HS``: grid ``(NCP, b * G * HS)``.

    The heads share ``G = C B^T``, and their B and C gradients are sums over the heads of
    ``(M o L)^T C``, ``(M o L) B`` and the state terms, so the program adds up
    ``W = sum_h (M_h o L_h)^T`` and the state terms over its heads and multiplies by B and C
    once: five dots per (head, p-block) and two per chunk, no atomics. The loop over the
    (head, p-block) pairs is pipelined (the next pair's loads in flight).

    FACTORED (FAST launches the kernel twice; a program runs in the launch that matches
    whether chunk c of all its heads decays by more than FACTOR_MIN): with
    ``L_ij = exp(l_i) exp(-l_j)``, ``v = dy exp(l)`` and ``u = xs exp(-l)``, ``(M o L)^T`` is
    the lower triangle of ``u v^T`` (W sums the dots, masked once), ``(G o L)^T dy`` is
    ``exp(-l) (G_lower^T v)`` with ``G_lower`` shared by the heads, and no Q x Q decay tile
    is formed. Else every head forms its decay tile (resets, strong decays, float16).

    Outputs: dx, dz; dB, dC in fp32 partials (HS, b, T, G, N); ``ddt`` (p-blocks, b, T, H):
    the raw dt's gradient (or log_a's); ``dsum`` (same layout): dA's terms ``keep dla dt``;
    ``dD`` (b, H, NCP, P): per-chunk sums of ``dy x``.
    """
    c = tl.program_id(0)
    pid = tl.program_id(1)
    hs = pid % HS
    grp = (pid // HS) % G
    b64 = (pid // (HS * G)).to(tl.int64)
    HPP = (H // G) // HS
    h0 = grp * (H // G) + hs * HPP
    if _chunk_skip(etot_ptr, b64, h0, H, NCP, c, HPP, FAST, FACTORED):
        return
    offs_q = tl.arange(0, Q)
    offs_n = tl.arange(0, BN)
    dtype = x_ptr.dtype.element_ty
    t = c * Q + offs_q.to(tl.int64)
    mask_t = t < T
    m_tn = mask_t[:, None] & (offs_n < N)[None, :]
    B_base = _start(B_ptr, b64, grp, T, G, N)
    C_base = _start(C_ptr, b64, grp, T, G, N)
    Bt = _ld(_tile(B_base, t, G * N, offs_n), m_tn, EVEN)
    Ct = _ld(_tile(C_base, t, G * N, offs_n), m_tn, EVEN)
    Cf = Ct.to(tl.float32)
    Gt = tl.dot(Bt, tl.trans(Ct), input_precision=PREC)     # Gt[j, i] = C_i . B_j
    low = offs_q[None, :] >= offs_q[:, None]                # i >= j
    strict = offs_q[None, :] > offs_q[:, None]
    if FACTORED:
        G_low = tl.where(low, Gt, 0.0).to(dtype)
        G_strict = tl.where(strict, Gt, 0.0)
    W = tl.zeros((Q, Q), dtype=tl.float32)                  # sum_h (M_h o L_h)^T
    accB = tl.zeros((Q, BN), dtype=tl.float32)              # sum_h exp(l_end - l) xs dS
    accC = tl.zeros((Q, BN), dtype=tl.float32)              # sum_h exp(l) dy S_in
    for k in range(0, HPP * NPB):
        h = h0 + k // NPB
        offs_p = (k % NPB) * BP + tl.arange(0, BP)
        m_tp = mask_t[:, None] & (offs_p < P)[None, :]
        dtv, hi, lo, e_in, to_end, e_tot, inv = _decays_all(
            PRE, dec_ptr, etot_ptr, BH, NCP, c, dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64, h, H,
            T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ, CLAMP_C)
        keep, sig = _dt_grad_factors(PRE, dec_ptr, BH, NCP, dt_ptr, A_ptr, dtb_ptr, seq_ptr,
                                     b64, h, H, T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ,
                                     CLAMP_C)
        io = (b64 * T * H + h) * P
        x = _ld(_tile(x_ptr + io, t, H * P, offs_p), m_tp, EVEN)
        dyo = _ld(_tile(dy_ptr + io, t, H * P, offs_p), m_tp, EVEN).to(tl.float32)
        loc, st_mask = _state_tile(0, 0, H, P, N, offs_p, offs_n)
        st_at = ((b64 * H + h) * NCP + c) * P * N + loc
        S_in = tl.load(st_ptr + st_at, mask=st_mask, other=0.0)
        dS = tl.load(dst_ptr + st_at, mask=st_mask, other=0.0)
        if HAS_Z:
            zz = _ld(_tile(z_ptr + io, t, H * P, offs_p), m_tp, EVEN).to(tl.float32)
            sz = tl.sigmoid(zz)
            dyp = dyo * zz * sz
        else:
            dyp = dyo
        xf = x.to(tl.float32)
        v = (dyp * e_in[:, None]).to(dtype)
        dSe = (dS.to(tl.float32) * e_tot).to(dtype)
        if FACTORED:
            # everything below is exp(-l_j) times a product of unscaled tiles (rs = inv)
            u = (xf * (dtv * inv)[:, None]).to(dtype)
            Mut = tl.dot(u, tl.trans(v), input_precision=PREC)   # (M o L)^T where i >= j
            W += Mut
            Pt = G_strict * Mut
            st = tl.dot(Bt, tl.trans(dSe), input_precision=PREC)
            r2 = tl.sum(u.to(tl.float32) * st, axis=1)
            acc = tl.dot(G_low, v, st, input_precision=PREC)
            rs = inv
            accB = tl.dot(u, dSe, accB, input_precision=PREC)
        else:
            if HAS_DT:
                xs = (xf * dtv[:, None]).to(dtype)
            else:
                xs = x
            Lt = _L_tile(hi, lo, e_in, inv, e_tot, offs_q, True, FACTOR)
            Mt = tl.dot(xs, tl.trans(dyp.to(dtype)), input_precision=PREC)  # dy_i . xs_j
            GLt = Gt * Lt
            Pt = tl.where(strict, GLt * Mt, 0.0)
            W += Mt * Lt
            st = tl.dot(Bt, tl.trans(dS.to(dtype)), input_precision=PREC) * to_end[:, None]
            r2 = tl.sum(xs.to(tl.float32) * st, axis=1)
            acc = tl.dot(GLt.to(dtype), dyp.to(dtype), st, input_precision=PREC)
            rs = tl.full((Q,), 1.0, tl.float32)
            accB = tl.dot((xs.to(tl.float32) * to_end[:, None]).to(dtype), dS.to(dtype), accB,
                          input_precision=PREC)
        # dxs = acc * rs: (G o L)^T dy + exp(l_end - l) (B dS^T)
        # sum_{i >= t > j} P_ij = suffix_t(rowP - colP), P = G o L o M strictly lower
        inner = tl.sum(Pt, axis=0) - tl.sum(Pt, axis=1)
        # the entering pairs: dCs[i] = exp(l_i) dy_i S_in
        dCs = tl.dot(v, S_in.to(dtype), input_precision=PREC)
        r1 = tl.sum(dCs * Cf, axis=1)
        accC += dCs
        cross = tl.sum(tl.sum(dS.to(tl.float32) * S_in.to(tl.float32), axis=1), axis=0) * e_tot
        dla = (tl.cumsum(inner + r1, axis=0, reverse=True) + (tl.cumsum(r2, axis=0) - r2)
               + cross) * keep
        pb_b = (k % NPB) * (BH // H) + b64
        if HAS_DT:
            ddt = (tl.sum(acc * xf, axis=1) * rs
                   + tl.load(A_ptr + h).to(tl.float32) * dla) * sig
            _st(dsum_ptr + (pb_b * T + t) * H + h, dla * dtv, mask_t, EVEN)
        else:
            ddt = dla
        _st(ddt_ptr + (pb_b * T + t) * H + h, ddt, mask_t, EVEN)
        dx = acc * (rs * dtv)[:, None]
        if HAS_D:
            Dv = _load_D(D_ptr, h, P, offs_p, D_PER_P)
            dx = _plus_D(dx, dyp, Dv, D_PER_P)
            # this chunk's share of dD, per p: (b, h, chunk, p)
            tl.store(dD_ptr + ((b64 * H + h) * NCP + c) * P + offs_p, tl.sum(dyp * xf, axis=0),
                     mask=offs_p < P)
        _st(_tile(dx_ptr + io, t, H * P, offs_p), dx.to(dx_ptr.dtype.element_ty), m_tp, EVEN)
        if HAS_Z:
            # y before the gate, for dz (rare enough to form the decay tile here)
            Lz = _L_tile(hi, lo, e_in, inv, e_tot, offs_q, True, FACTOR)
            yv = tl.dot(tl.trans((Gt * Lz).to(dtype)), (xf * dtv[:, None]).to(dtype),
                        tl.dot(Ct, tl.trans(S_in.to(dtype)), input_precision=PREC)
                        * e_in[:, None], input_precision=PREC)
            if HAS_D:
                yv = _plus_D(yv, xf, Dv, D_PER_P)
            dz = dyo * yv * sz * (1.0 + zz * (1.0 - sz))
            _st(_tile(dz_ptr + io, t, H * P, offs_p), dz.to(dz_ptr.dtype.element_ty), m_tp,
                EVEN)
    Wc = tl.where(low, W, 0.0).to(dtype)
    dB = tl.dot(Wc, Ct, accB, input_precision=PREC)
    dC = tl.dot(tl.trans(Wc), Bt, accC, input_precision=PREC)
    out = _start(dB_ptr + (hs * (BH // H)) * T * G * N, b64, grp, T, G, N)
    _st(_tile(out, t, G * N, offs_n), dB, m_tn, EVEN)
    out = _start(dC_ptr + (hs * (BH // H)) * T * G * N, b64, grp, T, G, N)
    _st(_tile(out, t, G * N, offs_n), dC, m_tn, EVEN)

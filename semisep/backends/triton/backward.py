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

from .decays import _decays_all, _dt_grad_factors, _L_tile
from .tiles import (_chunk_inputs, _grad_rows, _io_starts, _ld, _load_D, _plus_D, _program,
                    _put_grad, _st, _start, _state_tile, _tile)


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
def _chunk_grads(
    c, S_in, dS,
    x_base, dy_base, z_base, B_base, C_base, dx_base, dz_base, dB_base, dB_rs, dC_base, dC_rs,
    ddt_base, dsum_base, dD_ptr, dt_ptr, A_ptr, dtb_ptr, seq_ptr, dec_ptr, etot_ptr, D_ptr,
    b64, h, BH, T, H, G, P, N, NCP, offs_q, offs_p, offs_n,
    HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
    HAS_D: tl.constexpr, D_PER_P: tl.constexpr, HAS_Z: tl.constexpr, HAS_SEQ: tl.constexpr,
    Q: tl.constexpr, PREC: tl.constexpr, CLAMP_C: tl.constexpr, PRE: tl.constexpr,
    FACTOR: tl.constexpr, ATOMIC: tl.constexpr, EVEN: tl.constexpr, RET_DS: tl.constexpr,
):
    """All gradients of chunk ``c`` (module docstring) from ``S_in`` and ``dS`` ((p, n) blocks
    in the stored precision); with ``RET_DS`` also returns the adjoint entering the chunk
    (fp32; else ``dS``)."""
    dtype = x_base.dtype.element_ty
    t = c * Q + offs_q.to(tl.int64)
    dtv, hi, lo, e_in, to_end, e_tot, inv = _decays_all(
        PRE, dec_ptr, etot_ptr, BH, NCP, c, dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64, h, H, T, t,
        HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ, CLAMP_C)
    keep, sig = _dt_grad_factors(PRE, dec_ptr, BH, NCP, dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64,
                                 h, H, T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ, CLAMP_C)
    mask_t, m_tp, m_tn, x, Bt, Ct = _chunk_inputs(x_base, B_base, C_base, t, T, H, G, P, N,
                                                  offs_p, offs_n, EVEN)
    dyo = _ld(_tile(dy_base, t, H * P, offs_p), m_tp, EVEN).to(tl.float32)
    if HAS_Z:
        zz = _ld(_tile(z_base, t, H * P, offs_p), m_tp, EVEN).to(tl.float32)
        sz = tl.sigmoid(zz)
        dyp = dyo * zz * sz
    else:
        dyp = dyo
    dyc = dyp.to(dtype)
    if RET_DS:
        v = (dyp * e_in[:, None]).to(dtype)
    if HAS_D:
        Dv = _load_D(D_ptr, h, P, offs_p, D_PER_P)
        # this chunk's share of dD, per p: (b, h, chunk, p)
        tl.store(dD_ptr + ((b64 * H + h) * NCP + c) * P + offs_p,
                 tl.sum(dyp * x.to(tl.float32), axis=0), mask=offs_p < P)
    if HAS_DT:
        xs = (x.to(tl.float32) * dtv[:, None]).to(dtype)
    else:
        xs = x
    Sc = S_in.to(dtype)
    dSc = dS.to(dtype)
    # the chunk's tiles transposed (row j, column i): Gt[j, i] = G[i, j], likewise L and M
    Lt = _L_tile(hi, lo, e_in, inv, e_tot, offs_q, True, FACTOR)
    GLt = tl.dot(Bt, tl.trans(Ct), input_precision=PREC) * Lt
    Mt = tl.dot(xs, tl.trans(dyc), input_precision=PREC)
    # sum_{i >= t > j} P_ij = suffix_t(rowP - colP), P = G o L o M strictly lower
    # (rowP_i = sum_j P_ij, colP_j = sum_i P_ij)
    Pt = tl.where(offs_q[None, :] > offs_q[:, None], GLt * Mt, 0.0)
    inner = tl.sum(Pt, axis=0) - tl.sum(Pt, axis=1)
    MLt = (Mt * Lt).to(dtype)
    GLc = GLt.to(dtype)
    dB = tl.dot(MLt, Ct, tl.dot(xs, dSc, input_precision=PREC) * to_end[:, None],
                input_precision=PREC)
    _put_grad(_tile(dB_base, t, dB_rs, offs_n), dB, m_tn, ATOMIC, EVEN)
    # the entering pairs: dCs[i] = dy_i S_in, before exp(l_i)
    dCs = tl.dot(dyc, Sc, input_precision=PREC)
    r1 = tl.sum(dCs * Ct.to(tl.float32), axis=1) * e_in
    dC = tl.dot(tl.trans(MLt), Bt, dCs * e_in[:, None], input_precision=PREC)
    _put_grad(_tile(dC_base, t, dC_rs, offs_n), dC, m_tn, ATOMIC, EVEN)
    # the leaving pairs: st[j] = exp(l_end - l_j) (B_j dS^T)
    st = tl.dot(Bt, tl.trans(dSc), input_precision=PREC) * to_end[:, None]
    r2 = tl.sum(xs.to(tl.float32) * st, axis=1)
    dxs = tl.dot(GLc, dyc, st, input_precision=PREC)
    cross = tl.sum(tl.sum(dS.to(tl.float32) * S_in.to(tl.float32), axis=1), axis=0) * e_tot
    dla = (tl.cumsum(inner + r1, axis=0, reverse=True) + (tl.cumsum(r2, axis=0) - r2)
           + cross) * keep
    if HAS_DT:
        ddt = (tl.sum(dxs * x.to(tl.float32), axis=1)
               + tl.load(A_ptr + h).to(tl.float32) * dla) * sig
        _st(dsum_base + t * H, dla * dtv, mask_t, EVEN)
    else:
        ddt = dla
    _st(ddt_base + t * H, ddt, mask_t, EVEN)
    dx = dxs * dtv[:, None]
    if HAS_D:
        dx = _plus_D(dx, dyp, Dv, D_PER_P)
    _st(_tile(dx_base, t, H * P, offs_p), dx.to(dx_base.dtype.element_ty), m_tp, EVEN)
    if HAS_Z:
        # y before the gate, for dz
        yv = tl.dot(tl.trans(GLc), xs,
                    tl.dot(Ct, tl.trans(Sc), input_precision=PREC) * e_in[:, None],
                    input_precision=PREC)
        if HAS_D:
            yv = _plus_D(yv, x.to(tl.float32), Dv, D_PER_P)
        dz = dyo * yv * sz * (1.0 + zz * (1.0 - sz))
        _st(_tile(dz_base, t, H * P, offs_p), dz.to(dz_base.dtype.element_ty), m_tp, EVEN)
    if RET_DS:
        dS = tl.dot(tl.trans(v), Ct, dS.to(tl.float32) * e_tot, input_precision=PREC)
    return dS


@triton.jit
def ssd_bwd_chunk_kernel(
    x_ptr, dt_ptr, A_ptr, dtb_ptr, B_ptr, C_ptr, D_ptr, z_ptr, seq_ptr, dy_ptr,
    dec_ptr, etot_ptr, st_ptr, dst_ptr,
    dx_ptr, dz_ptr, dB_ptr, dC_ptr, ddt_ptr, dsum_ptr, dD_ptr,
    T, H, G, P, N, NCP,
    HAS_DT: tl.constexpr, DT_SOFTPLUS: tl.constexpr, HAS_DTB: tl.constexpr,
    HAS_D: tl.constexpr, D_PER_P: tl.constexpr, HAS_Z: tl.constexpr, HAS_SEQ: tl.constexpr,
    Q: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
    CLAMP_C: tl.constexpr, PRE: tl.constexpr, FACTOR: tl.constexpr, ATOMIC: tl.constexpr,
    SUB: tl.constexpr, EVEN: tl.constexpr,
):
    """The gradients of chunks ``s SUB .. s SUB + SUB - 1`` of one (b, h, block of p), grid
    ``(NCP // SUB, b * H, p-blocks)``: chunks fastest, so the programs running together add
    their dB, dC into different rows. Outputs: dx, dz; dB, dC (:func:`.tiles._put_grad`);
    ``ddt`` (p-blocks, b, T, H): the raw dt's gradient (or log_a's); ``dsum`` (same layout):
    dA's terms ``keep dla dt``; ``dD`` (b, H, chunks, P): per-chunk sums of ``dy x``.
    """
    s = tl.program_id(0)
    pid_bh = tl.program_id(1)
    pid_p = tl.program_id(2)
    BH = tl.num_programs(1)
    h = pid_bh % H
    grp = h // (H // G)
    b64 = (pid_bh // H).to(tl.int64)
    offs_q = tl.arange(0, Q)
    offs_p = pid_p * BP + tl.arange(0, BP)
    offs_n = tl.arange(0, BN)
    dtype = x_ptr.dtype.element_ty
    x_base, dy_base, z_base, B_base, C_base = _io_starts(x_ptr, dy_ptr, z_ptr, B_ptr, C_ptr,
                                                         b64, h, grp, T, H, G, P, N)
    dx_base = _start(dx_ptr, b64, h, T, H, P)
    dz_base = _start(dz_ptr, b64, h, T, H, P)
    dB_base, dB_rs = _grad_rows(dB_ptr, pid_p, b64, h, grp, T, H, G, N, ATOMIC)
    dC_base, dC_rs = _grad_rows(dC_ptr, pid_p, b64, h, grp, T, H, G, N, ATOMIC)
    pb_b = pid_p.to(tl.int64) * (BH // H) + b64
    ddt_base = ddt_ptr + pb_b * T * H + h
    dsum_base = dsum_ptr + pb_b * T * H + h
    loc, st_mask = _state_tile(0, 0, H, P, N, offs_p, offs_n)
    st_at = ((b64 * H + h) * (NCP // SUB) + s) * P * N + loc
    # in the stored precision (bf16 for bf16 inputs), converted where used
    S_in = tl.load(st_ptr + st_at, mask=st_mask, other=0.0)
    dS = tl.load(dst_ptr + st_at, mask=st_mask, other=0.0)
    if SUB == 1:
        _chunk_grads(
            s, S_in, dS, x_base, dy_base, z_base, B_base, C_base, dx_base, dz_base, dB_base,
            dB_rs, dC_base, dC_rs, ddt_base, dsum_base, dD_ptr, dt_ptr, A_ptr, dtb_ptr, seq_ptr,
            dec_ptr, etot_ptr, D_ptr, b64, h, BH, T, H, G, P, N, NCP, offs_q, offs_p, offs_n,
            HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_D, D_PER_P, HAS_Z, HAS_SEQ, Q, PREC, CLAMP_C,
            PRE, FACTOR, ATOMIC, EVEN, False)
    else:
        # the state entering the second chunk: one step of the recurrence over the first
        c0 = 2 * s
        t = c0 * Q + offs_q.to(tl.int64)
        dtv, _, _, _, to_end, e_tot, _ = _decays_all(
            PRE, dec_ptr, etot_ptr, BH, NCP, c0, dt_ptr, A_ptr, dtb_ptr, seq_ptr, b64, h, H,
            T, t, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_SEQ, CLAMP_C)
        _, _, _, x, Bt, _ = _chunk_inputs(x_base, B_base, C_base, t, T, H, G, P, N, offs_p,
                                          offs_n, EVEN)
        xd = (x.to(tl.float32) * (dtv * to_end)[:, None]).to(dtype)
        S_mid = tl.dot(tl.trans(xd), Bt, S_in.to(tl.float32) * e_tot, input_precision=PREC)
        S_mid = S_mid.to(st_ptr.dtype.element_ty)
        dS_mid = _chunk_grads(
            c0 + 1, S_mid, dS, x_base, dy_base, z_base, B_base, C_base, dx_base, dz_base,
            dB_base, dB_rs, dC_base, dC_rs, ddt_base, dsum_base, dD_ptr, dt_ptr, A_ptr, dtb_ptr,
            seq_ptr, dec_ptr, etot_ptr, D_ptr, b64, h, BH, T, H, G, P, N, NCP, offs_q, offs_p,
            offs_n, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_D, D_PER_P, HAS_Z, HAS_SEQ, Q, PREC,
            CLAMP_C, PRE, FACTOR, ATOMIC, EVEN, True)
        _chunk_grads(
            c0, S_in, dS_mid.to(dst_ptr.dtype.element_ty), x_base, dy_base, z_base, B_base, C_base, dx_base, dz_base,
            dB_base, dB_rs, dC_base, dC_rs, ddt_base, dsum_base, dD_ptr, dt_ptr, A_ptr, dtb_ptr,
            seq_ptr, dec_ptr, etot_ptr, D_ptr, b64, h, BH, T, H, G, P, N, NCP, offs_q, offs_p,
            offs_n, HAS_DT, DT_SOFTPLUS, HAS_DTB, HAS_D, D_PER_P, HAS_Z, HAS_SEQ, Q, PREC,
            CLAMP_C, PRE, FACTOR, ATOMIC, EVEN, False)

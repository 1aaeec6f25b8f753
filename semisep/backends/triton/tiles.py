"""Addressing and tile helpers of the SSD sweeps (:mod:`.kernels`): a program's coordinates,
the rows of a chunk, loads and stores with or without masks, the B and C gradient rows, and the
state's tile in its two forms.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _program(H, G):
    """``(pid_p, pid_bh, b, h, group)`` of a sweep's program (grid ``(p-blocks, b * H)``);
    ``b`` in int64, for the offsets."""
    pid_p = tl.program_id(0)
    pid_bh = tl.program_id(1)
    h = pid_bh % H
    return pid_p, pid_bh, (pid_bh // H).to(tl.int64), h, h // (H // G)


@triton.jit
def _offsets(pid_p, Q: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr):
    """``(offs_q, offs_p, offs_n)``: a chunk's rows, this program's block of p, the state's
    columns."""
    return tl.arange(0, Q), pid_p * BP + tl.arange(0, BP), tl.arange(0, BN)


@triton.jit
def _state_tile(b64, h, H, P, N, NS, offs_p, offs_n, TRANSPOSED: tl.constexpr = False):
    """``(offsets, mask)`` of this program's block of the first N of the NS columns of a
    (b, H, P, NS) state, as a (p, n) tile or (``TRANSPOSED``) an (n, p) one."""
    if TRANSPOSED:
        off = ((b64 * H + h) * P + offs_p[None, :]) * NS + offs_n[:, None]
        mask = (offs_p < P)[None, :] & (offs_n < N)[:, None]
    else:
        off = ((b64 * H + h) * P + offs_p[:, None]) * NS + offs_n[None, :]
        mask = (offs_p < P)[:, None] & (offs_n < N)[None, :]
    return off, mask


@triton.jit
def _slot(pid_p, pid_bh):
    """This program's row among the per-(p-block, b, h) rows of w, dsum (int64)."""
    return pid_p.to(tl.int64) * tl.num_programs(1) + pid_bh


@triton.jit
def _state_rows(st_ptr, b64, h, H, NC, P, N, offs_p, offs_n):
    """``(row0, loc)``: where this (b, h)'s stored chunk states start (one per chunk) and this
    program's block within one."""
    row0 = st_ptr + (b64 * H + h) * NC * P * N
    return row0, offs_p[:, None] * N + offs_n[None, :]


@triton.jit
def _slot_offset(c, size, WIDE: tl.constexpr):
    """``c * size``, the offset of slot ``c`` of a per-(b, h) row of chunk tiles: in int64 when
    ``WIDE`` (the row holds 2^31 elements or more), else in int32 (fewer instructions)."""
    if WIDE:
        off = tl.cast(c, tl.int64) * size
    else:
        off = c * size
    return off


@triton.jit
def _start(ptr, b64, i, T, W, D):
    """Where slot ``i`` of batch entry ``b`` starts in a (b, T, W, D) array (x: W = H, D = P;
    B, C: W = G, D = N); rows t then lie ``W * D`` apart (see :func:`_tile`)."""
    return ptr + (b64 * T * W + i) * D


@triton.jit
def _io_starts(x_ptr, o_ptr, B_ptr, C_ptr, b64, h, grp, T, H, G, P, NS):
    """:func:`_start` of (b, h) in x and in a second (b, T, H, P) array ``o`` (y, or dy), and
    of (b, its group) in B and C (rows of NS columns): the inputs every sweep walks."""
    return (_start(x_ptr, b64, h, T, H, P), _start(o_ptr, b64, h, T, H, P),
            _start(B_ptr, b64, grp, T, G, NS), _start(C_ptr, b64, grp, T, G, NS))


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
def _chunk_inputs(x_base, B_base, C_base, t, T, H, G, P, N, NS, offs_p, offs_n,
                  EVEN: tl.constexpr):
    """``(mask_t, m_tp, m_tn, x, B, C)``: the masks and the x, B, C tiles of positions ``t``,
    the first N of B's and C's NS columns (the masks go unused, and so cost nothing, when
    ``EVEN``)."""
    mask_t = t < T
    m_tp = mask_t[:, None] & (offs_p < P)[None, :]
    m_tn = mask_t[:, None] & (offs_n < N)[None, :]
    x = _ld(_tile(x_base, t, H * P, offs_p), m_tp, EVEN)
    Bt = _ld(_tile(B_base, t, G * NS, offs_n), m_tn, EVEN)
    Ct = _ld(_tile(C_base, t, G * NS, offs_n), m_tn, EVEN)
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
def _grad_rows(ptr, pid_p, b64, h, grp, T, H, G, NS, ATOMIC: tl.constexpr):
    """``(base, row stride)`` of a B or C gradient (rows of NS columns). ATOMIC: the fp32
    (b, T, G, NS) buffer that the heads and p-blocks add into; else this program's fp32
    partial in (p-blocks, b, T, H, NS)."""
    if ATOMIC:
        base = _start(ptr, b64, grp, T, G, NS)
        stride = G * NS
    else:
        pb_b = pid_p.to(tl.int64) * (tl.num_programs(1) // H) + b64
        base = ptr + (pb_b * T * H + h) * NS
        stride = H * NS
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
def _when(mask, a, b):
    """``mask`` where the scalars ``a < b``, else all false: a load or store of a state that
    only some spans make (built on the mask's shape: the interpreter refuses a scalar
    condition in a mask)."""
    return mask & (tl.zeros(mask.shape, tl.int32) + a < b)


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

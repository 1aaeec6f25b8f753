"""The raw launchers of the Triton SSD: the forward, the decay pre-pass and the two backward
sweeps, on contiguous tensors already checked by :mod:`.ops` (which wraps them in autograd).
"""

from __future__ import annotations

import contextlib

import torch

from . import gluon_bwd, gluon_fwd
from . import kernels as K
from .config import (_cdiv, _even, _factor, _fast, _gram, _launch_opts, _launches, _pre,
                     _prec, _wide, knobs, pick_config, span_steps, state_block,
                     whole_state)
from .decays import CLAMP, PRE_ALL, PRE_FACTORED, PRE_NONE, ssd_decays_kernel
from .fastlaunch import MAX_ENTRIES, Options, arg_key, launch
from .gate import BLOCK, fast_sigmoid, gate_options, ssd_gate_bwd_kernel


def _device_ctx(t: torch.Tensor):
    """The launches' device: t's (a context switch only where the current one differs)."""
    if t.is_cuda and t.get_device() != torch.cuda.current_device():
        return torch.cuda.device(t.device)
    return contextlib.nullcontext()


_DUMMIES: dict = {}


def _dummy(x):
    """A one-element tensor of x's dtype and device for the pointer arguments of absent inputs
    and outputs (every use is behind a constexpr flag: never read or written); one per (device,
    dtype), kept, except one made during a CUDA graph capture."""
    key = (x.device, x.dtype)
    d = _DUMMIES.get(key)
    if d is None:
        d = x.new_empty(1)
        if not (x.is_cuda and torch.cuda.is_current_stream_capturing()):
            _DUMMIES[key] = d
    return d


_PLANS: dict = {}


def _plan(build, *fields):
    """``build(*fields)``, made once per ``fields`` and values of the environment knobs
    (:func:`.config.knobs`): what a call's launches take besides its tensors (block sizes,
    grids, each launch's :class:`.fastlaunch.Options`), which follows from its shapes, dtype
    and flags alone, so it is not rebuilt on the host's critical path for every call (calls
    up to 4K steps are bound by the host on the H200, benchmarks/NOTES.md s8-s9)."""
    key = (build, fields, knobs())
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_ENTRIES:      # fields hold T: bounded as fastlaunch's cache is
            _PLANS.clear()
        plan = _PLANS[key] = build(*fields)
    return plan


def _fwd_plan(b, T, h, p, g, n, dtype, has_dt, dt_softplus, has_dtb, D_dim, has_z, has_h0,
              has_seq, chunk_size, for_grad, checkpoints=False, gluon_chunks=False):
    """``(Q, grid, pre, decays Options, gram Options or None, [forward Options], spans,
    chunks per span)``: one forward launch per loop kind, or one holding both; with
    ``checkpoints`` (for a backward) in the backward's spans (:func:`.config.span_steps`, of
    its blocks of the state's columns, :func:`.config.state_block`), else in one, and with z
    writing the ungated y too (``STORE_YU``). In chunks of 64 without GRAM: with
    ``gluon_chunks``, where the call is launched as two kernels (the Gluon forward's factored
    launch, :func:`.gluon_fwd.wants_chunks_of_64`), and where one launch holds both loops
    and it is recorded (``for_grad``) for a backward in chunks of 64 (n > 64, default
    chunks)."""
    cfg = pick_config(p, n, None if chunk_size < 0 else chunk_size, dtype, "fwd")
    pre = _pre("fwd")
    fast = _fast(dtype, pre)
    whole = _whole(b, T, h, n, chunk_size, dtype)
    nb = _block(p, n, chunk_size, dtype, whole)
    # the decay arrays serve the backward where it runs chunks of Q too; its blocks of the
    # state's columns at n > 64 (or its whole state in a small call) run chunks of 64, the
    # forward's default there is 32
    bwd_Q = pick_config(p, nb, None if chunk_size < 0 else chunk_size, dtype, "bwd",
                        whole)["Q"]
    launches = _launches(fast, b * h * T * cfg["BN"])
    # chunks of 64 without GRAM: for the Gluon kernel (two launches), and for a call small
    # enough for one launch holding both loops, recorded for a backward in chunks of 64,
    # which then takes the forward's decays (a pre-pass and the GRAM launch fewer where the
    # host sets the pace; H100 s30-2, N = 128 1K: host 1.31 -> 1.06 ms per fwd+bwd in one
    # profile, device 0.512 -> 0.535 ms; NOTES.md)
    small_for_grad = launches[0][1] and for_grad and chunk_size < 0
    chunks_64 = ((gluon_chunks and len(launches) == 2)
                 or (small_for_grad and bwd_Q == 64 != cfg["Q"]))
    if chunks_64:
        cfg = pick_config(p, n, 64, dtype, "fwd")
    Q = cfg["Q"]
    gram = fast and _gram(h, g, n) and not chunks_64
    flags = dict(HAS_DT=has_dt, DT_SOFTPLUS=dt_softplus, HAS_DTB=has_dtb)
    # a forward that autograd does not record (without seq_idx): the pre-pass writes the
    # factored loop's two rows only, the exact loop computing its decays in place
    rows = PRE_FACTORED if fast and not for_grad and not has_seq else PRE_ALL
    dec_opts = _dec_options(flags, has_seq, Q, for_grad and bwd_Q == Q, h, rows)
    gram_opts = Options(Q=Q, BN=cfg["BN"], PREC=_prec(dtype),
                        **_launch_opts(dict(cfg, num_stages=1))) if gram else None
    nc = _cdiv(T, Q)
    per, spans = (_spans(T, Q, p, nb, chunk_size, dtype, whole) if checkpoints
                  else (max(nc, 1), 1))
    fwd_opts = [Options(
        **flags, HAS_D=D_dim is not None, D_PER_P=D_dim == 2, HAS_Z=has_z, HAS_H0=has_h0,
        HAS_SEQ=has_seq, STORE_HT=True, Q=Q, BP=cfg["BP"], BN=cfg["BN"], PREC=_prec(dtype),
        CLAMP_C=CLAMP, PRE=rows if pre else PRE_NONE, FACTOR=_factor("fwd"), FAST=fast,
        FACTORED=factored, ONE_LAUNCH=one, EVEN=_even(cfg, T, p, n), UNROLL=cfg.get("UNROLL", 1),
        STATE_T=bool(cfg["STATE_T"]), GRAM=gram and (factored or one),
        WIDE=gram and _wide(nc * Q ** 2), EXACT_STAGES=cfg.get("EXACT_STAGES", 0),
        SPANS=spans > 1, STORE_YU=has_z and checkpoints,
        FAST_GATE=has_z and fast_sigmoid(dtype), PREFETCH=pre and bool(cfg["PREFETCH"]),
        **_launch_opts(cfg))
        for factored, one in _launches(fast, b * h * T * cfg["BN"])]
    return Q, (_cdiv(p, cfg["BP"]), b * h), pre, dec_opts, gram_opts, fwd_opts, spans, per


def _whole(b, T, h, n, chunk_size, dtype):
    """:func:`.config.whole_state` for an op's ``chunk_size`` (-1: the default)."""
    return whole_state(b, T, h, n, None if chunk_size < 0 else chunk_size, dtype)


def _block(p, n, chunk_size, dtype, whole=False):
    """:func:`.config.state_block` for an op's ``chunk_size`` (-1: the default)."""
    return state_block(p, n, None if chunk_size < 0 else chunk_size, dtype, whole)


def _spans(T, Q, p, n, chunk_size, dtype, whole=False):
    """``(chunks per span, spans)`` of a backward in chunks of Q (:func:`.config.span_steps`;
    one span of at least one chunk where it needs none)."""
    nc = max(_cdiv(T, Q), 1)
    steps = span_steps(T, p, n, chunk_size, dtype, whole)
    per = nc if steps is None else steps // Q
    return per, _cdiv(nc, per)


def _checkpoints(spans, b, h, p, n, device):
    """The states entering spans 1 .. spans - 1: ``(spans - 1, slot)`` fp32, each slot a
    (b, h, p, n) state padded to 16 bytes (the launches' argument keys take their alignment
    as fixed)."""
    return torch.empty(spans - 1, _slot_size(b, h, p, n), device=device, dtype=torch.float32)


def _checkpoints_shape(b, T, h, p, n, chunk_size, dtype):
    """The shape of :func:`_fwd`'s checkpoints (for the op's fake tensors)."""
    if T == 0:
        return (0, 0)
    whole = _whole(b, T, h, n, chunk_size, dtype)
    nb = _block(p, n, chunk_size, dtype, whole)
    return (_spans(T, 1, p, nb, chunk_size, dtype, whole)[1] - 1, _slot_size(b, h, p, n))


def _slot_size(b, h, p, n):
    return _cdiv(b * h * p * n, 4) * 4


def _fwd(x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus, chunk_size,
         for_grad=False, checkpoints=False):
    """``(y, final state, decays, checkpoints, ungated y)``: decays is what
    :func:`_pre_decays` made, with the rows only the backward reads, which the backward takes
    instead of running the pre-pass again (with ``for_grad``, where the backward's chunks are
    the forward's; else None); with ``checkpoints`` (for a backward) the states entering the
    backward's spans after the first (:func:`_checkpoints`), which its sweeps start from, and
    with z too the ungated y (x's shape and dtype), which its dz takes; else None."""
    b, T, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    if T == 0:
        hT = (h0.to(torch.float32, copy=True) if h0 is not None
              else x.new_zeros(b, h, p, n, dtype=torch.float32))
        ckpt = x.new_empty(0, 0, dtype=torch.float32) if checkpoints else None
        yu = torch.empty_like(x) if checkpoints and z is not None else None
        return torch.empty_like(x), hT, None, ckpt, yu
    # what fixes every launch's argument specializations (fastlaunch.launch): the buffers
    # below follow from these inputs' dtypes, alignment and shapes
    ak = arg_key((x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx), x.shape, B.shape)
    # at n = 128 on sm_90 the Gluon forward takes the factored launch: chunks of 64, no GRAM
    glu128 = chunk_size < 0 and gluon_fwd.wants_chunks_of_64(x, B, D, z, h0, seq_idx)
    Q, grid, pre, dec_opts, gram_opts, fwd_opts, spans, per = _plan(
        _fwd_plan, b, T, h, p, g, n, x.dtype, has_dt, dt_softplus, dt_bias is not None,
        None if D is None else D.dim(), z is not None, h0 is not None, seq_idx is not None,
        chunk_size, for_grad, checkpoints, glu128)
    # B, C share x's dtype inside the dots
    B, C = _as(B, x.dtype), _as(C, x.dtype)
    d = _dummy(x)
    # the factored launch in Gluon where it applies (sm_90, bf16, n = 64, ...); with PDL the
    # pre-pass, the Gluon launch and the exact one overlap each one's launch with the tail of
    # the one before (programmatic dependent launches, :func:`gluon_fwd.pdl`), or else in long
    # calls the exact launch runs on a side stream beside the Gluon one
    # (:func:`gluon_fwd.exact_aside`)
    glu = gluon_fwd.eligible(x, B, C, D, z, h0, seq_idx, Q, fwd_opts)
    pdl = glu and gluon_fwd.pdl()
    aside = glu and not pdl and gluon_fwd.exact_aside(b * h * T)
    with _device_ctx(x):
        # the pre-pass first: the outputs are allocated while it runs
        dec, etot = _pre_decays(pre, _with(dec_opts, TRIGGER=True) if pdl else dec_opts, dtla,
                                A, dt_bias, seq_idx, Q, d, ak)
        y = torch.empty_like(x)
        hT = torch.empty(b, h, p, n, device=x.device, dtype=torch.float32)
        ckpt = _checkpoints(spans, b, h, p, n, x.device) if checkpoints else None
        yu = torch.empty_like(x) if checkpoints and z is not None else None
        gl = _gram_tiles(B, C, Q, gram_opts, T, ak) if gram_opts is not None else d
        main = torch.cuda.current_stream() if aside else None
        side = _side_stream(main.device) if aside else None
        # aside, the exact launch goes first, on its stream once the pre-pass is done
        for opts in (fwd_opts[::-1] if aside else fwd_opts):
            if glu and opts.kwargs["FACTORED"]:
                gluon_fwd.launch_fwd(x, B, C, D, dec, etot, y, hT,
                                     dec_opts.kwargs["ROWS"] == PRE_FACTORED, pdl)
                continue
            if pdl:
                opts = _with(opts, PDL_WAIT=True, launch_pdl=True)
            with _aside(side, main) if aside else contextlib.nullcontext():
                # with one span no checkpoint is written: hT stands in (fp32, as the kernel
                # takes)
                launch(
                    K.ssd_fwd_kernel, grid,
                    x, dtla, A if A is not None else d, dt_bias if dt_bias is not None else d,
                    B, C, D if D is not None else d, z if z is not None else d,
                    h0 if h0 is not None else d, seq_idx if seq_idx is not None else d, dec,
                    etot, gl, y, yu if yu is not None else d, hT, ckpt if spans > 1 else hT,
                    T, h, g, p, n, per, _slot_size(b, h, p, n), arg_key=ak, opts=opts)
        if aside:
            main.wait_event(side.record_event())     # main waits for the side's launches
    decays = (Q, dec, etot) if pre and dec_opts.kwargs["GRAD_ROWS"] else None
    return y, hT, decays, ckpt, yu


_SIDE: dict = {}


def _side_stream(device):
    """The side stream of ``device`` that :func:`_aside` launches on (one per device, kept)."""
    side = _SIDE.get(device)
    if side is None:
        side = _SIDE[device] = torch.cuda.Stream(device)
    return side


@contextlib.contextmanager
def _aside(side, main):
    """The block's launches on the stream ``side``, after the work queued on ``main`` so far
    (the caller makes ``main`` wait for them). The events are each call's own: a call from
    another thread cannot come between a record and its wait (the current stream is each
    thread's own)."""
    side.wait_event(main.record_event())
    # set_stream, not torch.cuda.stream: the same on the launches' device, for less host time
    torch.cuda.set_stream(side)
    try:
        yield
    finally:
        torch.cuda.set_stream(main)


_WITH: dict = {}


def _with(opts, **extra):
    """``opts`` (:class:`.fastlaunch.Options`) with the keyword arguments ``extra`` added,
    made once."""
    key = (opts.key, tuple(extra.items()))
    hit = _WITH.get(key)
    if hit is None:
        if len(_WITH) >= MAX_ENTRIES:
            _WITH.clear()
        hit = _WITH[key] = Options(**opts.kwargs, **extra)
    return hit


def _gram_tiles(B, C, Q, opts, T, ak):
    """``lower(C B^T)`` of every chunk, (b, G, chunks, Q, Q) in B's dtype
    (:func:`.kernels.ssd_gram_kernel`); ``ak`` the call's fastlaunch argument key."""
    b, _, g, n = B.shape
    nc = _cdiv(T, Q)
    gl = torch.empty(b, g, nc, Q, Q, device=B.device, dtype=B.dtype)
    launch(K.ssd_gram_kernel, (nc, b * g), B, C, gl, T, g, n, arg_key=ak, opts=opts)
    return gl


def _prepass_heads(h):
    """The heads of one pre-pass program: the largest power of two dividing h, at most 8 (a
    32-byte sector of fp32 dt per position; 16 heads take 150-242 registers, 32 spill:
    Triton 3.6 for sm_90)."""
    return min(h & -h, 8)


def _dec_rows(has_seq, grad_rows, rows=PRE_ALL):
    """The rows of the pre-pass's ``dec`` (:func:`.decays.ssd_decays_kernel`): 6, the two
    segment rows with ``seq_idx``, the backward's two with ``grad_rows``; 2 with
    ``rows=PRE_FACTORED``."""
    if rows == PRE_FACTORED:
        return 2
    return 6 + 2 * has_seq + 2 * grad_rows


def _dec_options(flags, has_seq, Q, grad_rows, h, rows=PRE_ALL):
    """The pre-pass's :class:`.fastlaunch.Options`: the dt flags, seq_idx, the chunk size,
    whether it writes the rows only the backward reads, its block of the h heads, which rows
    (``PRE_ALL`` or ``PRE_FACTORED``, :mod:`.decays`)."""
    return Options(**flags, HAS_SEQ=has_seq, Q=Q, CLAMP_C=CLAMP, HB=_prepass_heads(h),
                   GRAD_ROWS=grad_rows, ROWS=rows)


def _pre_decays(pre, opts, dtla, A, dt_bias, seq_idx, Q, d, ak):
    """The decay arrays of :func:`.decays.ssd_decays_kernel` (or dummies when not ``pre``):
    the rows only the backward reads where ``opts`` has ``GRAD_ROWS``, the segments' rows and
    chunk decays with ``seq_idx``; ``d`` the dummy tensor for absent arguments, ``ak`` the
    call's fastlaunch argument key."""
    if not pre:
        return d.float(), d.float()
    b, T, h = dtla.shape
    nc = _cdiv(T, Q)
    has_seq = seq_idx is not None
    dec = torch.empty(_dec_rows(has_seq, opts.kwargs["GRAD_ROWS"], opts.kwargs["ROWS"]),
                      b * h, nc * Q, device=dtla.device, dtype=torch.float32)
    etot = torch.empty(1 + 2 * has_seq, b * h, nc, device=dtla.device, dtype=torch.float32)
    launch(
        ssd_decays_kernel, (nc, b * h // opts.kwargs["HB"]),
        dtla, A if A is not None else d, dt_bias if dt_bias is not None else d,
        seq_idx if seq_idx is not None else d, dec, etot, T, h, arg_key=ak, opts=opts)
    return dec, etot


def _bwd_plan(b, T, h, p, g, n, dtype, has_dt, dt_softplus, has_dtb, D_dim, has_h0,
              has_seq, has_dhT, need_dh0, chunk_size, atomic):
    """``(Q, BP, grid, pre, decays Options (with GRAD_ROWS), blocks, spans, chunks per span)``:
    ``blocks`` holds, for each block of the state's columns (:func:`.config.state_block`),
    ``(first column, width, [forward sweep Options], [reverse sweep Options])``: a launch per
    loop kind or one holding both, each run once per span (:func:`.config.span_steps`, of a
    block; ``SPANNED`` where there is more than one), last span first. D's terms go with the
    first block; the reverse sweeps of the others add their dx to the first's (``ACC_DX``).
    The sweeps know no z (:mod:`.gate` makes their dy)."""
    whole = _whole(b, T, h, n, chunk_size, dtype)
    nb = _block(p, n, chunk_size, dtype, whole)
    cfg = pick_config(p, nb, None if chunk_size < 0 else chunk_size, dtype, "bwd", whole)
    Q, BP = cfg["Q"], cfg["BP"]
    pre = _pre("bwd")
    fast = _fast(dtype, pre)
    kinds = _launches(fast, b * h * T * cfg["BN"])
    per, spans = _spans(T, Q, p, nb, chunk_size, dtype, whole)
    head = dict(HAS_DT=has_dt, DT_SOFTPLUS=dt_softplus, HAS_DTB=has_dtb)
    dec_opts = _dec_options(head, has_seq, Q, True, h)
    blocks = []
    for c0 in range(0, n, nb):
        width = min(nb, n - c0)
        flags = dict(head, HAS_D=D_dim is not None and c0 == 0, D_PER_P=D_dim == 2,
                     HAS_SEQ=has_seq, Q=Q, BP=BP, BN=cfg["BN"], PREC=_prec(dtype),
                     CLAMP_C=CLAMP, EVEN=_even(cfg, T, p, width), WIDE=_wide(per * p * nb),
                     PRE=pre, FACTOR=_factor("bwd"), ATOMIC=atomic, FAST=fast,
                     EXACT_STAGES=cfg.get("EXACT_STAGES", 0), SPANNED=spans > 1)
        fwd_opts = [Options(**flags, HAS_H0=has_h0, FACTORED=f, ONE_LAUNCH=one,
                            PREFETCH=pre and bool(cfg["PREFETCH"]),
                            **_launch_opts(dict(cfg, num_stages=cfg["fwd_sweep_stages"])))
                    for f, one in kinds]
        rev_opts = [Options(**flags, HAS_DHT=has_dhT, STORE_DH0=need_dh0, FACTORED=f,
                            ONE_LAUNCH=one, E_ON_C=bool(cfg["E_ON_C"]), ACC_DX=c0 > 0,
                            **_launch_opts(cfg))
                    for f, one in kinds]
        blocks.append((c0, width, fwd_opts, rev_opts))
    return Q, BP, (_cdiv(p, BP), b * h), pre, dec_opts, blocks, spans, per


def _from(t, c0):
    """The contiguous ``t`` from its element ``c0`` on (a flat view): the address of a block's
    first column in an array whose rows the kernels step through themselves."""
    return t if c0 == 0 or t is None else t.view(-1)[c0:]


def _sweeps_bwd(dy, dhT, x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus,
                chunk_size, need_dh0, fp32_states, decays=None, ckpt=None, yu=None):
    """The backward's sweeps: the state forward, then its adjoint backward; block by block of
    the state's columns (:func:`.config.state_block`), each in spans
    (:func:`.config.span_steps`) last first, each from the state entering it (h0, or
    ``ckpt``: the forward's :func:`_fwd` checkpoints, needed with more than one span).
    ``decays``: the forward's ``(Q, dec, etot)``, used when the chunk size matches; ``yu``:
    its ungated y, needed with z.

    The blocks share every buffer: each takes its columns of B, C, their gradients and the
    states of n columns at its first column (the kernels step through rows of n), writes its
    own rows of the dt gradient (summed at the end) and adds its dx to the blocks' before
    it. With z the sweeps' dy is ``dy silu(z)``, made with dz first (:func:`_gate_bwd`).
    Only what the first launch needs comes before it: the host time up to that launch is
    time the GPU idles after the forward where that is short (T <= 4K, H200 s8)."""
    b, T, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    Bx, Cx = _as(B, x.dtype), _as(C, x.dtype)
    # autograd hands broadcast gradients (stride 0, e.g. of hT.sum()) to the kernels'
    # contiguous addressing: materialize them
    dy = dy.contiguous()
    dhT = dhT.contiguous() if dhT is not None else None
    st_dtype = torch.float32 if (x.dtype == torch.float32 or fp32_states) else x.dtype
    # fastlaunch.launch's argument key (see _fwd)
    ak = arg_key((x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, dy, dhT), x.shape, B.shape,
                 st_dtype)
    atomic = not torch.are_deterministic_algorithms_enabled()
    Q, BP, grid, pre, dec_opts, blocks, spans, per = _plan(
        _bwd_plan, b, T, h, p, g, n, x.dtype, has_dt, dt_softplus, dt_bias is not None,
        None if D is None else D.dim(), h0 is not None, seq_idx is not None, dhT is not None,
        need_dh0, chunk_size, atomic)
    if spans > 1 and (ckpt is None or ckpt.shape[0] != spans - 1):
        raise RuntimeError(
            f"the backward runs in {spans} spans and needs the forward's {spans - 1} "
            f"checkpoints, got {None if ckpt is None else ckpt.shape[0]} (were the Triton "
            "knobs changed between the forward and the backward?)")
    if z is not None and (yu is None or yu.shape != x.shape):
        raise RuntimeError(
            "the backward of a call with z needs the forward's ungated y of shape "
            f"{tuple(x.shape)}, got {None if yu is None else tuple(yu.shape)}")
    npb = grid[0]
    nc = _cdiv(T, Q)
    f32 = dict(device=x.device, dtype=torch.float32)
    grads = _GradBuffers(b, T, h, g, p, n, npb, D, f32, atomic, spans, len(blocks))
    w = torch.empty(npb, b * h, T, **f32)
    # the state entering each chunk of a span, for the reverse sweep (a block's columns)
    states = torch.empty(b, h, per, p, blocks[0][1], device=x.device, dtype=st_dtype)
    d = _dummy(x)
    o = lambda t: t if t is not None else d  # noqa: E731
    slot = _slot_size(b, h, p, n)
    ddt = None
    with _device_ctx(x):
        if T > 0:
            if (pre and decays is not None and decays[0] == Q
                    and decays[1].shape[0] == _dec_rows(seq_idx is not None, True)):
                dec, etot = decays[1:]
            else:
                dec, etot = _pre_decays(pre, dec_opts, dtla, A, dt_bias, seq_idx, Q, d, ak)
        dz = None
        if z is not None:
            dy, dz = _gate_bwd(dy, z, yu, ak)
        # the factored sweeps in Gluon where they apply (sm_90, bf16, p = 64, ...)
        glu = gluon_bwd.eligible(x, Bx, Cx, dy, st_dtype, D, h0, seq_idx, dhT, has_dt, Q,
                                 spans, blocks, atomic)
        for j, (c0, width, fwd_opts, rev_opts) in enumerate(blocks):
            ins = (x, dtla, o(A), o(dt_bias), _from(Bx, c0), _from(Cx, c0), o(D))
            h0_j, ck_j = o(_from(h0, c0)), _from(ckpt, c0) if spans > 1 else d
            dC_j, dB_j = _from(grads.ws, c0), _from(grads.dB, c0)
            for k in reversed(range(spans)):
                c0k, c1k = k * per, min(nc, (k + 1) * per)
                # the block and the span specialize their launches (the block's first column
                # sets its addresses' alignment; an int of 1, or one that 16 divides,
                # compiles apart): part of their argument key
                key = ak if spans == 1 and j == 0 else (ak, j, k)
                if T > 0:
                    for opts in fwd_opts:
                        if glu and opts.kwargs["FACTORED"]:
                            gluon_bwd.launch_fwdsweep(x, dy, Bx, Cx, c0, dec, etot, dC_j, w[0],
                                                      grads.dD_of(k) if c0 == 0 else None,
                                                      states)
                            continue
                        launch(K.ssd_bwd_fwdsweep_kernel, grid, *ins, h0_j, ck_j,
                               o(seq_idx), dy, dec, etot, dC_j, w, o(grads.dD_of(k)), states,
                               T, h, g, p, width, n, c0k, c1k, per, k, slot,
                               arg_key=key, opts=opts)
                if ddt is None:
                    dx = torch.empty_like(x)
                    # the raw dt's (or log_a's) gradient, a partial per block and p-block
                    ddt = torch.empty(len(blocks) * npb, b, T, h, **f32)
                    dh0 = torch.empty(b, h, p, n, **f32) if need_dh0 else None
                    # the adjoint entering a span, left by the span after it
                    carry = torch.empty(b, h, p, n, **f32) if spans > 1 else None
                if T > 0:
                    for opts in rev_opts:
                        if glu and opts.kwargs["FACTORED"]:
                            gluon_bwd.launch_revsweep(
                                x, dy, Bx, Cx, c0, dec, etot, states, w[0], A,
                                D if c0 == 0 else None, dx, dB_j,
                                _from(ddt, j * npb * b * T * h), grads.sums_of(j, k))
                            continue
                        launch(K.ssd_bwd_revsweep_kernel, grid, *ins, o(seq_idx),
                               dy, o(_from(dhT, c0)),
                               o(_from(carry, c0)), dec, etot, states, w, dx, dB_j,
                               _from(ddt, j * npb * b * T * h),
                               grads.sums_of(j, k), o(_from(dh0, c0)),
                               T, h, g, p, width, n, npb, c0k, c1k, per, k, spans,
                               arg_key=key, opts=opts)
    if T == 0:
        if need_dh0:
            dh0.copy_(dhT if dhT is not None else torch.zeros_like(dh0))
        ddt.zero_()
        grads.zero_()
    del states
    # one block and one p-block (p <= 64): the partials are the sums
    ddt = ddt[0] if ddt.shape[0] == 1 else ddt.sum(0)
    dCB, sums, dD = grads.totals()
    return dx, dz, ddt, sums if has_dt else None, dCB, dD, dh0


def _gate_bwd(do, z, yu, ak):
    """``(dy, dz)``: the sweeps' dy ``do silu(z)`` (yu's dtype) and z's gradient, from the
    cotangent ``do`` of the gated output, z and the forward's ungated output ``yu``
    (:func:`.gate.ssd_gate_bwd_kernel`; contiguous, one shape); ``ak`` the call's fastlaunch
    argument key."""
    dy, dz = torch.empty_like(yu), torch.empty_like(z)
    numel = yu.numel()
    if numel:
        launch(ssd_gate_bwd_kernel, (_cdiv(numel, BLOCK),), do, z, yu, dy, dz, numel,
               arg_key=ak, opts=_plan(gate_options, yu.dtype))
    return dy, dz


class _GradBuffers:
    """Where the sweeps put the gradients of B, C, D and the per-head sums of dA and
    d dt_bias (fp32), and their totals.

    ``atomic`` (the default): the kernels add into one zeroed buffer ``ws``: dC (b, T, g, n)
    at its start (so ``ws`` itself is the forward sweep's dC), then dB, the sums (2, h) and
    dD (D's shape); the totals are views of it (one fill, no reduction; the order of the
    additions is not fixed, so not bit-reproducible). Else, under
    ``torch.use_deterministic_algorithms``, one partial per (p-block, b, h), dC's then dB's
    in ``ws`` (blocks of the state's columns write their own columns), per (block, span,
    p-block, b, h) for the sums and per (span, b, h) for dD (each writes its own), and one
    torch reduction per group. The views are made with the buffer, before the first
    launch.
    """

    def __init__(self, b, T, h, g, p, n, npb, D, f32, atomic, spans=1, blocks=1):
        self.atomic = atomic
        self.shape = (b, T, h, g, n, npb)
        self.D_shape = None if D is None else tuple(D.shape)
        if self.atomic:
            nbc, nD = b * T * g * n, 0 if D is None else D.numel()
            self.ws = ws = torch.zeros(2 * nbc + 2 * h + nD, **f32)
            self.dCB, self.dB = ws[:2 * nbc], ws[nbc:2 * nbc]
            self.sums, dD = ws[2 * nbc:2 * nbc + 2 * h], ws[2 * nbc + 2 * h:]
        else:
            self.ws = self.dCB = torch.empty(2, npb, b, T, h, n, **f32)
            self.dB = self.ws[1]
            self.spans = spans
            self.sums = torch.empty(blocks * spans, 2, npb, b, h, **f32)
            dD = torch.empty(spans, b, h, p, **f32)
        self.dD = dD if D is not None else None

    def dD_of(self, k):
        """Where span ``k`` puts its dD."""
        return self.dD if self.atomic or self.dD is None else self.dD[k]

    def sums_of(self, j, k):
        """Where span ``k`` of block ``j`` of the state's columns puts its sums."""
        return self.sums if self.atomic else self.sums[j * self.spans + k]

    def zero_(self):
        """For T = 0 (no launch); with ``atomic`` the sums and dD are views of ``ws``."""
        for t in (self.ws,) if self.atomic else (self.ws, self.sums, self.dD):
            if t is not None:
                t.zero_()

    def totals(self):
        """``(dCB (2, b, T, g, n): dC then dB, sums (2, h), dD (D's shape))``, fp32."""
        b, T, h, g, n, npb = self.shape
        if self.atomic:
            dD = None if self.dD is None else self.dD.view(self.D_shape)
            return self.dCB.view(2, b, T, g, n), self.sums.view(2, h), dD
        dCB = self.dCB.view(2, npb, b, T, g, h // g, n).sum((1, 5))
        dD = None
        if self.dD is not None:
            dD = self.dD.sum((0, 1) if len(self.D_shape) == 2 else (0, 1, 3))
        return dCB, self.sums.sum((0, 2, 3)), dD


def _bwd(dy, dhT, x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus,
         chunk_size, fp32_states, decays=None, ckpt=None, yu=None):
    """The gradients of every input, in the op's order (None for the absent ones); ``ckpt``
    the forward's checkpoints (:func:`_fwd`), needed where the backward runs in spans,
    ``yu`` its ungated y, needed with z."""
    dx, dz, ddt, sums, dCB, dD, dh0 = _sweeps_bwd(
        dy, dhT, x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus,
        chunk_size, h0 is not None, fp32_states, decays, ckpt, yu)
    # the kernels applied the chain rule of the clamp, dt -> dt A and the softplus
    dA = ddtb = None
    if has_dt:
        dA = _as(sums[0], A.dtype)
        if dt_bias is not None:
            ddtb = _as(sums[1], dt_bias.dtype)
    ddtla = _as(ddt, dtla.dtype)
    if B.dtype == C.dtype:
        dC, dB = _as(dCB, B.dtype).unbind(0)      # one conversion for both
    else:
        dC, dB = dCB[0].to(C.dtype), dCB[1].to(B.dtype)
    if dD is not None:
        dD = _as(dD, D.dtype)
    if dh0 is not None and h0 is not None:
        dh0 = _as(dh0, h0.dtype)
    return dx, ddtla, dA, dB, dC, dD, dz, ddtb, dh0


def _as(t, dtype):
    """``t.to(dtype)`` without its call when t has that dtype (~1.5 us of host a call)."""
    return t if t.dtype == dtype else t.to(dtype)

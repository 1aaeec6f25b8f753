"""Argument checks and the torch.library ops (with autograd) of the Triton SSD.

Public entry points: :func:`ssd` (chunked SSD, differentiable, torch.compile-able) and
:func:`ssd_decode_step` (one token, state updated in place). The launchers are in
:mod:`.launch`, block sizes and knobs in :mod:`.config`.
"""

from __future__ import annotations

import functools
from typing import Optional

import torch
from torch.autograd import forward_ad

from . import kernels as K
from .config import _cdiv, _interpret, _pow2, pick_config
from .decays import CLAMP
from .fastlaunch import launch
from .gate import fast_sigmoid
from .launch import _bwd, _checkpoints_shape, _device_ctx, _dummy, _fwd

__all__ = ["ssd", "ssd_decode_step", "supports_reason", "pick_config"]

_FLOAT = (torch.float32, torch.bfloat16, torch.float16)


# ---------------------------------------------------------------------------
# checks
# ---------------------------------------------------------------------------

def _shape_err(name, got, want):
    got = "nothing" if got is None else f"shape {tuple(got)}"
    return ValueError(f"{name} must have shape {want}, got {got}")


def supports_reason(x, B, C, *, chunk_size=None) -> Optional[str]:
    """None when the kernels run these inputs, else why not."""
    if not (isinstance(x, torch.Tensor) and isinstance(B, torch.Tensor)
            and isinstance(C, torch.Tensor)):
        return "the Triton kernels take torch tensors"
    if not x.is_cuda and not _interpret():
        return f"the Triton kernels need CUDA tensors, got device {x.device}"
    if x.dtype not in _FLOAT:
        return f"x dtype {x.dtype} is not one of float32, bfloat16, float16"
    if not x.is_cuda and x.dtype == torch.bfloat16:
        # the interpreter multiplies bfloat16 bit patterns in tl.dot (triton-lang/triton#11584)
        return ("the Triton interpreter (TRITON_INTERPRET=1) gives wrong bfloat16 dots; "
                "use float32 or float16 on the CPU, bfloat16 on a GPU")
    if x.dim() != 4 or B.dim() != 4:
        return "the Triton kernels take the ssd layout x (b, T, h, p), B (b, T, g, n)"
    p, n = x.shape[-1], B.shape[-1]
    if p > 256 or n > 256:
        return f"head dim p={p} and state size n={n} must be at most 256"
    if chunk_size is not None and (chunk_size < 16 or chunk_size & (chunk_size - 1)):
        return f"chunk_size must be a power of two >= 16 for the Triton kernels, got {chunk_size}"
    return None


def _check_mode(log_a, dt, A, dt_bias, dt_softplus) -> bool:
    """Whether the call takes ``dt`` (with ``A``) rather than ``log_a``; raises on a mix."""
    has_dt = dt is not None
    if has_dt == (log_a is not None):
        raise ValueError("pass exactly one of log_a and dt (with A)")
    if has_dt and A is None:
        raise ValueError("dt needs A, shape (heads,)")
    if not has_dt and (A is not None or dt_bias is not None or dt_softplus):
        raise ValueError("A, dt_bias and dt_softplus go with dt, not with log_a")
    return has_dt


def _check_per_head(x, la_or_dt, la_shape, A, D, z, dt_bias, has_dt):
    """The shapes of the per-step decay input and of the per-head ``A``, ``D``, ``dt_bias``
    and ``z`` (x's shape), for x of shape ``(..., heads, headdim)``."""
    h, p = x.shape[-2], x.shape[-1]
    if la_or_dt.shape != la_shape:
        raise _shape_err("dt" if has_dt else "log_a", la_or_dt.shape, la_shape)
    if has_dt and A.shape != (h,):
        raise _shape_err("A", A.shape, (h,))
    if D is not None and D.shape not in ((h,), (h, p)):
        raise _shape_err("D", D.shape, f"({h},) or ({h}, {p})")
    if z is not None and z.shape != x.shape:
        raise _shape_err("z", z.shape, tuple(x.shape))
    if dt_bias is not None and dt_bias.shape != (h,):
        raise _shape_err("dt_bias", dt_bias.shape, (h,))


def _check(x, la_or_dt, B, C, A, D, z, dt_bias, h0, seq_idx, has_dt):
    if x.dim() != 4:
        raise _shape_err("x", x.shape, "(batch, T, heads, headdim)")
    b, T, h, p = x.shape
    if B.dim() != 4 or B.shape[:2] != (b, T):
        raise _shape_err("B", B.shape, f"({b}, {T}, groups, N)")
    g, n = B.shape[2], B.shape[3]
    if C.shape != B.shape:
        raise _shape_err("C", C.shape, tuple(B.shape))
    if h % g:
        raise ValueError(f"groups g={g} (B.shape[2]) must divide heads h={h} (x.shape[2])")
    _check_per_head(x, la_or_dt, (b, T, h), A, D, z, dt_bias, has_dt)
    if h0 is not None and h0.shape != (b, h, p, n):
        raise _shape_err("initial_state", h0.shape, (b, h, p, n))
    if seq_idx is not None and seq_idx.shape != (b, T):
        raise _shape_err("seq_idx", seq_idx.shape, (b, T))
    for nm, t in (("B", B), ("C", C)):
        if t.dtype not in _FLOAT:
            raise TypeError(f"{nm} must be float32, bfloat16 or float16, got {t.dtype}")
    if x.dtype not in _FLOAT:
        raise TypeError(f"x must be float32, bfloat16 or float16, got {x.dtype}")
    devs = {t.device for t in (x, la_or_dt, B, C, A, D, z, dt_bias, h0, seq_idx)
            if t is not None}
    if len(devs) > 1:
        raise ValueError(f"all inputs must be on one device, got {sorted(map(str, devs))}")


def _c(t):
    return None if t is None else t.contiguous()


# ---------------------------------------------------------------------------
# torch.library ops
# ---------------------------------------------------------------------------

@torch.library.custom_op("semisep::ssd_chunked_fwd", mutates_args=())
def _op_fwd(x: torch.Tensor, dtla: torch.Tensor, A: Optional[torch.Tensor], B: torch.Tensor,
            C: torch.Tensor, D: Optional[torch.Tensor], z: Optional[torch.Tensor],
            dt_bias: Optional[torch.Tensor], h0: Optional[torch.Tensor],
            seq_idx: Optional[torch.Tensor], has_dt: bool, dt_softplus: bool,
            chunk_size: int, fp32_states: bool) -> tuple[torch.Tensor, torch.Tensor,
                                                         torch.Tensor, torch.Tensor]:
    """``(y, final state, checkpoints, ungated y)``: the last two for the backward
    (:func:`.launch._fwd`; the ungated y empty without z); fp32_states too (setup_context
    keeps it): the forward's state is fp32."""
    y, hT, _, ckpt, yu = _fwd(x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt,
                              dt_softplus, chunk_size, checkpoints=True)
    return y, hT, ckpt, yu if yu is not None else x.new_empty(0)


@_op_fwd.register_fake
def _(x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus, chunk_size,
      fp32_states):
    b, T, h, p = x.shape
    n = B.shape[-1]
    ckpt = x.new_empty(*_checkpoints_shape(b, T, h, p, n, chunk_size, x.dtype),
                       dtype=torch.float32)
    yu = torch.empty_like(x) if z is not None else x.new_empty(0)
    return torch.empty_like(x), x.new_empty(b, h, p, n, dtype=torch.float32), ckpt, yu


def _unaliased(outs, ref):
    """The op's outputs: empty for None, and a copy of any that shares memory with an earlier
    one (a custom op's outputs may not alias; the eager path returns views of one buffer,
    :class:`.launch._GradBuffers`)."""
    seen, res = set(), []
    for t in outs:
        if t is None:
            t = ref.new_empty(0)
        elif t.numel():
            ptr = t.untyped_storage().data_ptr()
            if ptr in seen:
                t = t.clone()
            seen.add(ptr)
        res.append(t)
    return res


@torch.library.custom_op("semisep::ssd_chunked_bwd", mutates_args=())
def _op_bwd(dy: torch.Tensor, dhT: Optional[torch.Tensor], x: torch.Tensor, dtla: torch.Tensor,
            A: Optional[torch.Tensor], B: torch.Tensor, C: torch.Tensor,
            D: Optional[torch.Tensor], z: Optional[torch.Tensor],
            dt_bias: Optional[torch.Tensor], h0: Optional[torch.Tensor],
            seq_idx: Optional[torch.Tensor], has_dt: bool, dt_softplus: bool,
            chunk_size: int, fp32_states: bool, ckpt: torch.Tensor,
            yu: Optional[torch.Tensor]) -> list[torch.Tensor]:
    outs = _bwd(dy, dhT, x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus,
                chunk_size, fp32_states, ckpt=ckpt, yu=yu)
    return _unaliased(outs, x)


@_op_bwd.register_fake
def _(dy, dhT, x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus, chunk_size,
      fp32_states, ckpt, yu):
    e = x.new_empty(0)
    return [torch.empty_like(x), torch.empty_like(dtla),
            torch.empty_like(A) if has_dt else e, torch.empty_like(B), torch.empty_like(C),
            torch.empty_like(D) if D is not None else e,
            torch.empty_like(z) if z is not None else e,
            torch.empty_like(dt_bias) if (has_dt and dt_bias is not None) else e,
            torch.empty_like(h0) if h0 is not None else e]


def _save(ctx, inputs, ckpt, yu):
    (x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus, chunk_size,
     fp32_states) = inputs
    ctx.save_for_backward(x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, ckpt,
                          yu if z is not None else None)
    ctx.flags = (has_dt, dt_softplus, chunk_size, fp32_states)


def _input_grads(ctx, dy, dhT, bwd):
    """The gradients of the op's 14 inputs from ``bwd`` (the raw :func:`_bwd` in eager mode,
    the ``ssd_chunked_bwd`` op under torch.compile), given the forward's checkpoints and
    ungated y."""
    x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, ckpt, yu = ctx.saved_tensors
    has_dt, dt_softplus, chunk_size, fp32_states = ctx.flags
    if dy is None:
        dy = torch.zeros_like(x)
    dx, ddtla, dA, dB, dC, dD, dz, ddtb, dh0 = bwd(
        dy, dhT, x, dtla, A, B, C, D, z, dt_bias, h0, seq_idx, has_dt, dt_softplus, chunk_size,
        fp32_states, ckpt=ckpt, yu=yu)
    nz = lambda g, ref: g if ref is not None else None  # noqa: E731
    return (dx, ddtla, dA if has_dt else None, dB, dC, nz(dD, D), nz(dz, z),
            ddtb if (has_dt and dt_bias is not None) else None, nz(dh0, h0), None, None, None,
            None, None)


def _setup(ctx, inputs, output):
    _save(ctx, inputs, output[2], output[3])


def _backward(ctx, dy, dhT, dckpt, dyu):
    return _input_grads(ctx, dy, dhT, _op_bwd)


torch.library.register_autograd("semisep::ssd_chunked_fwd", _backward, setup_context=_setup)


class _EagerSSD(torch.autograd.Function):
    """The eager twin of the op: the same launchers and gradients without the custom-op
    dispatch, whose checks cost more host time than the kernels at T <= 4K (H200 profile in
    benchmarks/NOTES.md). Under torch.compile the op is used, for its fake tensors."""

    @staticmethod
    def forward(ctx, *inputs):
        ctx.set_materialize_grads(False)
        grad = any(ctx.needs_input_grad)
        y, hT, ctx.decays, ckpt, yu = _fwd(*inputs[:-1], for_grad=grad, checkpoints=grad)
        _save(ctx, inputs, ckpt, yu)    # after the launches: host time the GPU need not wait for
        return y, hT

    @staticmethod
    def backward(ctx, dy, dhT):
        # the forward's decay arrays: no second pre-pass (the op recomputes them)
        decays, ctx.decays = ctx.decays, None
        return _input_grads(ctx, dy, dhT, functools.partial(_bwd, decays=decays))


def _autograd_needed(tensors):
    """Whether an eager call goes through :class:`_EagerSSD`: one of ``tensors`` requires grad
    with grad mode on, or a functorch transform or a forward-AD level is active (where
    autograd.Function then differentiates, or raises, as it does for any such Function)."""
    return ((torch.is_grad_enabled()
             and any([t is not None and t.requires_grad for t in tensors]))
            or torch._C._are_functorch_transforms_active() or forward_ad._current_level >= 0)


# ---------------------------------------------------------------------------
# public functions
# ---------------------------------------------------------------------------

def ssd(x, log_a=None, B=None, C=None, *, dt=None, A=None, D=None, z=None, dt_bias=None,
        dt_softplus=False, initial_state=None, seq_idx=None, chunk_size=None,
        return_final_state=False, final_state_dtype=None, fp32_states=False):
    """Chunked SSD on the Triton kernels (the ``ssd`` layout; see DESIGN.md and issue 5).

    Either ``log_a`` ``(b, T, h)`` or ``dt`` ``(b, T, h)`` with ``A`` ``(h,)`` (then the
    kernels use ``log_a = dt * A`` and the input ``dt * x``). Returns ``y`` (x's dtype),
    or ``(y, final_state)`` with ``return_final_state`` (fp32 unless ``final_state_dtype``).
    ``fp32_states`` stores the per-chunk states the backward keeps in fp32 rather than in x's
    dtype (fp32 inputs always do); the forward's state and all accumulation are fp32 anyway.
    """
    if B is None or C is None:
        raise TypeError("ssd() needs B and C")
    has_dt = _check_mode(log_a, dt, A, dt_bias, dt_softplus)
    dtla = dt if has_dt else log_a
    _check(x, dtla, B, C, A, D, z, dt_bias, initial_state, seq_idx, has_dt)
    reason = supports_reason(x, B, C, chunk_size=chunk_size)
    if reason is not None:
        raise ValueError(f"backend 'triton' cannot run this ssd: {reason}")
    if seq_idx is not None:
        seq_idx = seq_idx.to(torch.int32)
    args = (x.contiguous(), dtla.contiguous(), _c(A), B.contiguous(), C.contiguous(), _c(D),
            _c(z), _c(dt_bias), _c(initial_state), _c(seq_idx), has_dt, bool(dt_softplus),
            -1 if chunk_size is None else int(chunk_size), bool(fp32_states))
    if torch.compiler.is_compiling():
        y, hT, *_ = _op_fwd(*args)
    elif _autograd_needed(args[:10]):     # the ten tensors (or None)
        y, hT = _EagerSSD.apply(*args)
    else:
        # the launchers alone: the same launches and y as _EagerSSD's forward without a
        # gradient, without autograd.Function.apply's host time (benchmarks/cpu_host.py on
        # a 2-core VM: 30 -> 23 us a forward)
        y, hT = _fwd(*args[:-1])[:2]
    if not return_final_state:
        return y
    if final_state_dtype is not None:
        hT = hT.to(final_state_dtype)
    return y, hT


def ssd_decode_step(state, x, B, C, *, log_a=None, dt=None, A=None, D=None, z=None,
                    dt_bias=None, dt_softplus=False):
    """One token: ``state`` ``(b, h, p, n)`` is updated in place; returns ``y`` ``(b, h, p)``.

    ``x`` ``(b, h, p)``, ``B``/``C`` ``(b, g, n)``, ``log_a`` or ``dt`` ``(b, h)``. The state
    may be fp32 (recommended) or the input dtype; arithmetic is fp32.
    """
    has_dt = _check_mode(log_a, dt, A, dt_bias, dt_softplus)
    if x.dim() != 3:
        raise _shape_err("x", x.shape, "(batch, heads, headdim)")
    b, h, p = x.shape
    if B.dim() != 3:
        raise _shape_err("B", B.shape, f"({b}, groups, N)")
    g, n = B.shape[-2], B.shape[-1]
    if state.shape != (b, h, p, n):
        raise _shape_err("state", state.shape, (b, h, p, n))
    if B.shape != (b, g, n) or C.shape != B.shape:
        raise _shape_err("B/C", B.shape, f"({b}, groups, {n})")
    if h % g:
        raise ValueError(f"groups g={g} (B.shape[1]) must divide heads h={h} (x.shape[1])")
    dtla = dt if has_dt else log_a
    _check_per_head(x, dtla, (b, h), A, D, z, dt_bias, has_dt)
    if not state.is_contiguous():
        raise ValueError("state must be contiguous (it is updated in place)")
    dtla = dtla.contiguous()
    y = torch.empty_like(x)
    BP = max(16, min(64, _pow2(p)))
    BN = max(16, _pow2(n))
    d = _dummy(x)
    with _device_ctx(x):
        launch(
            K.ssd_decode_kernel, (_cdiv(p, BP), b * h),
            state, x.contiguous(), dtla, _c(A) if A is not None else d,
            _c(dt_bias) if dt_bias is not None else d, B.contiguous(), C.contiguous(),
            _c(D) if D is not None else d, _c(z) if z is not None else d, y,
            h, g, p, n,
            HAS_DT=has_dt, DT_SOFTPLUS=bool(dt_softplus), HAS_DTB=dt_bias is not None,
            HAS_D=D is not None, D_PER_P=D is not None and D.dim() == 2, HAS_Z=z is not None,
            BP=BP, BN=BN, CLAMP_C=CLAMP, FAST_GATE=z is not None and fast_sigmoid(x.dtype))
    return y

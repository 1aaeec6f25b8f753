"""The z gate of the SSD (Mamba-2's ``y * silu(z)``): its sigmoid, and its backward as one
elementwise pass before the backward's sweeps (launched by :func:`.launch._gate_bwd`).

With ``o = y silu(z)`` and the cotangent ``do``::

    dy = do silu(z)                               (the sweeps' dy)
    dz = do y sigmoid(z) (1 + z (1 - sigmoid(z)))

``y`` is the ungated output, which the forward writes beside ``o`` for a backward
(``STORE_YU`` in :func:`.kernels.ssd_fwd_kernel`), in x's dtype. One pass at memory speed
(three tensors read, two written) costs less than the gate inside a sweep: there it took the
n = 64 forward sweep from 1587 to 3239 instructions a chunk with y recomputed, and still to
3095 (392 B of stack against 72) with the stored y loaded (Triton 3.6 proxy,
benchmarks/NOTES.md s16). The sweeps know no z.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from .config import _interpret
from .fastlaunch import Options

BLOCK = 2048


@triton.jit
def _sigmoid(z, FAST: tl.constexpr):
    """``1 / (1 + exp(-z))`` of an fp32 tile; ``FAST`` with the approximate exp and divide
    (``__expf``, ``__fdividef``: a few ulp, for 16-bit inputs; the IEEE-rounded divide and
    the denormal handling of ``tl.sigmoid`` cost the forward 230 of its 1274 instructions a
    chunk with z, Triton 3.6 proxy). Not under the interpreter, which has no libdevice."""
    if FAST:
        out = libdevice.fast_dividef(1.0, 1.0 + libdevice.fast_expf(-z))
    else:
        out = tl.sigmoid(z)
    return out


def fast_sigmoid(dtype) -> bool:
    """Whether the kernels take the approximate sigmoid for inputs of ``dtype``."""
    return dtype != torch.float32 and not _interpret()


@triton.jit
def ssd_gate_bwd_kernel(do_ptr, z_ptr, yu_ptr, dy_ptr, dz_ptr, numel, BLOCK: tl.constexpr,
                        FAST: tl.constexpr):
    """``dy = do silu(z)`` (in yu's dtype) and ``dz`` (in z's) of ``numel`` elements, a
    block of ``BLOCK`` per program, int64 offsets."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    do = tl.load(do_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    z = tl.load(z_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(yu_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = _sigmoid(z, FAST)
    tl.store(dy_ptr + offs, (do * z * s).to(dy_ptr.dtype.element_ty), mask=mask)
    tl.store(dz_ptr + offs, (do * y * s * (1.0 + z * (1.0 - s))).to(dz_ptr.dtype.element_ty),
             mask=mask)


def gate_options(dtype):
    """The gate kernel's :class:`.fastlaunch.Options` for ungated outputs of ``dtype`` (the
    launchers cache it as a launch plan, :func:`.launch._plan`)."""
    launch_opts = {} if _interpret() else dict(num_warps=8)
    return Options(BLOCK=BLOCK, FAST=fast_sigmoid(dtype), **launch_opts)

"""The ``"triton"`` backend: the torch primitives plus Triton kernels for the chunked SSD.

It is a :class:`~semisep.backends.torch_backend.TorchBackend` (same primitives) whose two
entry points, :meth:`TritonBackend.ssd` and :meth:`TritonBackend.sss_matmul`, run the
kernels of :mod:`semisep.backends.triton.kernels` for the cases :meth:`supports` accepts:
scalar A given as log-decays, the chunked (or one-chunk quadratic) algorithm, fp32 / bf16 /
fp16 inputs, n and p up to 256. :meth:`supports` turns every other case away (from the
dtypes and sizes the :class:`~semisep.backends.base.Case` carries), so the automatic choice
runs it on the torch backend and an explicit ``backend="triton"`` is an error naming it.

The kernels are imported lazily (first use), so importing semisep never compiles or
imports Triton.
"""

from __future__ import annotations

import importlib.util
import os

from ..base import Case
from ..torch_backend import TorchBackend

_KERNEL_DTYPES = ("float32", "bfloat16", "float16")


def _cpu_allowed() -> bool:
    # the interpreter runs the kernels on CPU tensors; only the test-suite asks for that
    return (os.environ.get("TRITON_INTERPRET") == "1"
            and os.environ.get("SEMISEP_TRITON_CPU") == "1")


class TritonBackend(TorchBackend):
    """Triton GPU kernels for the chunked SSD (forward, backward, decode)."""

    name = "triton"

    def available(self):
        if importlib.util.find_spec("triton") is None:
            return "triton is not installed (pip install 'semisep[triton]')"
        try:
            import torch
        except ImportError:  # pragma: no cover
            return "torch is not installed"
        if not torch.cuda.is_available() and not _cpu_allowed():
            return "no CUDA device"
        return None

    def owns(self, array):
        return super().owns(array) and (array.is_cuda or _cpu_allowed())

    def supports(self, case: Case):
        if case.op not in ("ssd", "sss_matmul"):
            return f"the Triton backend implements ssd and sss_matmul, not {case.op}"
        if case.structure != "scalar":
            return f"the Triton kernels take scalar A (one decay per step), not {case.structure} A"
        if not case.log_form:
            return "the Triton kernels take log-decays (SSS.from_log), not values of A"
        if case.algorithm not in ("chunked", "quadratic"):
            return f"the Triton kernels run the chunked algorithm, not {case.algorithm!r}"
        other = [d for d in case.dtypes if d not in _KERNEL_DTYPES]
        if other:
            return f"the Triton kernels take {'/'.join(_KERNEL_DTYPES)} data, got {'/'.join(other)}"
        large = [f"{k}={v}" for k, v in case.sizes if v > 256]
        if large:
            return f"the Triton kernels take state and head sizes up to 256, got {', '.join(large)}"
        return None

    # -- entry points -----------------------------------------------------------
    def ssd(self, x, log_a, B, C, *, chunk_size=None, return_final_state=False,
            algorithm="chunked", initial_state=None, dt=None, A=None, D=None, z=None,
            dt_bias=None, dt_softplus=False, seq_idx=None, fp32_states=False):
        from . import ops

        Q = _kernel_chunk(chunk_size)
        return ops.ssd(x, log_a, B, C, dt=dt, A=A, D=D, z=z, dt_bias=dt_bias,
                       dt_softplus=dt_softplus, initial_state=initial_state, seq_idx=seq_idx,
                       chunk_size=Q, return_final_state=return_final_state,
                       fp32_states=fp32_states)

    def sss_matmul(self, problem):
        """``SSS.from_log(log_a, B, C) @ x`` through the SSD kernels (one head per batch entry)."""
        import torch

        from . import ops

        gen = problem.gen
        x = problem.x
        T, N, P = gen.T, gen.N, x.shape[-1]
        batch = tuple(problem.batch_shape(self))
        nb = 1
        for d in batch:
            nb *= d
        la = torch.broadcast_to(gen.decays.data, batch + (T,)).reshape(nb, T, 1)
        Bm = torch.broadcast_to(gen.B, batch + (T, N)).reshape(nb, T, 1, N)
        Cm = torch.broadcast_to(gen.C, batch + (T, N)).reshape(nb, T, 1, N)
        xm = torch.broadcast_to(x, batch + (T, P)).reshape(nb, T, 1, P)
        h0 = None
        if problem.initial_state is not None:   # (..., N, P) -> (b, 1, P, N)
            h0 = torch.broadcast_to(problem.initial_state, batch + (N, P)).reshape(nb, 1, N, P)
            h0 = h0.transpose(-1, -2)
        dtype = x.dtype
        y, hT = ops.ssd(xm, la.float(), Bm.to(dtype), Cm.to(dtype), initial_state=h0,
                        chunk_size=_kernel_chunk(problem.chunk_size), return_final_state=True)
        y = y.reshape(batch + (T, P))
        hT = hT.transpose(-1, -2).reshape(batch + (N, P)).to(dtype)
        return y, hT


def _kernel_chunk(chunk_size):
    """The kernels' chunk for a requested ``chunk_size``: the least power of two >= it, at
    least 16, where that is below 64; else None (the kernels' own plan), as for None.

    The result does not depend on the chunk (up to rounding). The kernels take chunks of at
    most 64, and their own plan (chunks of 64 or 32 by n, dtype and size; the Gluon
    forward's chunks of 64 at n = 128; a small call's backward over its whole state) serves
    a request for larger ones better than chunks of 64 forced: Mamba-2's ``chunk_size=256``
    at n = 128 would otherwise run the Triton forward in chunks of 64 with GRAM rather than
    the Gluon kernel (docs/performance.md).
    """
    if chunk_size is None:
        return None
    q = 16
    while q < chunk_size:
        q *= 2
    return q if q < 64 else None

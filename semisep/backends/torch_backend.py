"""The torch backend: CPU and CUDA tensors, autograd through every algorithm.

Half-precision inputs (bfloat16, float16) are computed in float32 and the
result is cast back; float64 stays float64. torch is imported on first use,
so ``import semisep`` stays quick for numpy users who have torch installed.
"""

from __future__ import annotations

import importlib.util

import numpy as np

from .._checks import is_torch
from .base import Backend


class _Torch:
    """The ``torch`` module, imported when first touched."""

    def __getattr__(self, name):
        import torch as module

        globals()["torch"] = module
        return getattr(module, name)


torch = _Torch()


class TorchBackend(Backend):
    """Primitives over :class:`torch.Tensor`."""

    name = "torch"

    def available(self):
        if importlib.util.find_spec("torch") is None:
            return "torch is not installed (pip install 'semisep[torch]')"
        return None

    def owns(self, array):
        return is_torch(array)

    def supports(self, case):
        return None

    def asarray(self, x, like=None):
        device = like.device if like is not None and isinstance(like, torch.Tensor) else None
        if isinstance(x, torch.Tensor):
            return x if device is None or x.device == device else x.to(device)
        x = np.asarray(x)
        return torch.as_tensor(np.ascontiguousarray(x).reshape(x.shape), device=device)  # keeps 0-d

    def result_dtype(self, *arrays):
        dtypes = [a.dtype for a in arrays if a is not None]
        out = dtypes[0]
        for d in dtypes[1:]:
            out = torch.promote_types(out, d)
        if not out.is_floating_point:
            out = torch.get_default_dtype()
        return out

    def compute_dtype(self, dtype):
        return torch.float64 if dtype == torch.float64 else torch.float32

    def cast(self, x, dtype):
        return x.to(dtype)

    def is_complex(self, x):
        return x.is_complex()

    def is_floating(self, x):
        return x.is_floating_point()

    def zeros(self, shape, like):
        return torch.zeros(shape, dtype=like.dtype, device=like.device)

    def ones(self, shape, like):
        return torch.ones(shape, dtype=like.dtype, device=like.device)

    def full(self, shape, value, like):
        return torch.full(shape, value, dtype=like.dtype, device=like.device)

    def tri(self, n, m, k, like):
        rows = torch.arange(n, device=like.device)[:, None]
        cols = torch.arange(m, device=like.device)[None, :]
        return cols <= rows + k            # not Tensor.tril: it costs milliseconds on the CPU

    def exp(self, x):
        return torch.exp(x)

    def abs(self, x):
        return torch.abs(x)

    def where(self, cond, a, b):
        return torch.where(cond, a, b)

    def softplus(self, x):
        return torch.nn.functional.softplus(x)

    def sigmoid(self, x):
        return torch.sigmoid(x)

    def cumsum(self, x, axis):
        return torch.cumsum(x, dim=axis)

    def cumprod(self, x, axis):
        return torch.cumprod(x, dim=axis)

    def sum(self, x, axis):
        return torch.sum(x, dim=axis)

    def einsum(self, spec, *operands):
        return torch.einsum(spec, *operands)

    def broadcast_to(self, x, shape):
        return torch.broadcast_to(x, shape)

    def broadcast_shapes(self, *shapes):
        return tuple(torch.broadcast_shapes(*shapes))

    def moveaxis(self, x, source, destination):
        return torch.movedim(x, source, destination)

    def flip(self, x, axis):
        return torch.flip(x, dims=(axis,))

    def concat(self, arrays, axis):
        return torch.cat(list(arrays), dim=axis)

    def stack(self, arrays, axis):
        return torch.stack(list(arrays), dim=axis)

    def any(self, x):
        return bool(torch.any(x))

    def to_numpy(self, x):
        return x.detach().cpu().to(torch.float64 if x.is_floating_point() else x.dtype).numpy()

    def power(self, x, y):
        return torch.pow(x, y)

    def complex_dtype(self, dtype):
        return torch.promote_types(dtype, torch.complex64)

    def fft(self, x, n, axis):
        return torch.fft.fft(x, n=n, dim=axis)

    def ifft(self, x, n, axis):
        return torch.fft.ifft(x, n=n, dim=axis).resolve_conj()   # real x gives a conj view

    def rfft(self, x, n, axis):
        return torch.fft.rfft(x, n=n, dim=axis)

    def irfft(self, x, n, axis):
        return torch.fft.irfft(x, n=n, dim=axis)

    def qr(self, x):
        return torch.linalg.qr(x, mode="reduced")

    def svd(self, x):
        return torch.linalg.svd(x, full_matrices=False)

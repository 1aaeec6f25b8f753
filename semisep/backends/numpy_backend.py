"""The numpy backend: float64 (or float32) on the CPU; the reference the others are held to."""

from __future__ import annotations

import numpy as np
import scipy.special

from .base import Backend


class NumpyBackend(Backend):
    """Primitives over :class:`numpy.ndarray`. Integer inputs compute in float64."""

    name = "numpy"

    def owns(self, array):
        return isinstance(array, (np.ndarray, np.generic))

    def supports(self, case):
        return None

    def asarray(self, x, like=None):
        if type(x).__module__.startswith("torch"):
            raise TypeError(
                f"backend 'numpy' got a torch tensor ({tuple(x.shape)}, {x.dtype}); "
                "pass numpy arrays, or use backend='torch'")
        return np.asarray(x)

    def result_dtype(self, *arrays):
        dtype = np.result_type(*[np.asarray(a).dtype for a in arrays if a is not None])
        if dtype == np.float32:
            return np.dtype(np.float32)
        return np.dtype(np.float64)

    def compute_dtype(self, dtype):
        return np.dtype(dtype)

    def cast(self, x, dtype):
        return np.asarray(x).astype(dtype, copy=False)

    def is_complex(self, x):
        return np.iscomplexobj(x)

    def is_floating(self, x):
        return np.issubdtype(np.asarray(x).dtype, np.floating)

    def zeros(self, shape, like):
        return np.zeros(shape, dtype=like.dtype)

    def ones(self, shape, like):
        return np.ones(shape, dtype=like.dtype)

    def full(self, shape, value, like):
        return np.full(shape, value, dtype=like.dtype)

    def tri(self, n, m, k, like):
        return np.tri(n, m, k, dtype=bool)

    exp = staticmethod(np.exp)
    abs = staticmethod(np.abs)
    where = staticmethod(np.where)
    broadcast_to = staticmethod(np.broadcast_to)
    broadcast_shapes = staticmethod(np.broadcast_shapes)
    moveaxis = staticmethod(np.moveaxis)
    flip = staticmethod(np.flip)

    def softplus(self, x):
        return np.logaddexp(0.0, x)

    def sigmoid(self, x):
        return scipy.special.expit(x)

    def cumsum(self, x, axis):
        return np.cumsum(x, axis=axis)

    def cumprod(self, x, axis):
        return np.cumprod(x, axis=axis)

    def sum(self, x, axis):
        return np.sum(x, axis=axis)

    def einsum(self, spec, *operands):
        return np.einsum(spec, *operands, optimize=True)

    def concat(self, arrays, axis):
        return np.concatenate(arrays, axis=axis)

    def stack(self, arrays, axis):
        return np.stack(arrays, axis=axis)

    def any(self, x):
        return bool(np.any(x))

    def to_numpy(self, x):
        return np.array(x)

    power = staticmethod(np.power)

    def complex_dtype(self, dtype):
        return np.result_type(dtype, np.complex64)

    def fft(self, x, n, axis):
        return np.fft.fft(x, n=n, axis=axis)

    def ifft(self, x, n, axis):
        return np.fft.ifft(x, n=n, axis=axis)

    def rfft(self, x, n, axis):
        return np.fft.rfft(x, n=n, axis=axis)

    def irfft(self, x, n, axis):
        return np.fft.irfft(x, n=n, axis=axis)

    def qr(self, x):
        return np.linalg.qr(x, mode="reduced")

    def svd(self, x):
        return np.linalg.svd(x, full_matrices=False)

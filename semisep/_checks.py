"""Argument checks shared by the public entry points; every error names the argument."""

from __future__ import annotations

import numbers

import numpy as np


def is_torch(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "device")


def as_array(name: str, x):
    """``x`` unchanged if it is a numpy array or torch tensor, else ``np.asarray(x)``."""
    if x is None:
        raise TypeError(f"{name} must be an array, got None")
    if isinstance(x, np.ndarray) or is_torch(x):
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except Exception as exc:  # noqa: BLE001 - reported with the argument's name
            raise TypeError(f"{name} must be array-like, got {type(x).__name__}") from exc
    kind = arr.dtype.kind if isinstance(arr, np.ndarray) else None
    if kind is not None and kind not in "biuf":
        what = "complex" if kind == "c" else str(arr.dtype)
        raise TypeError(f"{name} must be real (bool, int or float), got dtype {what}")
    if is_torch(arr) and arr.is_complex():
        raise TypeError(f"{name} must be real, got dtype {arr.dtype}")
    return arr


def shape_str(shape) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def check_min_ndim(name: str, arr, ndim: int, want: str):
    if arr.ndim < ndim:
        raise ValueError(f"{name} must have shape {want}, got shape {shape_str(arr.shape)}")


def check_trailing(name: str, arr, expected: tuple, want: str):
    """``arr.shape[-len(expected):] == expected`` or a ValueError naming ``want``."""
    got = tuple(arr.shape[arr.ndim - len(expected):]) if arr.ndim >= len(expected) else None
    if got != tuple(expected):
        raise ValueError(f"{name} must have shape {want}, got shape {shape_str(arr.shape)}")


def check_shape(name: str, arr, expected: tuple, want: str):
    """``arr.shape == expected`` (no extra leading dimensions) or a ValueError naming ``want``."""
    if tuple(arr.shape) != tuple(expected):
        raise ValueError(f"{name} must have shape {want}, got shape {shape_str(arr.shape)}")


def broadcast_batch(named_shapes: dict) -> tuple:
    """The broadcast of the leading shapes, or a ValueError listing them."""
    try:
        return tuple(np.broadcast_shapes(*[tuple(s) for s in named_shapes.values()]))
    except ValueError:
        listed = ", ".join(f"{k} {shape_str(v)}" for k, v in named_shapes.items())
        raise ValueError(f"leading (batch) dimensions do not broadcast: {listed}") from None


def check_positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int >= 1, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value}")
    return int(value)


def as_columns(name: str, x, rows: int, cols: str = "P", of: str = "", *,
               allow_complex: bool = False):
    """``(x2, vector)``: ``x`` of shape ``(rows,)`` or ``(..., rows, cols)`` as ``(..., rows, k)``.

    Only a 1-D ``x`` is a vector (numpy's matmul convention); it becomes one
    column and ``vector`` is True. ``of`` names what ``rows`` comes from, for
    the error message (e.g. ``"a matrix of T=5"``). Complex ``x`` is refused
    unless ``allow_complex``.
    """
    complex_given = allow_complex and (x.is_complex() if is_torch(x) else np.iscomplexobj(x))
    x = (x if is_torch(x) else np.asarray(x)) if complex_given else as_array(name, x)
    want = f"({rows},) or (..., {rows}, {cols})"
    check_min_ndim(name, x, 1, want)
    vector = x.ndim == 1
    x2 = x[:, None] if vector else x
    if x2.shape[-2] != rows:
        raise ValueError(f"{name} must have shape {want}{' for ' + of if of else ''}, "
                         f"got shape {shape_str(x.shape)}")
    return x2, vector


def check_decay_overflow(name: str, log_a, dtype, *, axis: int = -1) -> None:
    """Raise a ValueError if ``exp`` of a run of consecutive log-decays overflows ``dtype``.

    The products ``a_j ... a_{i+1} = exp(log_a_{i+1} + ... + log_a_j)`` are finite
    while every run's sum stays at most ``log(max of dtype)`` (88.7 for float32,
    709.8 for float64). The runs include the first step's ``log_a_0``: the
    algorithms carry the initial state (zero when none is given) through it, and
    an infinite decay times a zero state is NaN. Log-decays ``<= 0`` pass at once
    (one comparison); otherwise the largest run sum along ``axis`` is found in
    float64 as the largest rise of the cumulative sum over its running minimum
    (Kadane), after raising entries (``-inf`` and NaN too) below ``-limit`` to
    ``-limit``: no run that passes the limit with them raised stays under it
    without (such a run splits at a raised entry into two parts, one of which
    passes the limit alone).

    Arrays in host memory are checked; a tensor on a GPU is not (reading it would
    cost a device synchronization every call), nor one traced by ``torch.compile``.
    """
    if is_torch(log_a):
        import torch

        if (log_a.device.type != "cpu" or torch.compiler.is_compiling()
                or not bool((log_a > 0).any())):
            return
        limit = float(np.log(torch.finfo(dtype).max))
        log_a = log_a.detach().to(torch.float64).numpy()
    else:
        if not (log_a > 0).any():
            return
        limit = float(np.log(np.finfo(dtype).max))
    a = np.moveaxis(np.asarray(log_a, dtype=np.float64), axis, -1)
    a = np.where(a > -limit, a, -limit)
    sums = np.cumsum(a, axis=-1)
    lowest_before = np.minimum.accumulate(
        np.concatenate([np.zeros_like(sums[..., :1]), sums[..., :-1]], axis=-1), axis=-1)
    worst = float((sums - lowest_before).max())
    if worst > limit:
        raise ValueError(
            f"{name} must keep every run of consecutive log-decays summing to at most "
            f"{limit:.6g} (log of the largest {str(dtype).replace('torch.', '')}), got a run "
            f"summing to {worst:.6g}: exp of it overflows (log-decays <= 0 never do)")


def dtype_names(*arrays) -> tuple:
    """The sorted distinct dtype names (``"float32"``, ``"bfloat16"``, ...) of arrays or tensors."""
    return tuple(sorted({str(a.dtype).replace("torch.", "") for a in arrays}))

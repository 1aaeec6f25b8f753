"""The rank tolerance, defined once for every rank and compression in semisep.

A singular value ``s`` of a Hankel block ``M[k:, :k+1]`` counts when
``s > tol`` with, per matrix of a batch,

    tol = max(atol, rtol * s_max),     s_max = max_k ||M[k:, :k+1]||_2,

the largest singular value over all the Hankel blocks (at most ``||M||_2``).
``rtol`` defaults to ``T * eps`` of the compute dtype, or to 0 when a positive
``atol`` is given alone (the convention of :func:`scipy.linalg.pinv`); ``atol``
defaults to 0. A zero matrix has rank 0. The compute dtype is float32 for
bfloat16 and float16 inputs, so the rounding of a half-precision dense matrix
counts as rank at the default: pass an ``rtol`` of its precision (about
``1e-2``) to see past it.
"""

from __future__ import annotations

import numbers

import numpy as np


def check_tolerances(rtol, atol):
    """A TypeError/ValueError naming ``rtol`` or ``atol`` unless each is None or a real >= 0."""
    for name, value in (("rtol", rtol), ("atol", atol)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a float >= 0 or None, got {type(value).__name__}")
        if not value >= 0 or not np.isfinite(value):
            raise ValueError(f"{name} must be a finite float >= 0 or None, got {value}")


def eps_of(dtype) -> float:
    """The machine epsilon of a numpy or torch floating dtype."""
    return float(np.finfo(np.dtype(str(dtype).replace("torch.", ""))).eps)


def threshold(s_max: np.ndarray, rtol, atol, T: int, dtype) -> np.ndarray:
    """The absolute tolerance per matrix (the module docstring), for ``s_max`` of the batch shape."""
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else T * eps_of(dtype)
    return np.maximum(rtol * np.asarray(s_max, dtype=np.float64), 0.0 if atol is None else atol)


def counts(singular_values: np.ndarray, tol: np.ndarray) -> np.ndarray:
    """How many of ``singular_values`` ``(..., k)`` exceed ``tol`` ``(...)``."""
    return np.sum(singular_values > np.asarray(tol)[..., None], axis=-1)

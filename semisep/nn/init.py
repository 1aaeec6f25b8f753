"""Initializers shared by the layers' decay parameters (Mamba-2's recipe)."""

from __future__ import annotations

import math

import torch


def dt_bias_init(n: int, dt_min: float = 1e-3, dt_max: float = 1e-1, floor: float = 1e-4, *,
                 device=None, dtype=None) -> torch.Tensor:
    """``softplus^{-1}(dt)`` for ``n`` step sizes ``dt`` log-uniform in ``[dt_min, dt_max]``.

    So that ``softplus(dt_bias)`` starts log-uniform over the range (clamped below
    at ``floor``): a spread of time scales across heads. Shape ``(n,)``.
    """
    if not 0 < dt_min <= dt_max:
        raise ValueError(f"dt_min and dt_max must satisfy 0 < dt_min <= dt_max, "
                         f"got {dt_min}, {dt_max}")
    dt = torch.exp(torch.rand(n, device=device) * (math.log(dt_max) - math.log(dt_min))
                   + math.log(dt_min)).clamp(min=floor)
    return (dt + torch.log(-torch.expm1(-dt))).to(dtype)


def a_log_init(n: int, low: float = 1.0, high: float = 16.0, *, device=None,
               dtype=None) -> torch.Tensor:
    """``log(-A)`` for ``n`` rates ``-A`` uniform in ``[low, high]``. Shape ``(n,)``."""
    if not 0 < low <= high:
        raise ValueError(f"A_init_range must be (low, high) with 0 < low <= high, "
                         f"got {(low, high)}")
    return torch.log(torch.empty(n, device=device).uniform_(low, high)).to(dtype)

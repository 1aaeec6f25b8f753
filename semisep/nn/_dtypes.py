"""The precision rule of the layers: decay math and states in at least float32."""

from __future__ import annotations

import torch


def at_least_fp32(t: torch.Tensor) -> torch.Tensor:
    """``t`` in float32 when it is half precision, else unchanged (float64 stays float64)."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def fp32_or_wider(dtype: torch.dtype | None) -> torch.dtype:
    """float64 for float64, else float32: the dtype kept for parameters that need precision."""
    return torch.float64 if dtype == torch.float64 else torch.float32

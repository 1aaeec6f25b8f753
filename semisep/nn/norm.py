"""The gated RMSNorm of the Mamba-2 block: ``norm(y * silu(z))``."""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_positive_int
from ._dtypes import at_least_fp32


class GatedRMSNorm(nn.Module):
    """RMS normalization of ``y * silu(z)`` over groups of channels, times a learned scale.

    ``out = w * g / sqrt(mean(g^2) + eps)`` with ``g = y * silu(z)`` (``g = y``
    when ``z`` is None), the mean taken over each group of ``group_size``
    consecutive channels (the whole last axis by default). The Mamba-2 block
    uses one group per B/C group, so normalization never mixes groups.

    Parameters
    ----------
    dim : int
        Size of the last axis.
    eps : float
    group_size : int, optional
        Must divide ``dim``; ``dim`` when omitted.

    Notes
    -----
    Computed in at least float32 and cast back to the input's dtype; O(dim) per token.
    """

    def __init__(self, dim: int, eps: float = 1e-5, group_size: int | None = None, *,
                 device=None, dtype=None):
        super().__init__()
        dim = check_positive_int("dim", dim)
        group_size = dim if group_size is None else check_positive_int("group_size", group_size)
        if dim % group_size:
            raise ValueError(f"group_size must divide dim={dim}, got {group_size}")
        self.dim, self.eps, self.group_size = dim, eps, group_size
        self.weight = nn.Parameter(torch.ones(dim, device=device, dtype=dtype))

    def forward(self, y: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        """``y``, ``z`` of shape ``(..., dim)``; returns ``(..., dim)`` in ``y``'s dtype."""
        g = at_least_fp32(y)
        if z is not None:
            zc = at_least_fp32(z)
            g = g * zc * torch.sigmoid(zc)
        g = g.unflatten(-1, (self.dim // self.group_size, self.group_size))
        g = g * torch.rsqrt(g.square().mean(dim=-1, keepdim=True) + self.eps)
        return (g.flatten(-2) * self.weight).to(y.dtype)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}, group_size={self.group_size}"

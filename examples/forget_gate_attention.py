"""A new masked-attention variant in a few lines: linear attention with a forget gate.

A mask module is any callable ``x -> structured matrix``; give it a
``log_decays(x)`` method as well and the layer knows it is recurrent (a 1-SS
mask), so decoding and packed sequences work with no more code. Here the
decay of each head at each token is a sigmoid gate computed from the token,
``a_t = sigmoid(x_t w + b)`` (the scalar forget gate of gated linear attention
and mLSTM), and queries and keys pass through a positive feature map with the
paper's normalization.

The script checks the layer against the dense definition ``(L o Q K^T) V`` (via
``semisep.sma(..., algorithm="quadratic")``; the layer itself runs the linear
algorithm, ``L @ (V (x) K)`` by the 1-SS scan), checks that decoding token by token
matches, and reports both. Run ``python examples/forget_gate_attention.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import semisep as ss
import semisep.nn as ssnn
from semisep.testing import relative_error


class ForgetGateMask(nn.Module):
    """``L[i, j] = a_i a_{i-1} ... a_{j+1}`` with ``a_t = sigmoid(x_t w_h + b_h)`` per head."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.gate = nn.Linear(d_model, n_heads)
        nn.init.constant_(self.gate.bias, 3.0)          # start remembering (a ~ 0.95)

    def log_decays(self, x):                            # (batch, T, d) -> (batch, heads, T)
        return F.logsigmoid(self.gate(x)).transpose(1, 2)

    def forward(self, x):
        return ss.OneSS.from_log(self.log_decays(x))


def main(T: int = 48, batch: int = 2, d_model: int = 32, n_heads: int = 4, seed: int = 0) -> dict:
    """Build the layer, run it three ways; returns the relative differences."""
    torch.manual_seed(seed)
    layer = ssnn.MaskedAttention(d_model, n_heads, mask=ForgetGateMask(d_model, n_heads),
                                 feature_map=lambda t: F.elu(t) + 1, normalize=True,
                                 algorithm="linear")
    x = torch.randn(batch, T, d_model)
    y = layer(x)

    dense = ssnn.MaskedAttention(d_model, n_heads, mask=layer.mask, algorithm="quadratic",
                                 feature_map=layer.feature_map, normalize=True)
    dense.load_state_dict(layer.state_dict())            # same weights, dense (L o QK^T) V

    cache = layer.allocate_cache(batch)
    decoded = torch.stack([layer.step(x[:, t], cache) for t in range(T)], dim=1)
    return {"linear vs quadratic": relative_error(y, dense(x)),
            "decoded vs forward": relative_error(decoded, y)}


if __name__ == "__main__":
    for name, err in main().items():
        print(f"{name}: relative difference {err:.1e}")

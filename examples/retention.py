"""RetNet's retention as a MaskedAttention: the decay mask, parallel and recurrent forms.

Retention (Sun et al., 2023) is masked attention with the decay mask
``L[i, j] = gamma_h^(i - j)``, one ``gamma`` per head (multi-scale:
``1 - 2^(-5 - h)``). In semisep that is one argument: ``mask="decay"``. The
decay mask is 1-semiseparable, so the same layer also runs as a recurrence,
token by token, with a ``(d_key, d_value)`` state per head: this script checks
that the parallel form (``semisep.sma`` with the mask's blocked-scan product),
the recurrent form (``layer.step``) and chunked prefill agree.

Run ``python examples/retention.py``.
"""

from __future__ import annotations

import torch

import semisep.nn as ssnn
from semisep.testing import relative_error


def main(T: int = 64, batch: int = 2, d_model: int = 32, n_heads: int = 4, seed: int = 0) -> dict:
    """Run retention in its three forms; returns their relative differences."""
    torch.manual_seed(seed)
    layer = ssnn.MaskedAttention(d_model, n_heads, mask="decay")
    x = torch.randn(batch, T, d_model)

    parallel = layer(x)                                   # sma(Q, K, V, Decay(gamma, T))

    cache = layer.allocate_cache(batch)                   # recurrent: one token at a time
    recurrent = torch.stack([layer.step(x[:, t], cache) for t in range(T)], dim=1)

    half = T // 2                                         # chunked: prefill, then continue
    first, state = layer(x[:, :half], return_cache=True)
    second = layer(x[:, half:], cache=state)
    chunked = torch.cat([first, second], dim=1)

    return {"recurrent vs parallel": relative_error(recurrent, parallel),
            "chunked vs parallel": relative_error(chunked, parallel)}


if __name__ == "__main__":
    gammas = torch.exp(ssnn.MaskedAttention(32, 4, mask="decay").mask.log_gamma)
    print("gamma per head:", [round(g, 5) for g in gammas.tolist()])
    for name, err in main().items():
        print(f"{name}: relative difference {err:.1e}")

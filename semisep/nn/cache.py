"""Decoding caches: the state a layer carries from one token to the next.

A cache is a small mutable record. ``layer.allocate_cache(batch, dtype)``
makes a fresh one (a sequence not started), ``layer.forward(x, ...,
return_cache=True)`` returns the one after a prompt, and ``layer.step(x_t,
cache)`` reads it and replaces its tensors with the next ones (the tensors
themselves are never written in place, so earlier references stay valid and
autograd sees ordinary operations).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._checks import shape_str


@dataclass
class Mamba2Cache:
    """The state of a :class:`semisep.nn.Mamba2` layer between tokens.

    Attributes
    ----------
    conv_state : tensor, shape ``(batch, d_conv - 1, conv_dim)``
        The last ``d_conv - 1`` inputs of the convolution (x, B, C before it), oldest first.
    ssm_state : tensor, shape ``(batch, nheads, headdim, d_state)``
        The SSM state ``h_t`` in the layout of :func:`semisep.ssd`, in at least float32.
    """

    conv_state: torch.Tensor
    ssm_state: torch.Tensor


@dataclass
class AttentionCache:
    """The state of a :class:`semisep.nn.MaskedAttention` layer with a recurrent mask.

    Attributes
    ----------
    state : tensor, shape ``(batch, n_heads, N_L d_key, d_value')``
        The state of the dual SSM ``masked(L, Q, K).to_sss()`` (in the
        ``(..., N, P)`` layout of :meth:`semisep.SSS.matmul`), in at least
        float32: ``sum_i L[t, i] k_i v_i^T`` for a 1-SS mask (``N_L = 1``), and
        ``sum_i (A_t ... A_{i+1} b_i (x) k_i) v_i^T`` for an SSS mask of state
        size ``N_L``; ``d_value' = d_value + 1`` with the normalization column.
    conv_state : tensor, shape ``(batch, d_conv - 1, channels)``, or None
        The last inputs of the layer's short convolution, when it has one.
    position : int
        Tokens consumed so far: where a fixed mask (whose steps belong to
        positions) continues.
    """

    state: torch.Tensor
    conv_state: torch.Tensor | None = None
    position: int = 0


def check_cache(cache, kind: type, expected: dict, owner: str):
    """Check ``cache`` is a ``kind`` whose tensors have the ``expected`` shapes.

    ``expected`` maps attribute names to shapes; the first dimension is the batch.
    """
    if not isinstance(cache, kind):
        article = "an" if kind.__name__[0] in "AEIOU" else "a"
        raise TypeError(f"cache must be {article} {kind.__name__} (from {owner}.allocate_cache), "
                        f"got {type(cache).__name__}")
    for name, shape in expected.items():
        value = getattr(cache, name)
        if value is None:
            raise ValueError(f"cache.{name} must have shape {shape_str(shape)} for this "
                             f"{owner}, got None")
        got = tuple(value.shape)
        if got[:1] != tuple(shape[:1]):
            raise ValueError(f"cache was allocated for batch {got[0]}, got an input of batch "
                             f"{shape[0]}")
        if got != tuple(shape):
            raise ValueError(f"cache.{name} must have shape {shape_str(shape)} for this "
                             f"{owner}, got shape {shape_str(got)}")

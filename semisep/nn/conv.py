"""The depthwise causal convolution of the Mamba-2 block, packing- and cache-aware.

``y[b, t, c] = bias[c] + sum_k weight[c, k] * x[b, t - (K-1) + k, c]``: each
channel is filtered by its own ``K`` taps over the current and ``K - 1``
previous tokens. The ``K - 1`` inputs before ``x`` come from a carried state
(zeros for a fresh sequence), which is how decoding continues after a prompt.
In a packed row, a tap that reaches into an earlier sequence reads zero, so
no sequence sees another.
"""

from __future__ import annotations

import torch


def causal_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
                  state: torch.Tensor | None = None, segments: torch.Tensor | None = None):
    """Depthwise causal convolution along T (see the module docstring).

    Parameters
    ----------
    x : tensor, shape ``(b, T, c)``
    weight : tensor, shape ``(c, K)``
        The taps; ``weight[:, K-1]`` multiplies the current token.
    bias : tensor, shape ``(c,)``, optional
    state : tensor, shape ``(b, K-1, c)``, optional
        The ``K - 1`` inputs before ``x``, oldest first; zeros when omitted.
        In a packed row they belong to the first sequence.
    segments : int tensor, shape ``(b, T)``, optional
        Sequence ids from :func:`semisep.nn.packing.segment_ids`; taps across
        a change of id read zero.

    Returns
    -------
    y : tensor, shape ``(b, T, c)``
    new_state : tensor, shape ``(b, K-1, c)``
        The last ``K - 1`` inputs of the stream ``[state, x]``: the state after ``x``.

    Notes
    -----
    O(b T c K) work, as K shifted multiply-adds; ``x`` and ``state`` are not modified.
    """
    b, T, c = x.shape
    K = weight.shape[-1]
    if state is None:
        state = x.new_zeros(b, K - 1, c)
    stream = torch.cat([state.to(x.dtype), x], dim=1)                     # (b, K-1+T, c)
    if segments is not None:
        stream_seg = torch.cat([segments[:, :1].expand(b, K - 1), segments], dim=1)
    y = None
    for k in range(K):
        tap = stream[:, k:k + T]
        if segments is not None:
            tap = torch.where((stream_seg[:, k:k + T] == segments)[..., None], tap, 0.0)
        term = tap * weight[:, k]
        y = term if y is None else y + term
    if bias is not None:
        y = y + bias
    return y, stream[:, T:]

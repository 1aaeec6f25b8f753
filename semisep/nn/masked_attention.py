"""The masked-attention layer: a thin torch client of :func:`semisep.sma`.

Per head, with queries ``Q = phi(x W_q)``, keys ``K = phi(x W_k)`` (``phi`` an
optional feature map) and values ``V = x W_v`` (optionally each passed through
a short depthwise causal convolution first, as in Based or gated linear
attention, which lets a layer see the previous tokens directly)::

    Y = (L o Q K^T) V                       (structured masked attention)
    Y = Y[:, :P] / (Y[:, P] + eps)          (normalize=True: V gets a ones column)

then the heads are concatenated and projected back to ``d_model``. ``L`` is
the mask module's matrix for this input (:mod:`semisep.nn.masks`): causal
linear attention, RetNet's decay, a learnable Toeplitz kernel, an
input-dependent 1-SS mask, or a user's own.

For a recurrent mask (a 1-SS mask with ``log_decays``, or an SSS mask of
state size ``N_L``, see :mod:`semisep.nn.masks`) the same layer is an SSM: by
the duality, ``(L o Q K^T) V == masked(L, Q, K).to_sss() @ V``, e.g.
``SSS.from_log(log_a, K, Q) @ V`` for ``L = OneSS.from_log(log_a)``, whose state
``(N_L d_key, d_value)`` per head is the decoding cache.
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_positive_int, shape_str
from ..masked import masked
from ..oness import OneSS
from ..sma import sma
from ._dtypes import fp32_or_wider
from .cache import AttentionCache, check_cache
from .conv import causal_conv1d
from .masks import check_sss_mask, make_mask, with_resets
from .packing import resolve_packing, segment_ids


class MaskedAttention(nn.Module):
    """Multi-head structured masked attention (see the module docstring).

    Parameters
    ----------
    d_model : int
    n_heads : int
    mask : str, structured matrix or callable
        ``"causal"`` (default), ``"decay"`` (RetNet), ``"selective"`` (a 1-SS
        mask with per-token decays projected from ``x``), ``"toeplitz"``
        (learnable, needs ``max_len``), a fixed structured matrix ``(..., T, T)``,
        or a mask module ``x -> matrix`` (see :mod:`semisep.nn.masks`). A fixed
        SSS, OneSS, Causal or Decay matrix, and a mask module with ``log_decays``
        or ``state_size``, are recurrent: the layer then decodes.
    d_key, d_value : int, optional
        Per-head widths of Q/K and of V; ``d_model // n_heads`` by default.
    feature_map : callable, optional
        Applied to Q and K (e.g. ``lambda t: F.elu(t) + 1``).
    normalize : bool
        Divide by the masked attention weights' row sums (a ones column in V),
        the paper's normalization; meant for positive feature maps.
    eps : float
        Added to the normalizer.
    d_conv : int, optional
        Taps of a depthwise causal convolution over the projections ``(x W_q,
        x W_k, x W_v)``, before the feature map; none by default.
    max_len : int, optional
        For ``mask="toeplitz"``.
    algorithm : {"auto", "linear", "quadratic"}
        Passed to :func:`semisep.sma`.
    bias : bool
        Biases in the projections.
    device, dtype : optional

    Notes
    -----
    Cost per token: the projections O(d_model * n_heads * (d_key + d_value)),
    plus :func:`semisep.sma`'s (linear: O(d_key d_value) per head and token and
    the mask's product). Decoding (recurrent masks) costs O(N_L d_key d_value)
    per head and token for a mask of state size ``N_L`` (1 for 1-SS masks;
    O(N_L^2 d_key^2 d_value) for an SSS mask with full A).

    Examples
    --------
    >>> import torch, semisep.nn as ssnn
    >>> layer = ssnn.MaskedAttention(16, 4, mask="decay")
    >>> layer(torch.randn(2, 10, 16)).shape
    torch.Size([2, 10, 16])
    """

    def __init__(self, d_model: int, n_heads: int, mask="causal", *, d_key: int | None = None,
                 d_value: int | None = None, feature_map=None, normalize: bool = False,
                 eps: float = 1e-6, d_conv: int | None = None, max_len: int | None = None,
                 algorithm: str = "auto",
                 bias: bool = False, device=None, dtype=None):
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.n_heads = check_positive_int("n_heads", n_heads)
        if (d_key is None or d_value is None) and d_model % n_heads:
            raise ValueError(f"n_heads must divide d_model={d_model} unless d_key and d_value "
                             f"are given, got n_heads={n_heads}")
        self.d_key = check_positive_int("d_key", d_model // n_heads if d_key is None else d_key)
        self.d_value = check_positive_int(
            "d_value", d_model // n_heads if d_value is None else d_value)
        if feature_map is not None and not callable(feature_map):
            raise TypeError(f"feature_map must be callable or None, got "
                            f"{type(feature_map).__name__}")
        self.feature_map, self.normalize, self.eps = feature_map, normalize, eps
        self.algorithm = algorithm
        factory = {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(d_model, n_heads * self.d_key, bias=bias, **factory)
        self.k_proj = nn.Linear(d_model, n_heads * self.d_key, bias=bias, **factory)
        self.v_proj = nn.Linear(d_model, n_heads * self.d_value, bias=bias, **factory)
        self.out_proj = nn.Linear(n_heads * self.d_value, d_model, bias=bias, **factory)
        self.d_conv = None if d_conv is None else check_positive_int("d_conv", d_conv)
        self._widths = [n_heads * self.d_key, n_heads * self.d_key, n_heads * self.d_value]
        if self.d_conv is not None:
            channels = sum(self._widths)
            self.conv1d = nn.Conv1d(channels, channels, self.d_conv, groups=channels, **factory)
        self.mask = make_mask(mask, d_model, n_heads, max_len, device=device, dtype=dtype)

    @property
    def recurrent(self) -> bool:
        """Whether the mask has a recurrent (1-SS or SSS) form: decoding and packing need it."""
        return hasattr(self.mask, "log_decays") or hasattr(self.mask, "state_size")

    def _state_width(self) -> int:
        return self.d_value + (1 if self.normalize else 0)

    def _state_height(self) -> int:   # N_L d_key: the dual SSM's state size
        return (1 if hasattr(self.mask, "log_decays") else self.mask.state_size) * self.d_key

    def allocate_cache(self, batch: int, dtype: torch.dtype | None = None) -> AttentionCache:
        """A fresh decoding cache (zero state) for ``batch`` sequences.

        The attention state is in at least float32, the convolution's in ``dtype``
        (the parameters' by default).
        """
        self._need_recurrent("decoding")
        batch = check_positive_int("batch", batch)
        dtype = self.q_proj.weight.dtype if dtype is None else dtype
        device = self.q_proj.weight.device
        conv_state = None
        if self.d_conv is not None:
            conv_state = torch.zeros(batch, self.d_conv - 1, sum(self._widths), device=device,
                                     dtype=dtype)
        return AttentionCache(torch.zeros(batch, self.n_heads, self._state_height(),
                                          self._state_width(), device=device,
                                          dtype=fp32_or_wider(dtype)), conv_state)

    def _cache_shapes(self, batch: int) -> dict:
        shapes = {"state": (batch, self.n_heads, self._state_height(), self._state_width())}
        if self.d_conv is not None:
            shapes["conv_state"] = (batch, self.d_conv - 1, sum(self._widths))
        return shapes

    def _need_recurrent(self, what: str):
        if not self.recurrent:
            raise TypeError(f"{what} needs a recurrent mask (causal, decay, selective, 1-SS or "
                            f"SSS: one with log_decays or state_size), got "
                            f"{type(self.mask).__name__}")

    def _heads(self, t: torch.Tensor, width: int) -> torch.Tensor:  # (b, T, h*w) -> (b, h, T, w)
        return t.unflatten(-1, (self.n_heads, width)).transpose(1, 2)

    def forward(self, x: torch.Tensor, *, seq_idx=None, cu_seqlens=None,
                cache: AttentionCache | None = None, return_cache: bool = False):
        """Attend over ``x``.

        Parameters
        ----------
        x : tensor, shape ``(batch, T, d_model)``
        seq_idx, cu_seqlens : optional
            Packed sequences (recurrent masks whose steps follow the tokens, not a
            fixed matrix), as in :class:`semisep.nn.Mamba2`: the result equals
            running each sequence alone.
        cache : AttentionCache, optional
            Continue from this state (recurrent masks); read, never modified.
            In a packed row it feeds the first sequence. A fixed mask continues
            from the cache's position.
        return_cache : bool
            Also return the cache after the last token (recurrent masks).

        Returns
        -------
        y : tensor, shape ``(batch, T, d_model)``
        cache : AttentionCache, only with ``return_cache=True``

        Notes
        -----
        Without a cache the product is :func:`semisep.sma` with the mask's own
        algorithm; with one it is the dual SSM ``masked(L, Q, K).to_sss() @ V``,
        the same matrix, run with a state. Packed sequences reset ``A_t`` (a
        ``-inf`` log-decay) at each start.
        """
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (batch, T, {self.d_model}), "
                             f"got shape {shape_str(x.shape)}")
        b, T, _ = x.shape
        seq_idx = resolve_packing(seq_idx, cu_seqlens, b, T, x.device)
        if seq_idx is not None:
            self._need_recurrent("packed sequences")
            if return_cache:
                raise ValueError("return_cache=True needs one sequence per row; with seq_idx "
                                 "or cu_seqlens the state of each packed sequence is not returned")
        if cache is not None or return_cache:
            self._need_recurrent("a cache")
        if cache is not None:
            check_cache(cache, AttentionCache, self._cache_shapes(b), "MaskedAttention")

        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        conv_state = None
        if self.d_conv is not None:
            qkv, conv_state = causal_conv1d(
                torch.cat([q, k, v], dim=-1), self.conv1d.weight[:, 0], self.conv1d.bias,
                state=None if cache is None else cache.conv_state,
                segments=None if seq_idx is None else segment_ids(seq_idx))
            q, k, v = qkv.split(self._widths, dim=-1)
        Q, K = self._heads(q, self.d_key), self._heads(k, self.d_key)
        V = self._heads(v, self.d_value)
        if self.feature_map is not None:
            Q, K = self.feature_map(Q), self.feature_map(K)
        if self.normalize:
            V = torch.cat([V, torch.ones_like(V[..., :1])], dim=-1)

        state, start = None, 0 if cache is None else cache.position
        if cache is None and not return_cache and seq_idx is None:
            Y = sma(Q, K, V, self.mask(x), algorithm=self.algorithm)
        else:
            L = self._recurrent_mask(x, start, seq_idx)
            if cache is None and not return_cache:
                Y = sma(Q, K, V, L, algorithm=self.algorithm)
            else:
                Y, state = masked(L, Q, K).to_sss().matmul(
                    V, initial_state=None if cache is None else cache.state,
                    return_final_state=True)
        if self.normalize:
            Y = Y[..., :self.d_value] / (Y[..., self.d_value:] + self.eps)
        y = self.out_proj(Y.transpose(1, 2).flatten(2).to(x.dtype))
        return (y, AttentionCache(state, conv_state, start + T)) if return_cache else y

    def _recurrent_mask(self, x: torch.Tensor, start: int, seq_idx):
        """The mask for tokens ``x`` at positions ``start...``: a OneSS or an SSS.

        With ``seq_idx``, ``A_t = 0`` (a ``-inf`` log-decay) where each packed
        sequence starts.
        """
        starts = None
        if seq_idx is not None:
            starts = torch.nn.functional.pad(seq_idx[:, 1:] != seq_idx[:, :-1], (1, 0))
        if hasattr(self.mask, "log_decays"):
            log_a = self.mask.log_decays(x)
            return OneSS.from_log(log_a if starts is None else
                                  log_a.masked_fill(starts[:, None], float("-inf")))
        if hasattr(self.mask, "window"):   # a fixed mask: its steps belong to positions
            if starts is not None:
                raise ValueError(f"packed sequences need a mask whose steps follow the tokens; "
                                 f"the steps of this fixed mask ({type(self.mask).__name__}) "
                                 f"follow positions, so a packed sequence would not start "
                                 f"from step 0")
            return self.mask.window(start, start + x.shape[1])
        L = check_sss_mask(self.mask(x), self.mask.state_size, x.shape[1])
        return L if starts is None else with_resets(L, starts)

    def step(self, x_t: torch.Tensor, cache: AttentionCache) -> torch.Tensor:
        """Decode one token: ``x_t`` of shape ``(batch, d_model)`` -> ``(batch, d_model)``.

        ``cache`` (from :meth:`allocate_cache` or ``forward(..., return_cache=True)``)
        is advanced by one token. Stepping through a sequence gives
        :meth:`forward`'s output. Needs a recurrent mask.
        """
        if x_t.ndim != 2 or x_t.shape[-1] != self.d_model:
            raise ValueError(f"x_t must have shape (batch, {self.d_model}), "
                             f"got shape {shape_str(x_t.shape)}")
        check_cache(cache, AttentionCache, {}, "MaskedAttention")   # forward: None = no cache
        y, new = self.forward(x_t[:, None], cache=cache, return_cache=True)
        cache.state, cache.conv_state, cache.position = new.state, new.conv_state, new.position
        return y[:, 0]

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, d_key={self.d_key}, "
                f"d_value={self.d_value}, normalize={self.normalize}")

"""The Mamba-2 mixer: a thin torch client of :func:`semisep.ssd`.

For input ``u`` of shape ``(batch, T, d_model)``, with ``d_inner = expand *
d_model`` split into ``nheads = d_inner / headdim`` heads and ``ngroups``
groups of B and C (``d_state`` each):

1. one input projection gives ``z`` (the gate, ``d_inner``), ``x`` (``d_inner``),
   ``B``, ``C`` (``ngroups * d_state`` each) and ``dt`` (``nheads``);
2. a depthwise causal convolution (``d_conv`` taps) over ``(x, B, C)``, then SiLU;
3. the SSD product per head, ``y = SSS.from_log(dt * A, B, C) @ (dt * x) + D * x``
   with ``dt = softplus(dt + dt_bias)`` and ``A = -exp(A_log) < 0``
   (:func:`semisep.ssd` does it, on whatever backend the tensors select);
4. the gated RMSNorm ``norm(y * silu(z))`` (one normalization group per B/C group);
5. the output projection back to ``d_model``.

Parameter names and shapes follow the reference implementation (``in_proj``
with outputs ordered ``z, x, B, C, dt``, ``conv1d``, ``dt_bias``, ``A_log``,
``D``, ``norm``, ``out_proj``).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import check_positive_int, shape_str
from .. import distributed
from ..ssd import ssd
from ._dtypes import at_least_fp32, fp32_or_wider
from .cache import Mamba2Cache, check_cache
from .conv import causal_conv1d
from .init import a_log_init, dt_bias_init
from .norm import GatedRMSNorm
from .packing import resolve_packing, segment_ids


class Mamba2(nn.Module):
    """The Mamba-2 (SSD) mixer (see the module docstring for the computation).

    Parameters
    ----------
    d_model : int
        Width of the input and output.
    d_state : int
        N, the state size per head.
    headdim : int
        P, the width of a head; must divide ``expand * d_model``.
    expand : int
        ``d_inner = expand * d_model``.
    ngroups : int
        Groups of B and C, shared by ``nheads / ngroups`` heads each; must divide ``nheads``.
    d_conv : int
        Taps of the causal convolution.
    chunk_size : int
        Q of the chunked SSD algorithm.
    dt_min, dt_max, dt_init_floor : float
        ``dt_bias`` starts at ``softplus^{-1}(dt)`` for ``dt`` log-uniform in
        ``[dt_min, dt_max]`` (at least ``dt_init_floor``).
    A_init_range : (float, float)
        ``-A`` starts uniform in this range (``A_log = log(-A)``).
    bias : bool
        Biases in the input and output projections.
    conv_bias : bool
        Bias in the convolution.
    norm_eps : float
        ``eps`` of the gated RMSNorm.
    device, dtype : optional
        Of the parameters, except ``A_log`` and ``dt_bias``, created in at least
        float32 (``module.to(dtype)`` converts them like any parameter); ``A``,
        ``dt`` and the SSD product are computed in at least float32 whatever the dtype.

    Notes
    -----
    Cost per token: the projections, O(d_model * d_inner), dominate; the SSD
    product is O(Q (N + P) + N P) per head and token (chunked), the convolution
    O(d_conv) per channel. Decoding a token costs the same without the Q term.

    Examples
    --------
    >>> import torch, semisep.nn as ssnn
    >>> layer = ssnn.Mamba2(d_model=16, d_state=8, headdim=8, chunk_size=4)
    >>> layer(torch.randn(2, 10, 16)).shape
    torch.Size([2, 10, 16])
    """

    def __init__(self, d_model: int, d_state: int = 128, headdim: int = 64, expand: int = 2,
                 ngroups: int = 1, d_conv: int = 4, chunk_size: int = 64, *,
                 dt_min: float = 1e-3, dt_max: float = 1e-1, dt_init_floor: float = 1e-4,
                 A_init_range: tuple = (1.0, 16.0), bias: bool = False, conv_bias: bool = True,
                 norm_eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        d_model = check_positive_int("d_model", d_model)
        self.d_model = d_model
        self.d_state = check_positive_int("d_state", d_state)
        self.headdim = check_positive_int("headdim", headdim)
        self.expand = check_positive_int("expand", expand)
        self.ngroups = check_positive_int("ngroups", ngroups)
        self.d_conv = check_positive_int("d_conv", d_conv)
        self.chunk_size = check_positive_int("chunk_size", chunk_size)
        self.d_inner = expand * d_model
        if self.d_inner % headdim:
            raise ValueError(f"headdim must divide expand * d_model = {expand} * {d_model} = "
                             f"{self.d_inner}, got headdim={headdim}")
        self.nheads = self.d_inner // headdim
        if self.nheads % ngroups:
            raise ValueError(f"ngroups must divide the number of heads {self.nheads} "
                             f"(= expand * d_model / headdim), got ngroups={ngroups}")
        factory = {"device": device, "dtype": dtype}
        self.conv_dim = self.d_inner + 2 * ngroups * d_state
        self.in_proj = nn.Linear(d_model, self.d_inner + self.conv_dim + self.nheads, bias=bias,
                                 **factory)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, d_conv, groups=self.conv_dim,
                                bias=conv_bias, **factory)
        decay_factory = {"device": device, "dtype": fp32_or_wider(dtype)}
        self.dt_bias = nn.Parameter(dt_bias_init(self.nheads, dt_min, dt_max, dt_init_floor,
                                                 **decay_factory))
        self.A_log = nn.Parameter(a_log_init(self.nheads, *A_init_range, **decay_factory))
        self.D = nn.Parameter(torch.ones(self.nheads, **factory))
        for p in (self.dt_bias, self.A_log, self.D):
            p._no_weight_decay = True
        self.norm = GatedRMSNorm(self.d_inner, eps=norm_eps, group_size=self.d_inner // ngroups,
                                 **factory)
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=bias, **factory)

    def allocate_cache(self, batch: int, dtype: torch.dtype | None = None) -> Mamba2Cache:
        """A fresh decoding cache (zero state) for ``batch`` sequences.

        ``conv_state`` is in ``dtype`` (the parameters' by default), ``ssm_state``
        in at least float32.
        """
        batch = check_positive_int("batch", batch)
        dtype = self.in_proj.weight.dtype if dtype is None else dtype
        device = self.in_proj.weight.device
        return Mamba2Cache(
            torch.zeros(batch, self.d_conv - 1, self.conv_dim, device=device, dtype=dtype),
            torch.zeros(batch, self.nheads, self.headdim, self.d_state, device=device,
                        dtype=fp32_or_wider(dtype)))

    def forward(self, u: torch.Tensor, *, seq_idx=None, cu_seqlens=None,
                cache: Mamba2Cache | None = None, return_cache: bool = False, cp_group=None):
        """Mix ``u`` along the sequence.

        Parameters
        ----------
        u : tensor, shape ``(batch, T, d_model)``
        seq_idx : int tensor, shape ``(batch, T)``, optional
            Packed sequences: a new one starts wherever the label changes.
        cu_seqlens : int tensor, shape ``(n_seq + 1,)``, optional
            Packed sequences of a batch of one (see :mod:`semisep.nn.packing`).
            Either way the result equals running each sequence alone.
        cache : Mamba2Cache, optional
            Continue from this state (e.g. a previous call's, for chunked prefill);
            read, never modified. In a packed row it feeds the first sequence.
        return_cache : bool
            Also return the cache after the last token (not with packed sequences).
        cp_group : ProcessGroup, optional
            Context parallelism: ``u`` is this rank's slice of a sequence split
            along T over the ranks of ``cp_group``, in rank order (see
            :mod:`semisep.distributed`; ``torch.distributed.group.WORLD`` for all
            ranks). The convolution reads the previous ranks' last tokens and the
            SSD their states; the output is this slice of the whole sequence's.
            ``seq_idx`` then holds global labels (``cu_seqlens`` is refused), a
            ``cache`` is read on rank 0 only and ``return_cache`` gives the cache
            after this rank's slice.

        Returns
        -------
        y : tensor, shape ``(batch, T, d_model)``
        cache : Mamba2Cache, only with ``return_cache=True``
        """
        if u.ndim != 3 or u.shape[-1] != self.d_model:
            raise ValueError(f"u must have shape (batch, T, {self.d_model}), "
                             f"got shape {shape_str(u.shape)}")
        b, T, _ = u.shape
        seq_idx = resolve_packing(seq_idx, cu_seqlens, b, T, u.device)
        if cp_group is not None and cu_seqlens is not None:
            raise ValueError("cu_seqlens describes one rank's slice only; with cp_group pass "
                             "seq_idx, this slice of labels shared by the whole sequence")
        if return_cache and seq_idx is not None:
            raise ValueError("return_cache=True needs one sequence per row; with seq_idx or "
                             "cu_seqlens the state of each packed sequence is not returned")
        conv_state = ssm_state = None
        if cache is not None:
            check_cache(cache, Mamba2Cache,
                        {"conv_state": (b, self.d_conv - 1, self.conv_dim),
                         "ssm_state": (b, self.nheads, self.headdim, self.d_state)}, "Mamba2")
            conv_state, ssm_state = cache.conv_state, cache.ssm_state

        z, xBC, dt = self.in_proj(u).split([self.d_inner, self.conv_dim, self.nheads], dim=-1)
        mix = ssd
        if cp_group is not None:
            mix = functools.partial(distributed.ssd, group=cp_group)
            if self.d_conv > 1:
                conv_state = distributed.previous_tokens(xBC, self.d_conv - 1, group=cp_group,
                                                         first=conv_state, seq_idx=seq_idx)
        xBC, conv_state = causal_conv1d(
            xBC, self.conv1d.weight[:, 0], self.conv1d.bias, state=conv_state,
            segments=None if seq_idx is None else segment_ids(seq_idx))
        x, B, C = F.silu(xBC).split(
            [self.d_inner, self.ngroups * self.d_state, self.ngroups * self.d_state], dim=-1)
        out = mix(x.reshape(b, T, self.nheads, self.headdim),
                  B=B.reshape(b, T, self.ngroups, self.d_state),
                  C=C.reshape(b, T, self.ngroups, self.d_state),
                  dt=dt, A=-torch.exp(at_least_fp32(self.A_log)), D=self.D,
                  dt_bias=self.dt_bias, dt_softplus=True, seq_idx=seq_idx,
                  chunk_size=self.chunk_size, initial_state=ssm_state,
                  return_final_state=return_cache)
        y, ssm_state = out if return_cache else (out, None)
        y = self.out_proj(self.norm(y.reshape(b, T, self.d_inner), z))
        return (y, Mamba2Cache(conv_state, ssm_state)) if return_cache else y

    def step(self, u_t: torch.Tensor, cache: Mamba2Cache) -> torch.Tensor:
        """Decode one token: ``u_t`` of shape ``(batch, d_model)`` -> ``(batch, d_model)``.

        ``cache`` (from :meth:`allocate_cache` or ``forward(..., return_cache=True)``)
        is advanced by one token: its tensors are replaced by the new ones.
        Stepping through a sequence gives :meth:`forward`'s output.
        """
        if u_t.ndim != 2 or u_t.shape[-1] != self.d_model:
            raise ValueError(f"u_t must have shape (batch, {self.d_model}), "
                             f"got shape {shape_str(u_t.shape)}")
        check_cache(cache, Mamba2Cache, {}, "Mamba2")   # forward would take None as "no cache"
        y, new = self.forward(u_t[:, None], cache=cache, return_cache=True)
        cache.conv_state, cache.ssm_state = new.conv_state, new.ssm_state
        return y[:, 0]

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, d_state={self.d_state}, headdim={self.headdim}, "
                f"nheads={self.nheads}, ngroups={self.ngroups}, d_conv={self.d_conv}, "
                f"chunk_size={self.chunk_size}")

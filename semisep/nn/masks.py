"""Mask modules: what :class:`semisep.nn.MaskedAttention` asks for its mask.

A mask module is any callable (typically an ``nn.Module``, so its parameters
train with the layer) that maps the layer's input ``x`` of shape ``(batch, T,
d_model)`` to a structured matrix of shape broadcasting with ``(batch,
n_heads, T, T)``: a mask of :mod:`semisep.masks`, a :class:`~semisep.OneSS`,
an :class:`~semisep.SSS` or a user's own object with the matrix protocol.

A mask module is *recurrent* when it also has

* ``log_decays(x)``, returning log-decays ``(batch, n_heads or 1, T)`` whose
  1-SS matrix ``OneSS.from_log(log_decays(x))`` is its mask, the decay at
  token ``t`` depending on ``x_t`` alone; or
* ``state_size``, an int ``N_L``: its ``forward(x)`` returns an
  :class:`~semisep.SSS` of that state size (a :class:`~semisep.OneSS` when
  ``N_L = 1``) whose step ``t`` (``A_t, b_t, c_t``) depends on ``x_t`` alone.

Decoding sees one token at a time, hence "``x_t`` alone". Then the layer can
decode token by token (the dual SSM ``masked(L, Q, K).to_sss()``, of state
size ``N_L d_key``, carries the state) and pack sequences (``A_t = 0``, a
``-inf`` log-decay, at each start). A fixed matrix with an SSS form (an
:class:`~semisep.SSS`, :class:`~semisep.OneSS`, ``masks.Causal`` or
``masks.Decay``) is recurrent too (:class:`FixedSSSMask`), its steps fixed by
position: it decodes, but does not pack.

================  ==========================  =============  ==================
module            mask                        parameters     recurrent
================  ==========================  =============  ==================
CausalMask        ``masks.Causal(T)``         none           yes (``a = 1``)
DecayMask         ``masks.Decay(gamma, T)``   ``gamma`` (h,) yes (``a = gamma``)
SelectiveMask     ``OneSS.from_log(log_a)``   projection     yes (``a_t`` from ``x_t``)
ToeplitzMask      ``masks.Toeplitz(alpha)``   ``alpha``      no
FixedMask         a given matrix              none           no
FixedSSSMask      a given SSS-form matrix     none           yes (by position)
================  ==========================  =============  ==================
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .. import masks
from .._checks import as_array, check_min_ndim, check_positive_int, shape_str
from ..matrix import Dense
from ..oness import OneSS
from ..sss import SSS
from ._dtypes import at_least_fp32, fp32_or_wider
from .init import a_log_init, dt_bias_init


class CausalMask(nn.Module):
    """The causal mask (lower-triangular ones): plain causal linear attention."""

    def forward(self, x: torch.Tensor) -> masks.Causal:
        return masks.Causal(x.shape[1], dtype=x.dtype)

    def log_decays(self, x: torch.Tensor) -> torch.Tensor:
        """Zeros ``(batch, 1, T)``: ``a_t = 1``."""
        return x.new_zeros(x.shape[0], 1, x.shape[1], dtype=fp32_or_wider(x.dtype))


class DecayMask(nn.Module):
    """RetNet's decay mask ``gamma_h^(i - j)``, one fixed ``gamma`` per head.

    Parameters
    ----------
    n_heads : int
    gamma : array, shape ``(n_heads,)``, optional
        In ``(0, 1]``; RetNet's multi-scale ``1 - 2^(-5 - h)`` by default.
    learnable : bool
        Train ``gamma`` (kept as ``log(gamma)``, so it stays in ``(0, 1]`` only
        if the optimizer keeps ``log_gamma <= 0``) instead of fixing it.
    """

    def __init__(self, n_heads: int, gamma=None, *, learnable: bool = False, device=None):
        super().__init__()
        n_heads = check_positive_int("n_heads", n_heads)
        if gamma is None:
            gamma = 1 - 2.0 ** (-5 - torch.arange(n_heads, dtype=torch.float64))
        gamma = torch.as_tensor(gamma, dtype=torch.float32, device=device)
        if tuple(gamma.shape) != (n_heads,) or not bool(((gamma > 0) & (gamma <= 1)).all()):
            raise ValueError(f"gamma must have shape ({n_heads},) with values in (0, 1], "
                             f"got shape {tuple(gamma.shape)} with values {gamma.tolist()}")
        log_gamma = torch.log(gamma)
        if learnable:
            self.log_gamma = nn.Parameter(log_gamma)
        else:
            self.register_buffer("log_gamma", log_gamma)

    def forward(self, x: torch.Tensor) -> masks.Decay:
        return masks.Decay(torch.exp(self.log_gamma.to(fp32_or_wider(x.dtype))), x.shape[1])

    def log_decays(self, x: torch.Tensor) -> torch.Tensor:
        """``log gamma`` for every token, ``(batch, n_heads, T)``."""
        log_gamma = self.log_gamma.to(fp32_or_wider(x.dtype))
        return log_gamma[:, None].expand(x.shape[0], -1, x.shape[1])


class SelectiveMask(nn.Module):
    """An input-dependent 1-SS mask: a decay per token and head, projected from ``x``.

    ``log a_t = -exp(A_log) * softplus(x_t W + dt_bias)`` (Mamba-2's
    parametrization of the decay, with a scalar rate per head), so ``a_t`` is in
    ``(0, 1]`` and a head can hold or forget its state depending on the token.

    Parameters
    ----------
    d_model, n_heads : int
    dt_min, dt_max : float
        Range of the initial ``softplus(dt_bias)`` (log-uniform).
    A_init_range : (float, float)
        Range of the initial rates ``exp(A_log)``.
    """

    def __init__(self, d_model: int, n_heads: int, *, dt_min: float = 1e-3,
                 dt_max: float = 1e-1, A_init_range: tuple = (1.0, 16.0), device=None,
                 dtype=None):
        super().__init__()
        n_heads = check_positive_int("n_heads", n_heads)
        self.proj = nn.Linear(check_positive_int("d_model", d_model), n_heads, bias=False,
                              device=device, dtype=dtype)
        factory = {"device": device, "dtype": fp32_or_wider(dtype)}
        self.dt_bias = nn.Parameter(dt_bias_init(n_heads, dt_min, dt_max, **factory))
        self.A_log = nn.Parameter(a_log_init(n_heads, *A_init_range, **factory))

    def forward(self, x: torch.Tensor) -> OneSS:
        return OneSS.from_log(self.log_decays(x))

    def log_decays(self, x: torch.Tensor) -> torch.Tensor:
        """``(batch, n_heads, T)`` log-decays, ``<= 0``, in at least float32."""
        dt = F.softplus(at_least_fp32(self.proj(x)) + self.dt_bias)
        return (-torch.exp(at_least_fp32(self.A_log)) * dt).transpose(1, 2)


class ToeplitzMask(nn.Module):
    """A learnable causal Toeplitz mask ``alpha_h[i - j]`` per head (not recurrent).

    Parameters
    ----------
    n_heads : int
    max_len : int
        The longest sequence; ``alpha`` has shape ``(n_heads, max_len)``.
    gamma : array, shape ``(n_heads,)``, optional
        ``alpha`` starts as ``gamma_h ** lag`` (the decay mask); RetNet's
        multi-scale gammas by default.
    """

    def __init__(self, n_heads: int, max_len: int, gamma=None, *, device=None, dtype=None):
        super().__init__()
        n_heads = check_positive_int("n_heads", n_heads)
        self.max_len = check_positive_int("max_len", max_len)
        if gamma is None:
            gamma = 1 - 2.0 ** (-5 - torch.arange(n_heads, dtype=torch.float64))
        gamma = torch.as_tensor(gamma, dtype=torch.float64)
        if tuple(gamma.shape) != (n_heads,):
            raise ValueError(f"gamma must have shape ({n_heads},) (one per head), got shape "
                             f"{shape_str(gamma.shape)}")
        lags = torch.arange(max_len, dtype=torch.float64)
        alpha = gamma[:, None] ** lags
        self.alpha = nn.Parameter(alpha.to(device=device, dtype=dtype or torch.float32))

    def forward(self, x: torch.Tensor) -> masks.Toeplitz:
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(f"x must have at most max_len={self.max_len} tokens for this "
                             f"ToeplitzMask, got T={T}")
        return masks.Toeplitz(self.alpha[:, :T])


def make_mask(mask, d_model: int, n_heads: int, max_len: int | None, device=None, dtype=None):
    """The mask module a :class:`MaskedAttention` argument ``mask`` names.

    ``"causal"``, ``"decay"``, ``"selective"``, ``"toeplitz"`` (needs ``max_len``),
    a fixed structured matrix (used as is, for inputs of its length; a
    :class:`FixedSSSMask` when it has an SSS form), a plain array (numpy or
    torch, as :class:`~semisep.Dense`), or any callable mask module (used as is).
    """
    if isinstance(mask, str):
        if mask == "causal":
            return CausalMask()
        if mask == "decay":
            return DecayMask(n_heads, device=device)
        if mask == "selective":
            return SelectiveMask(d_model, n_heads, device=device, dtype=dtype)
        if mask == "toeplitz":
            if max_len is None:
                raise ValueError("mask='toeplitz' needs max_len (the longest sequence)")
            return ToeplitzMask(n_heads, max_len, device=device, dtype=dtype)
        raise ValueError(f"mask must be one of 'causal', 'decay', 'selective', 'toeplitz', "
                         f"a structured matrix or a callable, got {mask!r}")
    if isinstance(mask, (torch.Tensor, np.ndarray)):      # a plain array: the dense mask
        check_min_ndim("mask", as_array("mask", mask), 2, "(..., T, T)")
        return FixedMask(Dense(mask))
    if hasattr(mask, "to_dense") and hasattr(mask, "shape"):
        return FixedMask(mask) if sss_form(mask) is None else FixedSSSMask(mask)
    if callable(mask):
        return mask
    raise TypeError(f"mask must be a str, a structured matrix or a callable x -> matrix, "
                    f"got {type(mask).__name__}")


class FixedMask(nn.Module):
    """A given structured matrix of shape ``(..., T, T)``, used for inputs of length T."""

    def __init__(self, matrix):
        super().__init__()
        self.matrix = matrix

    def forward(self, x: torch.Tensor):
        T = self.matrix.shape[-1]
        if x.shape[1] != T:
            raise ValueError(f"x must have T={T} tokens for this fixed mask of shape "
                             f"{tuple(self.matrix.shape)}, got T={x.shape[1]}")
        return self.matrix


class FixedSSSMask(FixedMask):
    """A given matrix with an SSS form (see :func:`sss_form`): a fixed mask that decodes.

    Its steps ``A_t, b_t, c_t`` belong to positions, not tokens: decoding reads
    the window of positions a cache has reached (:meth:`window`), and packed
    sequences are refused (each sequence would need the mask from its own start).

    Attributes
    ----------
    state_size : int
        ``N_L``, the state size of the SSS form.
    """

    def __init__(self, matrix):
        super().__init__(matrix)
        self.sss = sss_form(matrix)
        self.state_size = self.sss.state_size

    def window(self, start: int, stop: int) -> SSS:
        """The mask's principal block over positions ``[start, stop)``, as an SSS."""
        T = self.sss.seq_len
        if stop > T:
            raise ValueError(f"x must have at most {T - start} tokens after position {start} "
                             f"for this fixed mask of T={T}, got {stop - start}")
        return self.sss[..., start:stop, start:stop]


def sss_form(matrix) -> SSS | None:
    """``matrix`` as an :class:`~semisep.SSS`, or None when it has no SSS form.

    An SSS is itself; a :class:`~semisep.OneSS` (``as_sss()``) and a square
    ``masks.Causal`` or ``masks.Decay`` (``as_oness()``) have one of state size 1.
    """
    if hasattr(matrix, "as_oness"):
        try:
            matrix = matrix.as_oness()
        except ValueError:   # e.g. a non-square or shifted Causal mask
            return None
    if hasattr(matrix, "as_sss"):
        matrix = matrix.as_sss()
    return matrix if isinstance(matrix, SSS) else None


def with_resets(L: SSS, starts: torch.Tensor) -> SSS:
    """``L`` with ``A_t = 0`` (a ``-inf`` log-decay) wherever ``starts[b, t]``.

    Parameters
    ----------
    L : SSS, shape broadcasting with ``(batch, n_heads, T, T)``
    starts : bool tensor, shape ``(batch, T)``

    Returns
    -------
    SSS of batch ``(batch, ...)``: no entry of the mask crosses a start.
    """
    log = L.log_a is not None
    A = torch.as_tensor(L.log_a if log else L.A, device=starts.device)
    trailing = {"scalar": 0, "diagonal": 1, "full": 2}[L.structure]
    where = starts.reshape(starts.shape[0], 1, starts.shape[1], *(1,) * trailing)
    A = torch.where(where, torch.full((), float("-inf") if log else 0.0, dtype=A.dtype,
                                      device=A.device), A)
    return (SSS.from_log if log else SSS)(A, L.B, L.C, structure=L.structure)


def check_sss_mask(L, state_size: int, T: int) -> SSS:
    """The SSS form of a mask module's output, checked against its ``state_size`` and ``T``."""
    form = sss_form(L)
    if form is None:
        raise TypeError(f"a mask module with state_size must return an SSS (or 1-SS) matrix, "
                        f"got {type(L).__name__}")
    if form.seq_len != T:
        raise ValueError(f"the mask must have T={T} steps like x, got an SSS of shape "
                         f"{shape_str(form.shape)}")
    if form.state_size != state_size:
        raise ValueError(f"the mask must have the state size {state_size} its module declares "
                         f"(state_size), got an SSS of state size {form.state_size}")
    return form

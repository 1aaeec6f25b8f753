"""Torch layers as thin clients of semisep's matrix operations (needs torch).

* :class:`Mamba2`: the Mamba-2 (SSD) mixer, built on :func:`semisep.ssd`.
* :class:`MaskedAttention`: multi-head structured masked attention, built on
  :func:`semisep.sma`, with the mask modules of :mod:`semisep.nn.masks`.
* :class:`GatedRMSNorm`: ``norm(y * silu(z))``.
* :class:`Mamba2Cache`, :class:`AttentionCache`: decoding state (``allocate_cache``,
  ``step``, ``forward(..., return_cache=True)``).
* :mod:`semisep.nn.packing`: packed variable-length batches (``cu_seqlens``, ``seq_idx``).
"""

from .cache import AttentionCache, Mamba2Cache
from .mamba2 import Mamba2
from .masked_attention import MaskedAttention
from .masks import CausalMask, DecayMask, SelectiveMask, ToeplitzMask
from .norm import GatedRMSNorm
from .packing import seq_idx_from_cu_seqlens

__all__ = ["AttentionCache", "CausalMask", "DecayMask", "GatedRMSNorm", "Mamba2", "Mamba2Cache",
           "MaskedAttention", "SelectiveMask", "ToeplitzMask", "seq_idx_from_cu_seqlens"]

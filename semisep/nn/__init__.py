"""Torch layers as thin clients of semisep's matrix operations (needs torch).

* :class:`Mamba2`: the Mamba-2 (SSD) mixer, built on :func:`semisep.ssd`.
* :class:`GatedRMSNorm`: ``norm(y * silu(z))``.
* :class:`Mamba2Cache`: decoding state (``allocate_cache``, ``step``, ``forward(..., return_cache=True)``).
* :mod:`semisep.nn.packing`: packed variable-length batches (``cu_seqlens``, ``seq_idx``).
"""

from .cache import Mamba2Cache
from .mamba2 import Mamba2
from .norm import GatedRMSNorm
from .packing import seq_idx_from_cu_seqlens

__all__ = ["GatedRMSNorm", "Mamba2", "Mamba2Cache", "seq_idx_from_cu_seqlens"]

"""Packed variable-length batches: ``cu_seqlens`` and ``seq_idx``.

Several sequences can share one row of a batch, one after another, with no
padding. Two equivalent descriptions:

* ``cu_seqlens``: int, shape ``(n_seq + 1,)``, the cumulative lengths
  ``0 = c_0 <= c_1 <= ... <= c_n = T`` of the sequences packed in a batch of one
  (sequence ``s`` is ``[c_s, c_{s+1})``), as in FlashAttention's varlen API;
* ``seq_idx``: int, shape ``(batch, T)``, a sequence label per token; a new
  sequence starts wherever the label changes.

The layers turn either into ``seq_idx`` (what :func:`semisep.ssd` takes) and,
for their convolutions, into :func:`segment_ids`.
"""

from __future__ import annotations

import torch

from .._checks import shape_str


def seq_idx_from_cu_seqlens(cu_seqlens, seqlen: int, *, device=None) -> torch.Tensor:
    """The ``(1, seqlen)`` labels of the sequences that ``cu_seqlens`` packs.

    Parameters
    ----------
    cu_seqlens : int array, shape ``(n_seq + 1,)``
        Starts at 0, never decreases, ends at ``seqlen``.
    seqlen : int
        The length T of the packed row.

    Returns
    -------
    seq_idx : int64 tensor, shape ``(1, seqlen)``

    Examples
    --------
    >>> seq_idx_from_cu_seqlens(torch.tensor([0, 2, 5]), 5)
    tensor([[0, 0, 1, 1, 1]])
    """
    cu = torch.as_tensor(cu_seqlens, device=device)
    if cu.dtype.is_floating_point or cu.dtype.is_complex or cu.dtype == torch.bool:
        raise TypeError(f"cu_seqlens must be an int array, got dtype {cu.dtype}")
    if cu.ndim != 1 or cu.shape[0] < 2:
        raise ValueError(f"cu_seqlens must have shape (n_seq + 1,) with n_seq >= 1, "
                         f"got shape {shape_str(cu.shape)}")
    if int(cu[0]) != 0 or int(cu[-1]) != seqlen:
        raise ValueError(f"cu_seqlens must run from 0 to the sequence length {seqlen}, "
                         f"got {cu[0].item()} ... {cu[-1].item()}")
    if bool((cu[1:] < cu[:-1]).any()):
        raise ValueError(f"cu_seqlens must be non-decreasing, got {cu.tolist()}")
    positions = torch.arange(seqlen, device=cu.device)
    return (torch.searchsorted(cu[1:].contiguous(), positions, right=True)[None]).to(torch.long)


def check_seq_idx(seq_idx, batch: int, seqlen: int) -> torch.Tensor:
    """``seq_idx`` as a tensor after checking its shape ``(batch, seqlen)`` and int dtype."""
    seq_idx = torch.as_tensor(seq_idx)
    if seq_idx.dtype.is_floating_point or seq_idx.dtype.is_complex:
        raise TypeError(f"seq_idx must be an int array, got dtype {seq_idx.dtype}")
    if tuple(seq_idx.shape) != (batch, seqlen):
        raise ValueError(f"seq_idx must have shape ({batch}, {seqlen}), "
                         f"got shape {shape_str(seq_idx.shape)}")
    return seq_idx


def resolve_packing(seq_idx, cu_seqlens, batch: int, seqlen: int, device) -> torch.Tensor | None:
    """The ``(batch, seqlen)`` labels from either description (at most one may be given)."""
    if cu_seqlens is not None:
        if seq_idx is not None:
            raise ValueError("pass cu_seqlens or seq_idx, not both")
        if batch != 1:
            raise ValueError(f"cu_seqlens packs sequences into a batch of one, got x of batch "
                             f"{batch}; use seq_idx of shape ({batch}, {seqlen}) for several rows")
        return seq_idx_from_cu_seqlens(cu_seqlens, seqlen, device=device)
    if seq_idx is None:
        return None
    return check_seq_idx(seq_idx, batch, seqlen).to(device)


def segment_ids(seq_idx: torch.Tensor) -> torch.Tensor:
    """Labels ``0, 1, 2, ...`` that grow by one at every change of ``seq_idx`` along T.

    Two tokens belong to the same sequence exactly when their segment ids are
    equal (a label reused later, e.g. ``0, 0, 1, 0``, is a new sequence).
    """
    changes = (seq_idx[:, 1:] != seq_idx[:, :-1]).to(torch.long)
    return torch.cat([changes.new_zeros(changes.shape[0], 1), changes.cumsum(dim=1)], dim=1)

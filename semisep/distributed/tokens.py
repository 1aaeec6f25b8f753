"""The last few steps before this rank's slice, from the ranks before it (for short convolutions).

A causal convolution of ``K`` taps at the first steps of a slice reads the
``K - 1`` steps before it, which live on the previous rank, or on several
previous ranks when slices are shorter than ``K - 1``. Each rank sends the
last ``min(count, T_r)`` steps of its slice (rank 0: of ``[first, x_0]``,
``first`` standing for the steps before the sequence) in one ``all_gather``
of ``b * count * c`` numbers; each rank then assembles its own ``count``
steps, newest from the nearest rank. The backward gathers the gradients the
same way and each rank adds up those that fall on the steps it sent.
"""

from __future__ import annotations

import torch

from .._checks import check_positive_int, check_shape, shape_str
from .group import (agree, all_gather, collective_device, dtype_code, require_all_or_none,
                    require_equal, resolve_group, show_dtype)


def previous_tokens(x, count: int, *, group=None, first=None, seq_idx=None):
    """The ``count`` steps before this rank's slice of a sequence split over ``group``.

    Parameters
    ----------
    x : tensor, shape ``(b, T_r, c)``
        This rank's slice (T_r >= 1; ``b``, ``c`` and the dtype agree across ranks).
    count : int
        How many steps (``K - 1`` for a convolution of ``K`` taps).
    group : ProcessGroup, optional
        The ranks sharing the sequence (default: the default group).
    first : tensor, shape ``(b, count, c)``, optional
        The steps before the whole sequence (e.g. a convolution state), oldest
        first; rank 0 only. Zeros when omitted.
    seq_idx : int tensor, shape ``(b, T_r)``, optional
        This rank's slice of the global packed-sequence labels: steps of an
        earlier sequence than this slice's first step come back as zeros.

    Returns
    -------
    tensor, shape ``(b, count, c)``, oldest first
        On rank 0, ``first`` (or zeros). Differentiable; as every collective
        backward, every rank must run the backward pass.

    Notes
    -----
    Communication: one ``all_gather`` of ``b * count * c`` numbers (and of
    ``b * count`` labels with ``seq_idx``) forward, the same backward, plus the
    agreement check: O(world * b * count * c), independent of T.
    """
    group, rank, world = resolve_group(group)
    error = None
    fields = {"b": 0, "T": 0, "c": 0, "count": 0, "dtype": 0, "first": first is not None,
              "seq_idx": seq_idx is not None, "grad": False}
    try:
        for name, value in (("x", x), ("first", first), ("seq_idx", seq_idx)):
            if value is not None and not isinstance(value, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor (semisep.distributed runs on "
                                f"torch.distributed), got {type(value).__name__}")
        if x.ndim != 3:
            raise ValueError(f"x must have shape (batch, T, channels), got shape "
                             f"{shape_str(x.shape)}")
        count = check_positive_int("count", count)
        b, T, c = x.shape
        if first is not None:
            check_shape("first", first, (b, count, c), f"({b}, {count}, {c})")
        if seq_idx is not None:
            check_shape("seq_idx", seq_idx, (b, T), f"({b}, {T})")
        fields.update(b=b, T=T, c=c, count=count, dtype=dtype_code(x.dtype),
                      grad=torch.is_grad_enabled() and (x.requires_grad or (
                          first is not None and first.requires_grad)))
    except (ValueError, TypeError) as exc:
        error = exc
    descs = agree(group, world, collective_device(group, x), fields, error)
    require_equal(descs, ("b", "c", "count"), "x", "(batch, channels) and count")
    require_equal(descs, ("dtype",), "x", "dtype", show_dtype)
    require_all_or_none(descs, "seq_idx", "seq_idx was given")
    require_all_or_none(descs, "grad", "the inputs require grad (so a backward pass, which "
                                       "exchanges gradients between ranks, will follow)")
    empty = [r for r, d in enumerate(descs) if d["T"] == 0]
    if empty:
        raise ValueError(f"x must hold at least one step on every rank, got T = 0 on "
                         f"rank(s) {empty}")
    late = [r for r, d in enumerate(descs) if d["first"] and r > 0]
    if late:
        raise ValueError(f"first holds the steps before the whole sequence and is read on rank 0 "
                         f"only; pass None on the other ranks, got one on rank(s) {late}")

    if rank == 0:
        start = x.new_zeros(b, count, c) if first is None else first.to(x.dtype)
        tail = torch.cat([start, x], dim=1)[:, -count:]
    else:
        tail = torch.cat([x.new_zeros(b, max(count - T, 0), c), x[:, -count:]], dim=1)
    pieces = _pieces([count] + [min(count, d["T"]) for d in descs[1:]], count)
    out = _PreviousTokens.apply(tail, start if rank == 0 else None, pieces, group, rank, world)
    if seq_idx is None:
        return out
    labels = seq_idx.to(torch.int64)
    if rank == 0:      # ``first`` belongs to the first sequence
        sent = torch.cat([labels[:, :1].expand(b, count), labels], dim=1)[:, -count:]
    else:
        sent = torch.cat([labels.new_zeros(b, max(count - T, 0)), labels[:, -count:]], dim=1)
    gathered = all_gather(sent, group, world)
    tails = labels[:, :1].expand(b, count) if rank == 0 else _assemble(gathered, pieces[rank])
    stream = torch.cat([tails, labels[:, :1]], dim=1)
    changed = (stream[:, 1:] != stream[:, :-1]).flip(1).cumsum(1).flip(1)
    return out * (changed == 0).to(out.dtype)[..., None]


def _pieces(lengths: list, count: int) -> list:
    """For every rank: where its ``count`` steps come from.

    ``lengths[q]`` is how many of rank ``q``'s sent steps are real (the last
    ones; rank 0 sends ``count``). Returns, per rank, a list of
    ``(q, src, dst)``: ``src`` and ``dst`` slices along the step axis.
    """
    out = []
    for r in range(len(lengths)):
        need, found = count, []
        for q in range(r - 1, -1, -1):
            if need == 0:
                break
            take = min(need, lengths[q])
            found.append((q, slice(count - take, count), slice(need - take, need)))
            need -= take
        out.append(found)
    return out


def _assemble(gathered: torch.Tensor, pieces: list) -> torch.Tensor:
    """One rank's ``count`` steps from the gathered tails (``pieces`` from :func:`_pieces`)."""
    out = gathered.new_empty(gathered.shape[1:])
    for q, src, dst in pieces:
        out[:, dst] = gathered[q][:, src]
    return out


class _PreviousTokens(torch.autograd.Function):
    """Gather every rank's tail and assemble this rank's steps; backward, the reverse."""

    @staticmethod
    def forward(ctx, tail, start, pieces, group, rank, world):
        ctx.pieces, ctx.group, ctx.rank, ctx.world = pieces, group, rank, world
        gathered = all_gather(tail, group, world)
        return start.clone() if rank == 0 else _assemble(gathered, pieces[rank])

    @staticmethod
    def backward(ctx, grad):
        grads = all_gather(grad, ctx.group, ctx.world)
        grad_tail = torch.zeros_like(grad)
        for r in range(ctx.rank + 1, ctx.world):
            for q, src, dst in ctx.pieces[r]:
                if q == ctx.rank:
                    grad_tail[:, src] += grads[r][:, dst]
        grad_start = grad if ctx.rank == 0 else None
        return grad_tail, grad_start, None, None, None, None

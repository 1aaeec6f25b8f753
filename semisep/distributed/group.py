"""The process group a context-parallel call runs over, and the check that its ranks agree.

Every collective must be entered by every rank of the group with tensors of the
same size, or the group hangs. So before any state is exchanged, each rank
validates its own arguments and the ranks compare a few small integers (the
sizes that must agree, which optional arguments were given, whether a backward
pass will follow) in one ``all_gather``. An error found on any rank is then
raised on every rank, before the first collective that could hang.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .._checks import shape_str


def resolve_group(group):
    """``(group, rank, world)`` for ``group`` (None: the default group).

    Raises
    ------
    ValueError
        When torch.distributed is not initialised, or this process is not in ``group``.
    """
    if not dist.is_available():
        raise ValueError("group: this torch build has no torch.distributed")
    if not dist.is_initialized():
        raise ValueError("group: torch.distributed is not initialised (call "
                         "torch.distributed.init_process_group first; group=None means the "
                         f"default group), got group={group!r}")
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError(f"group: this process (global rank {dist.get_rank()}) is not a member "
                         f"of the group it was given, got group={group!r}")
    return group, rank, dist.get_world_size(group)


def collective_device(group, like=None) -> torch.device:
    """Where the group's collectives take their tensors: ``like``'s device, else the backend's."""
    if isinstance(like, torch.Tensor):
        return like.device
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


# torch >= 2.13 names it all_gather_single; older releases all_gather_into_tensor
_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def all_gather(tensor: torch.Tensor, group, world: int) -> torch.Tensor:
    """Every rank's ``tensor``, stacked in rank order: shape ``(world,) + tensor.shape``."""
    tensor = tensor.contiguous()
    out = tensor.new_empty(world * tensor.numel())      # flat: the form every backend takes
    _gather_single(out, tensor.reshape(-1), group=group)
    return out.reshape((world,) + tuple(tensor.shape))


def agree(group, world: int, device, fields: dict, error: Exception | None) -> list:
    """Gather every rank's integer ``fields``; raise on every rank if any rank has an ``error``.

    Parameters
    ----------
    fields : dict of str to int
        The same keys, in the same order, on every rank (values may be anything
        when ``error`` is set).
    error : Exception or None
        This rank's own validation error: re-raised here after the exchange, so
        that the other ranks learn of it and raise too instead of hanging.

    Returns
    -------
    list of dict
        ``fields`` of each rank, in rank order.
    """
    row = torch.tensor([int(error is not None)] + [int(v) for v in fields.values()],
                       dtype=torch.int64, device=device)
    rows = all_gather(row, group, world).tolist()
    if error is not None:
        raise error
    failed = [r for r, values in enumerate(rows) if values[0]]
    if failed:
        raise ValueError(f"rank(s) {failed} of the group rejected their arguments (the error is "
                         f"raised there); nothing was exchanged")
    return [dict(zip(fields, values[1:])) for values in rows]


def require_equal(descs: list, keys: tuple, what: str, names: str, show=shape_str):
    """Raise a ValueError if the ranks' ``descs`` differ on ``keys`` (``names``, shown by ``show``)."""
    values = [tuple(d[k] for k in keys) for d in descs]
    if len(set(values)) > 1:
        listed = ", ".join(f"{show(v)} on rank {r}" for r, v in enumerate(values))
        raise ValueError(f"{what} must have the same {names} on every rank of the group "
                         f"(only T may differ), got {listed}")


def require_all_or_none(descs: list, key: str, what: str):
    """Raise a ValueError unless flag ``key`` is set on every rank or on none."""
    given = [r for r, d in enumerate(descs) if d[key]]
    if given and len(given) != len(descs):
        others = [r for r in range(len(descs)) if r not in given]
        raise ValueError(f"{what} on rank(s) {given} but not on rank(s) {others}; "
                         f"every rank of the group must do the same")


DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def require_state_passing(descs: list):
    """The checks every split product makes: gradients wanted on all ranks or none (the
    backward exchanges them), and an initial state on rank 0 only."""
    require_all_or_none(descs, "grad", "the inputs require grad (so a backward pass, which "
                                       "exchanges gradients between ranks, will follow)")
    late = [r for r, d in enumerate(descs) if d["initial_state"] and r > 0]
    if late:
        raise ValueError(f"initial_state is the state before the whole sequence and is read on "
                         f"rank 0 only; pass None on the other ranks, got one on rank(s) {late}")


def dtype_code(dtype) -> int:
    """A small integer for ``dtype`` (for :func:`agree`); -1 for an unlisted dtype."""
    return DTYPES.index(dtype) if dtype in DTYPES else -1


def show_dtype(codes: tuple) -> str:
    """The dtype names behind :func:`dtype_code` values."""
    return "/".join(str(DTYPES[c]) if c >= 0 else "other" for c in codes)

"""SSD over a sequence split across the ranks of a process group (context parallelism).

Each rank holds a contiguous slice of the sequence, ranks in sequence order.
The call runs in three steps:

1. locally, the slice's end state from a zero state and its total decay
   (:func:`semisep.distributed.local.ssd_end_state`, O(T h p n) work, a third
   of the SSD's);
2. across ranks, the state entering each slice
   (:func:`semisep.distributed.passing.incoming_states`: one ``all_gather`` of
   ``b * h * (p * n + 1)`` numbers per rank, independent of T);
3. locally, :func:`semisep.ssd` on the slice, started from that state.

Step 3 is the only place outputs are formed, so they are exactly the
single-process outputs at this rank's positions, with every option of
:func:`semisep.ssd` (``dt``, ``D``, ``z``, ``seq_idx``, any backend). The
alternative, running the SSD from zero first and adding the correction
``C_t^T (a_t ... a_start) h_in`` afterwards, costs the same work but splits the
outputs into two roundings and must know where the gate ``z`` applies; here
the correction is folded into the one SSD call by its ``initial_state``.
"""

from __future__ import annotations

import torch

from .._checks import check_decay_overflow
from ..backends import get_backend
from ..ssd import check_ssd_args, scaled_inputs, select_ssd_backend
from ..ssd import ssd as local_ssd
from .group import (agree, all_gather, collective_device, dtype_code, require_all_or_none,
                    require_equal, require_state_passing, resolve_group, show_dtype)
from .local import ssd_end_state
from .passing import incoming_states


def ssd(x, log_a=None, B=None, C=None, *, group=None, chunk_size: int | None = None,
        initial_state=None, return_final_state: bool = False, dt=None, A=None, D=None, z=None,
        dt_bias=None, dt_softplus: bool = False, seq_idx=None, algorithm: str = "auto",
        fp32_states: bool = False, backend: str | None = None):
    """:func:`semisep.ssd` on this rank's slice of a sequence split over ``group``.

    Every rank of ``group`` calls this with its own contiguous slice of T, in
    rank order (rank 0 holds the first steps); slices may have different
    lengths (at least one step each). The result on each rank is the
    single-process ``semisep.ssd`` of the whole sequence at that rank's steps.

    Parameters
    ----------
    x : tensor, shape ``(b, T_r, h, p)``
        This rank's slice; ``b``, ``h``, ``p`` (and ``g``, ``n`` of B and C, and
        the dtype) must agree across ranks, ``T_r`` may not.
    log_a, B, C, dt, A, D, z, dt_bias, dt_softplus, chunk_size, algorithm, fp32_states, backend
        As in :func:`semisep.ssd`, for this rank's slice (per-step arrays hold
        ``T_r`` steps; ``A``, ``D``, ``dt_bias`` are the same everywhere).
    group : ProcessGroup, optional
        The ranks sharing the sequence (default: the default group).
    initial_state : tensor, shape ``(b, h, p, n)``, optional
        The state before the whole sequence; rank 0 only (None on the others).
    return_final_state : bool
        Also return the state after this rank's slice; on the last rank, the
        state after the whole sequence.
    seq_idx : int tensor, shape ``(b, T_r)``, optional
        This rank's slice of the global packed-sequence labels: a sequence
        that changes exactly at a slice boundary is seen too.

    Returns
    -------
    y : tensor, shape ``(b, T_r, h, p)``, dtype of x (for bool or integer x, the
        promoted floating dtype of x, B and C)
    final_state : tensor, shape ``(b, h, p, n)``, only with ``return_final_state``

    Raises
    ------
    ValueError, TypeError
        On every rank, when any rank's arguments are invalid or disagree
        across ranks (sizes, dtype, which options are given, whether a
        backward pass will follow), before any state is exchanged; and when
        torch.distributed is not initialised.

    Notes
    -----
    Cost per rank: one local SSD plus O(T_r h p n) work for the end state;
    communication: one ``all_gather`` of ``b * h * (p * n + 1)`` numbers
    forward (each rank receives ``world`` times that), the same backward, and
    one of a dozen integers for the checks (plus ``b`` labels with
    ``seq_idx``): O(world * b * h * p * n), independent of T.

    Autograd: gradients equal the single-process ones (sum the gradients of
    shared parameters such as ``A`` or ``D`` over ranks, as data parallelism
    does). The backward exchanges state gradients, so every rank must run it.
    """
    group, rank, world = resolve_group(group)
    error = S = decay = None
    b = T = h = p = g = n = code = 0
    needs_grad = False
    try:
        named = check_ssd_args(x, log_a, B, C, initial_state=initial_state, dt=dt, A=A, D=D,
                               z=z, dt_bias=dt_bias, dt_softplus=dt_softplus,
                               seq_idx=seq_idx)
        for name, value in named.items():
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor (semisep.distributed runs on "
                                f"torch.distributed), got {type(value).__name__}")
        b, T, h, p = x.shape
        g, n = B.shape[2], B.shape[3]
        select_ssd_backend(named, chunk_size, algorithm, dt_softplus, backend)  # as the local call
        be = get_backend("torch")
        dtype = be.compute_dtype(be.result_dtype(x, B, C))
        code = dtype_code(dtype)
        xs, log_a_eff = scaled_inputs(be, x, log_a, dtype, dt=dt, A=A, dt_bias=dt_bias,
                                      dt_softplus=dt_softplus, seq_idx=seq_idx)
        check_decay_overflow("log_a" if dt is None else "dt * A", log_a_eff, dtype, axis=1)
        S, decay = ssd_end_state(xs, log_a_eff, B)
        needs_grad = S.requires_grad or decay.requires_grad or (
            initial_state is not None and initial_state.requires_grad)
    except Exception as exc:   # noqa: BLE001 - raised on this rank, agreed on by the others
        error = exc
    descs = agree(group, world, collective_device(group, x),
                  {"b": b, "h": h, "p": p, "g": g, "n": n, "dtype": code,
                   "log_a": log_a is not None, "seq_idx": seq_idx is not None,
                   "initial_state": initial_state is not None, "grad": needs_grad}, error)
    _check_agreement(descs)

    keep = None
    if seq_idx is not None:   # a new sequence at this slice's first step drops the incoming state
        last = all_gather(seq_idx[:, -1].to(torch.int64), group, world)
        keep = torch.ones(b, 1, dtype=S.dtype, device=S.device)
        if rank > 0:
            keep = (seq_idx[:, :1] == last[rank - 1][:, None]).to(S.dtype)
        decay = decay * keep
    init = None if initial_state is None else initial_state.to(S.dtype)
    h_in = incoming_states(S, decay[..., None, None], init, group, rank, world)
    if keep is not None:
        h_in = h_in * keep[..., None, None]
    return local_ssd(x, log_a, B, C, chunk_size=chunk_size, initial_state=h_in,
                     return_final_state=return_final_state, dt=dt, A=A, D=D, z=z,
                     dt_bias=dt_bias, dt_softplus=dt_softplus, seq_idx=seq_idx,
                     algorithm=algorithm, fp32_states=fp32_states, backend=backend)


def _check_agreement(descs: list):
    """Raise, identically on every rank, if the ranks' arguments cannot be combined."""
    require_equal(descs, ("b", "h", "p"), "x", "(batch, heads, headdim)")
    require_equal(descs, ("g", "n"), "B and C", "(groups, N)")
    require_equal(descs, ("dtype",), "x, B and C", "compute dtype", show_dtype)
    require_all_or_none(descs, "log_a", "log_a was given (dt and A elsewhere)")
    require_all_or_none(descs, "seq_idx", "seq_idx was given")
    require_state_passing(descs)

"""``M @ x`` for an SSS matrix whose T axis is split across the ranks of a process group.

Rank ``r`` holds ``M_r``, the SSS generators (A, B, C) of steps
``[t_r, t_{r+1})``, and the same steps of ``x``. The global product's rows
on those steps are ``M_r x_r`` plus the contribution of the state entering the
slice, which is exactly what ``M_r.matmul(x_r, initial_state=h_in)`` computes;
``h_in`` comes from the same three steps as :func:`semisep.distributed.ssd`
(local end state, one ``all_gather`` scan, local product). Scalar and diagonal
A only: their slice transitions are diagonal, so a state crosses a rank as
``(..., N, P)`` numbers; a full A would need ``N x N`` transition products.
"""

from __future__ import annotations

import torch

from .._checks import broadcast_batch, check_decay_overflow, check_trailing, shape_str
from ..backends import get_backend
from ..sss import SSS
from .group import (agree, collective_device, dtype_code, require_equal, require_state_passing,
                    resolve_group, show_dtype)
from .local import sss_end_state
from .passing import incoming_states

MAX_BATCH_DIMS = 8


def matmul(M, x, *, group=None, initial_state=None, return_final_state: bool = False,
           algorithm: str = "auto", chunk_size: int | None = None, backend: str | None = None):
    """Rows of ``M @ x`` on this rank's slice, for an SSS ``M`` split along T over ``group``.

    Parameters
    ----------
    M : SSS
        This rank's slice: scalar or diagonal A (values or log-decays), B and C
        over its ``T_r`` steps. Structure, form, ``N``, batch shape and dtype
        must agree across ranks; ``T_r`` may differ (at least one step).
    x : tensor, shape ``(..., T_r, P)`` or ``(T_r,)``
        The same steps of the right-hand side.
    group : ProcessGroup, optional
        The ranks sharing the sequence (default: the default group).
    initial_state : tensor, shape ``(..., N, P)`` (``(..., N)`` for a vector x), optional
        ``h_{-1}``, the state before the whole sequence; rank 0 only.
    return_final_state : bool
        Also return the state after this rank's slice (on the last rank, ``h_{T-1}``).
    algorithm, chunk_size, backend
        For the local product, as in :meth:`semisep.SSS.matmul`.

    Returns
    -------
    y : tensor, shape like ``x`` broadcast with M's batch
    final_state : tensor, only with ``return_final_state``

    Raises
    ------
    ValueError, TypeError
        On every rank, before any state is exchanged, when any rank's
        arguments are invalid or disagree across ranks; and when
        torch.distributed is not initialised.

    Notes
    -----
    Cost per rank: the local product plus O(T_r N P) work per batch entry;
    communication O(world * batch * N * P) forward and backward, independent
    of T. Gradients equal the single-process ones; every rank must run the
    backward pass.
    """
    group, rank, world = resolve_group(group)
    error = S = decay = init = None
    fields = {"T": 0, "N": 0, "P": 0, "vector": False, "structure": 0, "log": False,
              "dtype": 0, "initial_state": initial_state is not None, "grad": False,
              "batch_dims": 0, **{f"batch{i}": 0 for i in range(MAX_BATCH_DIMS)}}
    try:
        vector, x2, batch = _check_local(M, x, initial_state)
        M._matmul_plan(x2, initial_state, algorithm, chunk_size, backend)   # as the local call
        be = get_backend("torch")
        dtype = be.compute_dtype(be.result_dtype(M.B, M.C, x2))
        if M.log_a is not None:
            check_decay_overflow("log_a", M.log_a, dtype,
                                 axis=-1 if M.structure == "scalar" else -2)
        data = M.log_a if M.log_a is not None else M.A
        S, decay = sss_end_state(M.structure, data, M.log_a is not None, M.B, x2.to(dtype))
        S = S.broadcast_to(batch + S.shape[-2:])           # the same shapes on every rank
        decay = decay.broadcast_to(batch + decay.shape[-2:])
        if initial_state is not None:
            init = initial_state[..., None] if vector else initial_state
            init = init.to(dtype).broadcast_to(S.shape)
        fields.update(T=M.seq_len, N=M.state_size, P=x2.shape[-1], vector=vector,
                      structure=("scalar", "diagonal").index(M.structure),
                      log=M.log_a is not None, dtype=dtype_code(dtype), batch_dims=len(batch),
                      grad=S.requires_grad or decay.requires_grad or (
                          init is not None and init.requires_grad),
                      **{f"batch{i}": s for i, s in enumerate(batch)})
    except Exception as exc:   # noqa: BLE001 - raised on this rank, agreed on by the others
        error = exc
    descs = agree(group, world, collective_device(group, x), fields, error)
    batch_keys = ("batch_dims",) + tuple(f"batch{i}" for i in range(MAX_BATCH_DIMS))
    require_equal(descs, batch_keys, "M and x", "broadcast batch shape",
                  lambda v: shape_str(v[1:1 + v[0]]))
    require_equal(descs, ("N", "P", "vector"), "M and x", "(N, P, x is a vector)")
    require_equal(descs, ("structure", "log"), "M", "structure and form of A",
                  lambda v: f"{('scalar', 'diagonal')[v[0]]} A as {('values', 'log-decays')[v[1]]}")
    require_equal(descs, ("dtype",), "M and x", "compute dtype", show_dtype)
    require_state_passing(descs)

    h_in = incoming_states(S, decay, init, group, rank, world)
    return M.matmul(x, initial_state=h_in[..., 0] if vector else h_in,
                    return_final_state=return_final_state, algorithm=algorithm,
                    chunk_size=chunk_size, backend=backend)


def _check_local(M, x, initial_state):
    """``(vector, x as (..., T, P), broadcast batch)``, or the error naming the argument."""
    if not isinstance(M, SSS):
        raise TypeError(f"M must be a semisep.SSS, got {type(M).__name__}")
    if M.structure not in ("scalar", "diagonal"):
        raise ValueError(f"M must have scalar or diagonal A (a state crosses ranks as (..., N, P) "
                         f"numbers), got {M.structure} A")
    named = {"M.A": M.log_a if M.log_a is not None else M.A, "M.B": M.B, "M.C": M.C, "x": x,
             "initial_state": initial_state}
    for name, value in named.items():
        if value is not None and not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor (semisep.distributed runs on "
                            f"torch.distributed), got {type(value).__name__}")
    T, N = M.seq_len, M.state_size
    if T < 1:
        raise ValueError(f"M must hold at least one step on every rank, got T = {T}")
    vector = x.ndim == 1
    x2 = x[:, None] if vector else x
    if x2.ndim < 2 or x2.shape[-2] != T:
        raise ValueError(f"x must have shape ({T},) or (..., {T}, P) for a slice of T={T}, "
                         f"got shape {shape_str(x.shape)}")
    batch = broadcast_batch({"M": M.shape[:-2], "x": x2.shape[:-2]})
    if len(batch) > MAX_BATCH_DIMS:
        raise ValueError(f"M and x may have at most {MAX_BATCH_DIMS} batch dimensions, got "
                         f"batch shape {shape_str(batch)}")
    if initial_state is not None:
        want = (N,) if vector else (N, x2.shape[-1])
        check_trailing("initial_state", initial_state, want,
                       "(..., " + ", ".join(map(str, want)) + ")")
        lead = initial_state.shape[:initial_state.ndim - len(want)]
        if broadcast_batch({"initial_state": lead, "M and x": batch}) != batch:
            raise ValueError(f"initial_state must broadcast to the batch shape {shape_str(batch)} "
                             f"of M and x, got shape {shape_str(initial_state.shape)}")
    return vector, x2, batch

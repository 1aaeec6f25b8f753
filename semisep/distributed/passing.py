"""State passing across ranks: the state entering each rank's slice, with its backward.

Rank ``r`` holds steps ``[t_r, t_{r+1})`` of the sequence. Run from a zero
state, its slice ends in state ``S_r``; run from a state ``h``, it ends in
``d_r * h + S_r``, where ``d_r`` is the product of the slice's decays (a
scalar or a diagonal transition, broadcast over the state). The state entering
rank ``r`` is therefore the scan

    h_in_0 = h_{-1} (the initial state, zero by default),
    h_in_r = d_{r-1} h_in_{r-1} + S_{r-1}                  (r >= 1),

a 1-SS product over the ranks. Its backward is the reverse scan: with
``G_r = dL/dh_in_r``, the gradient reaching the end of slice ``q`` is
``Gbar_q = G_{q+1} + d_{q+1} Gbar_{q+1}`` (``Gbar_{world-1} = 0``), and then
``dL/dS_q = Gbar_q``, ``dL/dd_q = <Gbar_q, h_in_q>``, ``dL/dh_{-1} = G_0 + d_0 Gbar_0``:
state gradients flow from the last rank to the first.

How the scan is run: one ``all_gather`` of ``(S_r, d_r)`` (rank 0 sends
``d_0 h_{-1} + S_0``, its slice's end state), after which each rank finishes
its own prefix locally in O(r) state-sized multiply-adds; the backward
gathers the ``G_r`` the same way and each rank runs its own suffix. Each
direction is one collective round, so the latency is that of one
``all_gather`` rather than of ``world - 1`` dependent point-to-point hops (a
sequential pass) or ``2 log2(world)`` rounds (a scan over ranks); every rank
receives ``world`` states, O(world * b * h * p * n) numbers, independent of T.
"""

from __future__ import annotations

import torch

from .group import all_gather


def incoming_states(ends: torch.Tensor, decays: torch.Tensor, initial: torch.Tensor | None,
                    group, rank: int, world: int) -> torch.Tensor:
    """The state entering this rank's slice (see the module docstring); differentiable.

    Parameters
    ----------
    ends : tensor, shape ``(..., N, P)``
        ``S_r``, the end state of this rank's slice run from a zero state.
    decays : tensor, broadcastable to ``ends`` (e.g. ``(..., 1, 1)`` or ``(..., N, 1)``)
        ``d_r``, the slice's total transition; the same shape on every rank.
    initial : tensor like ``ends`` or None
        ``h_{-1}``, read on rank 0 only (None elsewhere).

    Returns
    -------
    tensor like ``ends``
        ``h_in_r``; on rank 0 the initial state (zeros when None).

    Notes
    -----
    Every rank of ``group`` must call this with tensors of the same shapes and
    dtype, and, when the result takes part in a backward pass, every rank must
    run that backward pass (it gathers the gradients the same way).
    """
    return _PassStates.apply(ends, decays, initial, group, rank, world)


class _PassStates(torch.autograd.Function):
    """The scan over ranks and its reverse (module docstring)."""

    @staticmethod
    def forward(ctx, ends, decays, initial, group, rank, world):
        sent = ends if initial is None or rank != 0 else decays * initial + ends
        gathered = all_gather(torch.cat([sent.reshape(-1), decays.reshape(-1)]), group, world)
        all_ends = gathered[:, :sent.numel()].reshape((world,) + tuple(ends.shape))
        all_decays = gathered[:, sent.numel():].reshape((world,) + tuple(decays.shape))
        if rank == 0:
            h = torch.zeros_like(ends) if initial is None else initial.clone()
        else:
            h = all_ends[0]
            for q in range(1, rank):
                h = all_decays[q] * h + all_ends[q]
        ctx.save_for_backward(all_decays, h)
        ctx.group, ctx.rank, ctx.world = group, rank, world
        ctx.decay_shape, ctx.has_initial = decays.shape, initial is not None
        return h

    @staticmethod
    def backward(ctx, grad):
        all_decays, h_in = ctx.saved_tensors
        all_grads = all_gather(grad, ctx.group, ctx.world)
        gbar = torch.zeros_like(grad)
        for s in range(ctx.world - 1, ctx.rank, -1):
            gbar = all_grads[s] + all_decays[s] * gbar
        grad_decays = (gbar * h_in).sum_to_size(ctx.decay_shape)
        grad_initial = None
        if ctx.rank == 0 and ctx.has_initial:
            grad_initial = grad + all_decays[0] * gbar
        return gbar, grad_decays, grad_initial, None, None, None

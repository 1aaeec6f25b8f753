"""Plain torch references for the Triton kernels (float64 by default).

Beside each kernel its naive twin: the same semantics written the simplest way,
used by the tests (CPU, interpreter) and by the GPU checks of the benchmark.

* :func:`ssd_reference` - the recurrence, one step at a time (exact, slow).
* :func:`ssd_reference_chunked` - the same result by the chunked algorithm in
  float64 with a cancellation-free segsum (a masked cumulative sum inside each
  chunk); fast enough for full-size checks on a GPU, differentiable by autograd.
* :func:`decode_reference` - one decode step.

Semantics (DESIGN.md, issue 5): x ``(b, T, h, p)``, log_a ``(b, T, h)``,
B and C ``(b, T, g, n)``, head ``i`` uses group ``i // (h // g)``.
``S_t = exp(log_a_t) S_{t-1} + x_t B_t^T``, ``y_t = S_t C_t``, ``S_{-1}`` the
initial state ``(b, h, p, n)``. With ``dt`` and ``A``: ``log_a = dt * A`` and the
input is ``dt * x`` (after ``dt = softplus(dt + dt_bias)`` when asked); ``D`` adds
``D * x`` (unscaled x); ``z`` gates ``y * silu(z)``; ``seq_idx`` resets the state
where it changes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def prepare(x, log_a=None, *, dt=None, A=None, dt_bias=None, dt_softplus=False,
            seq_idx=None, dtype=torch.float64):
    """``(xs, la)``: the scaled input and the log-decays the recurrence sees (Mamba-2's
    preprocessing, :func:`semisep.ssd.scaled_inputs`, in ``dtype``)."""
    from ...backends import get_backend
    from ...ssd import scaled_inputs

    return scaled_inputs(get_backend("torch"), x, log_a, dtype, dt=dt, A=A, dt_bias=dt_bias,
                         dt_softplus=dt_softplus, seq_idx=seq_idx)


def _finish(y, x, D, z, dtype):
    if D is not None:
        Dd = D.to(dtype)
        y = y + (Dd[:, None] if Dd.dim() == 1 else Dd) * x.to(dtype)
    if z is not None:
        y = y * F.silu(z.to(dtype))
    return y


def _heads(t, h):
    """Expand ``(b, T, g, n)`` to ``(b, T, h, n)``."""
    g = t.shape[2]
    return t.repeat_interleave(h // g, dim=2)


def ssd_reference(x, log_a, B, C, *, dt=None, A=None, D=None, z=None, dt_bias=None,
                  dt_softplus=False, initial_state=None, seq_idx=None, dtype=torch.float64):
    """The recurrence step by step. Returns ``(y, final_state)`` in ``dtype``."""
    b, T, h, p = x.shape
    xs, la = prepare(x, log_a, dt=dt, A=A, dt_bias=dt_bias, dt_softplus=dt_softplus,
                     seq_idx=seq_idx, dtype=dtype)
    Bh = _heads(B.to(dtype), h)
    Ch = _heads(C.to(dtype), h)
    n = B.shape[-1]
    S = (torch.zeros(b, h, p, n, dtype=dtype, device=x.device) if initial_state is None
         else initial_state.to(dtype))
    ys = []
    for t in range(T):
        S = torch.exp(la[:, t])[..., None, None] * S + xs[:, t, :, :, None] * Bh[:, t, :, None, :]
        ys.append(torch.einsum("bhpn,bhn->bhp", S, Ch[:, t]))
    y = torch.stack(ys, dim=1) if T else xs.new_zeros(b, 0, h, p)
    return _finish(y, x, D, z, dtype), S


def _segsum_exact(la):
    """``la (..., Q)`` -> ``(..., Q, Q)`` with ``[i, j] = la_{j+1} + ... + la_i`` (i >= j), -inf above.

    A masked cumulative sum: no difference of long cumulative sums, -inf safe.
    """
    Q = la.shape[-1]
    # z[..., i, j] = la_i for i > j else 0, cumsum over i
    lower = torch.tril(torch.ones(Q, Q, dtype=torch.bool, device=la.device), -1)
    zz = la[..., :, None].expand(*la.shape, Q).masked_fill(~lower, 0.0)
    seg = torch.cumsum(zz, dim=-2)
    keep = torch.tril(torch.ones(Q, Q, dtype=torch.bool, device=la.device))
    return seg.masked_fill(~keep, float("-inf"))


def ssd_reference_chunked(x, log_a, B, C, *, dt=None, A=None, D=None, z=None, dt_bias=None,
                          dt_softplus=False, initial_state=None, seq_idx=None,
                          chunk_size=64, dtype=torch.float64):
    """The chunked algorithm in ``dtype`` (differentiable). Returns ``(y, final_state)``."""
    b, T, h, p = x.shape
    n = B.shape[-1]
    xs, la = prepare(x, log_a, dt=dt, A=A, dt_bias=dt_bias, dt_softplus=dt_softplus,
                     seq_idx=seq_idx, dtype=dtype)
    Q = chunk_size
    pad = (-T) % Q
    Bh = _heads(B.to(dtype), h)
    Ch = _heads(C.to(dtype), h)
    if pad:
        xs = F.pad(xs, (0, 0, 0, 0, 0, pad))
        la = F.pad(la, (0, 0, 0, pad))
        Bh = F.pad(Bh, (0, 0, 0, 0, 0, pad))
        Ch = F.pad(Ch, (0, 0, 0, 0, 0, pad))
    c = (T + pad) // Q
    xs = xs.reshape(b, c, Q, h, p)
    la = la.reshape(b, c, Q, h).permute(0, 3, 1, 2)          # b h c Q
    Bc = Bh.reshape(b, c, Q, h, n)
    Cc = Ch.reshape(b, c, Q, h, n)
    seg = _segsum_exact(la)                                   # b h c Q Q
    L = torch.exp(seg)
    Gm = torch.einsum("bclhn,bcshn->bhcls", Cc, Bc)
    y_diag = torch.einsum("bhcls,bcshp->bclhp", Gm * L, xs)
    del Gm
    # decay from each position to the chunk end: exp(la_{j+1} + ... + la_{Q-1})
    after = torch.flip(torch.cumsum(torch.flip(la, [-1]), -1), [-1])
    after = torch.cat([after[..., 1:], torch.zeros_like(after[..., :1])], -1)
    to_end = torch.exp(after)
    states = torch.einsum("bcshn,bhcs,bcshp->bchpn", Bc, to_end, xs)
    chunk_decay = torch.exp(la.sum(-1))                       # b h c
    S = (torch.zeros(b, h, p, n, dtype=dtype, device=x.device) if initial_state is None
         else initial_state.to(dtype))
    inits = []
    for k in range(c):
        inits.append(S)
        S = chunk_decay[:, :, k, None, None] * S + states[:, k]
    S_in = torch.stack(inits, 1)                              # b c h p n
    from_start = torch.exp(torch.cumsum(la, -1))              # b h c Q (within chunk)
    y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", Cc, S_in, from_start)
    y = (y_diag + y_off).reshape(b, c * Q, h, p)[:, :T]
    return _finish(y, x, D, z, dtype), S


def decode_reference(state, x, B, C, *, log_a=None, dt=None, A=None, D=None, z=None,
                     dt_bias=None, dt_softplus=False, dtype=torch.float64):
    """One step: state ``(b, h, p, n)``, x ``(b, h, p)``, B, C ``(b, g, n)``.

    Returns ``(y, new_state)`` in ``dtype`` (the input state is not modified).
    """
    y, S = ssd_reference(x[:, None], None if log_a is None else log_a[:, None], B[:, None],
                         C[:, None], dt=None if dt is None else dt[:, None], A=A, D=D,
                         z=None if z is None else z[:, None], dt_bias=dt_bias,
                         dt_softplus=dt_softplus, initial_state=state, dtype=dtype)
    return y[:, 0], S

"""What a rank's slice does to a state: its end state from zero and its total decay.

For a slice of ``T`` steps with transitions ``a_t`` (scalar or diagonal),

    S = sum_t (a_{T-1} ... a_{t+1}) B_t x_t^T        (the end state from a zero state),
    d = a_{T-1} ... a_0                               (the total transition),

so that a slice entered in state ``h`` ends in ``d * h + S``. Both come from
the suffix products ``a_{t+1} ... a_{T-1}`` of one reversed cumulative sum of
log-decays (or cumulative product of values), taken in float64 whatever the
input dtype: an entry then carries a relative error of at most ``T`` float64
roundings (times ``|log a|`` summed, for the log form), below float32's
resolution for any practical ``T``; nothing is subtracted, and ``-inf``
log-decays (resets) give exact zeros. ``S`` is then one matmul per head.

Cost: O(T N P) work (one contraction over T) and O(T P) extra memory per head,
about a third of the chunked SSD's work at N = 2P and Q = 64.
"""

from __future__ import annotations

import torch


def suffix_decays(data: torch.Tensor, log: bool, dim: int):
    """``(to_end, total)`` along ``dim``, in float64.

    ``to_end[t] = a_{t+1} ... a_{T-1}`` (1 at ``t = T-1``) and
    ``total = a_0 ... a_{T-1}`` (``dim`` dropped), for log-decays (``log``) or
    values of ``a`` in ``data`` (``T >= 1`` along ``dim``).
    """
    data = data.to(torch.float64)
    flip = (dim,)
    if log:
        incl = torch.flip(torch.cumsum(torch.flip(data, flip), dim), flip)   # sum over s >= t
    else:
        incl = torch.flip(torch.cumprod(torch.flip(data, flip), dim), flip)  # product over s >= t
    last = torch.full_like(data.narrow(dim, 0, 1), 0.0 if log else 1.0)
    to_end = torch.cat([incl.narrow(dim, 1, data.shape[dim] - 1), last], dim)
    total = incl.select(dim, 0)
    return (torch.exp(to_end), torch.exp(total)) if log else (to_end, total)


def ssd_end_state(xs: torch.Tensor, log_a: torch.Tensor, B: torch.Tensor):
    """``(S (b, h, p, n), d (b, h))`` of an SSD slice, in ``xs``'s dtype.

    Parameters
    ----------
    xs : tensor, shape ``(b, T, h, p)``
        The SSS input (``dt * x`` for Mamba-2 arguments), in the compute dtype.
    log_a : tensor, shape ``(b, T, h)``
        Log-decays, resets included (see :func:`semisep.ssd.scaled_inputs`).
    B : tensor, shape ``(b, T, g, n)``
        Head ``i`` uses group ``i // (h // g)``.
    """
    b, T, h, p = xs.shape
    g, n = B.shape[2], B.shape[3]
    to_end, total = suffix_decays(log_a, True, 1)
    weighted = (to_end.to(xs.dtype)[..., None] * xs).reshape(b, T, g, (h // g) * p)
    S = torch.einsum("btgn,btgq->bgqn", B.to(xs.dtype), weighted)
    return S.reshape(b, h, p, n), total.to(xs.dtype)


def sss_end_state(structure: str, data: torch.Tensor, log: bool, B: torch.Tensor,
                  x: torch.Tensor):
    """``(S (..., N, P), d)`` of an SSS slice; ``d`` is ``(..., 1, 1)`` (scalar) or ``(..., N, 1)``.

    Parameters
    ----------
    structure : {"scalar", "diagonal"}
    data : tensor, shape ``(..., T)`` (scalar) or ``(..., T, N)`` (diagonal)
        Log-decays when ``log``, else the values of ``a``.
    B : tensor, shape ``(..., T, N)``
    x : tensor, shape ``(..., T, P)``, in the compute dtype
    """
    if structure == "scalar":
        to_end, total = suffix_decays(data, log, -1)
        S = torch.einsum("...tn,...tp->...np", B.to(x.dtype), to_end.to(x.dtype)[..., None] * x)
        return S, total.to(x.dtype)[..., None, None]
    to_end, total = suffix_decays(data, log, -2)
    S = torch.einsum("...tn,...tp->...np", to_end.to(x.dtype) * B.to(x.dtype), x)
    return S, total.to(x.dtype)[..., :, None]

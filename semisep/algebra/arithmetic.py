"""Sums, differences, products and scalings of SSS matrices, each an SSS matrix.

| operation | state size | structure of A | cost |
|---|---|---|---|
| `M1 + M2`, `M1 - M2` | `N1 + N2` | diagonal if neither is full, else full | O(T N^2) |
| `M1 @ M2` | `N1 + N2` | full (block upper triangular) | O(T N^2) |
| `alpha * M` | `N` | kept (A and B untouched) | O(T N) |
| `diag_scale(M, l, r)` | `N` | kept (A untouched) | O(T N) |

Here ``N = N1 + N2`` in the costs; scalar and diagonal operands are expanded to
full ``N x N`` transitions only when the result is full. The sum of two
matrices given by log-decays (``from_log``) is again given by log-decays, so
resets (``-inf``) stay exact. The state sizes are what the constructions need,
not the minimum: :meth:`SSS.compress` finds the minimum afterwards (``M + M``
compresses back to ``N``).
"""

from __future__ import annotations

import numbers

from .._checks import as_array, check_min_ndim, shape_str
from ..sss import SSS
from .generators import Workspace, as_sss, block_diagonal, check_same_length, raw_A, require_sss


def _operands(op: str, M1: SSS, M2):
    """``(workspace, M1 as SSS, M2 as SSS)`` for the binary operation ``op``, or None when
    ``M2`` is not an SSS-like matrix."""
    M1 = require_sss("M1", M1)
    M2 = as_sss(M2)
    if M2 is None:
        return None
    check_same_length("the right operand", M1, M2)
    return Workspace(op, [M1, M2]), M1, M2


def _with(ws: Workspace, M: SSS, *, B=None, C=None) -> SSS:
    """``M`` with new ``B`` and/or ``C`` (A, its structure and its form kept)."""
    be = ws.be
    B = be.asarray(M.B, like=ws.like) if B is None else B
    C = be.asarray(M.C, like=ws.like) if C is None else C
    make = SSS if M.log_a is None else SSS.from_log
    return make(be.asarray(raw_A(M), like=ws.like), B, C, structure=M.structure)


def add(M1: SSS, M2, *, sign: float = 1.0):
    """``M1 + sign * M2`` as an SSS matrix of state size ``N1 + N2``.

    The state is ``[h1; h2]``: ``A = diag(A1, A2)``, ``B = [B1; B2]``,
    ``C = [C1; sign C2]`` (the sign on the output side, so that an initial
    state ``[h1; h2]`` means each operand's own, for the difference too). Two
    scalar or diagonal A give a diagonal A (kept as log-decays when both are);
    a full operand gives a block-diagonal full A.

    Parameters
    ----------
    M1 : SSS
    M2 : SSS or OneSS
        Same T; leading dimensions broadcast.
    sign : float
        ``1.0`` for the sum, ``-1.0`` for the difference.

    Returns
    -------
    SSS, or NotImplemented when ``M2`` is not an SSS-like matrix.
    """
    ops = _operands("sss_add", M1, M2)
    if ops is None:
        return NotImplemented
    ws, M1, M2 = ops
    be = ws.be
    (B1, C1), (B2, C2) = ws.BC(M1), ws.BC(M2)
    B = ws.result(be.concat([B1, B2], axis=-1))
    C = ws.result(be.concat([C1, sign * C2], axis=-1))   # the state stays [h1; h2]
    if "full" in (M1.structure, M2.structure):
        A = block_diagonal(be, ws.full_A(M1), ws.full_A(M2))
        return SSS(A, B, C, structure="full")
    if M1.log_a is not None and M2.log_a is not None:
        log_a = be.concat([ws.decays(M1), ws.decays(M2)], axis=-1)
        return SSS.from_log(log_a, B, C, structure="diagonal")
    values = [ws.values(M) for M in (M1, M2)]
    A = be.concat([ws.batched(A if M.structure == "diagonal" else A[..., None],
                              (M.seq_len, M.state_size)) for M, A in zip((M1, M2), values)],
                  axis=-1)
    return SSS(A, B, C, structure="diagonal")


def multiply(M1: SSS, M2):
    """The product ``M1 @ M2`` as an SSS matrix of state size ``N1 + N2`` (full A).

    The cascade ``x -> M2 -> M1``: with the state ``[h1; h2]``,

    * ``A_t = [[A1_t, B1_t C2_t^T A2_t], [0, A2_t]]``,
    * ``B_t = [B1_t (C2_t^T B2_t); B2_t]``,
    * ``C_t = [C1_t; 0]``.

    An initial state ``[h1; h2]`` of the product is the pair of initial states
    of the cascade.

    Parameters
    ----------
    M1 : SSS
    M2 : SSS or OneSS
        Same T; leading dimensions broadcast.

    Returns
    -------
    SSS, or NotImplemented when ``M2`` is not an SSS-like matrix.
    """
    ops = _operands("sss_product", M1, M2)
    if ops is None:
        return NotImplemented
    ws, M1, M2 = ops
    be = ws.be
    A1, A2 = ws.full_A(M1), ws.full_A(M2)
    (B1, C1), (B2, C2) = ws.BC(M1), ws.BC(M2)
    C2A2 = (C2[..., None, :] @ A2)[..., 0, :]                               # (..., T, N2)
    top = be.concat([A1, B1[..., :, None] * C2A2[..., None, :]], axis=-1)
    bottom = be.concat([be.zeros(A2.shape[:-1] + (A1.shape[-1],), like=A2), A2], axis=-1)
    A = be.concat([top, bottom], axis=-2)
    d2 = be.sum(C2 * B2, axis=-1)
    B = be.concat([B1 * d2[..., None], B2], axis=-1)
    C = be.concat([C1, 0 * C2], axis=-1)
    return SSS(A, ws.result(B), ws.result(C), structure="full")


def scale(M: SSS, alpha) -> SSS:
    """``alpha * M`` for a real scalar ``alpha``: C is scaled, A and B are kept.

    Parameters
    ----------
    M : SSS
    alpha : real number or 0-d array
        For a diagonal scaling use :func:`diag_scale`.
    """
    M = require_sss("M", M)
    if not isinstance(alpha, numbers.Real):
        alpha = as_array("alpha", alpha)
        if alpha.ndim != 0:
            raise ValueError(f"alpha must be a scalar (use diag_scale for a diagonal), got shape "
                             f"{shape_str(alpha.shape)}")
    ws = Workspace("sss_scale", [M])
    return _with(ws, M, C=ws.result(ws.array(M.C) * ws.array(alpha)))


def diag_scale(M: SSS, left=None, right=None) -> SSS:
    """``diag(left) @ M @ diag(right)``: ``C_j <- left_j C_j``, ``B_i <- right_i B_i``.

    Parameters
    ----------
    M : SSS, shape ``(..., T, T)``
    left, right : array, shape ``(..., T)``, optional
        The diagonals; leading dimensions broadcast with M's.

    Returns
    -------
    SSS with M's A (structure and form kept) and state size.
    """
    M = require_sss("M", M)
    T = M.seq_len
    scalings, batches = {}, {}
    for name, d in (("left", left), ("right", right)):
        if d is not None:
            d = as_array(name, d)
            check_min_ndim(name, d, 1, f"(..., {T})")
            if d.shape[-1] != T:
                raise ValueError(f"{name} must have shape (..., {T}) for a matrix of T={T}, "
                                 f"got shape {shape_str(d.shape)}")
            scalings[name], batches[name] = d, d.shape[:-1]
    ws = Workspace("sss_diag_scale", [M], arrays=list(scalings.values()), batches=batches)
    B = C = None
    if "left" in scalings:
        C = ws.result(ws.array(M.C) * ws.array(scalings["left"])[..., None])
    if "right" in scalings:
        B = ws.result(ws.array(M.B) * ws.array(scalings["right"])[..., None])
    return _with(ws, M, B=B, C=C)

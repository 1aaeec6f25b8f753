"""The diagonal and the principal blocks of an SSS matrix.

A principal block ``M[i:j, i:j]`` of a causal SSS matrix is the SSS matrix of
the generators of steps ``i..j-1`` (``A_i`` becomes the unused ``A_0``): no
arithmetic, the arrays are sliced (views), A's structure and form are kept.
"""

from __future__ import annotations

from .._checks import shape_str
from ..sss import SSS
from .generators import Workspace, raw_A, require_sss


def diagonal(M: SSS):
    """The diagonal ``d_t = C_t^T B_t``, shape ``(..., T)``, in M's dtype. O(T N)."""
    M = require_sss("M", M)
    ws = Workspace("sss_diagonal", [M])
    B, C = ws.BC(M)
    return ws.result(ws.be.sum(B * C, axis=-1))


def _range(key_part, T: int, what: str):
    if not isinstance(key_part, slice):
        raise TypeError(f"key must be M[i:j, i:j] (two slices, a principal block), got "
                        f"{type(key_part).__name__} for the {what}")
    start, stop, step = key_part.indices(T)
    if step != 1:
        raise ValueError(f"key must take contiguous {what} (step 1), got step {step}")
    return start, max(stop, start)


def principal_block(M: SSS, key) -> SSS:
    """``M[i:j, i:j]`` (or ``M[..., i:j, i:j]``) as an SSS matrix of the same state size.

    Parameters
    ----------
    M : SSS, shape ``(..., T, T)``
    key : tuple of two slices, optionally after an Ellipsis
        The same non-empty range of rows and columns, step 1; negative and
        omitted bounds as in numpy.

    Returns
    -------
    SSS, shape ``(..., j - i, j - i)``
    """
    M = require_sss("M", M)
    parts = key if isinstance(key, tuple) else (key,)
    if parts and parts[0] is Ellipsis:
        parts = parts[1:]
    if len(parts) != 2:
        raise TypeError(f"key must be M[i:j, i:j] (two slices, a principal block), got {key!r}")
    T = M.seq_len
    rows, cols = _range(parts[0], T, "rows"), _range(parts[1], T, "columns")
    if rows != cols:
        raise ValueError(f"key must select a principal block (the same rows and columns): "
                         f"rows {rows[0]}:{rows[1]} and columns {cols[0]}:{cols[1]} of a "
                         f"matrix of shape {shape_str(M.shape)} give no SSS matrix")
    i, j = rows
    if j == i:
        raise ValueError(f"key must select a non-empty block, got rows {i}:{j} of a matrix of "
                         f"shape {shape_str(M.shape)}")
    time = slice(i, j)
    trailing = {"scalar": 0, "diagonal": 1, "full": 2}[M.structure]
    A = raw_A(M)[(Ellipsis, time) + (slice(None),) * trailing]
    make = SSS if M.log_a is None else SSS.from_log
    return make(A, M.B[..., time, :], M.C[..., time, :], structure=M.structure)

"""The semiseparable rank: the largest numerical rank of the Hankel blocks.

``semiseparable_rank(M) = max_k rank M[k:, :k+1]``: the blocks include the
diagonal, so it is the smallest state size N of an SSS form of M (whose
diagonal ``C_t^T B_t`` is carried by the state). Ranks are numerical, with the
tolerance of :mod:`semisep.algebra.tolerance`. For a dense matrix they come
from the forward sweep of :mod:`semisep.algebra.realize` (O(T^2 r^2)); for an SSS
object from its generators (:mod:`semisep.algebra.compress`, O(T N^3), no T x T
matrix). Both read the same singular values, so they agree to rounding.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..sss import SSS
from .compress import hankel_singular_values, reachable_form, s_max
from .generators import require_sss
from .realize import dense_ranks, strict_upper_max
from .tolerance import check_tolerances, counts, threshold


def _scalar_or_array(values: np.ndarray):
    return values.item() if values.ndim == 0 else values


def semiseparable_rank(dense, *, rtol=None, atol=None):
    """The largest numerical rank of the Hankel blocks ``dense[..., k:, :k+1]``.

    Parameters
    ----------
    dense : array, shape ``(..., T, T)``
        Only the lower triangle (diagonal included) is read.
    rtol, atol : float, optional
        Singular values above ``max(atol, rtol * s_max)`` count, ``s_max`` the largest
        over all the blocks; ``rtol`` defaults to ``T * eps`` (0 when ``atol > 0`` is
        given alone).

    Returns
    -------
    int, or an int array of the batch shape

    Examples
    --------
    >>> import numpy as np, semisep as ss
    >>> rng = np.random.default_rng(0)
    >>> M = ss.SSS(rng.uniform(-1, 1, 12), rng.normal(size=(12, 3)), rng.normal(size=(12, 3)))
    >>> ss.semiseparable_rank(M.to_dense())
    3
    """
    ranks = dense_ranks(dense, rtol, atol)[0]
    return _scalar_or_array(np.max(ranks, axis=-1))


def is_semiseparable(dense, N, *, rtol=None, atol=None):
    """Whether ``dense`` is an SSS matrix of state size at most ``N``, within the tolerance.

    That is: lower triangular (entries above the diagonal within the tolerance)
    and of semiseparable rank at most ``N``.

    Parameters
    ----------
    dense : array, shape ``(..., T, T)``
    N : int >= 0
    rtol, atol : float, optional
        As :func:`semiseparable_rank`.

    Returns
    -------
    bool, or a bool array of the batch shape
    """
    if isinstance(N, bool) or not isinstance(N, numbers.Integral) or N < 0:
        raise ValueError(f"N must be an int >= 0, got {N!r}")
    ranks, D, ws, _, tol = dense_ranks(dense, rtol, atol)
    ok = (np.max(ranks, axis=-1) <= N) & (strict_upper_max(ws.be, D) <= tol)
    return _scalar_or_array(ok)


def rank(M: SSS, *, rtol=None, atol=None):
    """The semiseparable rank of M from its generators (no T x T matrix). O(T N^3).

    Same tolerance and result as ``semiseparable_rank(M.to_dense(), ...)`` for float32
    and float64 M. A half-precision ``M.to_dense()`` is rounded to bfloat16 or float16,
    and at the default tolerance (the float32 compute dtype's) that rounding counts as
    rank there; this function reads the generators in float32 and does not see it.
    """
    M = require_sss("M", M)
    check_tolerances(rtol, atol)
    ws, steps = reachable_form(M)
    svs = hankel_singular_values(ws, steps)
    tol = threshold(s_max(svs), rtol, atol, M.seq_len, ws.dtype)
    return _scalar_or_array(np.max(np.stack([counts(s, tol) for s in svs], axis=-1), axis=-1))

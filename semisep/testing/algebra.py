"""Test helpers for the semiseparable algebra: pairs of matrices and redundant realizations.

* :func:`sss_pairs`: a hypothesis strategy of two SSS matrices of the same T
  whose batch shapes broadcast (operands of ``+``, ``-``, ``@``).
* :func:`redundant_form`: the same matrix as an SSS of a larger state size,
  through a random change of basis and states that never reach the output,
  so its semiseparable rank is the original one (a compression must find it).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from ..sss import SSS
from .reference import to_numpy64
from .strategies import shapes, sss_matrices


@st.composite
def _pairs(draw, structure, T, N, backend, dtype, allow_zeros, log):
    T = draw(T if isinstance(T, st.SearchStrategy) else st.just(T))
    batch = draw(shapes(max_dims=2, max_side=2))
    other = draw(st.sampled_from([batch, batch[1:], (1,) + batch[1:]]))
    kwargs = dict(structure=structure, T=T, N=N, backend=backend, dtype=dtype,
                  allow_zeros=allow_zeros, log=log)
    return (draw(sss_matrices(batch_shape=batch, **kwargs)),
            draw(sss_matrices(batch_shape=other, **kwargs)))


def sss_pairs(*, structure=None, T=st.integers(1, 12), N=st.integers(1, 3),
              backend: str = "numpy", dtype: str = "float64", allow_zeros: bool = True,
              log=None) -> st.SearchStrategy:
    """Pairs ``(M1, M2)`` of :class:`~semisep.SSS` of the same T, broadcastable batches.

    Arguments as :func:`semisep.testing.sss_matrices` (each matrix draws its own
    structure when ``structure`` is None).
    """
    return _pairs(structure, T, N, backend, dtype, allow_zeros, log)


def redundant_form(M: SSS, N: int, *, seed: int = 0) -> SSS:
    """M (float64 numpy, full A) as an SSS of state size ``N >= M.state_size``.

    With ``n = M.state_size``, the state ``[h; g]`` evolves by
    ``[[A, 0], [E, F]]`` from ``B' = [B; 0]``, so ``g`` (random ``E``, and ``F`` of
    norm 1/2) is driven by ``h`` but never read (``C' = [C; 0]``); then a random change of basis
    ``S`` (orthogonal, so nothing is amplified) mixes all states:
    ``A'' = S A' S^T``, ``B'' = S B'``, ``C'' = S C'``. The matrix is M to rounding
    and its semiseparable rank M's.
    """
    n = M.state_size
    if N < n:
        raise ValueError(f"N must be >= M.state_size = {n}, got {N}")
    rng = np.random.default_rng(seed)
    T, batch = M.seq_len, M.batch_shape
    A = np.broadcast_to(to_numpy64(M.A), M.A.shape)
    if M.structure == "scalar":
        A = A[..., None, None] * np.eye(n)
    elif M.structure == "diagonal":
        A = A[..., None] * np.eye(n)
    A = np.broadcast_to(A, batch + (T, n, n))
    top = np.concatenate([A, np.zeros(batch + (T, n, N - n))], axis=-1)
    E = rng.normal(size=batch + (T, N - n, n)) / np.sqrt(N)
    F = rng.normal(size=batch + (T, N - n, N - n))
    F = F / (2 * np.linalg.norm(F, ord=2, axis=(-2, -1), keepdims=True) + 1e-300)
    bottom = np.concatenate([E, F], axis=-1)       # g contracts: no growth to leak
    A = np.concatenate([top, bottom], axis=-2)
    B = np.concatenate([np.broadcast_to(to_numpy64(M.B), batch + (T, n)),
                        np.zeros(batch + (T, N - n))], axis=-1)
    C = np.concatenate([np.broadcast_to(to_numpy64(M.C), batch + (T, n)),
                        np.zeros(batch + (T, N - n))], axis=-1)
    S = np.linalg.qr(rng.normal(size=(N, N)))[0]       # orthogonal: S^{-1} = S^T
    return SSS(S @ A @ S.T, B @ S.T, C @ S.T, structure="full")

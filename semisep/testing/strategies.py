"""Hypothesis strategies for semiseparable matrices (keyword-only, hypothesis style).

Each function returns a strategy. Values are drawn from a seeded numpy
generator (the seed and the special cases are what hypothesis draws and
shrinks), so the arrays are dense and realistic: decays in ``(0, 1]`` or
``[-1, 1]``, ``B`` and ``C`` standard normal (each at times shared across the
batch, so that leading shapes broadcast), plus zeros, negatives and ``-inf``
resets where allowed. ``backend="torch"`` gives torch tensors.

>>> from hypothesis import given
>>> from semisep.testing import sss_matrices
>>> @given(M=sss_matrices(structure="scalar"))
... def test_dense_matches(M):
...     assert M.to_dense().shape == M.shape
"""

from __future__ import annotations

import numbers

import numpy as np
from hypothesis import strategies as st

from ..oness import OneSS
from ..sss import SSS

_DTYPES = ("float64", "float32", "bfloat16", "float16")
_STRUCTURES = ("scalar", "diagonal", "full")


def _strategy(value):
    return value if isinstance(value, st.SearchStrategy) else st.just(value)


def _check_plain(*, structure=None, backend=None, dtype=None, **sizes):
    """The ValueError/TypeError naming a bad argument; strategies and None are left to the draw.

    ``sizes`` maps a name to ``(value, least)``: an int ``>= least``.
    """
    if isinstance(structure, str) and structure not in _STRUCTURES:
        raise ValueError(f"structure must be one of {_STRUCTURES}, got {structure!r}")
    for name, (value, least) in sizes.items():
        if isinstance(value, st.SearchStrategy):
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an int >= {least} or a strategy of them, "
                            f"got {type(value).__name__} {value!r}")
        if value < least:
            raise ValueError(f"{name} must be an int >= {least}, got {value}")
    if backend is not None:
        _convert(np.zeros(1), backend, dtype)


def _convert(arr: np.ndarray, backend: str, dtype: str):
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {_DTYPES}, got {dtype!r}")
    if backend == "numpy":
        if dtype not in ("float64", "float32"):
            raise ValueError(f"backend 'numpy' takes dtype float64 or float32, got {dtype!r}")
        return arr.astype(dtype)
    if backend == "torch":
        import torch

        return torch.as_tensor(arr, dtype=getattr(torch, dtype))
    raise ValueError(f"backend must be 'numpy' or 'torch', got {backend!r}")


def shapes(*, max_dims: int = 2, max_side: int = 3) -> st.SearchStrategy:
    """Batch shapes: tuples of up to ``max_dims`` sides in ``[1, max_side]``."""
    return st.lists(st.integers(1, max_side), max_size=max_dims).map(tuple)


@st.composite
def _log_decays(draw, shape, min_value, allow_resets, backend, dtype):
    shape = tuple(draw(_strategy(shape)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    log_a = rng.uniform(min_value, 0.0, size=shape)
    if draw(st.booleans()):                       # a = 1: no decay at some steps
        log_a[rng.random(size=shape) < 0.15] = 0.0
    if allow_resets and draw(st.booleans()):
        log_a[rng.random(size=shape) < 0.15] = -np.inf
    return _convert(log_a, backend, dtype)


def log_decays(*, shape, min_value: float = -5.0, allow_resets: bool = True,
               backend: str = "numpy", dtype: str = "float64") -> st.SearchStrategy:
    """Log-decays in ``[min_value, 0]`` of ``shape`` (a tuple or a strategy of tuples).

    Some draws hold exact zeros (``a = 1``) and, with ``allow_resets``, ``-inf``
    entries (about 15% of them each).
    """
    if not min_value <= 0:
        raise ValueError(f"min_value must be <= 0 (log-decays lie in [min_value, 0]), "
                         f"got {min_value}")
    _check_plain(backend=backend, dtype=dtype)
    return _log_decays(shape, min_value, allow_resets, backend, dtype)


def _values(rng, shape, allow_zeros, allow_negative, special):
    a = rng.uniform(-1.0 if allow_negative else 0.05, 1.0, size=shape)
    if allow_zeros and special:
        a[rng.random(size=shape) < 0.15] = 0.0
    return a


@st.composite
def _sss(draw, structure, T, N, batch_shape, log, allow_zeros, allow_negative, allow_resets,
         backend, dtype):
    structure = draw(_strategy(structure) if structure is not None
                     else st.sampled_from(_STRUCTURES))
    T, N = draw(_strategy(T)), draw(_strategy(N))
    _check_plain(structure=structure, T=(T, 1), N=(N, 0))
    batch = tuple(draw(_strategy(batch_shape)))
    log = draw(_strategy(log) if log is not None else st.booleans()) and structure != "full"
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    special = draw(st.booleans())
    core = {"scalar": (T,), "diagonal": (T, N), "full": (T, N, N)}[structure]
    if log:
        A = rng.uniform(-3.0, 0.0, size=batch + core)
        if allow_resets and special:
            A[rng.random(size=A.shape) < 0.15] = -np.inf
    elif structure == "full":
        A = rng.normal(size=batch + core) / np.sqrt(N)
        if allow_zeros and special:
            A[..., rng.random(size=T) < 0.2, :, :] = 0.0
        if not allow_negative:
            A = np.abs(A)
    else:
        A = _values(rng, batch + core, allow_zeros, allow_negative, special)
    # B and C each shared across the batch at times (a leading shape that broadcasts)
    B = rng.normal(size=(batch if not batch or draw(st.booleans()) else ()) + (T, N))
    C = rng.normal(size=(batch if not batch or draw(st.booleans()) else ()) + (T, N))
    A, B, C = (_convert(v, backend, dtype) for v in (A, B, C))
    return SSS.from_log(A, B, C, structure=structure) if log else SSS(A, B, C, structure=structure)


def sss_matrices(*, structure=None, T=st.integers(1, 20), N=st.integers(1, 4),
                 batch_shape=shapes(), log=None, allow_zeros: bool = True,
                 allow_negative: bool = True, allow_resets: bool = True,
                 backend: str = "numpy", dtype: str = "float64") -> st.SearchStrategy:
    """Random :class:`~semisep.SSS` matrices.

    Parameters
    ----------
    structure : str or strategy, optional
        ``"scalar"``, ``"diagonal"`` or ``"full"``; any when omitted.
    T, N : int or strategy of int
    batch_shape : tuple or strategy of tuples
    log : bool or strategy, optional
        Build with :meth:`SSS.from_log` (scalar and diagonal only); either when omitted.
    allow_zeros, allow_negative, allow_resets : bool
        Whether draws may hold zero A, negative A, ``-inf`` log-decays.
    backend : {"numpy", "torch"}
    dtype : {"float64", "float32", "bfloat16", "float16"}
    """
    _check_plain(structure=structure, T=(T, 1), N=(N, 0), backend=backend, dtype=dtype)
    return _sss(structure, T, N, batch_shape, log, allow_zeros, allow_negative, allow_resets,
                backend, dtype)


@st.composite
def _one_ss(draw, T, batch_shape, log, allow_zeros, allow_negative, allow_resets, backend, dtype):
    T = draw(_strategy(T))
    _check_plain(T=(T, 1))
    batch = tuple(draw(_strategy(batch_shape)))
    log = draw(_strategy(log) if log is not None else st.booleans())
    if log:
        return OneSS.from_log(draw(log_decays(shape=batch + (T,), allow_resets=allow_resets,
                                              backend=backend, dtype=dtype)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    a = _values(rng, batch + (T,), allow_zeros, allow_negative, draw(st.booleans()))
    return OneSS(_convert(a, backend, dtype))


def one_ss(*, T=st.integers(1, 20), batch_shape=shapes(), log=None, allow_zeros: bool = True,
           allow_negative: bool = True, allow_resets: bool = True, backend: str = "numpy",
           dtype: str = "float64") -> st.SearchStrategy:
    """Random :class:`~semisep.OneSS` matrices (arguments as :func:`sss_matrices`)."""
    _check_plain(T=(T, 1), backend=backend, dtype=dtype)
    return _one_ss(T, batch_shape, log, allow_zeros, allow_negative, allow_resets, backend, dtype)


@st.composite
def _inputs(draw, M, P, vector, backend, dtype):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    S = M.shape[-1]
    if draw(_strategy(vector)):
        return _convert(rng.normal(size=(S,)), backend, dtype)
    P = draw(_strategy(P))
    _check_plain(P=(P, 0))
    return _convert(rng.normal(size=(S, P)), backend, dtype)


def inputs(M, *, P=st.integers(1, 3), vector=st.booleans(), backend: str = "numpy",
           dtype: str = "float64") -> st.SearchStrategy:
    """Right-hand sides ``x`` for ``M``: ``(S,)`` vectors or ``(S, P)`` matrices."""
    _check_plain(P=(P, 0), backend=backend, dtype=dtype)
    return _inputs(M, P, vector, backend, dtype)

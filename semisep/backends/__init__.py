"""Backend registry and selection.

The backend of an operation is chosen once, here:

1. ``backend="name"`` passed to the operation, else
2. the innermost ``with semisep.use_backend("name"):`` block, else
3. the array type of the inputs: numpy arrays run on ``"numpy"``; torch
   tensors on ``"torch"``; CUDA tensors on ``"triton"`` when it is installed and
   supports the case, else on ``"torch"``.

An explicit choice (1 or 2) that is unknown, not installed, or cannot run the
case raises an error naming it; only the automatic choice (3) may pass over a
backend, and only for the next one in its list.
"""

from __future__ import annotations

import contextlib
import contextvars

from .._checks import is_torch
from .base import Backend, Case
from .numpy_backend import NumpyBackend
from .torch_backend import TorchBackend

__all__ = ["Backend", "Case", "backend_of", "register", "get_backend", "use_backend",
           "available_backends", "select_backend"]

_REGISTRY: dict[str, Backend] = {}
_FORCED: contextvars.ContextVar[str | None] = contextvars.ContextVar("semisep_backend",
                                                                    default=None)


def register(backend: Backend, *, replace: bool = False) -> Backend:
    """Add ``backend`` to the registry under ``backend.name``."""
    if not isinstance(backend, Backend):
        raise TypeError(f"backend must be a semisep.backends.Backend, got {type(backend).__name__}")
    if backend.name in _REGISTRY and not replace:
        raise ValueError(f"a backend named {backend.name!r} is already registered")
    _REGISTRY[backend.name] = backend
    return backend


def available_backends() -> list[str]:
    """Names of the registered backends that can run on this machine."""
    return [name for name, be in _REGISTRY.items() if be.available() is None]


def get_backend(name: str) -> Backend:
    """The registered backend ``name``; an error if unknown or unavailable here."""
    if not isinstance(name, str):
        raise TypeError(f"backend must be a str naming a backend, got {type(name).__name__}")
    if name not in _REGISTRY:
        raise ValueError(f"backend must be one of {sorted(_REGISTRY)}, got {name!r}")
    be = _REGISTRY[name]
    reason = be.available()
    if reason is not None:
        raise RuntimeError(f"backend {name!r} is not available: {reason}")
    return be


@contextlib.contextmanager
def use_backend(name: str):
    """Run every semisep operation in this block on backend ``name``.

    Examples
    --------
    >>> import numpy as np, semisep as ss
    >>> with ss.use_backend("numpy"):
    ...     y = ss.cumprodsum(np.full(4, 0.5), np.ones(4))
    """
    get_backend(name)
    token = _FORCED.set(name)
    try:
        yield _REGISTRY[name]
    finally:
        _FORCED.reset(token)


def select_backend(arrays, case: Case, backend: str | None = None) -> Backend:
    """The backend that runs ``case`` on ``arrays`` (see the module docstring)."""
    explicit = backend if backend is not None else _FORCED.get()
    if explicit is not None:
        be = get_backend(explicit)
        reason = be.supports(case)
        if reason is not None:
            raise ValueError(f"backend {explicit!r} cannot run {case.describe()}: {reason}")
        return be
    tensors = [a for a in arrays if a is not None and is_torch(a)]
    if not tensors:
        candidates = ["numpy"]
    elif any(t.device.type == "cuda" for t in tensors):
        candidates = ["triton", "torch"]
    else:
        candidates = ["torch"]
    reasons = []
    for name in candidates:
        be = _REGISTRY.get(name)
        if be is None or be.available() is not None:
            continue
        reason = be.supports(case)
        if reason is None:
            return be
        reasons.append(f"{name}: {reason}")
    raise ValueError(f"no backend can run {case.describe()} on these arrays ({'; '.join(reasons)})")


register(NumpyBackend())
register(TorchBackend())

from .triton.backend import TritonBackend  # noqa: E402  (lazy: imports no triton until used)

register(TritonBackend())


def backend_of(*arrays) -> Backend:
    """The backend whose primitives handle ``arrays`` (torch if any is a tensor, else numpy).

    For array bookkeeping (flips, casts, shapes) only; operations choose their
    backend with :func:`select_backend`.
    """
    return _REGISTRY["torch" if any(is_torch(a) for a in arrays if a is not None) else "numpy"]

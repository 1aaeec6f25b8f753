"""Assertions that hold a structured matrix to its dense form."""

from __future__ import annotations

import numpy as np

from .reference import to_numpy64

#: Default normwise relative tolerances by the dtype of the result.
TOLERANCES = {"float64": 1e-10, "complex128": 1e-10, "float32": 1e-5, "complex64": 1e-5,
              "bfloat16": 1e-2, "float16": 1e-2}


def default_rtol(dtype) -> float:
    """The project's tolerance for results of ``dtype`` (numpy or torch)."""
    if type(dtype).__module__.startswith("torch"):
        name = str(dtype).replace("torch.", "")
    else:
        try:
            name = np.dtype(dtype).name            # np.float32, "float32", np.dtype(...)
        except TypeError:
            name = str(dtype)
    if name not in TOLERANCES:
        raise ValueError(f"dtype must be one of {sorted(TOLERANCES)}, got {dtype}")
    return TOLERANCES[name]


def relative_error(actual, expected) -> float:
    """``max |actual - expected| / max |expected|`` (normwise, in float64).

    Infinite entries must match exactly and are left out of both maxima.
    """
    a, e = to_numpy64(actual), to_numpy64(expected)
    if a.shape != e.shape:
        raise AssertionError(f"shapes differ: got {a.shape}, expected {e.shape}")
    if np.isnan(a).any() != np.isnan(e).any():
        raise AssertionError("NaN in one array and not the other")
    if not np.array_equal(np.isinf(a) & (a == e), np.isinf(e)):
        raise AssertionError("infinite entries differ")
    same = (a == e) | (np.isnan(a) & np.isnan(e))      # equal infinities count as exact
    with np.errstate(invalid="ignore"):
        diff = np.max(np.abs(np.where(same, 0.0, a - e)), initial=0.0)
    scale = np.max(np.abs(np.where(np.isfinite(e), e, 0.0)), initial=0.0)
    return float(diff / scale) if scale > 0 else float(diff)


def assert_close(actual, expected, *, rtol: float | None = None, what: str = "result"):
    """Assert the normwise relative error is within ``rtol`` (default by ``actual``'s dtype)."""
    rtol = default_rtol(actual.dtype) if rtol is None else rtol
    err = relative_error(actual, expected)
    if not err <= rtol:
        raise AssertionError(f"{what}: relative error {err:.3e} exceeds {rtol:.1e}")


def assert_matches_dense(M, dense=None, *, x=None, rtol: float | None = None,
                         check_transpose: bool = True, seed: int = 0):
    """Assert a structured matrix agrees with its dense form.

    Checks ``M.to_dense()`` against ``dense`` (when given), ``M @ x`` against
    ``dense @ x``, ``w @ M`` against ``w @ dense`` for a random ``w`` and, with
    ``check_transpose``, ``M.T`` against ``dense^T``.

    Parameters
    ----------
    M : StructuredMatrix
    dense : array ``(..., T, S)``, optional
        The expected matrix, e.g. from :func:`dense_reference`; ``M.to_dense()``
        when omitted (then only the products are checked).
    x : array ``(..., S, P)``, optional
        Random (same array type and dtype as ``M.to_dense()``) when omitted.
    rtol : float, optional
        Normwise relative tolerance; by default from ``M.dtype`` (float64 1e-10,
        float32 1e-5, bfloat16/float16 1e-2).
    """
    rtol = default_rtol(M.dtype) if rtol is None else rtol
    own = M.to_dense()
    expected = to_numpy64(own if dense is None else dense)
    if tuple(own.shape) != tuple(M.shape):
        raise AssertionError(f"to_dense() has shape {tuple(own.shape)}, M.shape is {tuple(M.shape)}")
    assert_close(own, np.broadcast_to(expected, tuple(own.shape)), rtol=rtol, what="to_dense()")
    rng = np.random.default_rng(seed)

    def like_own(arr):
        real = own.real.dtype if (own.is_complex() if hasattr(own, "detach") else
                                  np.iscomplexobj(own)) else own.dtype
        return own.new_tensor(arr, dtype=real) if hasattr(own, "detach") else arr.astype(real)

    if x is None:
        x = like_own(rng.normal(size=tuple(M.shape[-1:]) + (2,)))
    assert_close(M @ x, expected @ to_numpy64(x), rtol=rtol, what="M @ x")
    left = like_own(rng.normal(size=(2,) + tuple(M.shape[-2:-1])))
    assert_close(left @ M, to_numpy64(left) @ expected, rtol=rtol, what="x @ M")
    if check_transpose:
        assert_close(M.T.to_dense(), expected.swapaxes(-1, -2), rtol=rtol, what="M.T.to_dense()")


def assert_module_gradcheck(module, *inputs, eps: float = 1e-6, atol: float = 1e-6,
                            rtol: float = 1e-5):
    """``torch.autograd.gradcheck`` of ``module(*inputs)`` in its inputs and every parameter.

    Use a float64 module and float64 inputs that require grad; the parameters are
    checked through ``torch.func.functional_call`` on detached copies, so the
    module itself is left untouched.
    """
    import torch

    names = [k for k, _ in module.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for p in module.parameters())

    def f(*args):
        ins, ps = args[:len(inputs)], args[len(inputs):]
        return torch.func.functional_call(module, dict(zip(names, ps)), ins)

    assert torch.autograd.gradcheck(f, (*inputs, *params), eps=eps, atol=atol, rtol=rtol)

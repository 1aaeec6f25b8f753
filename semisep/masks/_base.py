"""What semisep's masks share: the product's input convention, and dtypes of masks without data.

A mask's ``matmul(x)`` takes ``x`` of shape ``(S,)`` (a vector) or ``(..., S, m)``
and multiplies along the sequence axis ``S`` by the mask's own fast algorithm
(:meth:`Mask._apply`). :class:`Mask` checks ``x``, chooses the backend (see
:mod:`semisep.backends`) and leaves the arithmetic to the subclass.

``Causal`` and ``Fourier`` hold no arrays: their entries are known. Their
``dtype`` (numpy or torch, chosen by the caller) is what ``to_dense()``
returns; their products follow the precision of ``x``.
"""

from __future__ import annotations

import numpy as np

from .._checks import as_columns, broadcast_batch, shape_str
from ..backends import Case, select_backend
from ..matrix import StructuredMatrix


class ComplexMaskError(TypeError):
    """A complex mask (e.g. :class:`~semisep.masks.Fourier`) where the result must be real.

    Raised by :func:`semisep.sma` and :func:`semisep.masked` without ``allow_complex=True``.
    """


def _is_torch_dtype(dtype) -> bool:
    return type(dtype).__module__ == "torch" and type(dtype).__name__ == "dtype"


def check_dtype(dtype, kind: str):
    """``dtype`` (numpy or torch) if it is of ``kind`` ("f": real floating, "c": complex)."""
    if _is_torch_dtype(dtype):
        ok = dtype.is_complex if kind == "c" else dtype.is_floating_point
    else:
        try:
            dtype = np.dtype(dtype)
        except TypeError as exc:
            raise TypeError(f"dtype must be a numpy or torch dtype, got {dtype!r}") from exc
        ok = dtype.kind == kind
    if not ok:
        want = "a complex" if kind == "c" else "a real floating"
        raise TypeError(f"dtype must be {want} dtype, got {dtype}")
    return dtype


def constant(values: np.ndarray, dtype):
    """``values`` as an array of ``dtype``: a numpy array, or a torch tensor for a torch dtype."""
    if _is_torch_dtype(dtype):
        import torch

        return torch.as_tensor(values).to(dtype)
    return values.astype(dtype)


def is_complex_dtype(dtype) -> bool:
    """Whether a numpy or torch dtype is complex."""
    if _is_torch_dtype(dtype):
        return dtype.is_complex
    return np.dtype(dtype).kind == "c"


class Mask(StructuredMatrix):
    """Base class of the masks: ``matmul`` checks ``x`` and calls :meth:`_apply`.

    Subclasses define ``shape``, ``dtype``, ``to_dense``, ``T``, :meth:`_apply`,
    :meth:`matmul_flops`, the tuple ``_arrays`` of the arrays they hold, and
    ``_algorithm`` (a word for their product, used in backend requests).
    """

    _arrays: tuple = ()
    _algorithm: str = "dense"
    _complex_input = False      # whether x may be complex (Fourier)

    def matmul(self, x, *, backend: str | None = None):
        """``L @ x`` along the sequence axis.

        Parameters
        ----------
        x : array, shape ``(S,)`` or ``(..., S, m)``
            Leading dimensions broadcast with the mask's batch dimensions.
        backend : str, optional
            Force a backend (see :mod:`semisep.backends`).

        Returns
        -------
        array, shape ``(T,)`` or ``(..., T, m)``
        """
        S = self.shape[-1]
        x2, vector = as_columns("x", x, S, "m", f"a mask of shape {shape_str(self.shape)}",
                                allow_complex=self._complex_input)
        broadcast_batch({"mask": self.batch_shape, "x": x2.shape[:-2]})
        case = Case(f"{type(self).__name__.lower()}_matmul", algorithm=self._algorithm,
                    log_form=False)
        be = select_backend([*self._arrays, x2], case, backend)
        like = next((a for a in (x2, *self._arrays) if be.owns(a)), None)
        y = self._apply(be, be.asarray(x2, like=like))
        return y[..., 0] if vector else y

    def _apply(self, be, x):
        """``L @ x`` for ``x`` of shape ``(..., S, m)``, a ``be`` array; returns ``(..., T, m)``."""
        raise NotImplementedError

    def matmul_flops(self, m: int) -> float:
        """Estimated floating-point work of ``L @ x`` for ``x`` of shape ``(S, m)``, per batch entry.

        ``sma(..., algorithm="auto")`` weighs it against the quadratic form.
        """
        raise NotImplementedError


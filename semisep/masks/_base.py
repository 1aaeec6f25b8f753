"""What semisep's masks share: the product's input convention, and dtypes of masks without data.

A mask's ``matmul(x)`` takes ``x`` of shape ``(S,)`` (a vector) or ``(..., S, m)``
and multiplies along the sequence axis ``S`` by the mask's own fast algorithm
(:meth:`Mask._apply`). :class:`Mask` checks ``x``, chooses the backend (see
:mod:`semisep.backends`) and leaves the arithmetic to the subclass.

``Causal`` and ``Fourier`` hold no arrays: their entries are known. Their
``dtype`` (numpy or torch, chosen by the caller) is what ``to_dense()``
returns; their products follow the precision of ``x`` as its backend
computes it (the numpy backend keeps float32 and gives float64 for every
other dtype, float16 included; torch keeps half precision, computing in float32).
"""

from __future__ import annotations

import numpy as np

from .._checks import as_array, as_columns, broadcast_batch, check_trailing, shape_str
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
    ``_algorithm`` (a word for their product, used in backend requests). A
    1-SS mask (:attr:`carries_state`) also takes ``initial_state`` in ``_apply``.
    """

    _arrays: tuple = ()
    _algorithm: str = "dense"
    _complex_input = False      # whether x may be complex (Fourier)

    @property
    def carries_state(self) -> bool:
        """Whether ``matmul`` takes ``initial_state`` and ``return_final_state``.

        True for the 1-SS masks: a square :class:`~semisep.masks.Causal` with
        offset 0, and :class:`~semisep.masks.Decay`.
        """
        return False

    def matmul(self, x, *, initial_state=None, return_final_state: bool = False,
               backend: str | None = None):
        """``L @ x`` along the sequence axis.

        Parameters
        ----------
        x : array, shape ``(S,)`` or ``(..., S, m)``
            Leading dimensions broadcast with the mask's batch dimensions.
        initial_state : array, shape ``(..., 1, m)`` (``(..., 1)`` for a vector x), optional
            Only for a mask that :attr:`carries_state` (a 1-SS matrix, state
            size 1, as :meth:`semisep.SSS.matmul`): the state ``h_{-1}`` the
            scan ``h_t = a_t h_{t-1} + x_t`` starts from (zero when omitted).
        return_final_state : bool
            Only for a mask that :attr:`carries_state`: also return ``h_{T-1}``,
            the last row of ``y``, shape ``(..., 1, m)`` (``(..., 1)``).
        backend : str, optional
            Force a backend (see :mod:`semisep.backends`).

        Returns
        -------
        array, shape ``(T,)`` or ``(..., T, m)``; and the final state with
        ``return_final_state``.
        """
        if (initial_state is not None or return_final_state) and not self.carries_state:
            raise TypeError(f"initial_state and return_final_state need a mask that carries a "
                            f"state (a square Causal with offset 0, or Decay), got "
                            f"{type(self).__name__} of shape {shape_str(self.shape)}")
        S = self.shape[-1]
        x2, vector = as_columns("x", x, S, "m", f"a mask of shape {shape_str(self.shape)}",
                                allow_complex=self._complex_input)
        batches = {"mask": self.batch_shape, "x": x2.shape[:-2]}
        if initial_state is not None:
            initial_state = as_array("initial_state", initial_state)
            want = (1,) if vector else (1, x2.shape[-1])
            check_trailing("initial_state", initial_state, want,
                           "(..., " + ", ".join(map(str, want)) + ")")
            if vector:
                initial_state = initial_state[..., None]
            batches["initial_state"] = initial_state.shape[:-2]
        broadcast_batch(batches)
        case = Case(f"{type(self).__name__.lower()}_matmul", algorithm=self._algorithm,
                    log_form=False)
        be = select_backend([*self._arrays, x2, initial_state], case, backend)
        like = next((a for a in (x2, *self._arrays) if be.owns(a)), None)
        x2 = be.asarray(x2, like=like)
        if initial_state is None:
            y = self._apply(be, x2)
        else:
            y = self._apply(be, x2, initial_state=be.asarray(initial_state, like=x2))
        if vector:
            y = y[..., 0]
        if not return_final_state:
            return y
        return y, (y[..., -1:] if vector else y[..., -1:, :])

    def _apply(self, be, x):
        """``L @ x`` for ``x`` of shape ``(..., S, m)``, a ``be`` array; returns ``(..., T, m)``."""
        raise NotImplementedError

    def matmul_flops(self, m: int) -> float:
        """Estimated floating-point work of ``L @ x`` for ``x`` of shape ``(S, m)``, per batch entry.

        ``sma(..., algorithm="auto")`` weighs it against the quadratic form.
        """
        raise NotImplementedError

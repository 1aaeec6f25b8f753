"""Structured masks for masked attention: matrices with a fast product along the sequence.

A mask is any :class:`~semisep.StructuredMatrix` of shape ``(..., T, S)``:

* ``shape`` (batch dimensions first) and ``dtype``;
* ``matmul(x)`` / ``L @ x`` for ``x`` of shape ``(S,)`` or ``(..., S, m)``, by the
  mask's own fast algorithm (this is what the linear form of
  :func:`semisep.sma` calls, with ``m = P N``);
* ``to_dense()``, the ``(..., T, S)`` array (what the quadratic form uses);
* ``T``, the transpose (for ``x @ L`` and ``masked(...).T``);
* optionally ``matmul_flops(m)``, the work of ``L @ x`` for ``x`` of shape
  ``(S, m)``, which ``sma(..., algorithm="auto")`` weighs (a mask without it
  is costed as a dense product).

=========================  =====================================  =========================
mask                       entries ``L[i, j]``                    ``L @ x``, work
=========================  =====================================  =========================
``Causal(T, S=None)``      1 for ``j <= i`` (``numpy.tri``)       blocked cumsum, O(64 S m)
``Decay(gamma, T)``        ``gamma^(i-j)``, ``j <= i``            blocked scan, O(64 T m)
``Toeplitz(alpha[, up])``  ``alpha[i-j]`` (``up[j-i]`` above)     FFT, O(T log T m)
``Fourier(T)``             ``exp(-2 pi i ij / T)``                FFT, O(T log T m)
``OneSS(a)``, ``SSS``      semiseparable                          chunked scan
``Dense(W)``               ``W[i, j]``                            O(T S m)
=========================  =====================================  =========================

See ``docs/masks.md`` for the protocol, the choice of algorithm and the duality.
"""

from ._base import ComplexMaskError, Mask
from .causal import Causal
from .decay import Decay
from .fourier import Fourier
from .toeplitz import Toeplitz

__all__ = ["Causal", "ComplexMaskError", "Decay", "Fourier", "Mask", "Toeplitz"]

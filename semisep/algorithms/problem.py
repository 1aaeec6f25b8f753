"""The canonical form the SSS algorithms take, after validation and casting."""

from __future__ import annotations

from dataclasses import dataclass

from ..backends.base import Array, Backend
from .decays import Decays


@dataclass(frozen=True)
class Generators:
    """The generators of ``M[j, i] = C_j^T A_j ... A_{i+1} B_i`` (j >= i).

    Attributes
    ----------
    structure : {"scalar", "diagonal", "full"}
    decays : Decays or None
        Scalar A: data ``(..., T)``. Diagonal A: data ``(..., N, T)`` (the state
        axis moved before the time axis, so that each state component is a 1-SS
        sequence). None for full A.
    A_full : array ``(..., T, N, N)`` or None
        Full A (values); None otherwise.
    B, C : array, shape ``(..., T, N)``
    """

    structure: str
    decays: Decays | None
    A_full: Array | None
    B: Array
    C: Array

    @property
    def T(self) -> int:
        return self.B.shape[-2]

    @property
    def N(self) -> int:
        return self.B.shape[-1]

    def steps(self, start: int, stop: int) -> "Generators":
        """The generators of steps ``start .. stop - 1`` (views; ``A_start`` becomes ``A_0``)."""
        t = slice(start, stop)
        return Generators(self.structure,
                          None if self.decays is None else self.decays.map(lambda d: d[..., t]),
                          None if self.A_full is None else self.A_full[..., t, :, :],
                          self.B[..., t, :], self.C[..., t, :])

    def batch_shape(self, be: Backend) -> tuple:
        """The broadcast leading shape of A, B and C."""
        if self.structure == "full":
            a_batch = self.A_full.shape[:-3]
        elif self.structure == "diagonal":
            a_batch = self.decays.data.shape[:-2]
        else:
            a_batch = self.decays.data.shape[:-1]
        return tuple(be.broadcast_shapes(tuple(a_batch), tuple(self.B.shape[:-2]),
                                         tuple(self.C.shape[:-2])))


@dataclass(frozen=True)
class SSSProblem:
    """``y = M x`` plus the initial-state term ``(C_t^T A_t ... A_0 h_{-1})_t``.

    Attributes
    ----------
    gen : Generators
    x : array, shape ``(..., T, P)``
    initial_state : array ``(..., N, P)`` or None
    algorithm : {"recurrent", "quadratic", "chunked"}
    chunk_size : int
    """

    gen: Generators
    x: Array
    initial_state: Array | None
    algorithm: str
    chunk_size: int

    def batch_shape(self, be: Backend) -> tuple:
        """The broadcast leading shape of the generators, x and the initial state."""
        shapes = [self.gen.batch_shape(be), tuple(self.x.shape[:-2])]
        if self.initial_state is not None:
            shapes.append(tuple(self.initial_state.shape[:-2]))
        return tuple(be.broadcast_shapes(*shapes))

"""The SSS algorithms, written once against the backend primitives.

=============  =====================  ============================  ==================
algorithm      structures of A        work                          extra memory
=============  =====================  ============================  ==================
"recurrent"    scalar, diagonal, full O(T N P) (O(T N^2 P) full)    O(N P)
"quadratic"    scalar, diagonal, full O(T^2 (N + P)) (T^2 N^2 full) O(T^2)
"chunked"      scalar, diagonal       O(T Q (N + P) + T N P)        O(T Q + T/Q N P)
=============  =====================  ============================  ==================

``algorithm="auto"`` is resolved by :func:`resolve_algorithm`, the one place
that rule lives.
"""

from __future__ import annotations

from .chunked import chunked
from .problem import Generators, SSSProblem
from .quadratic import dense_matrix, quadratic
from .recurrent import recurrent

__all__ = ["ALGORITHMS", "DEFAULT_CHUNK_SIZE", "Generators", "SSSProblem", "dense_matrix",
           "resolve_algorithm", "run_sss"]

ALGORITHMS = {"recurrent": recurrent, "quadratic": quadratic, "chunked": chunked}
DEFAULT_CHUNK_SIZE = 64


def resolve_algorithm(algorithm: str, structure: str, T: int, chunk_size: int) -> str:
    """The algorithm ``"auto"`` stands for, or ``algorithm`` itself once checked.

    The rule: full A runs ``"recurrent"`` (its quadratic form costs N times
    more and the chunked form is not implemented); scalar and diagonal A run
    ``"quadratic"`` when the sequence fits in one chunk (``T <= chunk_size``)
    and ``"chunked"`` otherwise.
    """
    if algorithm == "auto":
        if structure == "full":
            return "recurrent"
        return "quadratic" if T <= chunk_size else "chunked"
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {['auto', *ALGORITHMS]}, got {algorithm!r}")
    if algorithm == "chunked" and structure == "full":
        raise ValueError("algorithm='chunked' needs scalar or diagonal A, got full A "
                         "(use 'recurrent' or 'quadratic')")
    return algorithm


def run_sss(be, problem: SSSProblem):
    """Run ``problem`` with its (resolved) algorithm; returns ``(y, final_state)``."""
    return ALGORITHMS[problem.algorithm](be, problem)

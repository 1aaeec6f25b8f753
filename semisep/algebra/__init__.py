"""The semiseparable algebra, closed in SSS form.

| operation | result | state size | cost |
|---|---|---|---|
| `M1 + M2`, `M1 - M2` | SSS | `N1 + N2` | O(T N^2) |
| `M1 @ M2` | SSS (full A) | `N1 + N2` | O(T N^2) |
| `alpha * M`, `diag_scale(M, left, right)` | SSS | `N` | O(T N) |
| `M.T` | anti-causal matrix | `N` | O(T N) |
| `M.solve(y)` | array | - | O(T N P) |
| `M.inverse()` | SSS (full A) | `N + 1` (the minimum) | O(T N^2) |
| `M.diagonal()` | array `(..., T)` | - | O(T N) |
| `M[i:j, i:j]` | SSS | `N` | O(1) (views) |
| `M.rank()` | int | - | O(T N^3) |
| `M.compress()` | SSS (full A) | minimal | O(T N^3) |
| `SSS.from_dense(D)` | SSS (full A) | minimal | O(T^2 r^2) |
| `M.blocks(Q)` | `SSSBlocks` | `N` | O(T Q N) |

N is the result's state size (full A costs N times more where A enters a
product), r the semiseparable rank. The rank tolerance is defined once in
:mod:`semisep.algebra.tolerance`; docs/algebra.md has the whole story.
"""

from .arithmetic import add, diag_scale, multiply, scale
from .blocks import SSSBlocks
from .compress import compress
from .rank import is_semiseparable, rank, semiseparable_rank
from .realize import from_dense
from .slicing import diagonal, principal_block
from .solve import SingularMatrixError, inverse, solve

__all__ = ["SSSBlocks", "SingularMatrixError", "add", "compress", "diag_scale", "diagonal",
           "from_dense", "inverse", "is_semiseparable", "multiply", "principal_block", "rank",
           "scale", "semiseparable_rank", "solve"]

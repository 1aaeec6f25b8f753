"""Context parallelism over torch.distributed: one sequence split across ranks.

An SSM needs only the state at each slice boundary from the ranks before it,
so a sequence too long for one device is split along T, each rank holding a
contiguous slice (rank order = sequence order), and only states, O(h p n)
numbers per rank, cross the wire (the SSD paper's section 8).

* :func:`ssd`: :func:`semisep.ssd` on this rank's slice.
* :func:`matmul`: ``M @ x`` for an :class:`semisep.SSS` (scalar or diagonal A) split along T.
* :func:`previous_tokens`: the steps before this rank's slice, for short convolutions
  (``semisep.nn.Mamba2(...)(u, cp_group=group)`` uses it).

See ``docs/distributed.md`` for the algorithm, its costs and a launch recipe.
"""

from .ssd import ssd
from .sss import matmul
from .tokens import previous_tokens

__all__ = ["matmul", "previous_tokens", "ssd"]

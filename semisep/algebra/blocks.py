"""The chunked (SSD) block decomposition of an SSS matrix, as an object.

Split T into ``nc`` chunks of Q steps (the last one padded with zeros). For
scalar or diagonal A, the block of M at chunk rows ``c`` and chunk columns ``c'`` is

* ``c == c'``: the diagonal block ``D_c = L_c o C_c B_c^T`` (``Q x Q``);
* ``c > c'``: ``left_c  diag(total_{c-1} ... total_{c'+1})  right_{c'}^T``, with the
  C-factors ``left_c[j] = (a_j ... a_{start of c}) C_j``, the B-factors
  ``right_c[i] = (a_{end of c} ... a_{i+1}) B_i`` and the decay across a chunk
  ``total_c`` (a scalar, or N of them for diagonal A);
* ``c < c'``: zero.

The products ``total_{c-1} ... total_{c'+1}`` are the entries of the *center*,
the 1-SS matrix of the totals over the chunks (shifted by one chunk: the state
entering chunk c left chunk c - 1). The factors are those of the chunked
algorithm (:func:`semisep.algorithms.chunked.chunk_factors`) and :meth:`SSSBlocks.matmul`
is that algorithm (:func:`~semisep.algorithms.chunked.apply_chunk_factors`): the
code is shared, not copied.
"""

from __future__ import annotations

from .._checks import (as_array, as_columns, broadcast_batch, check_positive_int,
                       check_trailing)
from ..algorithms import DEFAULT_CHUNK_SIZE
from ..algorithms.chunked import apply_chunk_factors, chunk_factors
from ..backends import Case, select_backend
from ..matrix import StructuredMatrix
from ..oness import OneSS
from ..sss import SSS
from .generators import raw_A, require_sss


class SSSBlocks(StructuredMatrix):
    """The block decomposition of an SSS matrix with scalar or diagonal A (module docstring).

    Parameters
    ----------
    M : SSS
        Scalar or diagonal A.
    chunk_size : int, optional
        Q (default 64); T need not be a multiple of it.

    Attributes
    ----------
    diagonal_blocks : array ``(..., nc, Q, Q)``
    b_factors : array ``(..., nc, Q, N)``
        The right factors ``right_c`` (rows of padded steps are zero).
    c_factors : array ``(..., nc, Q, N)``
        The left factors ``left_c``.
    center : OneSS
        Over the ``nc`` chunks: shape ``(..., nc, nc)`` for scalar A, ``(..., N, nc, nc)``
        for diagonal A (one per state component).

    Notes
    -----
    Building runs the chunked algorithm's first steps, O(T Q N) work, and holds
    O(T Q + T N) numbers in the compute dtype; ``matmul`` runs the rest,
    O(T Q P + T N P). ``to_dense`` costs O(T^2 N).
    """

    def __init__(self, M: SSS, chunk_size: int | None = None):
        M = require_sss("M", M)
        chunk_size = DEFAULT_CHUNK_SIZE if chunk_size is None else check_positive_int(
            "chunk_size", chunk_size)
        if M.structure == "full":
            raise ValueError("M.blocks() needs scalar or diagonal A (the chunked algorithm's), "
                             "got full A")
        arrays = [raw_A(M), M.B, M.C]
        self._be = be = select_backend(arrays, Case("sss_blocks", M.structure, "chunked",
                                                    M.log_a is not None), None)
        like = next(a for a in arrays if be.owns(a))
        self._out_dtype = be.result_dtype(be.asarray(M.B, like=like), be.asarray(M.C, like=like))
        self._dtype = be.compute_dtype(self._out_dtype)
        self._matrix = M
        self._factors = chunk_factors(be, M._generators(be, self._dtype, like), chunk_size)

    @property
    def shape(self):
        return self._matrix.shape

    @property
    def dtype(self):
        return self._matrix.dtype

    @property
    def chunk_size(self) -> int:
        """Q, the chunk length (``min(chunk_size, T)``)."""
        return self._factors.diag.shape[-1]

    @property
    def num_chunks(self) -> int:
        return self._factors.diag.shape[-3]

    @property
    def diagonal_blocks(self):
        return self._factors.diag

    @property
    def b_factors(self):
        return self._factors.right

    @property
    def c_factors(self):
        return self._factors.left

    @property
    def center(self) -> OneSS:
        total = self._factors.total                            # (..., nc, 1 or N)
        if self._matrix.structure == "scalar":
            return OneSS(total[..., 0])
        return OneSS(self._be.moveaxis(total, -1, -2))

    def to_dense(self):
        """M, reassembled from the blocks: ``(..., T, T)`` in M's dtype."""
        be, f = self._be, self._factors
        nc, Q = self.num_chunks, self.chunk_size
        L = self.center.to_dense()                             # (..., [N,] nc, nc)
        shifted = be.concat([0 * L[..., :1, :], L[..., :-1, :]], axis=-2)   # c > c' only
        spec = "...cjn,...cd,...din->...cjdi" if self._matrix.structure == "scalar" else \
            "...cjn,...ncd,...din->...cjdi"
        off = be.einsum(spec, f.left, shifted, f.right)
        same = be.where(be.tri(nc, nc, 0, like=L) & ~be.tri(nc, nc, -1, like=L),
                        be.ones((nc, nc), like=L), be.zeros((nc, nc), like=L))
        dense = off + f.diag[..., :, :, None, :] * same[:, None, :, None]
        dense = dense.reshape(dense.shape[:-4] + (nc * Q, nc * Q))[..., :f.seq_len, :f.seq_len]
        return be.cast(be.broadcast_to(dense, self.shape), self._out_dtype)

    def matmul(self, x, *, initial_state=None, return_final_state: bool = False):
        """``y = M x`` by the chunked algorithm on the stored blocks.

        Parameters
        ----------
        x : array, shape ``(T,)`` or ``(..., T, P)``
        initial_state : array, shape ``(..., N, P)`` (``(..., N)`` for a vector x), optional
        return_final_state : bool

        Returns
        -------
        y, and the final state with ``return_final_state`` (as :meth:`SSS.matmul`).
        """
        be, T, N = self._be, self._matrix.seq_len, self._matrix.state_size
        x2, vector = as_columns("x", x, T, of=f"a matrix of T={T}")
        if initial_state is not None:
            initial_state = as_array("initial_state", initial_state)
            want = (N,) if vector else (N, x2.shape[-1])
            check_trailing("initial_state", initial_state, want,
                           "(..., " + ", ".join(map(str, want)) + ")")
            initial_state = be.cast(be.asarray(initial_state, like=self._factors.diag), self._dtype)
            if vector:
                initial_state = initial_state[..., None]
        broadcast_batch({"M": self._matrix.batch_shape, "x": x2.shape[:-2]})
        x2 = be.asarray(x2, like=self._factors.diag)
        out_dtype = be.result_dtype(be.cast(be.zeros((), like=x2), self._out_dtype), x2)
        y, h = apply_chunk_factors(be, self._factors, be.cast(x2, self._dtype), initial_state)
        y = be.cast(y, out_dtype)
        if vector:
            y, h = y[..., 0], h[..., 0]
        return (y, h) if return_final_state else y

    @property
    def T(self) -> StructuredMatrix:
        """The transpose of M (an anti-causal matrix; see :attr:`SSS.T`)."""
        return self._matrix.T

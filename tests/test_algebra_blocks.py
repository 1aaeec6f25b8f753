"""M.blocks(Q): the chunked block decomposition reassembles M and its matmul is the chunked algorithm."""

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

import semisep as ss
from semisep.algebra import SSSBlocks
from semisep.testing import assert_close, dense_reference, inputs, sss_matrices, to_numpy64


def reference_of(M):
    return dense_reference(M.A, M.B, M.C, structure=M.structure)


scalar_or_diagonal = st.sampled_from(["scalar", "diagonal"])


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@given(data=st.data(), chunk_size=st.integers(1, 7))
def test_blocks_reassemble_M(backend, data, chunk_size):
    M = data.draw(sss_matrices(structure=scalar_or_diagonal, backend=backend))
    blocks = M.blocks(chunk_size)
    assert isinstance(blocks, SSSBlocks)
    Q, T, N = blocks.chunk_size, M.seq_len, M.state_size
    nc = -(-T // Q)
    assert Q == min(chunk_size, T) and blocks.num_chunks == nc
    assert blocks.diagonal_blocks.shape[-3:] == (nc, Q, Q)
    assert blocks.b_factors.shape[-3:] == blocks.c_factors.shape[-3:] == (nc, Q, N)
    center_shape = (nc, nc) if M.structure == "scalar" else (N, nc, nc)
    assert blocks.center.shape[-len(center_shape):] == center_shape
    dense = blocks.to_dense()
    assert dense.dtype == M.dtype and tuple(dense.shape) == M.shape
    assert_close(dense, reference_of(M))


@given(M=sss_matrices(structure=scalar_or_diagonal, batch_shape=()), chunk_size=st.integers(1, 5))
def test_each_block_is_the_stated_product(M, chunk_size):
    """Block (c, c') = left_c diag(center[c-1, c']) right_c'^T for c > c', the diagonal block for c = c'."""
    blocks = M.blocks(chunk_size)
    Q, nc, T = blocks.chunk_size, blocks.num_chunks, M.seq_len
    D = np.zeros((nc * Q, nc * Q))
    D[:T, :T] = reference_of(M)
    L = to_numpy64(blocks.center.to_dense())
    for c in range(nc):
        rows = slice(c * Q, (c + 1) * Q)
        assert_close(blocks.diagonal_blocks[c], D[rows, rows])
        for d in range(c):
            decay = L[c - 1, d] if M.structure == "scalar" else L[:, c - 1, d]
            block = (blocks.c_factors[c] * decay) @ blocks.b_factors[d].T
            assert_close(block, D[rows, d * Q:(d + 1) * Q], rtol=1e-10)
        for d in range(c + 1, nc):
            assert not np.any(D[rows, d * Q:(d + 1) * Q])


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@given(data=st.data(), chunk_size=st.integers(1, 7))
def test_blocks_matmul_is_the_chunked_algorithm(backend, data, chunk_size):
    M = data.draw(sss_matrices(structure=scalar_or_diagonal, backend=backend))
    x = data.draw(inputs(M, backend=backend))
    blocks = M.blocks(chunk_size)
    vector = x.ndim == 1
    rng = np.random.default_rng(data.draw(st.integers(0, 100)))
    h0 = rng.normal(size=M.batch_shape + ((M.state_size,) if vector else (M.state_size, x.shape[-1])))
    if backend == "torch":
        h0 = torch.as_tensor(h0)
    y, h = blocks.matmul(x, initial_state=h0, return_final_state=True)
    y_ref, h_ref = M.matmul(x, algorithm="chunked", chunk_size=chunk_size, initial_state=h0,
                            return_final_state=True)
    np.testing.assert_array_equal(to_numpy64(y), to_numpy64(y_ref))      # the same code
    np.testing.assert_array_equal(to_numpy64(h), to_numpy64(h_ref))
    assert_close(blocks @ x, np.broadcast_to(reference_of(M), M.shape) @ to_numpy64(x))


@given(M=sss_matrices(structure=scalar_or_diagonal, backend="torch", dtype="bfloat16"))
def test_half_precision_blocks_within_1e2(M):
    blocks = M.blocks(4)
    assert blocks.to_dense().dtype == torch.bfloat16
    assert_close(blocks.to_dense(), reference_of(M), rtol=1e-2)


def test_transpose_and_errors():
    rng = np.random.default_rng(0)
    M = ss.SSS(rng.uniform(-1, 1, 6), rng.normal(size=(6, 2)), rng.normal(size=(6, 2)))
    assert_close(M.blocks(4).T.to_dense(), reference_of(M).T)
    with pytest.raises(ValueError, match="needs scalar or diagonal A.*got full A"):
        ss.SSS(rng.normal(size=(6, 2, 2)), rng.normal(size=(6, 2)), rng.normal(size=(6, 2))).blocks(2)
    with pytest.raises(ValueError, match="chunk_size must be an int >= 1, got 0"):
        M.blocks(0)
    with pytest.raises(ValueError, match=r"x must have shape \(6,\) or \(\.\.\., 6, P\).*got shape \(5, 1\)"):
        M.blocks(2) @ np.ones((5, 1))
    with pytest.raises(ValueError, match=r"initial_state must have shape \(\.\.\., 2, 1\)"):
        M.blocks(2).matmul(np.ones((6, 1)), initial_state=np.ones((3, 1)))

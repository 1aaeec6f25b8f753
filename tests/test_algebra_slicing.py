"""M.diagonal() and principal blocks M[i:j, i:j] against the float64 dense matrix."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import semisep as ss
from semisep.testing import assert_close, dense_reference, sss_matrices


def reference_of(M):
    return dense_reference(M.A, M.B, M.C, structure=M.structure)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@given(data=st.data())
def test_diagonal(backend, data):
    M = data.draw(sss_matrices(backend=backend))
    d = M.diagonal()
    assert tuple(d.shape) == M.shape[:-1] and d.dtype == M.dtype
    assert_close(d, np.einsum("...tt->...t", np.broadcast_to(reference_of(M), M.shape)))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@given(data=st.data())
def test_principal_blocks(backend, data):
    M = data.draw(sss_matrices(backend=backend))
    T = M.seq_len
    i = data.draw(st.integers(-T, T - 1))
    j = data.draw(st.integers(i % T + 1, T) | st.none())
    block = M[i:j, i:j]
    assert isinstance(block, ss.SSS)
    assert block.structure == M.structure and block.state_size == M.state_size
    assert (block.log_a is None) == (M.log_a is None)
    expected = reference_of(M)[..., i:j, i:j]
    assert_close(block.to_dense(), expected)
    assert_close(M[..., i:j, i:j].to_dense(), expected)


def test_bad_keys_name_the_problem():
    rng = np.random.default_rng(0)
    M = ss.SSS(rng.uniform(-1, 1, 6), rng.normal(size=(6, 2)), rng.normal(size=(6, 2)))
    with pytest.raises(ValueError, match="principal block.*rows 0:3 and columns 1:4"):
        M[0:3, 1:4]
    with pytest.raises(ValueError, match="non-empty"):
        M[3:3, 3:3]
    with pytest.raises(ValueError, match="step 1.*got step 2"):
        M[::2, ::2]
    with pytest.raises(TypeError, match="two slices"):
        M[0]
    with pytest.raises(TypeError, match="two slices.*int"):
        M[0, 0]

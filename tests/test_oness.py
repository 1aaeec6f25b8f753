"""OneSS, cumprodsum and segsum against their definitions."""

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

import semisep as ss
from semisep.testing import assert_close, assert_matches_dense, log_decays, one_ss, shapes


def one_ss_definition(a):
    """``L[..., j, i] = a_j ... a_{i+1}`` by explicit products."""
    a = np.asarray(a, dtype=np.float64)
    T = a.shape[-1]
    L = np.zeros(a.shape + (T,))
    for j in range(T):
        for i in range(j + 1):
            L[..., j, i] = np.prod(a[..., i + 1:j + 1], axis=-1)
    return L


def segsum_reference(x):
    """float64 segment sums by cumsum differences (fine in float64 at these sizes), -inf exact."""
    x = np.asarray(x, dtype=np.float64)
    T = x.shape[-1]
    finite = np.where(np.isneginf(x), 0.0, x)
    cs = np.cumsum(finite, axis=-1)
    resets = np.cumsum(np.isneginf(x), axis=-1)
    S = cs[..., :, None] - cs[..., None, :]
    S = np.where(resets[..., :, None] - resets[..., None, :] > 0, -np.inf, S)
    return np.where(np.tri(T, dtype=bool), S, -np.inf)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@given(data=st.data())
def test_one_ss_matches_definition(backend, data):
    L = data.draw(one_ss(backend=backend))
    expected = one_ss_definition(ss.testing.to_numpy64(L.a))
    assert_matches_dense(L, expected)


@given(a=st.lists(st.floats(-2, 2), min_size=1, max_size=15), seed=st.integers(0, 99))
def test_cumprodsum_is_the_scan(a, seed):
    a = np.array(a)
    x = np.random.default_rng(seed).normal(size=(2, a.size))
    expected = np.zeros_like(x)
    prev = np.zeros(2)
    for t in range(a.size):
        prev = a[t] * prev + x[:, t]
        expected[:, t] = prev
    for algorithm in ("recurrent", "quadratic", "chunked"):
        assert_close(ss.cumprodsum(a, x, algorithm=algorithm, chunk_size=4), expected)


def test_causal_mask_when_all_ones():
    L = ss.OneSS(np.ones(5)).to_dense()
    np.testing.assert_array_equal(L, np.tri(5))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@given(data=st.data())
def test_exp_segsum_is_one_ss(backend, data):
    batch = data.draw(shapes())
    log_a = data.draw(log_decays(shape=batch + (data.draw(st.integers(1, 16)),), backend=backend))
    S = ss.segsum(log_a)
    assert_close(S, segsum_reference(ss.testing.to_numpy64(log_a)))
    assert_close(np.exp(ss.testing.to_numpy64(S)),
                 ss.OneSS.from_log(log_a).to_dense())


@pytest.mark.parametrize("make", [lambda x: x.astype(np.float32),
                                  lambda x: torch.as_tensor(x, dtype=torch.float32)],
                         ids=["numpy", "torch"])
def test_segsum_fp32_is_exact_to_rounding_at_T_2048(make):
    rng = np.random.default_rng(0)
    T = 2048
    x = -rng.uniform(0, 1000, size=T) * (rng.random(T) < 0.05) - rng.uniform(0, 1, size=T)
    x[rng.choice(T, 8, replace=False)] = -np.inf
    x32 = x.astype(np.float32).astype(np.float64)        # the inputs as fp32 sees them
    S = ss.testing.to_numpy64(ss.segsum(make(x)))
    exact = segsum_reference(x32)
    finite = np.isfinite(exact)
    np.testing.assert_array_equal(np.isneginf(S), np.isneginf(exact))
    rel = np.abs(S[finite] - exact[finite]) / np.maximum(np.abs(exact[finite]), 1e-30)
    assert rel.max() <= 1e-5
    # the subtraction of fp32 cumulative sums misses by far more, which is why it is not used
    cs = np.cumsum(np.where(np.isneginf(x32), 0, x32).astype(np.float32))
    naive = (cs[:, None] - cs[None, :]).astype(np.float64)
    naive_rel = np.abs(naive[finite] - exact[finite]) / np.maximum(np.abs(exact[finite]), 1e-30)
    assert naive_rel.max() > 1e-3

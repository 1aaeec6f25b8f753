"""The state space duality: a scalar SSM is 1-SS masked attention with (Q, K, V) = (C, B, x)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import semisep as ss
from semisep.masks import Causal, Decay
from semisep.testing import assert_close, dense_reference, log_decays, shapes, to_numpy64


def draw_generators(data, backend, log):
    """Batch, T, N, P and the arrays (a or log_a, B, C, x) of one random scalar SSM."""
    batch = data.draw(shapes(max_dims=1))
    T, N, P = data.draw(st.integers(1, 20)), data.draw(st.integers(1, 4)), data.draw(
        st.integers(1, 3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    convert = torch.tensor if backend == "torch" else np.asarray
    if log:
        a = data.draw(log_decays(shape=batch + (T,), backend=backend))
    else:
        a = rng.uniform(-1, 1, size=batch + (T,))
        a[rng.random(size=a.shape) < 0.15] = 0.0
        a = convert(a)
    B, C, x = (convert(rng.normal(size=batch + s)) for s in ((T, N), (T, N), (T, P)))
    return a, B, C, x


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_sss_is_masked_attention(backend, data):
    """SSS.from_log(log_a, B, C) == masked(OneSS.from_log(log_a), C, B): dense and products."""
    log_a, B, C, x = draw_generators(data, backend, log=True)
    M = ss.SSS.from_log(log_a, B, C)
    W = ss.masked(ss.OneSS.from_log(log_a), C, B)
    oracle = dense_reference(log_a, B, C, structure="scalar", log=True)
    assert_close(M.to_dense(), oracle)
    assert_close(W.to_dense(), oracle)
    for algorithm in ("linear", "quadratic"):
        assert_close(W.matmul(x, algorithm=algorithm), oracle @ to_numpy64(x))
    assert_close(M @ x, W @ x)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_masked_attention_is_an_sss(backend, data):
    """The other way: masked(OneSS(a), Q, K).to_sss() is SSS(a, K, Q), values of any sign."""
    log = data.draw(st.booleans())
    a, K, Q, V = draw_generators(data, backend, log=log)
    L = ss.OneSS.from_log(a) if log else ss.OneSS(a)
    W = ss.masked(L, Q, K)
    M = W.to_sss()
    assert isinstance(M, ss.SSS) and (M.log_a is None) == (L.log_a is None)
    expected = W.to_dense()
    assert_close(M.to_dense(), expected)
    for algorithm in ("recurrent", "chunked"):
        assert_close(M.matmul(V, algorithm=algorithm, chunk_size=4), to_numpy64(expected)
                     @ to_numpy64(V))


def test_decay_and_causal_masks_are_one_ss():
    """RetNet and causal linear attention as SSMs with constant a."""
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(2, 40, 3)), rng.normal(size=(2, 40, 3)), rng.normal(size=(2, 40, 2))
    for L, a in ((Decay(np.array([0.5, 0.9]), 40), np.array([[0.5], [0.9]]) * np.ones(40)),
                 (Causal(40), np.ones(40))):
        M = ss.masked(L, Q, K).to_sss()
        assert_close(M.to_dense(), dense_reference(a, K, Q, structure="scalar"))
        assert_close(M @ V, ss.sma(Q, K, V, L))
    with pytest.raises(TypeError, match="L must be 1-SS"):
        ss.masked(ss.masks.Toeplitz(np.ones(40)), Q, K).to_sss()


def test_duality_holds_for_gradients():
    """d/d(log_a) of the SSM and of its masked-attention form agree (float64)."""
    rng = np.random.default_rng(0)
    B, C, x = (torch.tensor(rng.normal(size=s)) for s in ((70, 3), (70, 3), (70, 2)))
    grads = []
    for form in ("sss", "masked"):
        log_a = torch.tensor(-np.linspace(0.01, 1, 70), requires_grad=True)
        if form == "sss":
            y = ss.SSS.from_log(log_a, B, C) @ x
        else:
            y = ss.masked(ss.OneSS.from_log(log_a), C, B) @ x
        y.square().sum().backward()
        grads.append(log_a.grad)
    assert_close(grads[0], grads[1])

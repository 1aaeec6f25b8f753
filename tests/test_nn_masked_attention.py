"""semisep.nn.MaskedAttention against float64 dense attention built from the definition."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

import semisep as ss
from semisep.nn import AttentionCache, MaskedAttention, SelectiveMask
from semisep.testing import assert_close, to_numpy64

RECURRENT = ["causal", "decay", "selective"]


def elu1(t):
    return F.elu(t) + 1


def mask_definition(layer, x):
    """The mask's entries ``L[b, h, i, j]`` in float64, from each mask's formula."""
    T = x.shape[1]
    lag = np.arange(T)[:, None] - np.arange(T)[None, :]
    lower = lag >= 0
    m = layer.mask
    if m.__class__.__name__ == "CausalMask":
        return lower[None, None].astype(float)
    if m.__class__.__name__ == "DecayMask":
        gamma = np.exp(to_numpy64(m.log_gamma))[:, None, None]
        return np.where(lower, gamma ** np.where(lower, lag, 0), 0.0)[None]
    if m.__class__.__name__ == "ToeplitzMask":
        alpha = to_numpy64(m.alpha)
        return np.where(lower, alpha[:, np.where(lower, lag, 0)], 0.0)[None]
    assert isinstance(m, SelectiveMask)
    u = to_numpy64(x) @ to_numpy64(m.proj.weight).T + to_numpy64(m.dt_bias)   # (b, T, h)
    a = np.exp(-np.exp(to_numpy64(m.A_log)) * np.log1p(np.exp(u))).transpose(0, 2, 1)
    L = np.zeros(a.shape + (T,))
    for i in range(T):
        for j in range(i + 1):
            L[..., i, j] = np.prod(a[..., j + 1:i + 1], axis=-1)
    return L


def attention_reference(layer, x, L=None):
    """``(L o Q K^T) V`` per head in float64, normalized by the row sums of ``L o Q K^T``."""
    P = {k: torch.as_tensor(to_numpy64(v)) for k, v in layer.state_dict().items()}
    x64 = torch.as_tensor(to_numpy64(x))
    L = mask_definition(layer, x) if L is None else L

    qkv = torch.cat([x64 @ P[f"{name}.weight"].T + P.get(f"{name}.bias", 0.0)
                     for name in ("q_proj", "k_proj", "v_proj")], dim=-1).numpy()
    if layer.d_conv is not None:   # y[t] = bias + sum_k w[:, k] qkv[t - (K-1) + k], zero before 0
        w, K_taps = P["conv1d.weight"][:, 0].numpy(), layer.d_conv
        conv = np.zeros_like(qkv) + P["conv1d.bias"].numpy()
        for t in range(x.shape[1]):
            for k in range(K_taps):
                if t - (K_taps - 1) + k >= 0:
                    conv[:, t] += w[:, k] * qkv[:, t - (K_taps - 1) + k]
        qkv = conv
    hk, hv = layer.n_heads * layer.d_key, layer.n_heads * layer.d_value
    Q, K, V = (part.reshape(part.shape[:2] + (layer.n_heads, -1)).swapaxes(1, 2)
               for part in (qkv[..., :hk], qkv[..., hk:2 * hk], qkv[..., 2 * hk:2 * hk + hv]))
    if layer.feature_map is not None:
        Q, K = (layer.feature_map(torch.as_tensor(t)).numpy() for t in (Q, K))
    W = L * (Q @ K.swapaxes(-1, -2))
    Y = W @ V
    if layer.normalize:
        Y = Y / (W.sum(-1, keepdims=True) + layer.eps)
    Y = Y.swapaxes(1, 2).reshape(x.shape[0], x.shape[1], -1)
    return Y @ P["out_proj.weight"].numpy().T + P.get("out_proj.bias", torch.zeros(())).numpy()


def make_layer(mask, normalize=False, seed=0, dtype=torch.float32, **kwargs):
    torch.manual_seed(seed)
    layer = MaskedAttention(8, 2, mask=mask, normalize=normalize, max_len=16,
                            feature_map=elu1 if normalize else None, dtype=dtype, **kwargs)
    mask_params = layer.mask.named_parameters() if isinstance(layer.mask, torch.nn.Module) else []
    with torch.no_grad():   # decays in a range where every entry of L matters
        for name, param in mask_params:
            if name == "A_log":
                param.copy_(torch.log(torch.rand_like(param) + 0.1))
            if name == "dt_bias":
                param.copy_(torch.randn_like(param))
    return layer


@pytest.mark.parametrize("mask", RECURRENT + ["toeplitz"])
@pytest.mark.parametrize("normalize", [False, True])
@settings(max_examples=8, deadline=None)
@given(batch=st.integers(1, 2), T=st.integers(1, 16), seed=st.integers(0, 99),
       bias=st.booleans(), d_conv=st.sampled_from([None, 1, 3]))
def test_forward_matches_reference(mask, normalize, batch, T, seed, bias, d_conv):
    layer = make_layer(mask, normalize, seed, bias=bias, d_conv=d_conv)
    x = torch.randn(batch, T, 8, generator=torch.Generator().manual_seed(seed))
    x_before = x.clone()
    y = layer(x)
    assert y.shape == x.shape and y.dtype == torch.float32
    assert_close(y, attention_reference(layer, x))
    assert torch.equal(x, x_before)


@pytest.mark.parametrize("mask", RECURRENT + ["toeplitz"])
def test_forward_float64_and_both_algorithms(mask):
    x = torch.randn(2, 13, 8, dtype=torch.float64)
    for algorithm in ("linear", "quadratic"):
        layer = make_layer(mask, dtype=torch.float64, algorithm=algorithm)
        assert_close(layer(x), attention_reference(layer, x))


@pytest.mark.parametrize("mask", RECURRENT + ["toeplitz"])
def test_bfloat16_layer_matches_float32(mask):
    layer = make_layer(mask, normalize=True, d_conv=3).to(torch.bfloat16)
    x = torch.randn(2, 12, 8, dtype=torch.bfloat16)
    y = layer(x)
    assert y.dtype == torch.bfloat16
    ref = make_layer(mask, normalize=True, d_conv=3)
    ref.load_state_dict({k: v.float() for k, v in layer.state_dict().items()})
    assert_close(y, ref(x.float()))


def test_user_mask_module_and_fixed_matrix():
    """A user's mask in a few lines: a causal sliding window of width 3, as a Dense matrix."""
    def window(x):
        T = x.shape[1]
        i = torch.arange(T)
        return ss.Dense(((i[:, None] - i[None, :] >= 0) & (i[:, None] - i[None, :] < 3)).to(x.dtype))

    x = torch.randn(2, 9, 8)
    layer = make_layer(window)
    band = to_numpy64(window(x).to_dense())[None, None]
    assert_close(layer(x), attention_reference(layer, x, band))
    fixed = make_layer(ss.masks.Decay(0.5, 9))
    decay = to_numpy64(ss.masks.Decay(0.5, 9).to_dense())[None, None]
    assert_close(fixed(x), attention_reference(fixed, x, decay))
    assert not fixed.recurrent and not layer.recurrent


@pytest.mark.parametrize("mask", RECURRENT)
@pytest.mark.parametrize("normalize, d_conv", [(False, None), (True, 4)])
def test_decode_matches_forward(mask, normalize, d_conv):
    layer = make_layer(mask, normalize, seed=5, d_conv=d_conv)
    x = torch.randn(3, 12, 8)
    full = layer(x)
    y_prompt, cache = layer(x[:, :5], return_cache=True)
    assert_close(y_prompt, full[:, :5])
    steps = torch.stack([layer.step(x[:, t], cache) for t in range(5, 12)], 1)
    assert_close(steps, full[:, 5:])
    fresh = layer.allocate_cache(3)
    assert_close(torch.stack([layer.step(x[:, t], fresh) for t in range(12)], 1), full)
    assert_close(fresh.state, cache.state)
    prefix = layer(x[:, :5], return_cache=True)[1]
    saved = [t if t is None else t.clone() for t in (prefix.state, prefix.conv_state)]
    assert_close(layer(x[:, 5:], cache=prefix), full[:, 5:])
    for before, after in zip(saved, (prefix.state, prefix.conv_state)):
        assert (before is None and after is None) or torch.equal(before, after)


@pytest.mark.parametrize("mask", RECURRENT)
@settings(max_examples=8, deadline=None)
@given(lengths=st.lists(st.integers(1, 6), min_size=1, max_size=4), use_cu=st.booleans())
def test_packed_equals_alone_forward_and_backward(mask, lengths, use_cu):
    """In float64, so 'exactly the result of running each alone' is held to 1e-10."""
    layer = make_layer(mask, normalize=True, dtype=torch.float64, d_conv=3)
    T = sum(lengths)
    cu = torch.tensor([0, *np.cumsum(lengths)])
    x = torch.randn(1, T, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(1, T, 8, dtype=torch.float64)
    labels = torch.tensor([i % 2 for i, n in enumerate(lengths) for _ in range(n)])[None]
    packed = layer(x, cu_seqlens=cu) if use_cu else layer(x, seq_idx=labels)
    alone = [layer(x[:, cu[i]:cu[i + 1]]) for i in range(len(lengths))]
    params = [x, *layer.parameters()]
    got = torch.autograd.grad((packed * w).sum(), params, allow_unused=True)
    want = torch.autograd.grad(sum((y * w[:, cu[i]:cu[i + 1]]).sum() for i, y in enumerate(alone)),
                               params, allow_unused=True)
    assert_close(packed, torch.cat(alone, 1))
    for g, h in zip(got, want):
        assert (g is None) == (h is None)
        if g is not None:
            assert_close(g, h, what="gradient")


@pytest.mark.parametrize("mask", RECURRENT + ["toeplitz"])
def test_gradients_reach_every_parameter(mask):
    layer = make_layer(mask, normalize=True, bias=True, seed=3, d_conv=2)
    layer.mask.requires_grad_(True)
    x = torch.randn(2, 7, 8, requires_grad=True)
    (layer(x) * torch.randn(2, 7, 8)).sum().backward()
    named = [("x", x), *layer.named_parameters()]
    assert len(named) > 1
    for name, param in named:
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
        assert param.grad.abs().max() > 0, name


@pytest.mark.parametrize("mask", ["selective", "toeplitz"])
def test_gradcheck_float64(mask):
    torch.manual_seed(4)
    layer = MaskedAttention(4, 2, mask=mask, max_len=5, normalize=True, feature_map=elu1,
                            d_conv=2, dtype=torch.float64)
    names = [k for k, _ in layer.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for p in layer.parameters())
    x = torch.randn(1, 5, 4, dtype=torch.float64, requires_grad=True)

    def f(x, *ps):
        return torch.func.functional_call(layer, dict(zip(names, ps)), (x,))

    assert torch.autograd.gradcheck(f, (x, *params), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_decay_defaults_and_learnable():
    layer = MaskedAttention(8, 4, mask="decay")
    assert_close(torch.exp(layer.mask.log_gamma), 1 - 2.0 ** (-5 - torch.arange(4.0)))
    assert not list(layer.mask.parameters())
    learnable = MaskedAttention(8, 4, mask=ss.nn.DecayMask(4, [0.5, 0.6, 0.7, 0.8], learnable=True))
    assert [n for n, _ in learnable.mask.named_parameters()] == ["log_gamma"]


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"n_heads must divide d_model=8 unless d_key and d_value are given, got n_heads=3"):
        MaskedAttention(8, 3)
    assert MaskedAttention(8, 3, d_key=2, d_value=5).v_proj.out_features == 15
    with pytest.raises(ValueError, match=r"mask must be one of 'causal', 'decay', 'selective', 'toeplitz'.*got 'retnet'"):
        MaskedAttention(8, 2, mask="retnet")
    with pytest.raises(ValueError, match=r"mask='toeplitz' needs max_len"):
        MaskedAttention(8, 2, mask="toeplitz")
    with pytest.raises(TypeError, match=r"mask must be a str, a structured matrix or a callable.*got int"):
        MaskedAttention(8, 2, mask=3)
    with pytest.raises(TypeError, match=r"feature_map must be callable or None, got str"):
        MaskedAttention(8, 2, feature_map="elu")
    with pytest.raises(ValueError, match=r"gamma must have shape \(2,\) with values in \(0, 1\]"):
        ss.nn.DecayMask(2, [0.5, 1.5])
    toeplitz = MaskedAttention(8, 2, mask="toeplitz", max_len=4)
    with pytest.raises(ValueError, match=r"x must have at most max_len=4 tokens for this ToeplitzMask, got T=5"):
        toeplitz(torch.randn(1, 5, 8))
    with pytest.raises(TypeError, match=r"decoding needs a recurrent mask .* got ToeplitzMask"):
        toeplitz.allocate_cache(2)
    with pytest.raises(TypeError, match=r"packed sequences needs a recurrent mask"):
        toeplitz(torch.randn(1, 4, 8), cu_seqlens=torch.tensor([0, 2, 4]))
    fixed = MaskedAttention(8, 2, mask=ss.masks.Causal(5))
    with pytest.raises(ValueError, match=r"x must have T=5 tokens for this fixed mask of shape \(5, 5\), got T=4"):
        fixed(torch.randn(1, 4, 8))
    layer = MaskedAttention(8, 2, mask="selective")
    with pytest.raises(ValueError, match=r"x must have shape \(batch, T, 8\), got shape \(2, 8\)"):
        layer(torch.randn(2, 8))
    with pytest.raises(ValueError, match=r"cu_seqlens must run from 0 to the sequence length 4, got 0 ... 3"):
        layer(torch.randn(1, 4, 8), cu_seqlens=torch.tensor([0, 3]))
    cache = layer.allocate_cache(2)
    with pytest.raises(ValueError, match=r"cache was allocated for batch 2, got an input of batch 3"):
        layer.step(torch.randn(3, 8), cache)
    with pytest.raises(ValueError, match=r"cache.state must have shape \(2, 2, 4, 4\) for this MaskedAttention, got shape \(2, 2, 4, 5\)"):
        layer.step(torch.randn(2, 8), AttentionCache(torch.zeros(2, 2, 4, 5)))
    with pytest.raises(ValueError, match=r"cache.conv_state must have shape \(2, 2, 24\) for this MaskedAttention, got None"):
        MaskedAttention(8, 2, mask="selective", d_conv=3).step(torch.randn(2, 8), cache)
    with pytest.raises(ValueError, match=r"x_t must have shape \(batch, 8\), got shape \(2, 1, 8\)"):
        layer.step(torch.randn(2, 1, 8), cache)

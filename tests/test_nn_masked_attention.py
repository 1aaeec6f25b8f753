"""semisep.nn.MaskedAttention against float64 dense attention built from the definition."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

import semisep as ss
from semisep.nn import AttentionCache, MaskedAttention, SelectiveMask
from semisep.testing import (assert_close, assert_module_gradcheck, dense_reference, sss_matrices,
                             to_numpy64)

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
    assert fixed.recurrent and not layer.recurrent   # Decay has a 1-SS form; a Dense has none


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
@given(lengths=st.lists(st.integers(1, 6), min_size=1, max_size=4).filter(lambda n: max(n) > 1),
       use_cu=st.booleans())
def test_packed_equals_alone_forward_and_backward(mask, lengths, use_cu):
    """In float64, so 'exactly the result of running each alone' is held to 1e-10.

    Some sequence has two tokens or more: normalized, a one-token sequence's output
    is ``v (q.k) / (q.k + eps)``, whose gradient in q and k is of the order of eps,
    so with one-token sequences alone those gradients are rounding noise.
    """
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
    assert_module_gradcheck(layer, torch.randn(1, 5, 4, dtype=torch.float64, requires_grad=True))


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
    with pytest.raises(TypeError, match=r"cache must be an AttentionCache .* got NoneType"):
        layer.step(torch.randn(2, 8), None)
    with pytest.raises(ValueError, match=r"gamma must have shape \(2,\) \(one per head\), got shape \(3,\)"):
        ss.nn.ToeplitzMask(2, 5, gamma=[0.5, 0.6, 0.7])


# -- SSS masks (state size N_L): the dual SSM has state N_L * d_key -----------------------

SSS_STRUCTURES = ["scalar", "diagonal", "full"]


class ProjectedSSSMask(torch.nn.Module):
    """An input-dependent SSS mask: ``A_t``, ``b_t``, ``c_t`` per head projected from ``x_t``.

    scalar: ``log a_t = logsigmoid(x_t w)`` (log form); diagonal: ``a_t = sigmoid(x_t W)``;
    full: ``A_t = tanh(x_t W) / N_L``.
    """

    def __init__(self, d_model, n_heads, state_size, structure, dtype=torch.float64):
        super().__init__()
        self.n_heads, self.structure = n_heads, structure
        self.state_size = self.size = state_size    # declared (the protocol) and actual
        width = {"scalar": 1, "diagonal": state_size, "full": state_size ** 2}[structure]
        self.a = torch.nn.Linear(d_model, n_heads * width, dtype=dtype)
        self.b = torch.nn.Linear(d_model, n_heads * state_size, bias=False, dtype=dtype)
        self.c = torch.nn.Linear(d_model, n_heads * state_size, bias=False, dtype=dtype)

    def _heads(self, t, *core):   # (batch, T, h * prod(core)) -> (batch, h, T, *core)
        return t.unflatten(-1, (self.n_heads, *core)).transpose(1, 2)

    def forward(self, x):
        N = self.size
        b, c = self._heads(self.b(x), N), self._heads(self.c(x), N)
        if self.structure == "scalar":
            return ss.SSS.from_log(F.logsigmoid(self._heads(self.a(x), 1)[..., 0]), b, c)
        if self.structure == "diagonal":
            return ss.SSS(torch.sigmoid(self._heads(self.a(x), N)), b, c)
        return ss.SSS(torch.tanh(self._heads(self.a(x), N, N)) / N, b, c, structure="full")


def sss_dense(L):
    """The float64 dense mask of an SSS, entry by entry from the definition."""
    log = L.log_a is not None
    return dense_reference(to_numpy64(L.log_a if log else L.A), to_numpy64(L.B), to_numpy64(L.C),
                           structure=L.structure, log=log)


def sss_layer(mask, *, normalize=False, d_conv=None, dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    return MaskedAttention(8, 2, mask=mask, normalize=normalize, d_conv=d_conv, dtype=dtype,
                           feature_map=elu1 if normalize else None)


def decode_all(layer, x, prompt):
    """Outputs of ``forward(prompt, return_cache=True)`` then one ``step`` per token, and the cache."""
    y, cache = layer(x[:, :prompt], return_cache=True)
    steps = [layer.step(x[:, t], cache) for t in range(prompt, x.shape[1])]
    return torch.cat([y, *(s[:, None] for s in steps)], dim=1), cache


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_masked_sss_mask_to_sss_is_the_kronecker_form(backend, data):
    """masked(SSS(A, b, c), Q, K).to_sss(): state N_L * N, the same structure and form of A."""
    L = data.draw(sss_matrices(T=st.integers(1, 9), N=st.integers(1, 3),
                               batch_shape=st.sampled_from([(), (2,), (1, 2)]), backend=backend))
    N = data.draw(st.integers(1, 3))
    seed = data.draw(st.integers(0, 99))
    rng = np.random.default_rng(seed)
    T = L.seq_len
    Q, K = rng.normal(size=(3, 1, T, N)), rng.normal(size=(2, T, N))
    if backend == "torch":
        Q, K = torch.tensor(Q), torch.tensor(K)
    M = ss.masked(L, Q, K).to_sss()
    assert M.state_size == L.state_size * N and M.structure == L.structure
    assert (M.log_a is None) == (L.log_a is None)
    expected = sss_dense(L) * (to_numpy64(Q) @ to_numpy64(K).swapaxes(-1, -2))
    assert_close(M.to_dense(), expected)
    V = rng.normal(size=(T, 2))
    assert_close(M.matmul(torch.tensor(V) if backend == "torch" else V, algorithm="recurrent"),
                 expected @ V)


@pytest.mark.parametrize("structure", SSS_STRUCTURES)
def test_masked_sss_mask_with_more_batch_in_A_than_in_b_c(structure):
    """A per head, b and c shared: B' and C' have fewer batch dimensions than A'."""
    rng = np.random.default_rng(3)
    T, NL, N = 6, 2, 3
    core = {"scalar": (T,), "diagonal": (T, NL), "full": (T, NL, NL)}[structure]
    L = ss.SSS(rng.uniform(-1, 1, (2,) + core), rng.normal(size=(T, NL)),
               rng.normal(size=(T, NL)), structure=structure)
    Q, K = rng.normal(size=(T, N)), rng.normal(size=(T, N))
    M = ss.masked(L, Q, K).to_sss()
    expected = sss_dense(L) * (Q @ K.T)
    assert M.shape == (2, T, T)
    assert_close(M.to_dense(), expected)


@pytest.mark.parametrize("structure", SSS_STRUCTURES)
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_fixed_sss_mask_decode_matches_forward(structure, data):
    """A fixed SSS mask: forward == the float64 definition; prompt + steps == forward (1e-10)."""
    L = data.draw(sss_matrices(structure=structure, T=st.integers(1, 11), N=st.integers(1, 3),
                               batch_shape=st.sampled_from([(), (2,), (1, 2)]),
                               backend="torch"))
    T = L.seq_len
    normalize, seed = data.draw(st.booleans()), data.draw(st.integers(0, 99))
    prompt = data.draw(st.integers(0, T - 1))
    layer = sss_layer(L, normalize=normalize, seed=seed)
    x = torch.randn(2, T, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    full = layer(x)
    assert_close(full, attention_reference(layer, x, sss_dense(L)))
    if prompt == 0:
        cache = layer.allocate_cache(2)
        got = torch.stack([layer.step(x[:, t], cache) for t in range(T)], dim=1)
    else:
        got, cache = decode_all(layer, x, prompt)
    assert cache.state.shape == (2, 2, L.state_size * 4, 4 + normalize) and cache.position == T
    assert_close(got, full)


@pytest.mark.parametrize("structure", SSS_STRUCTURES)
def test_fixed_sss_mask_long_prompt_float32(structure):
    """T = 70 > the chunk (64): the chunked products with a state; float32 within 1e-5.

    A positive mask, as the normalization is meant for (row sums near zero would
    amplify rounding in any precision).
    """
    rng = np.random.default_rng(1)
    T, NL = 70, 2
    core = {"scalar": (T,), "diagonal": (T, NL), "full": (T, NL, NL)}[structure]
    A = rng.uniform(0.5, 1.0, core) / (NL if structure == "full" else 1)
    L64 = ss.SSS(A, rng.uniform(0.1, 1.0, (2, T, NL)), rng.uniform(0.1, 1.0, (T, NL)),
                 structure=structure)
    L32 = ss.SSS(*(torch.tensor(v, dtype=torch.float32) for v in (L64.A, L64.B, L64.C)),
                 structure=structure)
    layer = sss_layer(L32, normalize=True, d_conv=3, dtype=torch.float32, seed=2)
    x = torch.randn(2, T, 8)
    expected = attention_reference(layer, x, sss_dense(L64))
    assert_close(layer(x), expected)
    got, cache = decode_all(layer, x, 66)
    assert_close(got, expected)
    saved = cache.state.clone()
    assert_close(layer(x[:, 66:], cache=layer(x[:, :66], return_cache=True)[1]), expected[:, 66:])
    assert torch.equal(saved, cache.state)


@pytest.mark.parametrize("structure", SSS_STRUCTURES)
@settings(max_examples=4, deadline=None)
@given(lengths=st.lists(st.integers(1, 5), min_size=1, max_size=3).filter(lambda n: max(n) > 1),
       NL=st.integers(1, 3), seed=st.integers(0, 99))
def test_projected_sss_mask_decode_and_packing(structure, lengths, NL, seed):
    """A mask module returning an SSS: decode == forward; packed == each alone, with gradients.

    Some sequence has two tokens or more (see test_packed_equals_alone_forward_and_backward).
    Without the normalization: with a sign-indefinite SSS mask its row sums can come near
    zero, and the float64 gradients then differ by more than rounding (1.05e-10 seen); the
    normalization's packing is covered by the 1-SS tests.
    """
    torch.manual_seed(seed)
    layer = sss_layer(ProjectedSSSMask(8, 2, NL, structure), normalize=False, d_conv=2, seed=seed)
    T = sum(lengths)
    x = torch.randn(1, T, 8, dtype=torch.float64, requires_grad=True)
    full = layer(x)
    assert_close(full, attention_reference(layer, x, sss_dense(layer.mask(x))))
    assert_close(decode_all(layer, x, lengths[0])[0], full)

    cu = torch.tensor([0, *np.cumsum(lengths)])
    w = torch.randn(1, T, 8, dtype=torch.float64)
    packed = layer(x, cu_seqlens=cu)
    alone = [layer(x[:, cu[i]:cu[i + 1]]) for i in range(len(lengths))]
    assert_close(packed, torch.cat(alone, 1))
    params = [x, *layer.parameters()]   # A_0 of a one-token sequence reaches no output
    got = torch.autograd.grad((packed * w).sum(), params, allow_unused=True)
    want = torch.autograd.grad(sum((y * w[:, cu[i]:cu[i + 1]]).sum() for i, y in enumerate(alone)),
                               params, allow_unused=True)
    for g, h in zip(got, want):
        assert (g is None) == (h is None)
        if g is not None:
            assert_close(g, h, what="gradient")


def test_gradcheck_sss_mask_decoding():
    """float64 gradcheck through prompt + steps, to the layer's and the mask's parameters."""
    torch.manual_seed(6)
    layer = MaskedAttention(4, 2, mask=ProjectedSSSMask(4, 2, 2, "diagonal"), normalize=True,
                            feature_map=elu1, dtype=torch.float64)
    names = [k for k, _ in layer.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for p in layer.parameters())
    x = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)

    def f(x, *ps):
        with torch.nn.utils.stateless._reparametrize_module(layer, dict(zip(names, ps))):
            return decode_all(layer, x, 1)[0]

    assert torch.autograd.gradcheck(f, (x, *params), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_sss_mask_bad_inputs():
    L = ss.SSS(torch.rand(5, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64),
               torch.randn(5, 3, dtype=torch.float64))
    layer = sss_layer(L)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"x must have T=5 tokens for this fixed mask of shape \(5, 5\), got T=6"):
        layer(torch.randn(2, 6, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"x must have at most 5 tokens after position 0 for this fixed mask of T=5, got 6"):
        layer(torch.randn(2, 6, 8, dtype=torch.float64), return_cache=True)
    _, cache = layer(x, return_cache=True)
    with pytest.raises(ValueError, match=r"x must have at most 0 tokens after position 5 for this fixed mask of T=5, got 1"):
        layer.step(x[:, 0], cache)
    with pytest.raises(ValueError, match=r"cache was allocated for batch 2, got an input of batch 3"):
        layer.step(torch.randn(3, 8, dtype=torch.float64), layer.allocate_cache(2))
    one_ss = sss_layer("decay").allocate_cache(2)      # state (2, 2, 4, 4), not N_L d_key = 12
    with pytest.raises(ValueError, match=r"cache.state must have shape \(2, 2, 12, 4\) for this MaskedAttention, got shape \(2, 2, 4, 4\)"):
        layer.step(x[:, 0], one_ss)
    with pytest.raises(ValueError, match=r"packed sequences need a mask whose steps follow the tokens.*FixedSSSMask"):
        layer(x[:1], cu_seqlens=torch.tensor([0, 2, 5]))

    module = ProjectedSSSMask(8, 2, 3, "diagonal")
    projected = sss_layer(module)
    cache = projected.allocate_cache(2)
    module.state_size = 2
    with pytest.raises(ValueError, match=r"the mask must have the state size 2 its module declares \(state_size\), got an SSS of state size 3"):
        projected(x, return_cache=True)
    module.state_size = 3
    assert projected.step(x[:, 0], cache).shape == (2, 8)

    class Truncating(torch.nn.Module):   # returns a mask one step short of x
        state_size = 3

        def forward(self, x):
            return module(x[:, 1:])

    with pytest.raises(ValueError, match=r"the mask must have T=5 steps like x, got an SSS of shape \(2, 2, 4, 4\)"):
        sss_layer(Truncating())(x, return_cache=True)

    class NotSSS(torch.nn.Module):
        state_size = 1

        def forward(self, x):
            return ss.masks.Toeplitz(torch.ones(x.shape[1], dtype=x.dtype))

    with pytest.raises(TypeError, match=r"a mask module with state_size must return an SSS \(or 1-SS\) matrix, got Toeplitz"):
        sss_layer(NotSSS()).step(x[:, 0], sss_layer(NotSSS()).allocate_cache(2))


@pytest.mark.parametrize("algorithm", ["linear", "quadratic"])
def test_array_masks_numpy_or_torch_any_dtype(algorithm):
    """A plain array mask (numpy or a tensor of another dtype) is the dense mask L."""
    L = np.tril(np.random.default_rng(0).uniform(size=(6, 6)))
    torch.manual_seed(0)
    ref = MaskedAttention(8, 2, mask=ss.Dense(torch.tensor(L)), algorithm=algorithm,
                          dtype=torch.float64)
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    for mask in (L, torch.tensor(L, dtype=torch.float32), torch.tensor(L)):
        layer = MaskedAttention(8, 2, mask=mask, algorithm=algorithm, dtype=torch.float64)
        layer.load_state_dict(ref.state_dict())
        tol = 1e-6 if getattr(mask, "dtype", None) == torch.float32 else 1e-12
        torch.testing.assert_close(layer(x), ref(x), rtol=tol, atol=tol)

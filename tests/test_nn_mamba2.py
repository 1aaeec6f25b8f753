"""semisep.nn.Mamba2 against a float64 token-by-token reference; decoding, packing, errors."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from semisep.nn import GatedRMSNorm, Mamba2, Mamba2Cache, seq_idx_from_cu_seqlens
from semisep.testing import assert_close, assert_module_gradcheck, to_numpy64


def mamba2_reference(layer, u, starts=None):
    """The block from its definition in float64 numpy, one token at a time.

    ``starts``: (batch, T) bools, True where a new packed sequence begins.
    """
    P = {k: to_numpy64(v) for k, v in layer.state_dict().items()}
    u = to_numpy64(u)
    b, T, _ = u.shape
    di, ng, n, h, p, K = (layer.d_inner, layer.ngroups, layer.d_state, layer.nheads,
                          layer.headdim, layer.d_conv)
    starts = np.zeros((b, T), bool) if starts is None else np.asarray(starts)
    proj = u @ P["in_proj.weight"].T + P.get("in_proj.bias", 0.0)
    z, xbc, dt = proj[..., :di], proj[..., di:di + layer.conv_dim], proj[..., di + layer.conv_dim:]
    w = P["conv1d.weight"][:, 0]
    silu = lambda v: v / (1 + np.exp(-v))  # noqa: E731
    out = np.zeros((b, T, di))
    for r in range(b):
        hstate = np.zeros((h, p, n))
        first = 0
        for t in range(T):
            if starts[r, t]:
                hstate[:] = 0.0
                first = t
            conv = P.get("conv1d.bias", np.zeros(layer.conv_dim)).copy()
            for k in range(K):
                s = t - (K - 1) + k
                if s >= first:
                    conv += w[:, k] * xbc[r, s]
            conv = silu(conv)
            x = conv[:di].reshape(h, p)
            B = conv[di:di + ng * n].reshape(ng, n)
            C = conv[di + ng * n:].reshape(ng, n)
            d = np.log1p(np.exp(dt[r, t] + P["dt_bias"]))
            A = -np.exp(P["A_log"])
            y = np.zeros((h, p))
            for i in range(h):
                g = i // (h // ng)
                hstate[i] = np.exp(d[i] * A[i]) * hstate[i] + d[i] * np.outer(x[i], B[g])
                y[i] = hstate[i] @ C[g] + P["D"][i] * x[i]
            gated = (y.reshape(di) * silu(z[r, t])).reshape(ng, di // ng)
            gated = gated / np.sqrt((gated ** 2).mean(-1, keepdims=True) + layer.norm.eps)
            out[r, t] = gated.reshape(di) * P["norm.weight"]
    return out @ P["out_proj.weight"].T + P.get("out_proj.bias", 0.0)


@st.composite
def layers(draw, dtype=torch.float32):
    """A small Mamba2 with hypothesis-drawn sizes and random (not default-init) parameters."""
    d_model = draw(st.integers(1, 4))
    expand = draw(st.integers(1, 2))
    d_inner = expand * d_model
    headdim = draw(st.sampled_from([k for k in range(1, d_inner + 1) if d_inner % k == 0]))
    nheads = d_inner // headdim
    ngroups = draw(st.sampled_from([k for k in range(1, nheads + 1) if nheads % k == 0]))
    torch.manual_seed(draw(st.integers(0, 2**31 - 1)))
    layer = Mamba2(d_model, d_state=draw(st.integers(1, 5)), headdim=headdim, expand=expand,
                   ngroups=ngroups, d_conv=draw(st.integers(1, 4)),
                   chunk_size=draw(st.integers(1, 5)), bias=draw(st.booleans()), dtype=dtype)
    with torch.no_grad():
        for param in layer.parameters():
            param.add_(0.3 * torch.randn_like(param))
    return layer


@settings(max_examples=25, deadline=None)
@given(layer=layers(), batch=st.integers(1, 2), T=st.integers(1, 13), seed=st.integers(0, 99))
def test_forward_matches_reference(layer, batch, T, seed):
    u = torch.randn(batch, T, layer.d_model, generator=torch.Generator().manual_seed(seed))
    u_before = u.clone()
    y = layer(u)
    assert y.shape == u.shape and y.dtype == torch.float32
    assert_close(y, mamba2_reference(layer, u))
    assert torch.equal(u, u_before)


@settings(max_examples=6, deadline=None)
@given(layer=layers(dtype=torch.float64), T=st.integers(1, 9))
def test_forward_float64(layer, T):
    u = torch.randn(2, T, layer.d_model, dtype=torch.float64)
    y = layer(u)
    assert y.dtype == torch.float64
    assert_close(y, mamba2_reference(layer, u))


def test_bfloat16_layer_matches_float32():
    torch.manual_seed(0)
    layer = Mamba2(16, d_state=8, headdim=8, chunk_size=8).to(torch.bfloat16)
    u = torch.randn(2, 20, 16, dtype=torch.bfloat16)
    y = layer(u)
    assert y.dtype == torch.bfloat16
    ref = Mamba2(16, d_state=8, headdim=8, chunk_size=8)
    ref.load_state_dict({k: v.float() for k, v in layer.state_dict().items()})
    assert_close(y, ref(u.float()))


def test_initialization():
    torch.manual_seed(0)
    layer = Mamba2(64, d_state=16, headdim=4, dt_min=1e-3, dt_max=1e-1)
    dt = torch.nn.functional.softplus(layer.dt_bias.detach())
    assert dt.min() >= 1e-3 * (1 - 1e-5) and dt.max() <= 1e-1 * (1 + 1e-5)
    assert dt.log().std() > 0.5  # log-uniform over two decades, not a constant
    A = torch.exp(layer.A_log.detach())
    assert A.min() >= 1 and A.max() <= 16
    assert torch.equal(layer.D.detach(), torch.ones(layer.nheads))
    assert layer.A_log.dtype == torch.float32
    half = Mamba2(8, d_state=4, headdim=4, dtype=torch.bfloat16)
    assert half.A_log.dtype == half.dt_bias.dtype == torch.float32
    assert half.in_proj.weight.dtype == torch.bfloat16
    shapes = {k: tuple(v.shape) for k, v in layer.named_parameters()}
    assert shapes["in_proj.weight"] == (2 * 128 + 2 * 16 + 32, 64)
    assert shapes["conv1d.weight"] == (128 + 2 * 16, 1, 4)


def test_gradients_reach_every_parameter():
    torch.manual_seed(1)
    layer = Mamba2(8, d_state=4, headdim=4, ngroups=2, chunk_size=3, bias=True)
    u = torch.randn(2, 7, 8, requires_grad=True)
    (layer(u) * torch.randn(2, 7, 8)).sum().backward()
    for name, param in [("u", u), *layer.named_parameters()]:
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
        assert param.grad.abs().max() > 0, name


def test_gradcheck_float64():
    torch.manual_seed(2)
    layer = Mamba2(4, d_state=3, headdim=2, ngroups=2, d_conv=3, chunk_size=2, bias=True,
                   dtype=torch.float64)
    assert_module_gradcheck(layer, torch.randn(1, 5, 4, dtype=torch.float64, requires_grad=True))


@settings(max_examples=15, deadline=None)
@given(layer=layers(), T=st.integers(1, 12), data=st.data())
def test_decode_matches_forward(layer, T, data):
    u = torch.randn(2, T, layer.d_model)
    prompt = data.draw(st.integers(0, T), label="prompt")
    full = layer(u)
    if prompt:
        y_prompt, cache = layer(u[:, :prompt], return_cache=True)
        assert_close(y_prompt, full[:, :prompt])
    else:
        cache = layer.allocate_cache(2)
    steps = [layer.step(u[:, t], cache) for t in range(prompt, T)]
    if steps:
        assert_close(torch.stack(steps, 1), full[:, prompt:])
    _, final = layer(u, return_cache=True)
    assert_close(cache.ssm_state, final.ssm_state)
    assert_close(cache.conv_state, final.conv_state)


def test_chunked_prefill_continues_and_leaves_the_cache_alone():
    torch.manual_seed(3)
    layer = Mamba2(8, d_state=4, headdim=4, chunk_size=4)
    u = torch.randn(2, 11, 8)
    _, cache = layer(u[:, :5], return_cache=True)
    saved = Mamba2Cache(cache.conv_state.clone(), cache.ssm_state.clone())
    y2 = layer(u[:, 5:], cache=cache)
    assert_close(y2, layer(u)[:, 5:])
    assert torch.equal(cache.conv_state, saved.conv_state)
    assert torch.equal(cache.ssm_state, saved.ssm_state)


def _packed_vs_alone(layer, lengths, use_cu_seqlens):
    T = sum(lengths)
    u = torch.randn(1, T, layer.d_model, dtype=torch.float64, requires_grad=True)
    w = torch.randn(1, T, layer.d_model, dtype=torch.float64)
    cu = torch.tensor([0, *np.cumsum(lengths)])
    if use_cu_seqlens:
        packed = layer(u, cu_seqlens=cu)
    else:  # labels that repeat a value later on: still separate sequences
        labels = torch.tensor([i % 2 for i, n in enumerate(lengths) for _ in range(n)])[None]
        packed = layer(u, seq_idx=labels)
    packed_grads = torch.autograd.grad((packed * w).sum(), [u, *layer.parameters()])
    alone = [layer(u[:, cu[i]:cu[i + 1]]) for i in range(len(lengths))]
    alone_grads = torch.autograd.grad(
        sum((y * w[:, cu[i]:cu[i + 1]]).sum() for i, y in enumerate(alone)),
        [u, *layer.parameters()])
    assert_close(packed, torch.cat(alone, 1))
    for got, want in zip(packed_grads, alone_grads):
        assert_close(got, want, what="gradient")


@settings(max_examples=20, deadline=None)
@given(layer=layers(dtype=torch.float64),
       lengths=st.lists(st.integers(1, 7), min_size=1, max_size=4), use_cu_seqlens=st.booleans())
def test_packed_equals_alone_forward_and_backward(layer, lengths, use_cu_seqlens):
    """In float64, so 'exactly the result of running each alone' is held to 1e-10."""
    _packed_vs_alone(layer, lengths, use_cu_seqlens)


def test_packed_rows_with_seq_idx():
    torch.manual_seed(4)
    layer = Mamba2(8, d_state=4, headdim=4, chunk_size=3)
    u = torch.randn(2, 9, 8)
    seq_idx = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0, 0]])
    y = layer(u, seq_idx=seq_idx)
    assert_close(y[0, :4], layer(u[:1, :4])[0])
    assert_close(y[0, 4:], layer(u[:1, 4:])[0])
    assert_close(y[1], layer(u[1:])[0])


def test_seq_idx_from_cu_seqlens():
    assert seq_idx_from_cu_seqlens(torch.tensor([0, 2, 2, 5]), 5).tolist() == [[0, 0, 2, 2, 2]]
    assert seq_idx_from_cu_seqlens([0, 3], 3).tolist() == [[0, 0, 0]]


def test_gated_rmsnorm_groups():
    norm = GatedRMSNorm(6, group_size=3, eps=0.0)
    y, z = torch.randn(4, 6), torch.randn(4, 6)
    g = (y * torch.nn.functional.silu(z)).reshape(4, 2, 3)
    want = (g / g.square().mean(-1, keepdim=True).sqrt()).reshape(4, 6)
    assert_close(norm(y, z), want)


@pytest.mark.parametrize("kwargs, match", [
    ({"d_model": 6, "headdim": 5}, r"headdim must divide expand \* d_model = 2 \* 6 = 12, got headdim=5"),
    ({"d_model": 8, "headdim": 4, "ngroups": 3}, r"ngroups must divide the number of heads 4"),
    ({"d_model": 0}, r"d_model must be an int >= 1, got 0"),
    ({"d_model": 8, "headdim": 4, "chunk_size": 0}, r"chunk_size must be an int >= 1"),
])
def test_bad_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Mamba2(**kwargs)


def test_bad_inputs():
    layer = Mamba2(8, d_state=4, headdim=4)
    u = torch.randn(1, 6, 8)
    with pytest.raises(ValueError, match=r"u must have shape \(batch, T, 8\), got shape \(1, 6, 7\)"):
        layer(torch.randn(1, 6, 7))
    with pytest.raises(ValueError, match=r"cu_seqlens must run from 0 to the sequence length 6, got 0 ... 5"):
        layer(u, cu_seqlens=torch.tensor([0, 2, 5]))
    with pytest.raises(ValueError, match=r"cu_seqlens must be non-decreasing"):
        layer(u, cu_seqlens=torch.tensor([0, 4, 2, 6]))
    with pytest.raises(TypeError, match=r"cu_seqlens must be an int array, got dtype torch.float32"):
        layer(u, cu_seqlens=torch.tensor([0.0, 6.0]))
    with pytest.raises(ValueError, match=r"cu_seqlens packs sequences into a batch of one, got x of batch 2"):
        layer(torch.randn(2, 6, 8), cu_seqlens=torch.tensor([0, 6]))
    with pytest.raises(TypeError, match=r"cache must be a Mamba2Cache .* got NoneType"):
        layer.step(torch.randn(1, 8), None)
    with pytest.raises(ValueError, match=r"seq_idx must have shape \(1, 6\), got shape \(1, 5\)"):
        layer(u, seq_idx=torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"return_cache=True needs one sequence per row"):
        layer(u, seq_idx=torch.zeros(1, 6, dtype=torch.long), return_cache=True)
    cache = layer.allocate_cache(3)
    with pytest.raises(ValueError, match=r"cache was allocated for batch 3, got an input of batch 2"):
        layer.step(torch.randn(2, 8), cache)
    with pytest.raises(ValueError, match=r"cache.ssm_state must have shape \(3, 4, 4, 4\)"):
        layer.step(torch.randn(3, 8), Mamba2Cache(cache.conv_state, torch.zeros(3, 4, 4, 5)))
    with pytest.raises(TypeError, match=r"cache must be a Mamba2Cache"):
        layer.step(torch.randn(3, 8), {"ssm_state": None})
    with pytest.raises(ValueError, match=r"u_t must have shape \(batch, 8\), got shape \(3, 1, 8\)"):
        layer.step(torch.randn(3, 1, 8), cache)
    assert math.isfinite(float(layer(u).detach().sum()))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_float64_forward_backward_and_decode():
    """Whatever backend CUDA tensors select (Triton where it supports the case), same layer."""
    torch.manual_seed(5)
    layer = Mamba2(32, d_state=16, headdim=8, ngroups=2, chunk_size=16)
    u, w = torch.randn(2, 50, 32), torch.randn(2, 50, 32)
    layer64 = Mamba2(32, d_state=16, headdim=8, ngroups=2, chunk_size=16, dtype=torch.float64)
    layer64.load_state_dict(layer.state_dict())
    u64 = u.double().requires_grad_()
    want = layer64(u64)
    want_grads = torch.autograd.grad((want * w.double()).sum(), [u64, *layer64.parameters()])
    gpu = layer.cuda()
    u_gpu = u.cuda().requires_grad_()
    got = gpu(u_gpu)
    got_grads = torch.autograd.grad((got * w.cuda()).sum(), [u_gpu, *gpu.parameters()])
    assert_close(got, want)
    for g, h in zip(got_grads, want_grads):
        assert_close(g, h, what="gradient")
    cache = gpu.allocate_cache(2)
    with torch.no_grad():
        steps = torch.stack([gpu.step(u_gpu[:, t], cache) for t in range(50)], 1)
    assert_close(steps, want)

"""The backward in spans (config.span_steps): the forward keeps the state entering each span
after the first, the backward runs each span's two sweeps from it, last span first, carrying
the adjoint across. Spanned and whole calls give the same results, against float64 too."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from semisep.backends.triton import config, naive, ops, ssd
from semisep.backends.triton import launch as L


def rel(a, b):
    a, b = a.double(), b.double()
    assert torch.isfinite(a).all()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


@pytest.mark.parametrize("T,p,n,chunk,want", [
    (16384, 64, 128, None, 6144),       # N = 128: chunks of 32, three spans (2 x 6144 + 4096)
    (16384, 64, 64, None, None),        # n <= Q: one span
    (1024, 64, 256, None, 192),         # six spans
    (100, 8, 40, 16, 64),               # 7 chunks of 16: 1.5 x 112 // 40 = 4 chunks a span
    (100, 8, 17, 16, None),             # 1.5 x 112 // 17 = 9 chunks: one span
    (100, 8, 128, None, 32),            # 4 chunks of 32, each holding x's elements: a span each
    (20, 8, 128, None, None),           # one chunk: one span
])
def test_span_steps(T, p, n, chunk, want):
    assert config.span_steps(T, p, n, chunk, torch.float32) == want


@settings(max_examples=20, deadline=None)
@given(T=st.sampled_from([64, 100, 1000, 16384]), p=st.sampled_from([8, 64]),
       n=st.sampled_from([16, 64, 128, 256]), chunk=st.sampled_from([None, 16, 64]))
def test_a_spans_states_hold_at_most_one_and_a_half_x(T, p, n, chunk):
    """Where a span holds more than one chunk, its stored states (p x n a chunk) hold no
    more than 1.5 times x's elements (T x p, in whole chunks); spans are whole chunks of
    both sweeps."""
    steps = config.span_steps(T, p, n, chunk, torch.float32)
    Qb = config.pick_config(p, n, chunk, torch.float32, "bwd")["Q"]
    Qf = config.pick_config(p, n, chunk, torch.float32, "fwd")["Q"]
    nc = -(-T // Qb)
    if steps is None:
        assert 2 * n <= 3 * Qb or nc == 1
        return
    assert steps % Qb == 0 and steps % Qf == 0 and steps < T
    if steps > Qb:
        assert 2 * (steps // Qb) * p * n <= 3 * nc * Qb * p


def _make(b, T, h, g, p, n, seed):
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    return dict(x=r(b, T, h, p), dt=torch.rand(b, T, h, generator=gen) - 0.3,
                A=-torch.rand(h, generator=gen) * 3, B=r(b, T, g, n), C=r(b, T, g, n),
                D=r(h, p), z=r(b, T, h, p), dt_bias=r(h) * 0.5, initial_state=r(b, h, p, n))


def _loss(y, hT, seed, final):
    """A random linear function of y, and of the final state where ``final``."""
    gen = torch.Generator().manual_seed(seed)
    gy, gs = torch.randn(y.shape, generator=gen), torch.randn(hT.shape, generator=gen)
    return (y * gy.to(y.dtype)).sum() + ((hT * gs.to(y.dtype)).sum() if final else 0.0)


def _grads(ins, kw, seed, final):
    ins = {k: v.detach().clone().requires_grad_(True) for k, v in ins.items()}
    y, hT = ssd(**ins, **kw, chunk_size=16, return_final_state=True)
    return [y, hT, *torch.autograd.grad(_loss(y, hT, seed, final), list(ins.values()))]


@settings(max_examples=6, deadline=None)
@given(T=st.sampled_from([17, 40]), span=st.integers(1, 3), use_dt=st.booleans(),
       extras=st.booleans(), final=st.booleans(), deterministic=st.booleans(),
       reset=st.booleans(), seed=st.integers(0, 100))
def test_spanned_backward_is_the_whole_one(T, span, use_dt, extras, final, deterministic,
                                           reset, seed):
    """Spans of 1-3 chunks of 16 (SPAN) against one span: the same forward and gradients of
    every input (the carried adjoint, the per-span dA / d dt_bias / dD sums and partials in
    deterministic mode), and both against float64; with h0, z, D per p, dt_bias, softplus,
    seq_idx, a -inf reset and a final-state gradient as drawn."""
    b, h, g, p, n = 2, 2, 1, 8, 16
    d = _make(b, T, h, g, p, n, seed)
    if use_dt:
        ins = dict(x=d["x"], dt=d["dt"], A=d["A"], B=d["B"], C=d["C"])
        kw = dict(dt_softplus=True, log_a=None)
        if extras:
            ins.update(dt_bias=d["dt_bias"])
    else:
        la = -torch.rand(b, T, h, generator=torch.Generator().manual_seed(seed)) * 2
        if reset:
            la[0, T // 2, 1] = -math.inf
        ins = dict(x=d["x"], log_a=la, B=d["B"], C=d["C"])
        kw = {}
    if extras:
        ins.update(D=d["D"], z=d["z"], initial_state=d["initial_state"])
        kw["seq_idx"] = (torch.arange(T) >= T // 3).to(torch.int32).expand(b, T)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch, "are_deterministic_algorithms_enabled", lambda: deterministic)
        whole = _grads(ins, kw, seed, final)
        mp.setenv("SEMISEP_TRITON_BWD", f"SPAN={span}")
        assert config.span_steps(T, p, n, 16, torch.float32) == (
            span * 16 if span * 16 < T else None)
        spanned = _grads(ins, kw, seed, final)
    ref_ins = {k: v.detach().clone().requires_grad_(True) for k, v in ins.items()}
    yr, sr = naive.ssd_reference(**ref_ins, **kw)
    want = [yr, sr, *torch.autograd.grad(_loss(yr, sr, seed, final), list(ref_ins.values()))]
    names = ["y", "hT", *ins]
    for nm, a, s, w in zip(names, whole, spanned, want):
        assert rel(s, a) < 1e-6, nm
        if nm not in ("dt", "A", "dt_bias"):     # sums whose terms cancel: test_triton_ssd
            assert rel(s, torch.nan_to_num(w, nan=0.0)) < 2e-5, nm


def test_custom_op_carries_the_checkpoints(monkeypatch):
    """Under torch.compile's op the checkpoints are an output of the forward op, with the
    shape its fake gives, and input to the backward op: the gradients are the eager ones."""
    monkeypatch.setenv("SEMISEP_TRITON_BWD", "SPAN=1")
    d = _make(1, 40, 2, 1, 8, 16, 3)
    args = (d["x"].requires_grad_(True), d["dt"], d["A"], d["B"], d["C"], None, None, None,
            d["initial_state"], None, True, False, 16, False)
    y, hT, ckpt, _ = ops._op_fwd(*args)
    assert ckpt.shape == ops._checkpoints_shape(1, 40, 2, 8, 16, 16, torch.float32) == (2, 256)
    torch.library.opcheck(ops._op_fwd, args,
                          test_utils=("test_schema", "test_autograd_registration",
                                      "test_faketensor"))
    leaves = [d[k].detach().clone().requires_grad_(True) for k in ("x", "dt", "B", "C")]
    x, dt, B, C = leaves
    y, hT, *_ = ops._op_fwd(x, dt, d["A"], B, C, None, None, None, d["initial_state"], None,
                            True, False, 16, False)
    op = torch.autograd.grad(y.square().sum() + hT.sum(), leaves)
    eager_leaves = [t.detach().clone().requires_grad_(True) for t in leaves]
    x, dt, B, C = eager_leaves
    y, hT = ssd(x, None, B, C, dt=dt, A=d["A"], initial_state=d["initial_state"],
                chunk_size=16, return_final_state=True)
    eager = torch.autograd.grad(y.square().sum() + hT.sum(), eager_leaves)
    for a, b in zip(op, eager):
        assert torch.equal(a, b)


def test_backward_without_the_checkpoints_says_so(monkeypatch):
    monkeypatch.setenv("SEMISEP_TRITON_BWD", "SPAN=1")
    d = _make(1, 40, 2, 1, 8, 16, 3)
    la = -torch.rand(1, 40, 2)
    with pytest.raises(RuntimeError, match="3 spans and needs the forward's 2 checkpoints"):
        L._bwd(torch.ones_like(d["x"]), None, d["x"], la, None, d["B"], d["C"], None, None,
               None, None, None, False, False, 16, False)

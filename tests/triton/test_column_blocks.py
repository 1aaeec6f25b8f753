"""The backward in blocks of the state's columns (config.state_block): the SSD is linear in
the state's columns, so the backward runs one block of B's and C's columns after another,
adding dx, dz, the dt / log_a gradients and the dA / d dt_bias sums, putting dB, dC and d h0's
columns side by side. Blocked and whole backwards give the same gradients, against float64
too."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from semisep.backends.triton import config, naive, ssd
from semisep.backends.triton import launch as L


def rel(a, b):
    a, b = a.double(), b.double()
    assert torch.isfinite(a).all()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


@pytest.mark.parametrize("p,n,knob,want", [
    (64, 128, None, 64),     # N = 128: two blocks of 64
    (64, 256, None, 64),
    (64, 100, None, 64),     # blocks of 64 and 36
    (64, 64, None, 64),      # one block
    (64, 128, "NB=0", 128),
    (8, 40, "NB=16", 16),
])
def test_state_block(monkeypatch, p, n, knob, want):
    if knob:
        monkeypatch.setenv("SEMISEP_TRITON_BWD", knob)
    assert config.state_block(p, n, None, torch.bfloat16) == want


@pytest.mark.parametrize("n,chunk", [(128, -1), (128, 32), (128, 64), (64, -1)])
def test_forward_keeps_its_decays_for_a_backward_in_its_chunks(n, chunk):
    """The forward hands the backward its decay arrays where the backward runs its chunks:
    n = 128 runs blocks of 64 in chunks of 64 by default, and a forward small enough for one
    launch recorded for it takes chunks of 64 too (its default there is 32 with GRAM); a
    chunk size the caller gives holds for both."""
    gen = torch.Generator().manual_seed(1)
    b, T, h, p = 1, 40, 2, 16
    x, la = torch.randn(b, T, h, p, generator=gen), -torch.rand(b, T, h, generator=gen)
    B = torch.randn(b, T, 1, n, generator=gen)
    out = L._fwd(x, la, None, B, B, None, None, None, None, None, False, False, chunk,
                 for_grad=True)
    assert out[2] is not None and out[2][0] == (64 if chunk < 0 else chunk)


@pytest.mark.parametrize("T,for_grad,dtype,want", [
    (1024, True, torch.bfloat16, (64, False)),     # one launch, recorded: the backward's chunks
    (1024, False, torch.bfloat16, (32, True)),     # one launch, not recorded: the default
    (2048, True, torch.bfloat16, (32, True)),      # two launches (Gluon's chunks aside)
    (1024, True, torch.float16, (32, False)),      # the exact loop alone: the default
])
def test_n128_forward_plan(T, for_grad, dtype, want):
    """``(Q, GRAM)`` of the n = 128 forward's plan (b = 8, h = 32): chunks of 64 without GRAM
    only where it shares its decays with a backward and launches once holding both loops, so
    the host (which sets the pace there) runs a pre-pass and a GRAM launch fewer; float16,
    whose programs all run the exact loop, keeps its default at any size."""
    Q, _, _, dec, gram, _, _, _ = L._fwd_plan(8, T, 32, 64, 1, 128, dtype, True,
                                              False, False, 1, False, False, False, -1,
                                              for_grad, for_grad)
    assert (Q, gram is not None) == want
    assert dec.kwargs["GRAD_ROWS"] == (for_grad and Q == 64)


@pytest.mark.parametrize("T,n,chunk,dtype,whole,plan", [
    (1024, 128, None, torch.bfloat16, True, (64, 1, 1)),    # b h T BN = 2^25: whole state
    (1024, 128, None, torch.float16, True, (64, 1, 1)),
    (1024, 128, None, torch.float32, False, (64, 2, 1)),    # its sweeps exceed shared memory
    (2048, 128, None, torch.bfloat16, False, (64, 2, 1)),   # above 2^25: blocks of 64
    (1024, 100, None, torch.bfloat16, True, (64, 1, 1)),    # BN = 128
    (1024, 256, None, torch.bfloat16, False, (64, 4, 1)),   # n = 256: blocks of 64
    (1024, 64, None, torch.bfloat16, False, (64, 1, 1)),    # one block anyway
    (1024, 128, 32, torch.bfloat16, False, (32, 2, 2)),     # a chunk size the caller gives
])
def test_whole_state_plan(T, n, chunk, dtype, whole, plan):
    """``(chunk, blocks, spans)`` of the backward's plan (b = 8, h = 32, p = 64): a small
    16-bit call at 64 < n <= 128 runs the whole state in one span of chunks of 64 (4
    launches a fwd+bwd, the host setting the pace there); else blocks of 64 columns."""
    assert config.whole_state(8, T, 32, n, chunk, dtype) == whole
    got = L._bwd_plan(8, T, 32, 64, 1, n, dtype, True, False, False, None, False, False,
                      False, False, chunk or -1, True)
    assert (got[0], len(got[5]), got[6]) == plan


@settings(max_examples=6, deadline=None)
@given(T=st.sampled_from([40, 64, 100, 130]), extras=st.booleans(),
       dtype=st.sampled_from([torch.float32, torch.float16]), seed=st.integers(0, 100))
def test_whole_state_backward_against_float64(T, extras, dtype, seed):
    """The whole-state plan (n = 128, default chunks: one block, one span of chunks of 64)
    against float64, T a multiple of 64 or not: with the extras dt, softplus, dt_bias, D,
    h0, seq_idx and a final-state gradient, else log-decays with a -inf reset. fp32 held to
    its tolerance (the plan forced: on sm_90 these sweeps exceed shared memory in fp32, so
    by default only 16-bit calls take it); fp16 as by default (its exact loop, 5e-3)."""
    b, h, g, p, n = 1, 2, 1, 16, 128
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    ins = dict(x=r(b, T, h, p).to(dtype), B=r(b, T, g, n).to(dtype),
               C=r(b, T, g, n).to(dtype))
    kw = dict(chunk_size=None)
    if extras:
        ins.update(dt=torch.rand(b, T, h, generator=gen) - 0.3,
                   A=-torch.rand(h, generator=gen) * 3, dt_bias=r(h) * 0.5, D=r(h),
                   initial_state=r(b, h, p, n))
        kw.update(dt_softplus=True, seq_idx=(torch.arange(T) >= T // 3).to(torch.int32)[None])
    else:
        la = -torch.rand(b, T, h, generator=gen) * 2
        la[0, T // 2, 1] = -math.inf
        ins.update(log_a=la)
    with pytest.MonkeyPatch.context() as mp:
        if dtype == torch.float32:
            mp.setattr(config, "WHOLE_DTYPES", (torch.float32,))
        assert config.whole_state(b, T, h, n, None, dtype)
        L._PLANS.clear()
        got = _grads(ins, kw, seed, extras)
        L._PLANS.clear()
    want = _grads(ins, kw, seed, extras, fn=_reference)
    tol = 2e-5 if dtype == torch.float32 else 5e-3
    scale = _term_scales(ins, kw, seed, extras) if extras and dtype == torch.float32 else {}
    for nm, a, w in zip(["y", "hT", *ins], got, want):
        if nm in scale:
            # sums over b T positions whose terms cancel: held to fp32 rounding of the
            # terms' magnitudes, as in test_column_blocks_give_the_whole_backward (dA's relative
            # error reached 2.03e-5 at T=100, seed 20)
            assert ((a.double() - w).abs() <= 1e-5 * scale[nm]).all(), nm
            continue
        assert rel(a, torch.nan_to_num(w, nan=0.0)) < tol, nm


def _loss(y, hT, seed, final):
    gen = torch.Generator().manual_seed(seed)
    gy, gs = torch.randn(y.shape, generator=gen), torch.randn(hT.shape, generator=gen)
    return (y * gy).sum() + ((hT * gs).sum() if final else 0.0)


def _grads(ins, kw, seed, final, fn=ssd):
    ins = {k: v.detach().clone().requires_grad_(True) for k, v in ins.items()}
    y, hT = fn(**ins, **kw, return_final_state=True)
    return [y, hT, *torch.autograd.grad(_loss(y, hT, seed, final), list(ins.values()))]


def _term_scales(ins, kw, seed, final):
    """Per head, the sum over (b, t) of the magnitudes of the float64 terms whose sum is
    the gradient of A and of dt_bias (each given per position, so that autograd returns
    the terms)."""
    b, T, h = ins["dt"].shape
    per = {k: ins[k].detach().expand(b, T, h).clone() for k in ("A", "dt_bias") if k in ins}
    terms = _grads({**ins, **per}, kw, seed, final, fn=_reference)
    return {k: terms[2 + list(ins).index(k)].abs().sum((0, 1)) for k in per}


def _reference(chunk_size, return_final_state, **kw):
    return naive.ssd_reference(**{"log_a": None, **kw})


def _whole_blocked_float64(mp, ins, kw, seed, final, knob, whole="NB=0", ref_ins=None):
    """``(name, whole, blocked, float64)`` for y, the final state and every input's
    gradient: ``SEMISEP_TRITON_BWD`` set to ``whole``, then to ``knob`` (left set); float64
    from ``ref_ins`` (default ``ins``)."""
    mp.setenv("SEMISEP_TRITON_BWD", whole)
    one = _grads(ins, kw, seed, final)
    mp.setenv("SEMISEP_TRITON_BWD", knob)
    blocked = _grads(ins, kw, seed, final)
    want = _grads(ref_ins or ins, kw, seed, final, fn=_reference)
    return list(zip(["y", "hT", *ins], one, blocked, want))


@settings(max_examples=8, deadline=None)
@given(T=st.sampled_from([17, 40]), n=st.sampled_from([24, 40]), nb=st.sampled_from([8, 16]),
       span=st.sampled_from([0, 1]), use_dt=st.booleans(), extras=st.booleans(),
       final=st.booleans(), deterministic=st.booleans(), seed=st.integers(0, 100))
def test_column_blocks_give_the_whole_backward(T, n, nb, span, use_dt, extras, final,
                                               deterministic, seed):
    """Blocks of 8 or 16 of n = 24 or 40 columns (a last block narrower where 16 does not
    divide n), each in one span or in spans of one chunk of 16 (the forward's checkpoints
    split by columns), against one block and against float64; with h0, D per p, z, dt_bias,
    softplus, seq_idx, a -inf reset and a final-state gradient as drawn."""
    b, h, g, p = 2, 2, 1, 8
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    ins = dict(x=r(b, T, h, p), B=r(b, T, g, n), C=r(b, T, g, n))
    kw = dict(chunk_size=16)
    if use_dt:
        ins.update(dt=torch.rand(b, T, h, generator=gen) - 0.3,
                   A=-torch.rand(h, generator=gen) * 3)
        kw.update(dt_softplus=True)
        if extras:
            ins.update(dt_bias=r(h) * 0.5)
    else:
        la = -torch.rand(b, T, h, generator=gen) * 2
        la[0, T // 2, 1] = -math.inf
        ins.update(log_a=la)
    if extras:
        ins.update(D=r(h, p), z=r(b, T, h, p), initial_state=r(b, h, p, n))
        kw["seq_idx"] = (torch.arange(T) >= T // 3).to(torch.int32).expand(b, T)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch, "are_deterministic_algorithms_enabled", lambda: deterministic)
        got = _whole_blocked_float64(mp, ins, kw, seed, final,
                                     f"NB={nb}" + (f",SPAN={span}" if span else ""))
        assert config.state_block(p, n, 16, torch.float32) == nb
    scale = _term_scales(ins, kw, seed, final) if use_dt else {}
    for nm, a, s, w in got:
        if nm in ("A", "dt_bias"):
            # sums over b T positions whose terms cancel, added block by block in another
            # order: held to fp32 rounding of the terms' magnitudes, not of their sum (its
            # relative error reached 4.1e-5 at T=40, n=24, nb=16, seed 42 with the extras);
            # their float64 check: test_triton_ssd
            assert ((s - a).abs() <= 1e-5 * scale[nm]).all(), nm
            continue
        assert rel(s, a) < 1e-6, nm
        if nm != "dt":
            assert rel(s, torch.nan_to_num(w, nan=0.0)) < 2e-5, nm


def test_z_with_blocks(monkeypatch):
    """With z every block takes the gated dy of the gate pass, and dz comes from the
    forward's ungated y (D's term in it): blocks of 8 of n = 24 (three) against one block and
    against float64."""
    gen = torch.Generator().manual_seed(5)
    b, T, h, p, n = 1, 40, 2, 8, 24
    r = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    ins = dict(x=r(b, T, h, p), log_a=-torch.rand(b, T, h, generator=gen), B=r(b, T, 1, n),
               C=r(b, T, 1, n), z=r(b, T, h, p), D=r(h))
    got = _whole_blocked_float64(monkeypatch, ins, dict(chunk_size=16), 1, True, "NB=8")
    for nm, a, s, w in got:
        assert rel(s, a) < 1e-6, nm
        assert rel(s, w) < 2e-5, nm


def test_half_column_blocks(monkeypatch):
    """float16 (the exact loops): blocks of 16 of n = 40, whose dx is added in float16 by the
    blocks after the first, against one block and against float64."""
    gen = torch.Generator().manual_seed(7)
    b, T, h, p, n = 1, 40, 2, 16, 40
    ins = dict(x=torch.randn(b, T, h, p, generator=gen),
               dt=torch.rand(b, T, h, generator=gen) * 0.5, A=-torch.rand(h, generator=gen),
               B=torch.randn(b, T, 1, n, generator=gen) / n ** 0.5,
               C=torch.randn(b, T, 1, n, generator=gen), D=torch.randn(h, generator=gen))
    half = {k: v.half() if k in ("x", "B", "C") else v for k, v in ins.items()}
    kw = dict(chunk_size=16)
    for nm, a, s, w in _whole_blocked_float64(monkeypatch, half, kw, 2, True, "NB=16",
                                              ref_ins=ins):
        assert rel(s, a) < 2e-3, nm
        assert rel(s, w) < 5e-3, nm


@pytest.mark.parametrize("knob,spans", [("NB=8", 1), ("NB=8,SPAN=1", 3)])
def test_custom_op_runs_the_blocks(monkeypatch, knob, spans):
    """The torch.library op (torch.compile's path) runs the same blocks as the eager path:
    its gradients are the eager ones bit for bit, and its checkpoints (the states entering
    the blocks' spans after the first, all n columns) have the shape its fake gives."""
    from semisep.backends.triton import ops
    monkeypatch.setenv("SEMISEP_TRITON_BWD", knob)
    gen = torch.Generator().manual_seed(9)
    b, T, h, p, n = 1, 40, 2, 8, 24
    x, B, C = (torch.randn(b, T, h, p, generator=gen), torch.randn(b, T, 1, n, generator=gen),
               torch.randn(b, T, 1, n, generator=gen))
    dt, A = torch.rand(b, T, h, generator=gen), -torch.rand(h, generator=gen)
    h0 = torch.randn(b, h, p, n, generator=gen)
    leaves = [t.clone().requires_grad_(True) for t in (x, dt, B, C, h0)]
    y, hT, ckpt, _ = ops._op_fwd(leaves[0], leaves[1], A, leaves[2], leaves[3], None, None,
                                 None, leaves[4], None, True, False, 16, False)
    assert ckpt.shape == ops._checkpoints_shape(b, T, h, p, n, 16, torch.float32)
    assert ckpt.shape[0] == spans - 1
    op = torch.autograd.grad(y.square().sum() + hT.sum(), leaves)
    eager_leaves = [t.detach().clone().requires_grad_(True) for t in leaves]
    xe, dte, Be, Ce, h0e = eager_leaves
    y, hT = ssd(xe, None, Be, Ce, dt=dte, A=A, initial_state=h0e, chunk_size=16,
                return_final_state=True)
    eager = torch.autograd.grad(y.square().sum() + hT.sum(), eager_leaves)
    for a, e in zip(op, eager):
        assert torch.equal(a, e)


def test_column_blocks_with_p_blocks(monkeypatch):
    """Two blocks of the head dimension (p = 32 in blocks of 16) times three of the state's
    columns: each p-block's dx tiles and dt-gradient partials add up across column blocks."""
    gen = torch.Generator().manual_seed(11)
    b, T, h, p, n = 1, 40, 2, 32, 24
    ins = dict(x=torch.randn(b, T, h, p, generator=gen),
               dt=torch.rand(b, T, h, generator=gen) * 0.5, A=-torch.rand(h, generator=gen),
               B=torch.randn(b, T, 1, n, generator=gen), C=torch.randn(b, T, 1, n, generator=gen),
               D=torch.randn(h, p, generator=gen), initial_state=torch.randn(b, h, p, n,
                                                                             generator=gen))
    kw = dict(chunk_size=16)
    for nm, a, s, w in _whole_blocked_float64(monkeypatch, ins, kw, 3, True, "NB=8,BP=16",
                                              whole="NB=0,BP=16"):
        assert rel(s, a) < (1e-5 if nm == "A" else 1e-6), nm
        if nm not in ("dt", "A"):
            assert rel(s, w) < 2e-5, nm


def test_blocks_take_their_columns_in_place(monkeypatch):
    """The blocks of one backward share its buffers and read B and C where they are: each
    sweep launch gets B's and C's own storage at its block's first column (no copies), the
    block's width and the row length n, and the same dC / dB buffer (launches recorded, none
    run)."""
    from semisep.backends.triton import kernels as K
    monkeypatch.setenv("SEMISEP_TRITON_BWD", "NB=16")
    calls = []
    monkeypatch.setattr(L, "launch", lambda kernel, grid, *args, arg_key, opts:
                        calls.append((kernel, args)))
    gen = torch.Generator().manual_seed(13)
    b, T, h, p, n = 1, 32, 2, 8, 40
    x, B, C = (torch.randn(b, T, h, p, generator=gen), torch.randn(b, T, 1, n, generator=gen),
               torch.randn(b, T, 1, n, generator=gen))
    la = -torch.rand(b, T, h, generator=gen)
    L._sweeps_bwd(torch.randn_like(x), None, x, la, None, B, C, None, None, None, None, None,
                  False, False, 16, False, False)
    sweeps = [(k, a) for k, a in calls if k in (K.ssd_bwd_fwdsweep_kernel,
                                                 K.ssd_bwd_revsweep_kernel)]
    assert len(sweeps) == 2 * 3                 # blocks of 16, 16 and 8 columns
    size = B.element_size()
    for i, (kernel, args) in enumerate(sweeps):
        c0 = 16 * (i // 2)
        names = kernel.arg_names
        got = dict(zip(names, args))
        assert got["B_ptr"].untyped_storage().data_ptr() == B.untyped_storage().data_ptr()
        assert got["B_ptr"].data_ptr() == B.data_ptr() + c0 * size
        assert got["C_ptr"].data_ptr() == C.data_ptr() + c0 * size
        assert (got["N"], got["NS"]) == (min(16, n - c0), n)
    dC = [dict(zip(k.arg_names, a))["dC_ptr"] for k, a in sweeps if k is K.ssd_bwd_fwdsweep_kernel]
    assert len({t.untyped_storage().data_ptr() for t in dC}) == 1

"""Packed sequences in the factored loops: the pre-pass's segment rows, the loop choice, and
forward and backward against the float64 reference with boundaries anywhere.

A reset (a ``seq_idx`` change, a ``-inf`` or any log-decay below ``-CLAMP``) splits its chunk
into segments; with ``seq_idx`` the factored loops run on the decays within each segment
(``semisep.backends.triton.decays``), so these (batch, head) pairs no longer take the exact
loops.
"""

import math
import os
from unittest import mock

import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings
from hypothesis import strategies as st

from semisep.backends.triton import decays, launch as L, naive, ssd

LOG2E = 1.0 / math.log(2.0)


def rel(a, b):
    a, b = a.double(), b.double()
    assert torch.isfinite(a).all()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def packed_seq(draw_lengths, b, T):
    """A (b, T) non-decreasing int32 seq_idx from lists of sequence lengths."""
    rows = []
    for lengths in draw_lengths:
        ids = [i for i, n in enumerate(lengths) for _ in range(n)][:T]
        ids += [ids[-1] if ids else 0] * (T - len(ids))
        rows.append(ids)
    return torch.tensor(rows[:b], dtype=torch.int32)


def segments_by_definition(la, seq, Q):
    """float64 ``(seg, ls, e_tot_s, least)`` of every chunk, per (b*h, chunk*Q) position, from
    the definition: resets where seq_idx changes or the log-decay is below -CLAMP; ``ls`` the
    log2-decay summed from the start of the position's segment (0 at a reset), padded
    positions continuing with log-decay 0."""
    b, T, h = la.shape
    nc = -(-T // Q)
    la = la.double().clone()
    la[:, 1:][seq[:, 1:] != seq[:, :-1]] = -math.inf
    reset = la < -decays.CLAMP
    la2 = torch.where(reset, 0.0, la * LOG2E)
    pad = nc * Q - T
    la2 = torch.nn.functional.pad(la2, (0, 0, 0, pad)).permute(0, 2, 1).reshape(b * h, nc, Q)
    reset = torch.nn.functional.pad(reset, (0, 0, 0, pad)).permute(0, 2, 1).reshape(b * h, nc, Q)
    seg = torch.cumsum(reset.long(), -1)
    ls = torch.zeros_like(la2)
    for i in range(Q):
        prev = ls[..., i - 1] if i else torch.zeros_like(ls[..., 0])
        ls[..., i] = torch.where(reset[..., i], 0.0, prev + la2[..., i])
    e = torch.exp2(ls)
    return seg, ls, e[..., -1], e.min(-1).values


def assert_exp2_close(got, arg):
    """``got`` (fp32) is ``2^arg`` to the rounding the kernels make: a few ulps of exp2 and
    the fp32 log2-decays' own rounding (2^-24 relative each), which an argument of magnitude
    |arg| carries into the result as ln 2 |arg| 2^-24 (hypothesis found 2.01e-6 at |arg| 48)."""
    want = torch.exp2(arg)
    tol = want * (2.0 ** -21 + 2 * math.log(2) * arg.abs() * 2.0 ** -24)
    got = got.double().reshape(want.shape)
    bad = (got - want).abs() > tol
    assert not bad.any(), (got[bad][:4], want[bad][:4], arg[bad][:4])


@settings(max_examples=12, deadline=None)
@given(b=st.integers(1, 2), T=st.integers(1, 70), h=st.integers(1, 3),
       lengths=st.lists(st.lists(st.integers(1, 20), min_size=1, max_size=8), min_size=2,
                        max_size=2),
       inf_at=st.lists(st.integers(0, 69), max_size=3), seed=st.integers(0, 1000))
def test_prepass_segment_rows(b, T, h, lengths, inf_at, seed):
    """The pre-pass's segment rows and chunk decays equal their definition, and a chunk's
    other rows are the unsegmented ones where it has no reset."""
    gen = torch.Generator().manual_seed(seed)
    Q = 16
    la = -torch.rand(b, T, h, generator=gen) * 3
    for t in inf_at:
        if t < T:
            la[0, t, t % h] = -math.inf
    seq = packed_seq(lengths, b, T)
    x = torch.randn(b, T, h, 4, generator=gen)
    B = torch.randn(b, T, 1, 8, generator=gen)
    _, _, (q, dec, etot), *_ = L._fwd(x, la, None, B, B, None, None, None, None, seq, False,
                                   False, Q, for_grad=True)
    _, _, (_, dec0, etot0), *_ = L._fwd(x, la, None, B, B, None, None, None, None, None, False,
                                    False, Q, for_grad=True)
    assert q == Q and dec.shape[0] == L._dec_rows(True, True) == 10 and etot.shape[0] == 3
    nc = -(-T // Q)
    seg, ls, e_tot_s, least = segments_by_definition(la, seq, Q)
    rows = dec.view(10, b * h, nc, Q)
    assert torch.equal(rows[7], seg.float())
    assert_exp2_close(rows[6], ls)
    assert_exp2_close(rows[5], torch.clamp(-ls, max=126.0))
    assert_exp2_close(etot[1], ls[..., -1])
    torch.testing.assert_close(etot[2].double(), least, rtol=2e-6 + 1e-7 * ls.abs().max().item(),
                               atol=0)
    # without a reset in the chunk (and no seq_idx change) the rows are the unsegmented ones
    plain = (seg[..., -1] == 0)
    rows0 = dec0.view(8, b * h, nc, Q)
    for r in range(6):
        assert torch.equal(rows[r][plain], rows0[r][plain]), r
    assert torch.equal(etot[0][plain], etot0[0][plain])
    assert torch.equal(rows[8:][:, plain], rows0[6:][:, plain])


@triton.jit
def _factorable_probe(etot_ptr, out_ptr, NC, HAS_SEQ: tl.constexpr):
    # the sweeps' grid: (p-blocks, b * h)
    pid = tl.program_id(1)
    tl.store(out_ptr + pid, decays._factorable(etot_ptr, pid, NC, True, HAS_SEQ).to(tl.int32))


def test_resets_keep_the_factored_loops():
    """With seq_idx a (b, h) with resets but weak decays runs the factored loops (every
    chunk's least exp(ls) above FACTOR_MIN); one whose segment decays by 2^-64 or more, in
    any of its segments, runs the exact loops; without the segment data every reset sends
    its (b, h) to the exact loops."""
    b, T, h, Q = 1, 48, 4, 16
    la = torch.full((b, T, h), -0.01)
    seq = torch.zeros(b, T, dtype=torch.int32)
    seq[:, 21:] = 1                          # a boundary inside chunk 1
    strong = 70 * math.log(2.0) / 5          # 2^-70 over 5 steps
    la[0, 16:21, 1] = -strong                # ... in the segment before the boundary
    la[0, 40:45, 2] = -strong                # ... in a chunk without a boundary
    la[0, 5, 3] = -math.inf                  # and a -inf reset, weak decays
    x = torch.randn(b, T, h, 4)
    B = torch.randn(b, T, 1, 8)
    _, _, (_, _, etot), *_ = L._fwd(x, la, None, B, B, None, None, None, None, seq, False, False,
                                 Q, for_grad=True)
    out = torch.empty(b * h, dtype=torch.int32)
    _factorable_probe[(1, b * h)](etot, out, T // Q, HAS_SEQ=True)
    assert out.tolist() == [1, 0, 0, 1]
    _factorable_probe[(1, b * h)](etot, out, T // Q, HAS_SEQ=False)
    assert out.tolist() == [0, 0, 0, 0]


@settings(max_examples=8, deadline=None)
@given(T=st.sampled_from([16, 37, 64]), use_dt=st.booleans(), one=st.sampled_from(["0", "1"]),
       lengths=st.lists(st.lists(st.integers(1, 24), min_size=1, max_size=6), min_size=2,
                        max_size=2),
       strong_head=st.booleans(), seed=st.integers(0, 1000))
def test_packed_sequences_forward_backward(T, use_dt, one, lengths, strong_head, seed):
    """y, the final state and every gradient against float64 for packed sequences (boundaries
    anywhere: several in a chunk, at a chunk's start, sequences of one step), a -inf reset,
    h0, D, z; one (b, h) with strong decays (the exact loop) beside factored ones; the loops
    in one launch or in two."""
    gen = torch.Generator().manual_seed(seed)
    b, h, p, g, n, Q = 2, 4, 16, 2, 16, 16
    seq = packed_seq(lengths, b, T)
    x = torch.randn(b, T, h, p, generator=gen)
    x[:, T // 3] = 0.0
    B = torch.randn(b, T, g, n, generator=gen)
    C = torch.randn(b, T, g, n, generator=gen)
    h0 = torch.randn(b, h, p, n, generator=gen)
    D = torch.randn(h, p, generator=gen)
    z = torch.randn(b, T, h, p, generator=gen)
    if use_dt:
        dt = torch.rand(b, T, h, generator=gen) - 0.3
        A = -torch.rand(h, generator=gen) * 2
        if strong_head:
            A[1] = -60.0
        ins = dict(x=x, dt=dt, A=A, dt_bias=torch.rand(h, generator=gen) * 0.5)
        kw = dict(log_a=None, dt_softplus=True)
    else:
        la = -torch.rand(b, T, h, generator=gen) * 2
        if strong_head:
            la[1, :, 2] = -60.0
        la[0, T // 2, 0] = -math.inf
        ins = dict(x=x, log_a=la)
        kw = {}
    ins.update(B=B, C=C, D=D, z=z, initial_state=h0)
    ins = {k: v.clone().requires_grad_(True) for k, v in ins.items()}
    with mock.patch.dict(os.environ, SEMISEP_TRITON_ONE_LAUNCH=one):   # no fixture in @given
        y, hT = ssd(**ins, **kw, seq_idx=seq, chunk_size=Q, return_final_state=True)
        gy = torch.randn(y.shape, generator=gen)
        gs = torch.randn(hT.shape, generator=gen)
        got = torch.autograd.grad((y * gy).sum() + (hT * gs).sum(), list(ins.values()))
    yr, sr = naive.ssd_reference(**ins, **kw, seq_idx=seq)
    assert rel(y, yr) < 1e-5 and rel(hT, sr) < 1e-5
    want = torch.autograd.grad((yr * gy.double()).sum() + (sr * gs.double()).sum(),
                               list(ins.values()))
    for nm, a, w in zip(ins, got, want):
        assert rel(a, torch.nan_to_num(w, nan=0.0)) < 2e-5, nm


@pytest.mark.parametrize("fast", ["0", "1"])
def test_packed_sequences_match_the_exact_loops(fast):
    """Both loop kinds give the float64 result on a call with a boundary in every chunk: the
    segmented factored loops (FAST=1) and the exact ones (FAST=0)."""
    gen = torch.Generator().manual_seed(3)
    b, T, h, p, g, n = 1, 64, 2, 16, 1, 16
    seq = torch.arange(T, dtype=torch.int32)[None] // 11
    ins = [torch.randn(b, T, h, p, generator=gen), -torch.rand(b, T, h, generator=gen),
           torch.randn(b, T, g, n, generator=gen), torch.randn(b, T, g, n, generator=gen)]
    ins = [t.requires_grad_(True) for t in ins]
    with mock.patch.dict(os.environ, SEMISEP_TRITON_FAST=fast):
        y = ssd(*ins, seq_idx=seq, chunk_size=16)
        got = torch.autograd.grad(y.square().sum(), ins)
    yr, _ = naive.ssd_reference(*ins, seq_idx=seq)
    want = torch.autograd.grad(yr.square().sum(), ins)
    assert rel(y, yr) < 1e-5
    for i, (a, w) in enumerate(zip(got, want)):
        assert rel(a, w) < 2e-5, i

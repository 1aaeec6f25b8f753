"""A forward that autograd does not record: the pre-pass writes the factored loop's rows only
(``decays.PRE_FACTORED``: ``w = dt exp(-l)`` and ``exp(l)``) and the exact loop computes its
own decays. Its y and final state are the recorded forward's (all the rows) bit for bit, and
the float64 reference's, on random calls with both loop kinds (heads decaying past
FACTOR_MIN, resets), one launch or two.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from semisep.backends.triton import launch as L
from semisep.backends.triton import naive, ssd
from semisep.backends.triton.decays import PRE_ALL, PRE_FACTORED


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-300)).item()


def _inputs(b, T, h, p, g, n, Q, seed, form):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, T, h, p, generator=gen)
    B, C = torch.randn(b, T, g, n, generator=gen), torch.randn(b, T, g, n, generator=gen)
    if form == "log_a":
        la = -torch.rand(b, T, h, generator=gen) * 2
        la[0, :, 0] = 1.01 * math.log(2.0 ** -64) / Q      # past FACTOR_MIN: the exact loop
        if T > 3:
            la[-1, 3, h - 1] = -math.inf                   # a reset: the exact loop
        return x, la, B, C, {}
    dt = torch.rand(b, T, h, generator=gen) - 0.3
    A = -torch.rand(h, generator=gen) * 3
    A[0] = -1e4                                            # the exact loop
    return x, None, B, C, dict(dt=dt, A=A, dt_bias=torch.randn(h, generator=gen) * 0.5,
                               dt_softplus=True, D=torch.randn(h, generator=gen))


@settings(max_examples=8, deadline=None)
@given(b=st.integers(1, 2), T=st.integers(1, 70), hg=st.sampled_from([(2, 1), (4, 2)]),
       p=st.sampled_from([8, 16]), n=st.sampled_from([8, 16]), Q=st.sampled_from([16, 32]),
       form=st.sampled_from(["log_a", "dt"]), one=st.sampled_from(["0", "1"]),
       seed=st.integers(0, 100))
def test_forward_without_autograd_is_the_recorded_one(b, T, hg, p, n, Q, form, one, seed):
    h, g = hg
    x, la, B, C, kw = _inputs(b, T, h, p, g, n, Q, seed, form)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SEMISEP_TRITON_FAST", "1")
        mp.setenv("SEMISEP_TRITON_ONE_LAUNCH", one)
        y0, s0 = ssd(x, la, B, C, chunk_size=Q, return_final_state=True, **kw)
        xg = x.clone().requires_grad_(True)
        y1, s1 = ssd(xg, la, B, C, chunk_size=Q, return_final_state=True, **kw)
    assert torch.equal(y0, y1.detach()) and torch.equal(s0, s1.detach())
    yr, sr = naive.ssd_reference(x, la, B, C, **kw)
    assert rel(y0, yr) < 1e-5 and rel(s0, sr) < 1e-5


def test_plan_writes_the_factored_rows_only_without_autograd():
    """The plan's pre-pass rows and the forward launches' PRE, by whether autograd records
    and by seq_idx (whose segment rows only PRE_ALL holds)."""
    def plan(for_grad, has_seq):
        _, _, _, dec, _, fwd, _, _ = L._fwd_plan(2, 4096, 4, 64, 1, 64, torch.float32, True,
                                                 False, False, None, False, False, has_seq,
                                                 -1, for_grad)
        return dec.kwargs["ROWS"], {o.kwargs["PRE"] for o in fwd}

    assert plan(False, False) == (PRE_FACTORED, {PRE_FACTORED})
    assert plan(True, False) == (PRE_ALL, {PRE_ALL})
    assert plan(False, True) == (PRE_ALL, {PRE_ALL})
    assert L._dec_rows(False, False, PRE_FACTORED) == 2

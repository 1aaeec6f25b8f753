"""The functional ssd (Mamba-2 layout) against per-head SSS references."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import semisep as ss
from semisep.testing import assert_close, recurrence_reference


@st.composite
def ssd_inputs(draw):
    b, T = draw(st.integers(1, 2)), draw(st.integers(1, 20))
    g = draw(st.integers(1, 2))
    h = g * draw(st.integers(1, 2))
    p, n = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    log_a = rng.uniform(-3, 0, size=(b, T, h))
    if draw(st.booleans()):
        log_a[rng.random(size=log_a.shape) < 0.15] = -np.inf
    return dict(x=rng.normal(size=(b, T, h, p)), log_a=log_a,
                B=rng.normal(size=(b, T, g, n)), C=rng.normal(size=(b, T, g, n)),
                initial_state=rng.normal(size=(b, h, p, n)))


def per_head_reference(x, log_a, B, C, initial_state):
    b, T, h, p = x.shape
    g = B.shape[2]
    y = np.zeros_like(x)
    final = np.zeros_like(initial_state)
    for bi in range(b):
        for hi in range(h):
            gi = hi // (h // g)
            y[bi, :, hi], hT = recurrence_reference(
                log_a[bi, :, hi], B[bi, :, gi], C[bi, :, gi], x[bi, :, hi],
                initial_state=initial_state[bi, hi].T, structure="scalar", log=True)
            final[bi, hi] = hT.T
    return y, final


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@given(inp=ssd_inputs(), chunk_size=st.integers(1, 8),
       algorithm=st.sampled_from(["recurrent", "quadratic", "chunked"]))
def test_ssd_matches_per_head_recurrence(backend, inp, chunk_size, algorithm):
    y_ref, final_ref = per_head_reference(**inp)
    args = {k: torch.as_tensor(v) for k, v in inp.items()} if backend == "torch" else inp
    y, final = ss.ssd(**args, chunk_size=chunk_size, algorithm=algorithm,
                      return_final_state=True)
    assert_close(y, y_ref)
    assert_close(final, final_ref)


@settings(max_examples=20)
@given(inp=ssd_inputs(), softplus=st.booleans(), D_per_channel=st.booleans())
def test_mamba2_semantics_dt_A_D_z(inp, softplus, D_per_channel):
    b, T, h, p = inp["x"].shape
    rng = np.random.default_rng(0)
    dt = rng.uniform(-1, 1, size=(b, T, h)) if softplus else rng.uniform(0.01, 0.5, size=(b, T, h))
    A, dt_bias = -rng.uniform(0.5, 4, size=h), rng.uniform(-0.5, 0.5, size=h)
    D = rng.normal(size=(h, p) if D_per_channel else (h,))
    z = rng.normal(size=(b, T, h, p))
    y = ss.ssd(inp["x"], None, inp["B"], inp["C"], dt=dt, A=A, dt_bias=dt_bias,
               dt_softplus=softplus, D=D, z=z, initial_state=inp["initial_state"])
    dt_eff = dt + dt_bias
    if softplus:
        dt_eff = np.log1p(np.exp(dt_eff))
    core, _ = per_head_reference(inp["x"] * dt_eff[..., None], dt_eff * A, inp["B"], inp["C"],
                                 inp["initial_state"])
    expected = (core + (D if D_per_channel else D[:, None]) * inp["x"]) * z / (1 + np.exp(-z))
    assert_close(y, expected)


@given(data=st.data())
def test_seq_idx_equals_separate_sequences(data):
    lengths = data.draw(st.lists(st.integers(1, 9), min_size=1, max_size=3))
    T, h, p, n = sum(lengths), 2, 2, 3
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x, B, C = rng.normal(size=(1, T, h, p)), rng.normal(size=(1, T, 1, n)), rng.normal(size=(1, T, 1, n))
    log_a = rng.uniform(-2, 0, size=(1, T, h))
    seq_idx = np.repeat(np.arange(len(lengths)), lengths)[None]
    for backend in ("numpy", "torch"):
        conv = (lambda v: torch.as_tensor(v)) if backend == "torch" else (lambda v: v)
        y = ss.ssd(conv(x), conv(log_a), conv(B), conv(C), seq_idx=conv(seq_idx), chunk_size=4)
        start = 0
        for L in lengths:
            part = slice(start, start + L)
            alone = ss.ssd(x[:, part], log_a[:, part], B[:, part], C[:, part], chunk_size=4)
            assert_close(y[:, part], alone)
            start += L


def test_ssd_gradcheck_with_every_option():
    rng = np.random.default_rng(3)
    b, T, h, p, n = 1, 6, 2, 2, 2
    leaves = [torch.tensor(v, requires_grad=True) for v in (
        rng.normal(size=(b, T, h, p)), rng.uniform(0.1, 0.5, size=(b, T, h)), -rng.uniform(1, 2, h),
        rng.normal(size=(b, T, 1, n)), rng.normal(size=(b, T, 1, n)), rng.normal(size=h),
        rng.normal(size=(b, T, h, p)), rng.normal(size=(b, h, p, n)))]

    def f(x, dt, A, B, C, D, z, h0):
        return ss.ssd(x, None, B, C, dt=dt, A=A, D=D, z=z, initial_state=h0, chunk_size=4,
                      return_final_state=True)

    assert torch.autograd.gradcheck(f, tuple(leaves))


def test_half_precision_output_dtype_and_fp32_state():
    rng = np.random.default_rng(4)
    x = torch.tensor(rng.normal(size=(1, 10, 2, 3)), dtype=torch.bfloat16)
    B = torch.tensor(rng.normal(size=(1, 10, 1, 4)), dtype=torch.bfloat16)
    log_a = torch.tensor(rng.uniform(-1, 0, size=(1, 10, 2)), dtype=torch.float32)
    y, final = ss.ssd(x, log_a, B, B, return_final_state=True)
    assert y.dtype == torch.bfloat16 and final.dtype == torch.float32
    ref = ss.ssd(x.double(), log_a.double(), B.double(), B.double())
    assert_close(y, ref)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@settings(max_examples=20)
@given(inp=ssd_inputs(), x_dtype=st.sampled_from(["int32", "int64", "bool"]))
def test_integer_x_gives_the_float_result(backend, inp, x_dtype):
    """Bool or integer x is not truncated: y takes the promoted floating dtype."""
    x = (inp["x"] > 0 if x_dtype == "bool" else np.round(3 * inp["x"])).astype(x_dtype)
    inp = dict(inp, x=x)
    y_ref, _ = per_head_reference(**dict(inp, x=x.astype(np.float64)))
    args = {k: torch.as_tensor(v) for k, v in inp.items()} if backend == "torch" else inp
    y = ss.ssd(**args)
    assert y.dtype == (torch.float64 if backend == "torch" else np.float64)
    assert_close(y, y_ref)

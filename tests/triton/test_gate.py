"""The z gate's backward pass (:mod:`semisep.backends.triton.gate`) under the interpreter,
against autograd of ``y * silu(z)`` in float64, and the forward's ungated y that it takes."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from semisep.backends.triton import gate
from semisep.backends.triton import launch as L


@settings(max_examples=8, deadline=None)
@given(numel=st.sampled_from([1, 7, gate.BLOCK - 1, gate.BLOCK, gate.BLOCK + 5, 3 * gate.BLOCK]),
       dtype=st.sampled_from([torch.float32, torch.float16]),
       z32=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_gate_bwd_is_autograd_of_the_gate(numel, dtype, z32, seed):
    """dy = do silu(z) and dz = d(y silu(z))/dz . do, every element (blocks not a multiple of
    the size, z in another dtype than y, large |z| where the sigmoid saturates)."""
    gen = torch.Generator().manual_seed(seed)
    y = torch.randn(numel, generator=gen).to(dtype)
    z = (torch.randn(numel, generator=gen) * 8).to(torch.float32 if z32 else dtype)
    do = torch.randn(numel, generator=gen).to(dtype)
    ins = [t.clone() for t in (do, z, y)]
    dy, dz = L._gate_bwd(do, z, y, None)
    assert all(torch.equal(a, b) for a, b in zip(ins, (do, z, y)))   # inputs untouched
    assert dy.dtype == y.dtype and dz.dtype == z.dtype
    y64 = y.double().requires_grad_(True)
    z64 = z.double().requires_grad_(True)
    out = y64 * torch.nn.functional.silu(z64)
    want_dy, want_dz = torch.autograd.grad(out, (y64, z64), do.double())
    tol = 1e-6 if dtype == torch.float32 else 2e-3
    scale = lambda t: t.abs().max().clamp_min(1.0)  # noqa: E731
    assert ((dy.double() - want_dy).abs().max() / scale(want_dy)).item() < tol
    assert ((dz.double() - want_dz).abs().max() / scale(want_dz)).item() < tol


def test_forward_keeps_the_ungated_y_only_for_a_backward():
    """With z the forward writes the ungated y for a backward (``checkpoints``) and not
    otherwise; the gated y is it times silu(z)."""
    gen = torch.Generator().manual_seed(3)
    b, T, h, p, n = 1, 20, 2, 8, 16
    x, z = torch.randn(b, T, h, p, generator=gen), torch.randn(b, T, h, p, generator=gen)
    la, B = -torch.rand(b, T, h, generator=gen), torch.randn(b, T, 1, n, generator=gen)
    args = (x, la, None, B, B, None, z, None, None, None, False, False, 16)
    y, *_, yu = L._fwd(*args, checkpoints=True)
    assert torch.allclose(y, yu * torch.nn.functional.silu(z), atol=1e-6)
    assert L._fwd(*args)[4] is None
    y0, *_ = L._fwd(x, la, None, B, B, None, None, None, None, None, False, False, 16)
    assert torch.allclose(yu, y0, atol=1e-6)


def test_backward_with_z_needs_the_ungated_y():
    gen = torch.Generator().manual_seed(4)
    x, z = torch.randn(1, 20, 2, 8, generator=gen), torch.randn(1, 20, 2, 8, generator=gen)
    la, B = -torch.rand(1, 20, 2, generator=gen), torch.randn(1, 20, 1, 16, generator=gen)
    with pytest.raises(RuntimeError, match="needs the forward's ungated y"):
        L._bwd(torch.ones_like(x), None, x, la, None, B, B, None, z, None, None, None, False,
               False, 16, False)


def test_empty_sequence_with_z():
    """T = 0 with z, D and h0: empty outputs, the final state is h0 and its gradient reaches
    h0; the rest are empty or zero (no launch)."""
    from semisep.backends.triton import ssd
    gen = torch.Generator().manual_seed(5)
    b, h, p, n = 2, 2, 8, 16
    x, z = torch.randn(b, 0, h, p, requires_grad=True), torch.randn(b, 0, h, p, requires_grad=True)
    dt, A = torch.rand(b, 0, h, requires_grad=True), -torch.rand(h, generator=gen)
    B = torch.randn(b, 0, 1, n, requires_grad=True)
    h0 = torch.randn(b, h, p, n, generator=gen).requires_grad_(True)
    D = torch.randn(h, generator=gen).requires_grad_(True)
    y, hT = ssd(x, None, B, B, dt=dt, A=A.requires_grad_(True), D=D, z=z, initial_state=h0,
                return_final_state=True)
    assert y.shape == x.shape and torch.equal(hT, h0)
    gx, gz, gA, gD, gh0 = torch.autograd.grad((hT * 2).sum(), (x, z, A, D, h0))
    assert gx.shape == x.shape and gz.shape == z.shape
    assert not gA.any() and not gD.any() and torch.equal(gh0, torch.full_like(h0, 2.0))

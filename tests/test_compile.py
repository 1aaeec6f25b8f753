"""``torch.compile`` over the torch-backend paths of ``SSS.matmul`` and ``ssd`` (CPU).

Each algorithm of ``SSS.matmul``, forward and backward: chunked on log-decays with a
reset, quadratic (diagonal A) and recurrent (scalar A) on real values of A; and ``ssd``
with Mamba-2's arguments.

``fullgraph=True`` makes any graph break an error, so these tests show that
Dynamo traces the whole product (argument checks, backend selection, the
algorithm) into one graph. The ``aot_eager`` backend runs AOTAutograd on that
graph (functionalization, the joint forward/backward graph) without Inductor's
C++ code generation, which is torch's own code and costs 15 to 20 s of CPU per
function on a cold cache on a 2-core machine (measured by hand with the default
backend: ``SSS.matmul`` chunked and ``ssd`` compile and agree with eager within
5e-7 in float32).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import semisep as ss  # noqa: E402
from semisep.testing import assert_close, dense_reference  # noqa: E402

T, N, P, Q = 37, 4, 3, 8        # T not a multiple of the chunk size


def _compile(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="aot_eager", fullgraph=True)


def _check_forward_backward(product, arrays, expected):
    """Compiled ``product`` against ``expected`` (float64 numpy), and its gradients against
    eager ones."""
    leaves = [v.clone().requires_grad_() for v in arrays]
    y = _compile(product)(*leaves)
    assert_close(y.detach(), expected)
    y.square().sum().backward()
    eager = [v.clone().requires_grad_() for v in arrays]
    product(*eager).square().sum().backward()
    for got, want in zip(leaves, eager):
        assert torch.isfinite(got.grad).all()
        assert_close(got.grad, want.grad)


def test_sss_matmul_chunked_compiles():
    gen = torch.Generator().manual_seed(0)
    log_a = -torch.rand(2, T, generator=gen, dtype=torch.float64)
    log_a[1, 20] = -torch.inf                                # a reset
    B, C = torch.randn(2, T, N, generator=gen, dtype=torch.float64), torch.randn(
        2, T, N, generator=gen, dtype=torch.float64)
    x = torch.randn(2, T, P, generator=gen, dtype=torch.float64)

    def product(log_a, B, C, x):
        return ss.SSS.from_log(log_a, B, C).matmul(x, algorithm="chunked", chunk_size=Q,
                                                   backend="torch")

    _check_forward_backward(product, (log_a, B, C, x),
                            dense_reference(log_a, B, C, log=True) @ x.numpy())


@pytest.mark.parametrize("algorithm, structure", [("quadratic", "diagonal"),
                                                  ("recurrent", "scalar")])
def test_sss_matmul_other_algorithms_compile(algorithm, structure):
    gen = torch.Generator().manual_seed(2)
    shape = (T,) if structure == "scalar" else (T, N)
    A = 2 * torch.rand(shape, generator=gen, dtype=torch.float64) - 1     # values, any sign
    B, C = torch.randn(T, N, generator=gen, dtype=torch.float64), torch.randn(
        T, N, generator=gen, dtype=torch.float64)
    x = torch.randn(T, P, generator=gen, dtype=torch.float64)

    def product(A, B, C, x):
        return ss.SSS(A, B, C).matmul(x, algorithm=algorithm, backend="torch")

    _check_forward_backward(product, (A, B, C, x),
                            dense_reference(A, B, C, structure=structure) @ x.numpy())


def test_ssd_compiles_with_mamba2_arguments():
    gen = torch.Generator().manual_seed(1)
    b, h, p, g, n = 2, 4, 3, 2, 4
    x = torch.randn(b, T, h, p, generator=gen)
    dt = torch.rand(b, T, h, generator=gen)
    A = -torch.rand(h, generator=gen)
    B, C = torch.randn(b, T, g, n, generator=gen), torch.randn(b, T, g, n, generator=gen)
    D, z = torch.randn(h, generator=gen), torch.randn(b, T, h, p, generator=gen)
    h0 = torch.randn(b, h, p, n, generator=gen)

    def mixer(x, dt, B, C):
        return ss.ssd(x, None, B, C, dt=dt, A=A, D=D, z=z, initial_state=h0, chunk_size=Q,
                      return_final_state=True, backend="torch")

    y, state = _compile(mixer)(x, dt, B, C)
    y_eager, state_eager = mixer(x, dt, B, C)
    assert y.dtype == torch.float32 and y.shape == x.shape
    assert_close(y, y_eager.double())
    assert_close(state, state_eager.double())

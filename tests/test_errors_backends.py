"""Bad input gets named errors; inputs are never modified; backend choice is explicit."""

import numpy as np
import pytest
import torch
from hypothesis import assume, find, given, settings, strategies as st

import semisep as ss
from semisep.backends import Backend, register
from semisep.testing import strategies

rng = np.random.default_rng(0)
T, N, P = 6, 3, 2
A, B, C, x = rng.uniform(size=T), rng.normal(size=(T, N)), rng.normal(size=(T, N)), rng.normal(size=(T, P))


@pytest.mark.parametrize("call,match", [
    (lambda: ss.SSS(A, B[:, :2], C), r"C must have shape \(\.\.\., 6, 2\) like B"),
    (lambda: ss.SSS(A, B[0], C[0]), r"B must have shape \(\.\.\., T, N\), got shape \(3,\)"),
    (lambda: ss.SSS(A[:0], B[:0], C[:0]), r"B must have shape \(\.\.\., T, N\) with T >= 1"),
    (lambda: ss.ssd(np.zeros((1, 0, 2, 2)), np.zeros((1, 0, 2)), np.zeros((1, 0, 1, N)),
                    np.zeros((1, 0, 1, N))), r"x must have shape .* every size >= 1"),
    (lambda: ss.SSS(A[:4], B, C), r"A must have shape .*T=6, N=3.*got shape \(4,\)"),
    (lambda: ss.SSS(A, B, C, structure="banded"), r"structure must be one of"),
    (lambda: ss.SSS.from_log(rng.normal(size=(T, N, N)), B, C), r"from_log takes scalar or diagonal"),
    (lambda: ss.SSS(rng.uniform(size=(4, T)), rng.normal(size=(3, T, N)), C), r"do not broadcast"),
    (lambda: ss.SSS(A, B, C) @ x[:4], r"x must have shape \(6,\) or \(\.\.\., 6, P\).*got shape \(4, 2\)"),
    (lambda: ss.SSS(A, B, C).matmul(x, algorithm="fast"), r"algorithm must be one of"),
    (lambda: ss.SSS(A, B, C).matmul(x, chunk_size=0), r"chunk_size must be an int >= 1, got 0"),
    (lambda: ss.SSS(A, B, C).matmul(x, initial_state=np.zeros((N, P + 1))),
     r"initial_state must have shape \(\.\.\., 3, 2\), got shape \(3, 3\)"),
    (lambda: ss.SSS(rng.uniform(size=(T, N, N)), B, C).matmul(x, algorithm="chunked"),
     r"algorithm='chunked' needs scalar or diagonal A"),
    (lambda: ss.SSS(A, B, C).matmul(x, backend="jax"), r"backend must be one of"),
    (lambda: ss.segsum(np.float64(1.0)), r"x must have shape \(\.\.\., T\)"),
    (lambda: ss.ssd(x, A, B, C), r"x must have shape \(batch, T, heads, headdim\)"),
    (lambda: ss.ssd(np.zeros((1, T, 3, 2)), np.zeros((1, T, 3)), np.zeros((1, T, 2, N)),
                    np.zeros((1, T, 2, N))), r"groups of B and C \(2\) must divide the heads of x \(3\)"),
    (lambda: ss.ssd(np.zeros((1, T, 2, 2)), np.zeros((1, T, 2)), np.zeros((1, T, 1, N)),
                    np.zeros((1, T, 1, N)), dt=np.zeros((1, T, 2)), A=np.zeros(2)),
     r"pass either log_a or \(dt, A\)"),
    (lambda: ss.ssd(np.zeros((1, T, 2, 2)), np.zeros((1, T, 2)), np.zeros((1, T, 1, N)),
                    np.zeros((1, T, 1, N)), dt_bias=np.zeros(2)), r"dt_bias and dt_softplus act on dt"),
    (lambda: ss.ssd(np.zeros((1, T, 2, 2)), np.zeros((1, T, 2)), np.zeros((1, T, 1, N)),
                    np.zeros((1, T, 1, N)), dt_softplus=True), r"dt_bias and dt_softplus act on dt"),
    (lambda: ss.algebra.from_dense(np.where(np.tri(T) > 0, np.nan, 0.0)),
     r"the lower triangle of dense must be finite"),
    (lambda: ss.semiseparable_rank(np.tril(np.full((T, T), np.inf))),
     r"the lower triangle of dense must be finite"),
    (lambda: ss.algebra.from_dense(np.where(np.tri(T) > 0, 1.0, np.nan)),
     r"dense must be lower triangular .* up to nan above the diagonal"),
    (lambda: ss.SSS(A, B, np.full((T, N), np.nan)).compress(), r"M.C must be finite"),
    (lambda: ss.SSS(np.full(T, np.nan), B, C).rank(), r"M.A must be finite"),
])
def test_value_errors_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("call,match", [
    (lambda: ss.SSS(A, B.astype(complex), C), r"B must be real"),
    (lambda: ss.SSS(A, B, C).matmul(x, chunk_size=2.0), r"chunk_size must be an int"),
    (lambda: ss.SSS(A, B, C).matmul(x, backend=3), r"backend must be a str"),
    (lambda: ss.SSS(A, B, C).matmul(torch.as_tensor(x), backend="numpy"), r"backend 'numpy' got a torch tensor"),
    (lambda: ss.SSS(A, B, C) @ None, r"x must be an array, got None"),
    *[(lambda f=f: f(np.tril(np.ones((T, T)))), r"M must be an SSS matrix .* got ndarray")
      for f in (ss.algebra.compress, ss.algebra.rank, ss.algebra.inverse, ss.algebra.diagonal,
                lambda M: ss.algebra.solve(M, x), lambda M: ss.algebra.diag_scale(M, A),
                lambda M: ss.algebra.scale(M, 2.0), ss.algebra.SSSBlocks,
                lambda M: ss.algebra.principal_block(M, (slice(0, 2), slice(0, 2))))],
    (lambda: ss.algebra.add(np.eye(T), ss.SSS(A, B, C)), r"M1 must be an SSS matrix"),
    (lambda: ss.algebra.multiply(np.eye(T), ss.SSS(A, B, C)), r"M1 must be an SSS matrix"),
])
def test_type_errors_name_the_argument(call, match):
    with pytest.raises(TypeError, match=match):
        call()


def test_inputs_are_never_modified():
    arrays = [rng.uniform(-1, 0, size=(2, T)), rng.normal(size=(T, N)), rng.normal(size=(T, N)),
              rng.normal(size=(2, T, P)), rng.normal(size=(2, N, P))]
    copies = [a.copy() for a in arrays]
    tensors = [torch.tensor(a) for a in arrays]
    for algorithm in ("recurrent", "quadratic", "chunked"):
        for args in (arrays, tensors):
            M = ss.SSS.from_log(*args[:3])
            M.matmul(args[3], algorithm=algorithm, chunk_size=4, initial_state=args[4])
            M.to_dense(), M.T @ args[3]
            ss.segsum(args[0]), ss.cumprodsum(args[0], args[0])
    for a, c, t in zip(arrays, copies, tensors):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(t.numpy(), c)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_log_decays_whose_products_overflow_are_refused(data):
    """A run of consecutive log-decays (step 0 included) past log(max) raises; short of it, no inf/NaN."""
    n = data.draw(st.integers(1, 12))
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    limit = float(np.log(np.finfo(dtype).max))
    entries = st.one_of(st.floats(-1.2 * limit, 1.2 * limit), st.just(-np.inf), st.just(0.0))
    log_a = np.array(data.draw(st.lists(entries, min_size=n, max_size=n)), dtype=dtype)
    worst = max(log_a[i:j + 1].astype(np.float64).sum() for i in range(n) for j in range(i, n))
    assume(abs(worst - limit) > 1e-3 * limit)          # clear of rounding at the border
    wrap = torch.as_tensor if data.draw(st.booleans()) else np.asarray
    ones, eye = wrap(np.ones((n, 1), dtype)), wrap(np.eye(n, dtype=dtype))
    M = ss.SSS.from_log(wrap(log_a), ones, ones)
    products = [lambda alg=alg: M.matmul(eye, algorithm=alg, chunk_size=4)
                for alg in ("recurrent", "quadratic", "chunked")]
    products += [M.to_dense, lambda: ss.OneSS.from_log(wrap(log_a)) @ eye,
                 lambda: ss.ssd(eye[None, :, None], wrap(log_a)[None, :, None], ones[None, :, None],
                                ones[None, :, None], chunk_size=4)]
    for product in products:
        if worst > limit:
            with pytest.raises(ValueError, match=r"log_a must keep every run of consecutive "
                                                 r"log-decays summing to at most"):
                product()
        else:
            assert np.isfinite(np.asarray(product())).all()


def test_backend_by_array_type_and_override():
    M = ss.SSS(A, B, C)
    assert isinstance(M @ x, np.ndarray)
    assert isinstance(M @ torch.as_tensor(x), torch.Tensor)
    assert isinstance(M.matmul(x, backend="torch"), torch.Tensor)
    with ss.use_backend("torch"):
        assert isinstance(M @ x, torch.Tensor)
        assert isinstance(M.matmul(x, backend="numpy"), np.ndarray)
    assert isinstance(M @ x, np.ndarray)
    assert {"numpy", "torch"} <= set(ss.available_backends())


def test_explicit_backend_that_cannot_run_the_case_is_an_error():
    class ScalarOnly(Backend):
        name = "scalar-only-test"

        def supports(self, case):
            return None if case.structure == "scalar" else "only scalar A"

    register(ScalarOnly(), replace=True)
    M = ss.SSS(rng.uniform(size=(T, N)), B, C)
    with pytest.raises(ValueError, match="backend 'scalar-only-test' cannot run sss_matmul "
                                         "with diagonal A.*only scalar A"):
        M.matmul(x, backend="scalar-only-test")
    with pytest.raises(ValueError, match="a backend named 'numpy' is already registered"):
        register(ss.get_backend("numpy"))


@pytest.mark.parametrize("make, error, words", [
    (lambda: strategies.sss_matrices(structure="banded"), ValueError, "structure must be one of"),
    (lambda: find(strategies.sss_matrices(structure=st.just("banded")), bool), ValueError,
     "structure must be one of"),
    (lambda: strategies.sss_matrices(T=0), ValueError, "T must be an int >= 1, got 0"),
    (lambda: find(strategies.sss_matrices(T=st.just(-2)), bool), ValueError, "T must be an int >= 1"),
    (lambda: strategies.sss_matrices(N=2.0), TypeError, "N must be an int >= 0 or a strategy"),
    (lambda: strategies.one_ss(T=-1), ValueError, "T must be an int >= 1"),
    (lambda: strategies.one_ss(backend="jax"), ValueError, "backend must be 'numpy' or 'torch'"),
    (lambda: strategies.log_decays(shape=(3,), dtype="int8"), ValueError, "dtype must be one of"),
    (lambda: strategies.log_decays(shape=(3,), min_value=1.0), ValueError, "min_value must be <= 0"),
    (lambda: strategies.inputs(ss.SSS(A, B, C), P=-1), ValueError, "P must be an int >= 0"),
])
def test_strategies_name_bad_arguments(make, error, words):
    """Plain bad values fail at the call, drawn ones at the draw, each naming the argument."""
    with pytest.raises(error, match=words):
        make()

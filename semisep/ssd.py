"""The functional SSD in the layout Mamba-2 code uses.

``x`` is ``(batch, T, heads, headdim)``, the log-decays ``(batch, T, heads)``,
``B`` and ``C`` ``(batch, T, groups, N)`` with the heads split evenly over the
groups (head ``i`` uses group ``i // (heads // groups)``), and states are
``(batch, heads, headdim, N)``. Per head this is ``SSS.from_log(log_a, B, C) @ x``.
"""

from __future__ import annotations

from ._checks import (as_array, check_decay_overflow, check_positive_int, check_shape,
                      dtype_names, shape_str)
from .algorithms import DEFAULT_CHUNK_SIZE, Generators, SSSProblem, resolve_algorithm
from .algorithms.decays import Decays
from .backends import Case, select_backend


def ssd(x, log_a=None, B=None, C=None, *, chunk_size: int | None = None, initial_state=None,
        return_final_state: bool = False, dt=None, A=None, D=None, z=None, dt_bias=None,
        dt_softplus: bool = False, seq_idx=None, algorithm: str = "auto",
        fp32_states: bool = False, backend: str | None = None):
    """Structured state space duality: ``y = SSS.from_log(log_a, B, C) @ x`` per head.

    Parameters
    ----------
    x : array, shape ``(b, T, h, p)``
    log_a : array, shape ``(b, T, h)``, optional
        Log-decays (``<= 0``; ``-inf`` resets the state). Omit when ``dt`` and ``A`` are given.
        Positive ones whose consecutive sums overflow ``exp`` in the compute dtype raise a
        ValueError (arrays in host memory; docs/concepts/oness.md, "Positive log-decays").
    B, C : array, shape ``(b, T, g, n)``, ``g`` dividing ``h``
    chunk_size : int, optional
        Chunk length Q of the chunked algorithm (default 64).
    initial_state : array, shape ``(b, h, p, n)``, optional
    return_final_state : bool
        Also return the final state ``(b, h, p, n)`` (compute dtype).
    dt : array, shape ``(b, T, h)``, optional
        Mamba-2's step sizes: with ``A`` (shape ``(h,)``) the decays are
        ``log_a = dt * A`` and the input is ``dt * x``. ``dt_bias`` (``(h,)``) is
        added first, then ``softplus`` when ``dt_softplus``.
    D : array, shape ``(h,)`` or ``(h, p)``, optional
        Skip connection: ``y += D * x`` (the unscaled x).
    z : array, shape ``(b, T, h, p)``, optional
        Gate: ``y *= silu(z)``, after the skip.
    seq_idx : int array, shape ``(b, T)``, optional
        Packed sequences: the state is reset where ``seq_idx`` changes, giving
        exactly the per-sequence results (an initial state feeds the first one).
    algorithm : {"auto", "recurrent", "quadratic", "chunked"}
    fp32_states : bool
        Keep the states that the Triton backward stores per chunk in float32
        rather than in x's dtype (more memory traffic, less rounding for
        bf16/fp16 inputs). The torch and numpy backends always keep states in
        the compute dtype (float32 or float64), so for them this changes nothing.
    backend : str, optional

    Returns
    -------
    y : array, shape ``(b, T, h, p)``, dtype of x (for bool or integer x, the
        promoted floating dtype of x, B and C)
    final_state : array, shape ``(b, h, p, n)``, only with ``return_final_state``
    """
    named = check_ssd_args(x, log_a, B, C, initial_state=initial_state, dt=dt, A=A, D=D, z=z,
                           dt_bias=dt_bias, dt_softplus=dt_softplus, seq_idx=seq_idx)
    be, arrays, chunk_size, algorithm = select_ssd_backend(named, chunk_size, algorithm,
                                                           dt_softplus, backend)
    return be.ssd(arrays.pop("x"), arrays.pop("log_a", None), arrays.pop("B"), arrays.pop("C"),
                  chunk_size=chunk_size, return_final_state=return_final_state,
                  dt_softplus=dt_softplus, algorithm=algorithm, fp32_states=fp32_states,
                  **arrays)


def select_ssd_backend(named: dict, chunk_size, algorithm: str, dt_softplus: bool,
                       backend: str | None):
    """``(backend, arrays on it, chunk_size, algorithm)`` for :func:`ssd`'s checked ``named``.

    Raises the named ValueError/TypeError for a bad ``chunk_size`` or
    ``algorithm``, or a ``backend`` that cannot run the case or take the arrays.
    """
    x, B = named["x"], named["B"]
    chunk_size = DEFAULT_CHUNK_SIZE if chunk_size is None else check_positive_int(
        "chunk_size", chunk_size)
    algorithm = resolve_algorithm(algorithm, "scalar", x.shape[1], chunk_size)
    features = frozenset(k for k in ("dt", "dt_bias", "D", "z", "seq_idx", "initial_state")
                         if k in named) | ({"dt_softplus"} if dt_softplus else set())
    case = Case("ssd", "scalar", algorithm, True, features, dtypes=dtype_names(x, B, named["C"]),
                sizes=(("n", B.shape[-1]), ("p", x.shape[-1])))
    be = select_backend(list(named.values()), case, backend)
    like = next((v for v in named.values() if be.owns(v)), None)
    return be, {k: be.asarray(v, like=like) for k, v in named.items()}, chunk_size, algorithm


def check_ssd_args(x, log_a=None, B=None, C=None, *, initial_state=None, dt=None, A=None,
                   D=None, z=None, dt_bias=None, dt_softplus=False, seq_idx=None) -> dict:
    """Validate :func:`ssd`'s arrays; returns those given, by name (``x``, ``B``, ``C``, ...).

    Raises the ValueError/TypeError that names the argument, the shape it got and
    the shape it wanted. The arrays are returned as given (not converted).
    """
    x = as_array("x", x)
    if x.ndim != 4:
        raise ValueError(f"x must have shape (batch, T, heads, headdim), got shape {shape_str(x.shape)}")
    b, T, h, p = x.shape
    if min(b, T, h, p) < 1:
        raise ValueError(f"x must have shape (batch, T, heads, headdim) with every size >= 1, "
                         f"got shape {shape_str(x.shape)}")
    B, C = as_array("B", B), as_array("C", C)
    if B.ndim != 4 or tuple(B.shape[:2]) != (b, T):
        raise ValueError(f"B must have shape ({b}, {T}, groups, N), got shape {shape_str(B.shape)}")
    g, n = B.shape[2], B.shape[3]
    check_shape("C", C, (b, T, g, n), f"({b}, {T}, {g}, {n}) like B")
    if h % g:
        raise ValueError(f"the groups of B and C ({g}) must divide the heads of x ({h})")
    if (dt is None) != (A is None):
        raise ValueError("dt and A go together: pass both (Mamba-2 semantics) or neither")
    if (log_a is None) == (dt is None):
        raise ValueError("pass either log_a or (dt, A), not both and not neither")
    if dt is None and (dt_bias is not None or dt_softplus):
        raise ValueError("dt_bias and dt_softplus act on dt: pass dt and A (Mamba-2 semantics) "
                         "to use them, not log_a")
    named = {"x": x, "B": B, "C": C}
    if log_a is not None:
        named["log_a"] = log_a = as_array("log_a", log_a)
        check_shape("log_a", log_a, (b, T, h), f"({b}, {T}, {h})")
    else:
        named["dt"] = dt = as_array("dt", dt)
        check_shape("dt", dt, (b, T, h), f"({b}, {T}, {h})")
        named["A"] = A = as_array("A", A)
        check_shape("A", A, (h,), f"({h},)")
        if dt_bias is not None:
            named["dt_bias"] = dt_bias = as_array("dt_bias", dt_bias)
            check_shape("dt_bias", dt_bias, (h,), f"({h},)")
    if D is not None:
        named["D"] = D = as_array("D", D)
        if tuple(D.shape) not in ((h,), (h, p)):
            raise ValueError(f"D must have shape ({h},) or ({h}, {p}), got shape {shape_str(D.shape)}")
    if z is not None:
        named["z"] = z = as_array("z", z)
        check_shape("z", z, (b, T, h, p), f"({b}, {T}, {h}, {p})")
    if seq_idx is not None:
        named["seq_idx"] = seq_idx = as_array("seq_idx", seq_idx)
        check_shape("seq_idx", seq_idx, (b, T), f"({b}, {T})")
    if initial_state is not None:
        named["initial_state"] = initial_state = as_array("initial_state", initial_state)
        check_shape("initial_state", initial_state, (b, h, p, n), f"({b}, {h}, {p}, {n})")
    return named


def scaled_inputs(be, x, log_a, dtype, *, dt=None, A=None, dt_bias=None, dt_softplus=False,
                  seq_idx=None):
    """The SSS input and log-decays that Mamba-2's arguments stand for, in ``dtype``.

    Returns ``(xs (b, T, h, p), log_a (b, T, h))``: ``xs = dt * x`` and
    ``log_a = dt * A`` (``dt = softplus(dt + dt_bias)`` as asked) when ``dt`` is
    given, else ``x`` and ``log_a`` cast; ``log_a = -inf`` where ``seq_idx``
    changes (a reset at the first step of each packed sequence but the first).
    """
    xs = be.cast(x, dtype)
    if dt is not None:
        dt = be.cast(dt, dtype)
        if dt_bias is not None:
            dt = dt + be.cast(dt_bias, dtype)
        if dt_softplus:
            dt = be.softplus(dt)
        log_a = dt * be.cast(A, dtype)
        xs = xs * dt[..., None]
    log_a = be.cast(log_a, dtype)
    if seq_idx is not None:
        starts = seq_idx[:, 1:] != seq_idx[:, :-1]
        reset = be.concat([be.zeros((x.shape[0], 1), like=starts), starts], axis=1)
        log_a = be.where(reset[..., None], be.full((), float("-inf"), like=log_a), log_a)
    return xs, log_a


def ssd_via_sss(be, x, log_a, B, C, *, chunk_size, algorithm, return_final_state=False,
                initial_state=None, dt=None, A=None, D=None, z=None, dt_bias=None,
                dt_softplus=False, seq_idx=None, fp32_states=False):
    """The generic SSD: Mamba-2's preprocessing, then the SSS algorithms per head.

    Arguments are validated arrays of backend ``be`` (see :func:`ssd`); the states
    are in the compute dtype whatever ``fp32_states`` says.
    """
    b, T, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    r = h // g
    promoted = be.result_dtype(x, B, C)
    out_dtype = x.dtype if be.is_floating(x) else promoted   # bool or integer x: no truncation
    dtype = be.compute_dtype(promoted)
    xs, log_a = scaled_inputs(be, x, log_a, dtype, dt=dt, A=A, dt_bias=dt_bias,
                              dt_softplus=dt_softplus, seq_idx=seq_idx)
    check_decay_overflow("log_a" if dt is None else "dt * A", log_a, dtype, axis=1)

    def heads(arr):  # (b, T, h, k) -> (b, g, r, T, k)
        return be.moveaxis(arr.reshape(b, T, g, r, arr.shape[-1]), 1, 3)

    def groups(arr):  # (b, T, g, n) -> (b, g, 1, T, n)
        return be.moveaxis(be.cast(arr, dtype), 1, 2)[:, :, None]

    decays = Decays(be.moveaxis(log_a.reshape(b, T, g, r), 1, 3), log=True)
    init = None
    if initial_state is not None:
        init = be.cast(initial_state, dtype).reshape(b, g, r, p, n).swapaxes(-1, -2)
    problem = SSSProblem(Generators("scalar", decays, None, groups(B), groups(C)),
                         heads(xs), init, algorithm, chunk_size)
    y, final = be.sss_matmul(problem)
    y = be.moveaxis(y, 3, 1).reshape(b, T, h, p)
    if D is not None:
        Dh = be.cast(D, dtype)
        y = y + (Dh[:, None] if Dh.ndim == 1 else Dh) * be.cast(x, dtype)
    if z is not None:
        zc = be.cast(z, dtype)
        y = y * zc * be.sigmoid(zc)
    y = be.cast(y, out_dtype)
    if return_final_state:
        return y, final.swapaxes(-1, -2).reshape(b, h, p, n)
    return y

"""One rank of the context-parallel tests (tests/test_distributed.py starts ``world`` of these).

:func:`run` is the entry point of each rank. Every case draws the whole sequence from a
fixed seed (the same on every rank), runs single-process ``semisep.ssd`` on it
as the reference, runs ``semisep.distributed`` on this rank's slice and
compares outputs, states and gradients. Exits non-zero on the first failure.
"""

from __future__ import annotations

import traceback

import torch
import torch.distributed as dist

import semisep as ss
import semisep.distributed as ssdist
from semisep.testing import assert_close

PER_STEP = ("x", "log_a", "dt", "B", "C", "z", "seq_idx")   # arrays with a T axis (dim 1)


def ssd_inputs(T, *, b=2, h=4, g=2, p=3, n=5, mamba2=False, resets=(), seq_starts=(),
               initial=True, dtype=torch.float64, seed=0):
    """The whole sequence's arguments of ``semisep.ssd`` (float64 unless ``dtype``)."""
    gen = torch.Generator().manual_seed(seed)

    def rnd(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=gen, dtype=torch.float64)).to(dtype)

    args = {"x": rnd(b, T, h, p), "B": rnd(b, T, g, n), "C": rnd(b, T, g, n)}
    if mamba2:
        args.update(dt=rnd(b, T, h), A=-torch.rand(h, generator=gen, dtype=torch.float64).to(dtype),
                    dt_bias=rnd(h), D=rnd(h, p), z=rnd(b, T, h, p))
    else:
        log_a = -torch.rand(b, T, h, generator=gen, dtype=torch.float64) * 2
        log_a[:, list(resets)] = float("-inf")
        args["log_a"] = log_a.to(dtype)
    if seq_starts:            # one tuple of start positions per batch row
        seq_idx = torch.zeros(b, T, dtype=torch.int64)
        for row, starts in enumerate(seq_starts):
            for t in starts:
                seq_idx[row, t:] += 1
        seq_idx[1:] += 7          # labels need only change, not count from zero
        args["seq_idx"] = seq_idx
    if initial:
        args["initial_state"] = rnd(b, h, p, n)
    return args


def leaves(args):
    """Fresh float leaves requiring grad (integer arrays kept as they are)."""
    return {k: v.detach().clone().requires_grad_(v.is_floating_point()) for k, v in args.items()}


def local_args(args, start, stop, rank):
    """This rank's arguments: per-step arrays sliced, the initial state on rank 0 only."""
    out = {k: (v[:, start:stop] if k in PER_STEP else v) for k, v in args.items()}
    if rank > 0:
        out.pop("initial_state", None)
    return leaves(out)


def check_ssd(rank, world, sizes, case, rtol=1e-10, **options):
    start, stop = sum(sizes[:rank]), sum(sizes[:rank + 1])
    T = sum(sizes)
    args = ssd_inputs(T, **options)
    weights = torch.Generator().manual_seed(99)
    mamba2 = options.get("mamba2", False)
    kw = {"dt_softplus": True} if mamba2 else {}

    full = leaves({k: (v.double() if v.is_floating_point() else v) for k, v in args.items()})
    y, hT = ss.ssd(**full, chunk_size=4, return_final_state=True, **kw)
    wy = torch.randn(y.shape, generator=weights, dtype=torch.float64)
    wh = torch.randn(hT.shape, generator=weights, dtype=torch.float64)
    ((y * wy).sum() + (hT * wh).sum()).backward()
    prefix = {k: (v[:, :stop] if k in PER_STEP else v) for k, v in full.items()}
    _, h_end = ss.ssd(**prefix, chunk_size=4, return_final_state=True, **kw)

    mine = local_args(args, start, stop, rank)
    y_r, h_r = ssdist.ssd(**mine, chunk_size=4, return_final_state=True, **kw)
    loss = (y_r * wy[:, start:stop]).sum()
    if rank == world - 1:
        loss = loss + (h_r * wh).sum()
    loss.backward()

    assert_close(y_r, y[:, start:stop], rtol=rtol, what=f"{case}: y on rank {rank}")
    assert_close(h_r, h_end, rtol=rtol, what=f"{case}: final state on rank {rank}")
    for k, v in mine.items():
        if not v.is_floating_point():
            continue
        grad = v.grad
        if k in PER_STEP:
            expected = full[k].grad[:, start:stop]
        elif k == "initial_state":
            expected = full[k].grad
        else:                      # shared parameters: summed over ranks, as DDP does
            grad = grad.clone()
            dist.all_reduce(grad)
            expected = full[k].grad
        assert_close(grad, expected, rtol=rtol, what=f"{case}: grad of {k} on rank {rank}")


def check_sss(rank, world, sizes, case, *, structure, log, vector=False, N=3, P=2, seed=0):
    """``semisep.distributed.matmul`` against ``SSS.matmul`` on the whole sequence."""
    start, stop = sum(sizes[:rank]), sum(sizes[:rank + 1])
    T = sum(sizes)
    gen = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    a_shape = (3, T) if structure == "scalar" else (3, T, N)       # broadcast against B's (2, 3)
    if log:
        A = -2 * torch.rand(*a_shape, generator=gen, dtype=torch.float64)
        for t in (sizes[0], T - sizes[-1] // 2 - 1):   # resets: a slice's first step, and inside
            A[:, t] = float("-inf")
    else:
        A = rnd(*a_shape)                                           # any sign
        A.reshape(-1)[::5] = 0.0                                    # and zeros
    full = {"A": A, "B": rnd(2, 3, T, N), "C": rnd(2, 3, T, N),
            "x": rnd(T) if vector else rnd(2, 3, T, P),
            "h0": rnd(2, 3, N) if vector else rnd(2, 3, N, P)}
    t_axis = {"A": 1, "B": 2, "C": 2, "x": 0 if vector else 2}
    make = ss.SSS.from_log if log else ss.SSS
    whole = leaves(full)
    y, hT = make(whole["A"], whole["B"], whole["C"], structure=structure).matmul(
        whole["x"], initial_state=whole["h0"], return_final_state=True, algorithm="chunked",
        chunk_size=4)
    weights = torch.Generator().manual_seed(99)
    wy = torch.randn(y.shape, generator=weights, dtype=torch.float64)
    wh = torch.randn(hT.shape, generator=weights, dtype=torch.float64)
    ((y * wy).sum() + (hT * wh).sum()).backward()

    mine = leaves({k: v.narrow(t_axis[k], start, stop - start) if k in t_axis else v
                   for k, v in full.items() if k != "h0" or rank == 0})
    M_r = make(mine["A"], mine["B"], mine["C"], structure=structure)
    y_r, h_r = ssdist.matmul(M_r, mine["x"], initial_state=mine.get("h0"),
                             return_final_state=True, algorithm="chunked", chunk_size=4)
    y_axis = y.ndim - 1 if vector else y.ndim - 2
    loss = (y_r * wy.narrow(y_axis, start, stop - start)).sum()
    if rank == world - 1:
        loss = loss + (h_r * wh).sum()
        assert_close(h_r, hT, what=f"{case}: final state on rank {rank}")
    loss.backward()
    assert_close(y_r, y.narrow(y_axis, start, stop - start), what=f"{case}: y on rank {rank}")
    for k, v in mine.items():
        expected = whole[k].grad
        if k in t_axis:
            expected = expected.narrow(t_axis[k], start, stop - start)
        assert_close(v.grad, expected, what=f"{case}: grad of {k} on rank {rank}")


def check_mamba2(rank, world, sizes, case, *, cache=False, seq_starts=(), seed=0):
    """``Mamba2(u, cp_group=...)`` against the whole sequence through one layer."""
    from semisep.nn import Mamba2

    start, stop = sum(sizes[:rank]), sum(sizes[:rank + 1])
    T = sum(sizes)
    torch.manual_seed(seed)
    layer = Mamba2(d_model=6, d_state=4, headdim=3, expand=2, ngroups=2, d_conv=4,
                   chunk_size=4, dtype=torch.float64)
    gen = torch.Generator().manual_seed(seed)
    u = torch.randn(2, T, 6, generator=gen, dtype=torch.float64)
    extra = {}
    if cache:
        fresh = layer.allocate_cache(2)
        extra["cache"] = type(fresh)(torch.randn(fresh.conv_state.shape, generator=gen,
                                                 dtype=torch.float64),
                                     torch.randn(fresh.ssm_state.shape, generator=gen,
                                                 dtype=torch.float64))
        extra["return_cache"] = True
    if seq_starts:
        extra["seq_idx"] = ssd_inputs(T, seq_starts=seq_starts)["seq_idx"]

    def run(u, extra, weights, last):
        u = u.detach().clone().requires_grad_()
        state = {}
        if "cache" in extra:
            state = {k: getattr(extra["cache"], k).detach().clone().requires_grad_()
                     for k in ("conv_state", "ssm_state")}
            extra = dict(extra, cache=type(extra["cache"])(**state))
        layer.zero_grad()
        out = layer(u, **extra)
        y, new = out if isinstance(out, tuple) else (out, None)
        loss = (y * weights[0]).sum()
        if new is not None and last:
            loss = loss + (new.conv_state * weights[1]).sum() + (new.ssm_state * weights[2]).sum()
        loss.backward()
        grads = {"u": u.grad, **{k: v.grad for k, v in state.items()},
                 **{k: p.grad.clone() for k, p in layer.named_parameters()}}
        return y, new, grads

    fresh = layer.allocate_cache(2)
    weights = [torch.randn(2, T, 6, generator=gen, dtype=torch.float64),
               torch.randn(fresh.conv_state.shape, generator=gen, dtype=torch.float64),
               torch.randn(fresh.ssm_state.shape, generator=gen, dtype=torch.float64)]
    y, new, grads = run(u, extra, weights, True)

    mine = dict(extra, cp_group=dist.group.WORLD)
    if seq_starts:
        mine["seq_idx"] = extra["seq_idx"][:, start:stop]
    if rank > 0:
        mine.pop("cache", None)
    y_r, new_r, grads_r = run(u[:, start:stop], mine, [weights[0][:, start:stop]] + weights[1:],
                              rank == world - 1)
    assert_close(y_r, y[:, start:stop], what=f"{case}: y on rank {rank}")
    if cache and rank == world - 1:
        assert_close(new_r.conv_state, new.conv_state, what=f"{case}: conv state")
        assert_close(new_r.ssm_state, new.ssm_state, what=f"{case}: ssm state")
    for k, g in grads_r.items():
        if g is None:
            continue
        expected = grads[k][:, start:stop] if k == "u" else grads[k]
        if k not in ("u", "conv_state", "ssm_state"):      # parameters: summed over ranks
            dist.all_reduce(g)
        assert_close(g, expected, what=f"{case}: grad of {k} on rank {rank}")


def expect_error(rank, case, exc_type, pattern, call):
    try:
        call()
    except exc_type as exc:
        if pattern not in str(exc):
            raise AssertionError(f"{case}: rank {rank} raised {exc!r}, wanted {pattern!r}") from exc
    else:
        raise AssertionError(f"{case}: rank {rank} raised nothing, wanted {exc_type.__name__}")


def check_errors(rank, world, sizes):
    def call(h=4, n=5, initial=False, bad_C=False, grad=True):
        args = ssd_inputs(sizes[rank], h=h, g=2, n=n, initial=initial, seed=rank)
        if bad_C:
            args["C"] = args["C"][..., :-1]
        args = leaves(args) if grad else args
        return ssdist.ssd(**args)

    last = world - 1
    expect_error(rank, "heads", ValueError, "x must have the same (batch, heads, headdim)",
                 lambda: call(h=6 if rank == last else 4))
    expect_error(rank, "state size", ValueError, "B and C must have the same (groups, N)",
                 lambda: call(n=7 if rank == last else 5))
    expect_error(rank, "initial state off rank 0", ValueError, f"got one on rank(s) [{last}]",
                 lambda: call(initial=rank == last))
    wanted = "C must have shape" if rank == last else f"rank(s) [{last}] of the group rejected"
    expect_error(rank, "local error", ValueError, wanted, lambda: call(bad_C=rank == last))
    expect_error(rank, "grad on some ranks", ValueError, "the inputs require grad",
                 lambda: call(grad=rank != last))
    wanted = "every size >= 1" if rank == last else f"rank(s) [{last}] of the group rejected"
    expect_error(rank, "empty slice", ValueError, wanted,
                 lambda: ssdist.ssd(**ssd_inputs(0 if rank == last else 3, initial=False)))
    expect_error(rank, "dtypes", ValueError, "x, B and C must have the same compute dtype",
                 lambda: ssdist.ssd(**ssd_inputs(3, initial=False, dtype=torch.float32
                                                 if rank == last else torch.float64)))
    T, N = sizes[rank], 2
    A = torch.rand(T, N, N) if rank == last else torch.rand(T)
    expect_error(rank, "full A", ValueError, "M must have scalar or diagonal A" if rank == last
                 else f"rank(s) [{last}] of the group rejected",
                 lambda: ssdist.matmul(ss.SSS(A, torch.ones(T, N), torch.ones(T, N)),
                                       torch.ones(T, 1)))
    expect_error(rank, "first off rank 0", ValueError, "first holds the steps before",
                 lambda: ssdist.previous_tokens(torch.ones(1, T, 2), 3,
                                                first=torch.ones(1, 3, 2) if rank else None))
    # found only by the local call's own checks (a shape's rank, the backend, the chunk, the
    # decays), which run before anything is exchanged: every rank raises, none hangs
    others = f"rank(s) [{last}] of the group rejected"
    bad = {"extra leading dimension": (ValueError, "C must have shape", dict(C=lambda C: C[None])),
           "backend": (TypeError, "backend 'numpy' got a torch tensor", dict(backend="numpy")),
           "chunk_size": (ValueError, "chunk_size must be an int >= 1", dict(chunk_size=0)),
           "overflow": (ValueError, "log_a must keep every run",
                        dict(log_a=lambda la: torch.full_like(la, 1e3)))}
    for case, (exc_type, wanted, change) in bad.items():
        def local_call(change=change):
            args = ssd_inputs(3, initial=False, seed=rank)
            if rank == last:
                for key, value in change.items():
                    args[key] = value(args[key]) if callable(value) else value
            return ssdist.ssd(**args)
        expect_error(rank, case, exc_type if rank == last else ValueError,
                     wanted if rank == last else others, local_call)
    expect_error(rank, "matmul algorithm", ValueError,
                 "algorithm must be one of" if rank == last else others,
                 lambda: ssdist.matmul(ss.SSS(torch.rand(T), torch.ones(T, N), torch.ones(T, N)),
                                       torch.ones(T, 1), algorithm="fast" if rank == last
                                       else "auto"))


def cases(rank, world, sizes):
    edges = [sum(sizes[:r]) for r in range(1, world)]
    inner = edges[-1] + sizes[-1] // 2          # inside the last slice
    check_ssd(rank, world, sizes, "log-decays, a reset inside a slice", resets=(inner,))
    check_ssd(rank, world, sizes, "resets at the first and the last step of slices",
              resets=(edges[0], edges[-1] - 1), initial=False, seed=1)
    check_ssd(rank, world, sizes, "Mamba-2 arguments, packed sequences", mamba2=True,
              seq_starts=((edges[0], inner), (edges[0] + 1,)), seed=2)
    check_ssd(rank, world, sizes, "bfloat16", rtol=1e-2, dtype=torch.bfloat16, seed=3)
    check_sss(rank, world, sizes, "SSS, scalar A values with zeros and negatives",
              structure="scalar", log=False, seed=4)
    check_sss(rank, world, sizes, "SSS, diagonal log-decays, vector x", structure="diagonal",
              log=True, vector=True, seed=5)
    check_mamba2(rank, world, sizes, "Mamba2 layer with a cache", cache=True, seed=6)
    check_mamba2(rank, world, sizes, "Mamba2 layer, packed sequences", seed=7,
                 seq_starts=((edges[0],), (edges[0] - 1, inner)))
    check_errors(rank, world, sizes)


def run(rank: int, world: int, store: str, sizes: list, log: str):
    """One rank: join the gloo group at ``store``, run every case; a failure goes to ``log``."""
    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                                world_size=world)
        try:
            cases(rank, world, sizes)
        finally:
            dist.destroy_process_group()
    except BaseException:
        with open(log, "w") as f:
            f.write(traceback.format_exc())
        raise

"""The launch cache of the Triton kernels (semisep.backends.triton.fastlaunch), on the CPU.

The cached path itself launches only on a GPU (benchmarks/gpu_ssd.py checks it there against
Triton's own launch, bit for bit); here: its key and its bookkeeping, with a stand-in kernel.
"""

import inspect
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from semisep.backends.triton import fastlaunch as FL


def test_spec_separates_what_triton_specializes_on():
    def spec(a):
        return FL._specs([a])[0]
    t = torch.empty(64, dtype=torch.float32)
    assert spec(t) != spec(t[1:])                      # alignment
    assert spec(t) != spec(t.to(torch.bfloat16))       # dtype
    assert spec(t) == spec(torch.empty(64))
    for a, b in [(1, 2), (16, 17), (2 ** 31 - 16, 2 ** 31), (-2 ** 31, -2 ** 31 - 16),
                 (2 ** 63 - 16, 2 ** 63)]:
        assert spec(a) != spec(b), (a, b)
    assert spec(32) == spec(4096)
    assert spec(1.5) is None and spec(True) is None


class _Compiled:
    """A stand-in for a CompiledKernel: records its direct launches."""

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args: self.calls.append((grid, args))


class _Kernel:
    """A stand-in for a JITFunction: f(a, n, X: constexpr, Y: constexpr = 7)."""

    def __init__(self):
        self.params = [SimpleNamespace(name=p.name, default=p.default)
                       for p in inspect.signature(lambda a, n, X, Y=7: 0).parameters.values()]
        self.calls = []
        self.compiled = _Compiled()

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.calls.append((grid, args, kwargs))
            return self.compiled
        return run


@pytest.fixture
def cached(monkeypatch):
    monkeypatch.setattr(FL, "_enabled", lambda: True)
    monkeypatch.setattr(FL, "_CACHE", {})
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


def test_second_launch_is_direct_with_every_argument(cached):
    k = _Kernel()
    t = torch.empty(64)
    FL.launch(k, (3, 4), t, 64, X=True, num_warps=4)
    assert k.calls == [((3, 4), (t, 64), dict(X=True, num_warps=4))]
    FL.launch(k, (5, 6), t, 128, X=True, num_warps=4)
    assert len(k.calls) == 1                      # no second trip through Triton's binder
    assert k.compiled.calls == [((5, 6, 1), (t, 128, True, 7))]   # X given, Y its default


def test_options_launch_as_their_keyword_arguments(cached):
    """``opts=Options(...)`` is the same launch, and the same cache entry, as the keywords."""
    k = _Kernel()
    t = torch.empty(64)
    FL.launch(k, (1,), t, 64, opts=FL.Options(X=True, num_warps=4))
    FL.launch(k, (1,), t, 64, X=True, num_warps=4)
    assert k.calls == [((1,), (t, 64), dict(X=True, num_warps=4))] and len(FL._CACHE) == 1
    assert k.compiled.calls == [((1, 1, 1), (t, 64, True, 7))]
    with pytest.raises(TypeError, match="opts together"):
        FL.launch(k, (1,), t, 64, X=True, opts=FL.Options(num_warps=4))


def test_cache_starts_again_when_full(cached, monkeypatch):
    """Keys hold shapes: a run over many lengths must not grow the cache without end."""
    monkeypatch.setattr(FL, "MAX_ENTRIES", 3)
    k = _Kernel()
    for T in range(5):
        FL.launch(k, (1,), torch.empty(64), 64, X=True, arg_key=("T", T))
        assert len(FL._CACHE) == T % 3 + 1
    assert len(k.calls) == 5


def test_new_specialization_goes_through_triton(cached):
    k = _Kernel()
    t = torch.empty(64)
    FL.launch(k, (1,), t, 64, X=True)
    FL.launch(k, (1,), t[1:], 64, X=True)         # misaligned: another kernel
    FL.launch(k, (1,), t, 1, X=True)              # n == 1: another kernel
    FL.launch(k, (1,), t, 64, X=False)            # another constexpr
    assert len(k.calls) == 4 and len(FL._CACHE) == 4 and not k.compiled.calls


def test_off_under_the_interpreter():
    assert not FL._enabled()                      # tests/triton runs with TRITON_INTERPRET=1
    k = _Kernel()
    FL.launch(k, (2,), 1.5, 3, X=1)
    FL.launch(k, (2,), 1.5, 3, X=1)
    assert len(k.calls) == 2 and not k.compiled.calls


class _Launcher:
    """A stand-in for Triton 3.6's CudaLauncher: no scratch memory, records its C launches."""
    global_scratch_size = profile_scratch_size = 0
    launch_cooperative_grid, launch_pdl = False, True

    def __init__(self):
        self.calls = []

    def launch(self, *a):
        self.calls.append(a)


def test_cached_launch_calls_the_c_launcher_directly(cached, monkeypatch):
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda dev: 1000 + dev,
                        raising=False)
    k = _Kernel()
    k.compiled._run, k.compiled.function, k.compiled.packed_metadata = _Launcher(), "fn", "meta"
    t = torch.empty(64)
    FL.launch(k, (3, 4), t, 64, X=True)
    FL.launch(k, (5,), t, 128, X=True)
    assert k.compiled._run.calls == [(5, 1, 1, 1000, "fn", False, True, None, None, "meta",
                                      None, None, None, t, 128, True, 7)]
    assert not k.compiled.calls


def test_cached_launch_is_per_device_on_that_devices_stream(cached, monkeypatch):
    """A kernel compiled on cuda:0 is not launched on cuda:1 (a module is loaded per device):
    the current device is part of the key, and the direct launch takes its stream."""
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda dev: 1000 + dev,
                        raising=False)
    current = [0]
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    k = _Kernel()
    k.compiled._run, k.compiled.function, k.compiled.packed_metadata = _Launcher(), "fn", "meta"
    t = torch.empty(64)
    for dev in (0, 1, 1, 0):
        current[0] = dev
        FL.launch(k, (1,), t, 64, X=True)
    assert len(k.calls) == 2 and len(FL._CACHE) == 2     # one compile a device
    assert [c[3] for c in k.compiled._run.calls] == [1001, 1000]


def test_launches_run_on_the_inputs_device(monkeypatch):
    """The launchers make the inputs' device current (a tensor on cuda:1 while cuda:0 is
    current), and switch nothing where it already is, or for CPU tensors."""
    from semisep.backends.triton.launch import _device_ctx

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    on = lambda i: SimpleNamespace(is_cuda=True, get_device=lambda: i,  # noqa: E731
                                   device=torch.device("cuda", i))
    ctx = _device_ctx(on(1))
    assert isinstance(ctx, torch.cuda.device) and ctx.idx == 1
    assert not isinstance(_device_ctx(on(0)), torch.cuda.device)
    assert not isinstance(_device_ctx(torch.empty(1)), torch.cuda.device)


def test_launch_hooks_take_the_compiled_kernels_own_launch(cached, monkeypatch):
    from triton import knobs
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda dev: 0, raising=False)
    k = _Kernel()
    k.compiled._run, k.compiled.function, k.compiled.packed_metadata = _Launcher(), "fn", "meta"
    t = torch.empty(64)
    FL.launch(k, (1,), t, 64, X=True)
    hook = lambda *a: None  # noqa: E731
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        FL.launch(k, (1,), t, 64, X=True)
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert k.compiled.calls == [((1, 1, 1), (t, 64, True, 7))] and not k.compiled._run.calls




def _misaligned(t, shift):
    """A contiguous copy of ``t`` starting ``shift`` elements into a fresh buffer."""
    if not shift:
        return t
    buf = torch.empty(t.numel() + shift, dtype=t.dtype)
    out = buf[shift:].view(t.shape)
    out.copy_(t)
    return out


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float16]),
       bc32=st.booleans(), T=st.sampled_from([5, 64, 70]), p=st.sampled_from([16, 32, 96]),
       n=st.sampled_from([16, 128]), has_dt=st.booleans(), d_per_p=st.none() | st.booleans(),
       extras=st.booleans(), fp32_states=st.booleans(), atomic=st.booleans(),
       shifts=st.lists(st.integers(0, 1), min_size=6, max_size=6),
       change=st.integers(0, 7))
def test_launchers_arg_keys_fix_every_specialization(dtype, bc32, T, p, n, has_dt, d_per_p,
                                                      extras, fp32_states, atomic, shifts,
                                                      change):
    """The promise of the launchers' fastlaunch ``arg_key``: one key, one set of argument
    specializations (dtypes, alignment, ints), over inputs of any dtype, alignment and shape.
    Each example runs twice, the second time with one input moved off (or onto) 16-byte
    alignment, B and C in the other dtype, or the other stored-state dtype; the kernels are
    not run: every launch is recorded instead."""
    from semisep.backends.triton import launch as L
    seen = {}

    def record(kernel, grid, *args, arg_key=None, opts=None):
        assert arg_key is not None, kernel
        key = (kernel, arg_key, opts.key)
        assert seen.setdefault(key, FL._specs(args)) == FL._specs(args), key

    cfg = dict(dtype=dtype, bc32=bc32, T=T, p=p, n=n, has_dt=has_dt, d_per_p=d_per_p,
               extras=extras, fp32_states=fp32_states, shifts=shifts)
    other = dict(cfg, shifts=list(shifts))
    if change < 6:
        other["shifts"][change] ^= 1
    else:
        other[("bc32", "fp32_states")[change - 6]] ^= True
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(L, "launch", record)
        mp.setattr(torch, "are_deterministic_algorithms_enabled", lambda: not atomic)
        _run_launchers(L, **cfg)
        _run_launchers(L, **other)


def _run_launchers(L, dtype, bc32, T, p, n, has_dt, d_per_p, extras, fp32_states, shifts):
    b, h, g = 2, 4, 2
    gen = torch.Generator().manual_seed(T + p + n)
    r = lambda *s, dt=torch.float32: torch.randn(*s, generator=gen).to(dt)  # noqa: E731
    x = _misaligned(r(b, T, h, p, dt=dtype), shifts[0])
    bc_dtype = torch.float32 if bc32 else dtype
    B, C = (_misaligned(r(b, T, g, n, dt=bc_dtype), s) for s in shifts[1:3])
    dtla = _misaligned(r(b, T, h).abs() * (0.1 if has_dt else -1), shifts[3])
    A = -r(h).abs() if has_dt else None
    D = None if d_per_p is None else _misaligned(r(h, p) if d_per_p else r(h), shifts[4])
    z = r(b, T, h, p, dt=dtype) if extras else None
    dtb = r(h) if extras and has_dt else None
    h0 = r(b, h, p, n) if extras else None
    seq = (torch.arange(T) >= T // 2).to(torch.int32).expand(b, T).contiguous() if extras \
        else None
    args = (x, dtla, A, B, C, D, z, dtb, h0, seq, has_dt, extras and has_dt)
    y, hT, decays, ckpt, yu = L._fwd(*args, -1, for_grad=True, checkpoints=True)
    dy = _misaligned(torch.randn_like(y), shifts[5])
    L._bwd(dy, hT if extras else None, *args, -1, fp32_states, decays=decays, ckpt=ckpt,
           yu=yu)


_CONFIGS = st.fixed_dictionaries(dict(
    dtype=st.sampled_from([torch.float32, torch.float16]), bc32=st.booleans(),
    T=st.sampled_from([5, 64, 70]), p=st.sampled_from([16, 96]), n=st.sampled_from([16, 128]),
    has_dt=st.booleans(), d_per_p=st.none() | st.booleans(), extras=st.booleans(),
    fp32_states=st.booleans(), shifts=st.just([0] * 6)))


@settings(max_examples=30, deadline=None)
@given(first=_CONFIGS, second=_CONFIGS, atomic=st.tuples(st.booleans(), st.booleans()))
def test_launch_plans_are_those_made_afresh(first, second, atomic):
    """A call after another (any shapes, dtypes, flags, deterministic mode) launches with the
    constexprs and options that a plan made for it alone gives: the plan key misses nothing."""
    from semisep.backends.triton import launch as L
    launched = []

    def record(kernel, grid, *args, arg_key=None, opts=None):
        launched.append((kernel, grid, opts.kwargs))

    def run(cfg, det):
        launched.clear()
        mp.setattr(torch, "are_deterministic_algorithms_enabled", lambda: det)
        _run_launchers(L, **cfg)
        return list(launched)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(L, "launch", record)
        mp.setattr(L, "_PLANS", {})
        run(first, not atomic[0])
        after = run(second, not atomic[1])
        mp.setattr(L, "_PLANS", {})
        assert after == run(second, not atomic[1])

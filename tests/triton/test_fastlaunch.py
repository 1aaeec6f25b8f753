"""The launch cache of the Triton kernels (semisep.backends.triton.fastlaunch), on the CPU.

The cached path itself launches only on a GPU (benchmarks/gpu_ssd.py checks it there against
Triton's own launch, bit for bit); here: its key and its bookkeeping, with a stand-in kernel.
"""

import inspect
from types import SimpleNamespace

import pytest
import torch

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


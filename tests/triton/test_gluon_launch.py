"""The Gluon kernels' direct launch (semisep.backends.triton.gluon_launch) on the CPU.

On the GPU the launch is checked by its results (benchmarks/gpu_ssd.py --gluon-checks: the
Gluon kernels' outputs equal the Triton kernels', every kernel launched directly). Here, on a
stand-in of a Triton 3.6 compiled kernel (its launcher's descriptor wrapper, a closure over the
C launcher, the descriptors' indices and metadata): the arguments the C launcher gets, the
encoded maps kept by address, and the kernels it refuses to launch directly.
"""

from types import SimpleNamespace

import pytest
import torch
import triton

from semisep.backends.triton import gluon_launch as GL

pytestmark = pytest.mark.skipif(GL.gl is None, reason="this Triton has no Gluon Hopper API")

class _Compiled(SimpleNamespace):
    """A stand-in compiled kernel: ``compiled[grid](*args)`` (Triton's Python launcher)
    records its arguments in ``python_calls``."""

    def __getitem__(self, grid):
        return lambda *args: self.python_calls.append(args)


META = dict(swizzle=3, elem_size=2, elem_type=10, block_size=[64, 64], fp4_padded=False)


def _compiled(ndesc=2, metas=None, scratch=0, names=("launcher", "tensordesc_indices",
                                                      "tensordesc_meta")):
    """A stand-in compiled kernel whose C launcher records its arguments."""
    got = []

    def c_launch(*args):
        got.append(args)

    free = dict(zip(names, (c_launch, set(range(ndesc)),
                            [dict(META) for _ in range(ndesc)] if metas is None else metas)))
    # a closure over those names, as Triton 3.6's wrap_handle_tensordesc makes
    src = (f"def outer({', '.join(names)}):\n"
           f"    def inner(*args):\n        return ({', '.join(names)})\n    return inner\n")
    scope = {}
    exec(src, scope)                                       # noqa: S102
    wrapper = scope["outer"](*free.values())
    run = SimpleNamespace(launch=wrapper, global_scratch_size=scratch, profile_scratch_size=0,
                          launch_cooperative_grid=False, launch_pdl=False)
    return _Compiled(_run=run, function=1234, packed_metadata="meta", python_calls=[]), got


@pytest.fixture
def fills(monkeypatch):
    """Triton's fill_tma_descriptor replaced by one that records its calls."""
    made = []

    def fill(ptr, swizzle, size, dtype, block, shape, strides, padding):
        made.append((ptr, swizzle, size, dtype, tuple(block), list(shape), list(strides),
                     padding))
        return ("map", len(made))

    monkeypatch.setattr(triton.runtime.driver, "_active",
                        SimpleNamespace(utils=SimpleNamespace(fill_tma_descriptor=fill)))
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 77 + device,
                        raising=False)        # CPU builds have none
    monkeypatch.setattr(GL, "_MAPS", {})
    return made


def test_direct_launch_arguments(fills):
    compiled, got = _compiled()
    run = GL._direct(compiled, 2)
    a, b = torch.zeros(128, 64), torch.zeros(64, 256)
    run((3, 1, 1), 1, ((a, 128, 64), (b, 64, 256)), (7, "ptr", 64, True))
    host = GL.TMA_DTYPE_DEVICE_TO_HOST[10]
    assert fills == [(a.data_ptr(), 3, 2, host, (64, 64), [128, 64], [64, 1], 0),
                     (b.data_ptr(), 3, 2, host, (64, 64), [64, 256], [256, 1], 0)]
    # grid, the device's stream, function, cooperative, PDL, scratch, metadata, hooks; each
    # descriptor as its map, shape and strides; then the other arguments and the constants
    assert got == [(3, 1, 1, 78, 1234, False, False, None, None, "meta", None, None, None,
                    ("map", 1), 128, 64, 64, 1, ("map", 2), 64, 256, 256, 1,
                    7, "ptr", 64, True)]


def test_maps_kept_by_address_and_shape(fills):
    compiled, got = _compiled(ndesc=1)
    run = GL._direct(compiled, 1)
    a, b = torch.zeros(128, 64), torch.zeros(128, 64)
    for t, rows, cols in ((a, 128, 64), (a, 128, 64), (a, 64, 128), (b, 128, 64)):
        run((1, 1, 1), 0, ((t, rows, cols),), ())
    assert len(fills) == 3                      # the second call's map is the first's
    assert [args[13] for args in got] == [("map", 1), ("map", 1), ("map", 2), ("map", 3)]


@pytest.mark.parametrize("why, kw", [
    ("scratch memory", dict(scratch=16)),
    ("another wrapper", dict(names=("launch", "indices", "meta"))),
    ("descriptor metadata missing", dict(metas=[None, None])),
    ("fp4 padded", dict(metas=[dict(META, fp4_padded=True), dict(META)])),
    ("other descriptor count", dict(ndesc=3)),
])
def test_refuses_unexpected_launchers(fills, why, kw):
    compiled, _ = _compiled(**kw)
    assert GL._direct(compiled, 2) is None, why


def test_refuses_a_launcher_without_a_wrapper(fills):
    compiled, _ = _compiled()
    compiled._run.launch = print                # a builtin: no closure
    assert GL._direct(compiled, 2) is None


class _Kernel:
    """A stand-in Gluon kernel: ``kernel[grid](*args, **kw)`` (the JIT) records its
    arguments and returns the compiled kernel of ``_compiled``."""

    def __init__(self, ndesc):
        self.fn = SimpleNamespace(__name__="stand_in_kernel")
        self.compiled, self.c_calls = _compiled(ndesc=ndesc)
        self.jit_calls = []

    def __getitem__(self, grid):
        def jit(*args, **kw):
            self.jit_calls.append((args, kw))
            return self.compiled
        return jit


@pytest.fixture
def launching(fills, monkeypatch):
    """launch() from an empty cache, with descriptors as tuples, on 'Triton 3.6'."""
    monkeypatch.setattr(GL, "_COMPILED", {})
    monkeypatch.setattr(GL, "descriptor", lambda t, rows, cols: ("desc", rows, cols))
    monkeypatch.setattr(triton, "__version__", "3.6.0")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("SEMISEP_TRITON_FAST_LAUNCH", raising=False)
    return monkeypatch


def test_launch_compiles_once_then_launches_directly(launching):
    kernel = _Kernel(ndesc=1)
    t = torch.zeros(128, 64)
    dev = SimpleNamespace(index=0)
    for _ in range(3):
        GL.launch(kernel, (4, 1, 1), ((t, 128, 64),), (5, 64), dict(Q=64, HAS_D=True), dev)
    # the first call through the JIT (descriptors as objects, constants by name), the others
    # through the C launcher (constants in order after the other arguments)
    assert kernel.jit_calls == [((("desc", 128, 64), 5, 64),
                                 dict(Q=64, HAS_D=True, num_warps=4, launch_pdl=False))]
    assert [c[13:] for c in kernel.c_calls] == [(("map", 1), 128, 64, 64, 1, 5, 64, 64, True)] * 2
    # a key per specialization: an argument that 16 no longer divides compiles again
    GL.launch(kernel, (4, 1, 1), ((t, 128, 64),), (5, 63), dict(Q=64, HAS_D=True), dev)
    assert len(kernel.jit_calls) == 2


def test_launch_without_a_direct_launcher(launching):
    kernel = _Kernel(ndesc=1)
    kernel.compiled._run.global_scratch_size = 16          # _direct refuses it
    t = torch.zeros(128, 64)
    for _ in range(2):
        GL.launch(kernel, (4, 1, 1), ((t, 128, 64),), (5,), dict(Q=64), SimpleNamespace(index=0))
    assert len(kernel.jit_calls) == 1 and kernel.c_calls == []
    assert kernel.compiled.python_calls == [(("desc", 128, 64), 5, 64)]


def test_launch_on_other_tritons_takes_the_jit_path(launching):
    launching.setattr(triton, "__version__", "3.7.0")
    kernel = _Kernel(ndesc=1)
    t = torch.zeros(128, 64)
    for _ in range(2):
        GL.launch(kernel, (4, 1, 1), ((t, 128, 64),), (5,), dict(Q=64), SimpleNamespace(index=0))
    assert len(kernel.jit_calls) == 2 and GL._COMPILED == {} and kernel.c_calls == []


def test_launch_hooks_take_tritons_launcher(launching):
    from triton import knobs

    kernel = _Kernel(ndesc=1)
    t = torch.zeros(128, 64)
    GL.launch(kernel, (4, 1, 1), ((t, 128, 64),), (5,), dict(Q=64), SimpleNamespace(index=0))
    launching.setattr(knobs.runtime.launch_enter_hook, "calls", [print])
    GL.launch(kernel, (4, 1, 1), ((t, 128, 64),), (5,), dict(Q=64), SimpleNamespace(index=0))
    assert kernel.c_calls == [] and len(kernel.compiled.python_calls) == 1


def test_fast_launch_off_takes_the_jit_path(launching):
    launching.setenv("SEMISEP_TRITON_FAST_LAUNCH", "0")
    kernel = _Kernel(ndesc=1)
    t = torch.zeros(128, 64)
    for _ in range(2):
        GL.launch(kernel, (4, 1, 1), ((t, 128, 64),), (5,), dict(Q=64), SimpleNamespace(index=0))
    assert len(kernel.jit_calls) == 2 and GL._COMPILED == {}

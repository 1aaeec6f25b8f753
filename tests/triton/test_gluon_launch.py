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
    return SimpleNamespace(_run=run, function=1234, packed_metadata="meta"), got


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

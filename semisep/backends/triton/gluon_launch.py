"""Launching the Gluon kernels (:mod:`.gluon_fwd`, :mod:`.gluon_bwd`) at little host cost.

Their first arguments are TMA descriptors of 2-D bf16 views in (64, 64) blocks, given here as
``(tensor, rows, cols)``. The first call of a kernel for a key (the kernel, the device, what
Triton specializes the other arguments on, the constants) compiles it through Gluon's JIT;
later calls launch the compiled kernel. With the Triton versions of ``fastlaunch._TESTED``
they call its C launcher directly, each descriptor encoded by Triton's own
``fill_tma_descriptor`` from the compiled kernel's descriptor metadata, as Triton's Python
launcher does, and kept by address (the maps hold nothing else): that launcher (stream and
device queries, hooks, scratch, its descriptor wrapper) and the descriptor objects cost
~0.14 ms a launch on the H200 (s22-2: the forward's host time 0.25 against 0.11 ms for the
Triton kernel through :mod:`.fastlaunch`; s22-3, launched directly: 0.13 against 0.12), which
set the pace of a forward and backward up to T = 4K. Where the compiled kernel is not as expected
(a kernel with scratch memory), or where launch hooks are set (a profiler's),
``CompiledKernel[grid]`` launches it; on other Tritons, or with
``SEMISEP_TRITON_FAST_LAUNCH=0``, every call goes through Gluon's JIT.
"""

from __future__ import annotations

import torch
import triton

from .fastlaunch import MAX_ENTRIES, _enabled, _hooked, _specs

try:
    from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
except ImportError:     # a Triton without Gluon's Hopper API: nothing here is called
    gl = None

BLOCK = 64           # the descriptors' block: (BLOCK, BLOCK) elements

_CAPABILITY: dict = {}
_LAYOUTS: dict = {}
# by key (module docstring): the compiled kernel and its direct launcher (or None)
_COMPILED: dict = {}
# encoded TMA maps by (address, rows, cols, encoding): a map holds only these, so one made
# for a buffer that a later call gets at the same address is that call's map too (the
# caching allocator hands a training step's buffers the same addresses, step after step)
_MAPS: dict = {}


def capability(device: torch.device):
    """The device's compute capability (cached: ~5 us a query)."""
    cap = _CAPABILITY.get(device.index)
    if cap is None:
        cap = _CAPABILITY[device.index] = torch.cuda.get_device_capability(device)
    return cap


def descriptor(t, rows, cols):
    """A TMA descriptor of the contiguous bf16 ``t`` seen as (rows, cols), in (64, 64)
    blocks (the form Gluon's JIT takes)."""
    lay = _LAYOUTS.get("bf16")
    if lay is None:
        lay = _LAYOUTS["bf16"] = gl.NVMMASharedLayout.get_default_for([BLOCK, BLOCK],
                                                                      gl.bfloat16)
    return TensorDescriptor(t.view(rows, cols), [rows, cols], [cols, 1], [BLOCK, BLOCK], lay)


def _direct(compiled, ndesc):
    """``run(grid, device, views, args)`` through the C launcher of a Triton 3.6 compiled
    Gluon kernel whose first ``ndesc`` arguments are 2-D TMA descriptors, or None where the
    launcher is not as expected."""
    wrapper = getattr(getattr(compiled, "_run", None), "launch", None)
    cells = getattr(wrapper, "__closure__", None)
    if cells is None or getattr(compiled._run, "global_scratch_size", 1) \
            or getattr(compiled._run, "profile_scratch_size", 1):
        return None
    # wrap_handle_tensordesc's closure: the C launcher, the descriptors' indices and metadata
    free = dict(zip(wrapper.__code__.co_freevars, (c.cell_contents for c in cells)))
    c_launch, where, metas = (free.get(k) for k in ("launcher", "tensordesc_indices",
                                                    "tensordesc_meta"))
    if (not callable(c_launch) or where != set(range(ndesc)) or not metas
            or len(metas) != ndesc or any(m is None or m.get("fp4_padded") for m in metas)):
        return None
    enc = [(m["swizzle"], m["elem_size"], TMA_DTYPE_DEVICE_TO_HOST[m["elem_type"]],
            tuple(m["block_size"])) for m in metas]
    fill = triton.runtime.driver.active.utils.fill_tma_descriptor
    fn, meta = compiled.function, compiled.packed_metadata
    coop, pdl = compiled._run.launch_cooperative_grid, compiled._run.launch_pdl
    stream_of = torch._C._cuda_getCurrentRawStream

    def run(g, device, views, args):
        descs = []
        for (t, rows, cols), code in zip(views, enc):
            # a descriptor's arguments: the encoded map, then its shape and strides
            key = (t.data_ptr(), rows, cols, code)
            tmap = _MAPS.get(key)
            if tmap is None:
                swizzle, size, dtype, block = code
                tmap = fill(key[0], swizzle, size, dtype, block, [rows, cols], [cols, 1], 0)
                if len(_MAPS) >= MAX_ENTRIES:
                    _MAPS.clear()
                _MAPS[key] = tmap
            descs += (tmap, rows, cols, cols, 1)
        # grid, stream, function, cooperative, PDL, scratch (none), packed metadata, launch
        # metadata and hooks (none), then the kernel's arguments (constants included)
        c_launch(g[0], g[1], g[2], stream_of(device), fn, coop, pdl, None, None, meta, None,
                 None, None, *descs, *args)
    return run


def launch(kernel, grid, views, args, consts, device, pdl=False):
    """Launch the Gluon ``kernel`` on ``grid`` (one warpgroup a program): its TMA descriptors
    of ``views`` (``(tensor, rows, cols)`` each, bf16, contiguous, 16-byte aligned), then
    ``args``, then the constexprs ``consts`` (in the kernel's order), on ``device``; ``pdl``:
    as a programmatic dependent launch (one of ``consts`` must say so too: the key)."""
    if not _enabled():
        # the compiled kernel's calling convention is checked for fastlaunch._TESTED only
        # (and SEMISEP_TRITON_FAST_LAUNCH=0 turns the cache off, as for the Triton kernels)
        kernel[grid](*[descriptor(*v) for v in views], *args, **consts, num_warps=4,
                     launch_pdl=pdl)
        return
    from triton import knobs    # here: triton.knobs is not in every Triton version

    key = (kernel.fn.__name__, device.index, _specs(args), *consts.values(),
           knobs.runtime.debug, knobs.compilation.instrumentation_mode)
    hit = _COMPILED.get(key)
    if hit is None:
        compiled = kernel[grid](*[descriptor(*v) for v in views], *args, **consts,
                                num_warps=4, launch_pdl=pdl)
        if len(_COMPILED) >= MAX_ENTRIES:
            _COMPILED.clear()
        _COMPILED[key] = (compiled, _direct(compiled, len(views)))
        return
    compiled, run = hit
    if run is not None and not _hooked(knobs):       # launch hooks: Triton's launcher
        run(grid, device.index, views, (*args, *consts.values()))
    else:
        compiled[grid](*[descriptor(*v) for v in views], *args, *consts.values())

"""Launching the SSD kernels with less host time: a cache of compiled kernels by specialization.

``kernel[grid](*args, **kwargs)`` makes Triton 3.6 specialize every argument and build a cache
key on each call (25-35 us on a 2-core VM for the reverse sweep's ~45 arguments; on the H200's
host, launches were 36 % of a 1K-step forward+backward's profiled host time, run s7-6).
:func:`launch` does the same launch with a key of its own, ``(kernel, device, the keyword
arguments, for each positional argument its specialization)``, mapped to the compiled kernel
that Triton returned the first time, which it then launches directly.

The specialization of a positional argument is what Triton specializes on, or finer: for a
tensor its dtype and whether its address is 16-byte aligned; for an int whether it is 1,
whether it is divisible by 16 and its range (i32, i64, u64). Equal keys therefore select the
kernel Triton itself would select. Triton's debug and instrumentation settings are part of
the key too. The SSD launchers pass an ``arg_key`` instead (:func:`arg_key`: the dtypes,
alignment and shapes of a call's inputs, which fix those of every buffer they allocate), so
a launch costs no per-argument work; ``tests/triton/test_fastlaunch.py`` holds them to it
over inputs of every dtype, alignment and shape.

The direct launch calls the compiled kernel's C launcher itself (:func:`_direct`: the CUDA
stream, the function handle and the packed metadata, then the arguments), skipping the
``CompiledKernel[grid]`` closure and its launch-metadata dictionary; kernels that need scratch
memory, and any launch while Triton launch hooks are set (e.g. proton's), go through
``CompiledKernel[grid]``. Both use Triton's calling convention of the versions in ``_TESTED``
(checked on the H200, ``benchmarks/gpu_ssd.py``); any other version, the interpreter
(``TRITON_INTERPRET=1``) and ``SEMISEP_TRITON_FAST_LAUNCH=0`` take Triton's own launch path.
"""

from __future__ import annotations

import torch
import triton

from .config import _env, _interpret

_TESTED = ("3.6.",)
_CACHE: dict = {}
# Entries kept at most: the keys hold a call's shapes, so a run over many sequence lengths
# would grow the cache without end; past this it starts again (a launch through Triton each).
MAX_ENTRIES = 4096


def _enabled() -> bool:
    return (triton.__version__.startswith(_TESTED) and not _interpret()
            and _env("SEMISEP_TRITON_FAST_LAUNCH", "1") == "1")


def _specs(args):
    """What Triton specializes each positional argument on (or finer); None for an argument
    not handled here. One comprehension, no call per argument (which would cost as much as
    the rest of the key)."""
    return tuple([(a.dtype, a.data_ptr() & 15 == 0) if type(a) is torch.Tensor
                  else (a == 1, a & 15 == 0, -2 ** 31 <= a < 2 ** 31, a < 2 ** 63)
                  if type(a) is int else None for a in args])


def _direct(compiled):
    """``run(grid, args)`` through the C launcher of a Triton 3.6 ``CompiledKernel``, or None
    where that launcher is not as expected or the kernel needs scratch memory."""
    launcher = getattr(compiled, "_run", None)
    c_launch = getattr(launcher, "launch", None)
    if c_launch is None or getattr(launcher, "global_scratch_size", 1) \
            or getattr(launcher, "profile_scratch_size", 1):
        return None
    fn, meta = compiled.function, compiled.packed_metadata
    coop, pdl = launcher.launch_cooperative_grid, launcher.launch_pdl
    stream_of = torch._C._cuda_getCurrentRawStream

    def run(g, device, args):
        # grid, stream, function, cooperative, PDL, scratch buffers (none), packed metadata,
        # launch metadata and the enter / exit hooks (none), then the kernel's arguments
        c_launch(g[0], g[1], g[2], stream_of(device), fn, coop, pdl, None, None, meta,
                 None, None, None, *args)
    return run


def _hooked(knobs) -> bool:
    hooks = knobs.runtime
    return bool(hooks.launch_enter_hook.calls or hooks.launch_exit_hook.calls)


def arg_key(tensors, *extra):
    """A caller's :func:`launch` ``arg_key``: the dtype and 16-byte alignment of each of
    ``tensors`` (None for an absent one) and ``extra`` (shapes, dtypes of its buffers)."""
    return (tuple([None if t is None else (t.dtype, t.data_ptr() & 15 == 0)
                   for t in tensors]), *extra)


class Options:
    """The keyword arguments of a :func:`launch` (constexprs and launch options) made once,
    with their part of the cache key, for a caller that launches with them many times."""

    __slots__ = ("kwargs", "key")

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.key = tuple(kwargs.items())

    def __repr__(self):
        return f"Options({self.kwargs})"


def launch(kernel, grid, *args, arg_key=None, opts=None, **kwargs):
    """``kernel[grid](*args, **kwargs)``: positional arguments are the kernel's runtime
    arguments (in order), keyword ones its constexprs and launch options (or ``opts``, an
    :class:`Options` holding them).

    ``arg_key``: a hashable that the caller guarantees to determine the specialization of
    every positional argument (made by :func:`arg_key` from a call's inputs, whose dtypes,
    alignment and shapes fix those of the buffers it allocates); it stands for the
    per-argument specializations in the cache key, which cost ~0.5 us an argument (~25 us
    for a sweep's). ``SEMISEP_TRITON_CHECK_ARG_KEY=1`` checks that promise on every launch.
    """
    if opts is not None:
        if kwargs:
            raise TypeError(f"launch: keyword arguments {sorted(kwargs)} and opts together")
        kwargs, kw_key = opts.kwargs, opts.key
    else:
        kw_key = tuple(kwargs.items())
    if not _enabled():
        kernel[grid](*args, **kwargs)
        return
    from triton import knobs    # here: triton.knobs is not in every Triton version

    if arg_key is None:
        specs = _specs(args)
        if None in specs:
            kernel[grid](*args, **kwargs)
            return
    else:
        specs = ("arg_key", arg_key)
    device = torch.cuda.current_device()
    key = (kernel, device, specs, kw_key, knobs.runtime.debug,
           knobs.compilation.instrumentation_mode)
    hit = _CACHE.get(key)
    if hit is None:
        exact = _specs(args) if arg_key is not None else specs
        compiled = kernel[grid](*args, **kwargs)
        if None in exact:
            return
        # the values of the parameters after the positional ones, in signature order
        tail = tuple(kwargs[p.name] if p.name in kwargs else p.default
                     for p in kernel.params[len(args):])
        if len(_CACHE) >= MAX_ENTRIES:
            _CACHE.clear()
        _CACHE[key] = (compiled, tail, _direct(compiled), exact)
        return
    compiled, tail, run, exact = hit
    if arg_key is not None and _env("SEMISEP_TRITON_CHECK_ARG_KEY") == "1" \
            and _specs(args) != exact:
        raise RuntimeError(f"fastlaunch: arg_key {arg_key} of {kernel} stands for two "
                           f"specializations: {exact} and {_specs(args)}")
    g = tuple(grid) + (1,) * (3 - len(grid))
    if run is None or _hooked(knobs):
        compiled[g](*args, *tail)
    else:
        run(g, device, args + tail)

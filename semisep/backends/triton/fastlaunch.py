"""Launching the SSD kernels with less host time: a cache of compiled kernels by specialization.

``kernel[grid](*args, **kwargs)`` makes Triton 3.6 specialize every argument and build a cache
key on each call (25-35 us on a 2-core VM for the reverse sweep's ~45 arguments; on the H200's
host, launches were 36 % of a 1K-step forward+backward's profiled host time, run s7-6). :func:`launch` does the same
launch with a key of its own, ``(kernel, device, the keyword arguments, for each positional
argument its specialization)``, mapped to the compiled kernel that Triton returned the first
time, which it then launches directly (``CompiledKernel[grid](*all arguments)``).

The specialization of a positional argument is what Triton specializes on, or finer: for a
tensor its dtype and whether its address is 16-byte aligned; for an int whether it is 1,
whether it is divisible by 16 and its range (i32, i64, u64). Equal keys therefore select the
kernel Triton itself would select. Triton's debug and instrumentation settings are part of
the key too.

The direct launch uses Triton's calling convention of the versions in ``_TESTED`` (checked on
the H200, ``benchmarks/gpu_ssd.py``); any other version, the interpreter
(``TRITON_INTERPRET=1``) and ``SEMISEP_TRITON_FAST_LAUNCH=0`` take Triton's own launch path.
"""

from __future__ import annotations

import os

import torch
import triton

from .config import _interpret

_TESTED = ("3.6.",)
_CACHE: dict = {}


def _enabled() -> bool:
    return (triton.__version__.startswith(_TESTED) and not _interpret()
            and os.environ.get("SEMISEP_TRITON_FAST_LAUNCH", "1") == "1")


def _spec(a):
    """What Triton specializes a positional argument on (or finer); None: not handled here."""
    if isinstance(a, torch.Tensor):
        return a.dtype, a.data_ptr() % 16 == 0
    if type(a) is int:
        return a == 1, a % 16 == 0, -2 ** 31 <= a < 2 ** 31, a < 2 ** 63
    return None


def launch(kernel, grid, *args, **kwargs):
    """``kernel[grid](*args, **kwargs)``: positional arguments are the kernel's runtime
    arguments (in order), keyword ones its constexprs and launch options."""
    if not _enabled():
        kernel[grid](*args, **kwargs)
        return
    from triton import knobs    # here: triton.knobs is not in every Triton version

    specs = tuple(_spec(a) for a in args)
    if None in specs:
        kernel[grid](*args, **kwargs)
        return
    key = (kernel, torch.cuda.current_device(), specs, tuple(kwargs.items()),
           knobs.runtime.debug, knobs.compilation.instrumentation_mode)
    hit = _CACHE.get(key)
    if hit is None:
        compiled = kernel[grid](*args, **kwargs)
        # the values of the parameters after the positional ones, in signature order
        tail = tuple(kwargs[p.name] if p.name in kwargs else p.default
                     for p in kernel.params[len(args):])
        _CACHE[key] = (compiled, tail)
        return
    compiled, tail = hit
    g = tuple(grid) + (1,) * (3 - len(grid))
    compiled[g](*args, *tail)

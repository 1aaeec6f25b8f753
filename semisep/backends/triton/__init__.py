"""The Triton backend: GPU kernels for the chunked SSD (forward and backward) and the decode step.

Nothing heavy happens at import: torch, triton and the kernels load on first use of
:func:`ssd`, :func:`ssd_decode_step` or the backend's entry points.

* :func:`ssd` - the chunked SSD in the ``ssd`` layout (differentiable, ``torch.compile``-able:
  the ops ``semisep::ssd_chunked_fwd`` / ``semisep::ssd_chunked_bwd``).
* :func:`ssd_decode_step` - one token, the state updated in place.
* :class:`TritonBackend` - the registry entry ``"triton"``.
* :mod:`.naive` - float64 torch references of the same semantics.

Inside: :mod:`.kernels` (the math and the sweeps), :mod:`.decays` and :mod:`.tiles` (their
jit helpers), :mod:`.gluon_fwd` and :mod:`.gluon_bwd` (the forward's factored loop and
the backward's factored sweeps in Gluon, on sm_90), :mod:`.gluon_launch` (their launches),
:mod:`.gate` (the z gate's sigmoid and backward pass), :mod:`.launch` (the launchers),
:mod:`.fastlaunch` (their cache of compiled kernels), :mod:`.config` (block sizes, knobs)
and :mod:`.ops` (checks, autograd, the torch.library ops, the public functions).
"""

from __future__ import annotations

from .backend import TritonBackend

__all__ = ["TritonBackend", "ssd", "ssd_decode_step", "supports_reason", "pick_config"]


def __getattr__(name):
    if name in ("ssd", "ssd_decode_step", "supports_reason", "pick_config"):
        from . import ops

        return getattr(ops, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

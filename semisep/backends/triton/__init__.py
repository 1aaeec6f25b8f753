"""The Triton backend: GPU kernels for the chunked SSD (forward and backward) and the decode step.

Importing this package needs torch and triton; :data:`AVAILABLE` / :data:`UNAVAILABLE_REASON`
say whether they imported.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
    import triton  # noqa: F401
except Exception as exc:  # pragma: no cover - depends on the install
    AVAILABLE = False
    UNAVAILABLE_REASON = f"torch and triton are needed ({exc.__class__.__name__}: {exc})"
else:
    AVAILABLE = True
    UNAVAILABLE_REASON = None
    from .ops import pick_config, ssd, ssd_decode_step, supports_reason  # noqa: F401

__all__ = ["AVAILABLE", "UNAVAILABLE_REASON", "ssd", "ssd_decode_step", "supports_reason"]

"""A dependency-free progress bar on stderr, for the command-line tools."""

from __future__ import annotations

import sys


def progress(items, *, desc: str, stream=None):
    """Yield from ``items`` while drawing ``desc [#####     ] k/n`` on ``stream`` (stderr)."""
    items = list(items)
    stream = sys.stderr if stream is None else stream
    width = 30
    for k, item in enumerate(items):
        done = int(width * k / max(len(items), 1))
        stream.write(f"\r{desc} [{'#' * done}{' ' * (width - done)}] {k}/{len(items)}")
        stream.flush()
        yield item
    stream.write(f"\r{desc} [{'#' * width}] {len(items)}/{len(items)}\n")
    stream.flush()

"""Command line: ``python -m semisep demo [--quick] [--plot PATH]``, ``python -m semisep bench``."""

from __future__ import annotations

import sys

COMMANDS = {"demo": "semisep.demo", "bench": "semisep.bench"}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: python -m semisep {{{','.join(COMMANDS)}}} [options]  (--help per command)",
              file=sys.stderr)
        return 2
    import importlib

    return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())

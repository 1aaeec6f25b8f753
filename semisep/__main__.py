"""Command line: ``python -m semisep demo [--quick] [--plot PATH]``, ``python -m semisep bench``."""

from __future__ import annotations

import sys

COMMANDS = {"demo": "semisep.demo", "bench": "semisep.bench"}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    usage = f"usage: python -m semisep {{{','.join(COMMANDS)}}} [options]  (--help per command)"
    if argv[:1] in (["-h"], ["--help"]):
        print(usage)
        return 0
    if not argv or argv[0] not in COMMANDS:
        print(usage, file=sys.stderr)
        if argv:
            print(f"python -m semisep: unknown command {argv[0]!r}", file=sys.stderr)
        return 2
    import importlib

    return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())

"""`python -m buildgen.cache exec ...`: the wrapper build.ninja runs every cached action with."""

from __future__ import annotations

import sys


def _main(argv: list[str]) -> int:
    if not argv or argv[0] != "exec":
        print("usage: python -m buildgen.cache exec --root R --rule NAME [--restat] "
              "[--depfile F] --out OUT... --in IN... -- COMMAND...", file=sys.stderr)
        return 2
    from buildgen.cache.exec import main

    return main(argv[1:])


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

"""``python -m nereus.cli.reference (--write | --check) [--out DIR]``: regenerate or check
the man pages and completion scripts under DIR (default: the current directory, which
``scripts/gen-reference`` sets to the repository root)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nereus.cli.reference import differences, generate, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nereus.cli.reference",
                                     description=__doc__.split("\n\n", 1)[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true",
                        help="write man/ and completions/, delete stale generated pages")
    action.add_argument("--check", action="store_true",
                        help="exit 1 listing the files that differ from the CLI")
    parser.add_argument("--out", type=Path, default=Path.cwd(),
                        help="the repository root (default: the current directory)")
    args = parser.parse_args(argv)
    files = generate()
    if args.check:
        problems = differences(args.out, files)
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            print("run `make reference` to regenerate", file=sys.stderr)
        return 1 if problems else 0
    for line in write(args.out, files):
        print(line)
    print(f"{len(files)} files up to date under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

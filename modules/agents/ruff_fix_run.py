"""The ruff-fix program (stdlib only): safe fixes, then formatting, on the given files."""

from __future__ import annotations

import argparse
import subprocess
import sys


def main(argv: list[str] | None = None) -> int:
    """Run ruff on the files; exit 0 when ruff itself worked."""
    parser = argparse.ArgumentParser(description="ruff check --fix and ruff format on files")
    parser.add_argument("--ruff", required=True, help="the ruff executable")
    parser.add_argument("--mode", choices=("check", "format"), default="check")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    steps = [[args.ruff, "format", "--no-cache", *args.files]]
    if args.mode == "check":
        # fixing can leave a file unformatted (a removed import leaves blank lines)
        steps.insert(0, [args.ruff, "check", "--fix", "--no-cache", "--exit-zero", *args.files])
    for step in steps:
        print("$", " ".join(step), flush=True)
        code = subprocess.call(step, stdin=subprocess.DEVNULL)
        if code not in (0, 1):
            print(f"ruff exited {code}", file=sys.stderr)
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""seed: a self-improving project daemon. Run `python seed.py --help`.

This file is protected: no agent may change it. It bootstraps the dependencies (a local
virtualenv on first use), then hands over to the kernel's command line.
"""

from __future__ import annotations

import sys

from kernel.bootstrap import ensure

_VALUED = {"--root", "--config"}


def _command(argv: list[str]) -> str:
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _VALUED:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return "run"


def main() -> int:
    """Bootstrap, then run the command line."""
    argv = sys.argv[1:]
    ensure([__file__, *argv], tests=_command(argv) == "test", allowed="--no-bootstrap" not in argv)
    from kernel.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())

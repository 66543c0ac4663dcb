#!/usr/bin/env python3
"""seed: a self-improving project daemon. Run `python seed.py --help`.

This file is protected: no agent may change it. It bootstraps the dependencies (a local
virtualenv on first use), then hands over to the kernel's command line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kernel.shell.bootstrap import ensure, ray_wanted

_VALUED = {"--root", "--config"}


def _command_at(argv: list[str]) -> int:
    """Where the command word is (len(argv) when there is none: `run`)."""
    skip = False
    for at, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg in _VALUED:
            skip = True
        elif not arg.startswith("-"):
            return at
    return len(argv)


def _command(argv: list[str]) -> str:
    at = _command_at(argv)
    return argv[at] if at < len(argv) else "run"


def _usage_only(argv: list[str]) -> bool:
    """Whether `test` is followed by -h or --help (the command line prints its usage)."""
    at = _command_at(argv)
    return argv[at + 1 : at + 2] in (["-h"], ["--help"])


def _on_itself(argv: list[str]) -> bool:
    """Whether the daemon works on this repository: --root naming it, or, without --root, the
    current directory inside it (where the person stands is the repository seed works on)."""
    root = None
    for i, arg in enumerate(argv):
        if arg == "--root" and i + 1 < len(argv):
            root = argv[i + 1]
        elif arg.startswith("--root="):
            root = arg.split("=", 1)[1]
    home = Path(__file__).resolve().parent
    where = Path(root or os.getcwd()).resolve()
    return where == home or home in where.parents


def _config(argv: list[str]) -> Path:
    """The seed.toml this command reads: --config, else the repository's (--root or the
    current directory, up to the folder holding .git)."""
    root = None
    for i, arg in enumerate(argv):
        if arg in ("--root", "--config") and i + 1 < len(argv):
            if arg == "--config":
                return Path(argv[i + 1])
            root = argv[i + 1]
        elif arg.startswith("--config="):
            return Path(arg.split("=", 1)[1])
        elif arg.startswith("--root="):
            root = arg.split("=", 1)[1]
    where = Path(root or os.getcwd()).resolve()
    top = next((p for p in (where, *where.parents) if (p / ".git").exists()), where)
    return top / "seed.toml"


def main() -> int:
    """Bootstrap, then run the command line."""
    argv = sys.argv[1:]
    command = _command(argv)
    # `test --help` prints the usage: the test extras are for running the suite
    testing = command == "test" and not _usage_only(argv)
    # on itself the daemon measures its own tests, which need the test extras too
    tests = testing or (command in ("run", "once", "gaps", "plan") and _on_itself(argv))
    # the Ray extra: for the test command (its tests run on a local cluster), and for a
    # daemon whose seed.toml asks for the Ray engine; never otherwise
    ray = testing or (command in ("run", "once") and ray_wanted(_config(argv)))
    ensure([__file__, *argv], tests=tests, allowed="--no-bootstrap" not in argv, ray=ray)
    from kernel.shell.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())

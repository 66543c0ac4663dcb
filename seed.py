#!/usr/bin/env python3
"""seed: a self-improving project daemon. Run `python seed.py --help`.

This file is protected: no agent may change it. It bootstraps the dependencies (a local
virtualenv on first use), then hands over to the kernel's command line.

No `from __future__` import and nothing but `os` and `sys` (both loaded before any script
runs) until `_own_path` has run: Python puts this file's folder first on `sys.path`, and on
seed's own repository an agent may land files there (a `__future__.py`, `pathlib.py` or
`pydantic.py` at the root would otherwise run here, outside every sandbox).
"""

import os
import sys

_VALUED = {"--root", "--config"}
_OWN = ("kernel", "domain")
"""The only packages imported from seed's own folder (both protected; SECURITY.md)."""


def _own_path() -> None:
    """Take seed's folder off `sys.path`, and import only `kernel` and `domain` from it: no
    other module of seed's folder stands in for what the kernel imports, whatever its name."""
    home = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != home]
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec, PathFinder
    from types import ModuleType

    class _Own:
        """seed's own packages, from seed's folder only."""

        @staticmethod
        def find_spec(
            name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
        ) -> ModuleSpec | None:
            if path is not None or name not in _OWN:
                return None
            return PathFinder.find_spec(name, [home])

    sys.meta_path.insert(0, _Own)


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
    home = os.path.dirname(os.path.realpath(__file__))
    where = os.path.realpath(root or os.getcwd())
    return where == home or where.startswith(home + os.sep)


def _config(argv: list[str]) -> str:
    """The seed.toml this command reads: --config, else the repository's (--root or the
    current directory, up to the folder holding .git)."""
    root = None
    for i, arg in enumerate(argv):
        if arg in ("--root", "--config") and i + 1 < len(argv):
            if arg == "--config":
                return argv[i + 1]
            root = argv[i + 1]
        elif arg.startswith("--config="):
            return arg.split("=", 1)[1]
        elif arg.startswith("--root="):
            root = arg.split("=", 1)[1]
    where = os.path.realpath(root or os.getcwd())
    top = where
    while not os.path.exists(os.path.join(top, ".git")) and os.path.dirname(top) != top:
        top = os.path.dirname(top)
    if not os.path.exists(os.path.join(top, ".git")):
        top = where
    return os.path.join(top, "seed.toml")


def main() -> int:
    """Bootstrap, then run the command line."""
    _own_path()
    from pathlib import Path

    from kernel.shell.bootstrap import ensure, ray_wanted

    argv = sys.argv[1:]
    command = _command(argv)
    # `test --help` prints the usage: the test extras are for running the suite
    testing = command == "test" and not _usage_only(argv)
    # on itself the daemon measures its own tests, which need the test extras too
    tests = testing or (command in ("run", "once", "gaps", "plan") and _on_itself(argv))
    # the Ray extra: for the test command (its tests run on a local cluster), and for a
    # daemon whose seed.toml asks for the Ray engine; never otherwise
    ray = testing or (command in ("run", "once") and ray_wanted(Path(_config(argv))))
    ensure([__file__, *argv], tests=tests, allowed="--no-bootstrap" not in argv, ray=ray)
    from kernel.shell.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())

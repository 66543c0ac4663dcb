"""The two sandbox profiles: one for runs of repository code (baseline, verification, the
self-check), one for the agent. Built here from the paths and the config, nowhere else.

Both hide the kernel's state folder and the real HOME, and see the rest of the machine
read-only; measurement has no network, the agent keeps it (it calls model APIs).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from kernel import sandbox
from kernel.config import GuardConfig
from kernel.measure import Jail
from kernel.paths import Paths

_NEVER_SHOWN = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".kube",
    ".docker",
    ".netrc",
    ".pypirc",
    ".npmrc",
    ".git-credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
)
"""Credentials no adapter may ask to see."""


def enabled(guard: GuardConfig) -> bool:
    """Whether runs are to be sandboxed (the config does not opt out)."""
    return guard.sandbox != "off"


def active(guard: GuardConfig) -> bool:
    """Whether runs are sandboxed now (on, and bubblewrap works here)."""
    return enabled(guard) and sandbox.available().ok


def why_not(guard: GuardConfig) -> str:
    """Why no agent that executes code may run now ('' when one may)."""
    if not enabled(guard):
        return ""
    found = sandbox.available()
    return "" if found.ok else f"no sandbox: {found.reason}"


def describe(guard: GuardConfig) -> str:
    """One line for `status` and reports: how runs are isolated here."""
    if not enabled(guard):
        return 'off: agents and test runs are NOT sandboxed ([guard] sandbox = "off")'
    found = sandbox.available()
    if not found.ok:
        return f"unavailable, so no agent runs (plans only): {found.reason}"
    return "on: bubblewrap (read-only filesystem, hidden HOME, PID namespace, limits)"


def _limited(guard: GuardConfig, **mounts: Any) -> sandbox.Profile:
    """A profile with the config's limits on memory, processes and /tmp."""
    return sandbox.Profile(
        memory_bytes=guard.sandbox_memory_mb * 1024 * 1024,
        max_processes=guard.sandbox_max_processes,
        tmp_bytes=guard.sandbox_tmp_mb * 1024 * 1024,
        **mounts,
    )


def _shown(paths: Paths, extra: Sequence[Path] = ()) -> tuple[Path, ...]:
    """What a run must still see read-only where HOME and /tmp are covered: the repository,
    seed, the interpreters, and the folders on PATH with the installation each belongs to
    (a pyenv shim needs pyenv, an npm-installed CLI its node_modules)."""
    home = Path(os.environ.get("HOME") or "/nonexistent").resolve()
    places = [paths.root, paths.seed_home, Path(sys.prefix), Path(sys.base_prefix)]
    places += [Path(sys.executable).resolve().parent.parent, *extra]
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        folder = Path(entry)
        if not folder.is_absolute():
            continue
        places.append(folder)
        parent = folder.resolve().parent
        if home in parent.parents:
            places.append(parent)
    return tuple(dict.fromkeys(p for p in places if p.is_absolute()))


def _secrets() -> tuple[Path, ...]:
    """Credentials under HOME, hidden again wherever a shown folder would include them."""
    home = Path(os.environ.get("HOME") or "/nonexistent")
    return tuple(home / name for name in _NEVER_SHOWN)


def _empty_home(paths: Paths) -> Path:
    """An empty HOME for test runs (tests must not read the person's dotfiles)."""
    home = paths.homes / "tests"
    home.mkdir(parents=True, exist_ok=True)
    return home


def measurement_jail(paths: Paths, guard: GuardConfig) -> Jail | None:
    """The sandbox for runs of repository code, or None when it is off or missing."""
    if not enabled(guard) or not sandbox.available().ok:
        return None

    def jail(argv: Sequence[str], writable: Sequence[Path]) -> list[str]:
        python = Path(argv[0]) if argv and os.path.isabs(argv[0]) else None
        shown = _shown(
            paths, (python.resolve().parent.parent, python.parent.parent) if python else ()
        )
        profile = _limited(
            guard,
            writable=tuple(writable),
            hidden=(paths.state, *_secrets()),
            shown=shown,
            home=_empty_home(paths),
            network=False,
        )
        return sandbox.wrap(argv, profile)

    return jail


def extra_writable(paths: Paths) -> tuple[Path, ...]:
    """Folders the person lets a sandboxed agent write besides its worktree: SEED_SANDBOX_WRITABLE
    in the daemon's environment (a tool's shared cache; test harnesses' trace folders). The
    agent cannot change the daemon's environment, so it cannot widen this. A place inside the
    kernel's state folder is never one (the seal key and the kernel's records live there); a
    folder around it is bound under the state's hiding (`sandbox._mounts`), and what the run
    changes in the checkout or `.git` through it is a violation (`integrity.py`)."""
    raw = os.environ.get("SEED_SANDBOX_WRITABLE", "")
    state = paths.state.resolve()
    return tuple(
        Path(p)
        for p in raw.split(os.pathsep)
        if p and os.path.isabs(p) and not Path(p).resolve().is_relative_to(state)
    )


def home_names(names: Sequence[str]) -> tuple[str, ...]:
    """The adapter's HOME entries that may be shown: relative, inside HOME, no credentials."""
    kept: list[str] = []
    for name in names:
        pure = PurePosixPath(name)
        if pure.is_absolute() or ".." in pure.parts or not pure.parts:
            continue
        text = pure.as_posix()
        if any(text == n or text.startswith(n + "/") for n in _NEVER_SHOWN):
            continue
        kept.append(text)
    return tuple(kept)


def agent_argv(
    argv: Sequence[str],
    *,
    paths: Paths,
    guard: GuardConfig,
    writable: Sequence[Path],
    readonly: Sequence[Path],
    home: Path,
    home_binds: Sequence[str],
    cwd: Path,
) -> list[str]:
    """The agent's argv, sandboxed: only the named places writable, HOME private."""
    commands = [Path(a) for a in argv if os.path.isabs(a) and Path(a).exists()]
    profile = _limited(
        guard,
        writable=tuple(writable),
        readonly=tuple(readonly),
        hidden=(paths.state, *_secrets()),
        shown=_shown(paths, commands),
        home=home,
        home_binds=home_names(home_binds),
        network=True,
        chdir=cwd,
    )
    return sandbox.wrap(argv, profile)

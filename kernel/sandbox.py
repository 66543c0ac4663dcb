"""The OS sandbox every agent run and every run of repository code goes through (bubblewrap).

The whole filesystem is seen read-only; named places are bound read-write; the kernel's
state and the real HOME are hidden behind empty tmpfs mounts (with the places a run needs
shown through again); `/tmp` is private and bounded; the run gets a new PID namespace, so
when it ends every process it started is gone; all capabilities are dropped (as root,
bubblewrap keeps them otherwise, and root could remount `/` read-write); the network is
cut unless the profile keeps it. Memory and processes are bounded by rlimits set by a
small launcher inside the sandbox (RLIMIT_DATA rather than RLIMIT_AS: node-based agent CLIs
reserve far more address space than they use).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

INSTALL = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    "bubblewrap); it needs unprivileged user namespaces or root, so it does not run on "
    'macOS or in some containers; or set [guard] sandbox = "off" in seed.toml to run '
    "agents unsandboxed"
)

_LIMITS = (
    "import os, resource, sys\n"
    "data, procs = int(sys.argv[1]), int(sys.argv[2])\n"
    "if data: resource.setrlimit(resource.RLIMIT_DATA, (data, data))\n"
    "if procs: resource.setrlimit(resource.RLIMIT_NPROC, (procs, procs))\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)
"""Runs inside the sandbox, as its first process: set the limits, then become the command."""


@dataclass(frozen=True)
class Profile:
    """What one sandboxed run may see and touch.

    Mounts are applied over the read-only root and the private home: the most specific
    (deepest) place last, so nothing writable covers a hidden place inside it; at one path,
    `hidden` over `readonly` over `writable` and `home_binds` over `shown`.
    """

    writable: tuple[Path, ...] = ()
    """Bound read-write at their own path (the worktree or export, run folders)."""
    readonly: tuple[Path, ...] = ()
    """Re-bound read-only at their own path, over a writable place (prompt and plan files)."""
    hidden: tuple[Path, ...] = ()
    """Folders replaced by an empty tmpfs (the kernel's state), files by an empty one."""
    shown: tuple[Path, ...] = ()
    """Shown read-only again where the private /tmp or home covers them (the repository,
    interpreters, PATH folders, the agent's own program)."""
    home: Path | None = None
    """A folder bound read-write over the real HOME (which is then unseen)."""
    real_home: Path | None = None
    """The HOME path to cover (default: $HOME)."""
    home_binds: tuple[str, ...] = ()
    """Names under the real HOME bound read-write at their place in the private home."""
    network: bool = False
    tmp_bytes: int = 512 * 1024 * 1024
    memory_bytes: int = 4 * 1024 * 1024 * 1024
    max_processes: int = 512
    chdir: Path | None = None


@dataclass(frozen=True)
class Availability:
    """Whether the sandbox can run here, and why not."""

    ok: bool
    reason: str = ""


def _bwrap() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def available() -> Availability:
    """Whether bubblewrap exists and starts a sandbox with the flags the kernel uses."""
    found = _bwrap()
    if found is None:
        return Availability(False, f"bubblewrap (bwrap) is not installed: {INSTALL}")
    try:
        probe = subprocess.run(
            wrap([sys.executable, "-I", "-S", "-c", "pass"], Profile(tmp_bytes=1 << 20)),
            capture_output=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Availability(False, f"bubblewrap could not start a sandbox ({exc}): {INSTALL}")
    if probe.returncode != 0:
        said = probe.stderr.decode("utf-8", errors="replace").strip()[:300]
        return Availability(False, f"bubblewrap could not start a sandbox ({said}): {INSTALL}")
    return Availability(True)


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _mounts(profile: Profile, covered: Sequence[Path], real_home: Path) -> list[str]:
    """The shown, hidden, writable and read-only mounts, the most specific last.

    bubblewrap applies mounts in order, a later one over an earlier: ordered by depth, a
    folder bound writable can never cover a hidden place inside it (the kernel's state, its
    seal key), while a place bound inside a hidden folder (a run's own folder) still shows;
    at the same path, hidden wins over read-only, read-only over writable.
    """
    mounts: list[tuple[int, int, list[str]]] = []

    def add(path: Path, rank: int, args: list[str]) -> None:
        mounts.append((len(path.parts), rank, args))

    # what the run needs from under a covered folder is shown again, read-only
    for path in profile.shown:
        real = path.resolve()
        if path.exists() and any(_inside(real, c) for c in covered):
            add(real, 0, ["--ro-bind", str(real), str(real)])
    for path in profile.writable:
        if path.exists():
            add(path.resolve(), 1, ["--bind", str(path.resolve()), str(path.resolve())])
    if profile.home is not None:
        for name in profile.home_binds:
            source = real_home / name
            if source.exists():
                add(source, 1, ["--bind", str(source), str(source)])
    for path in profile.readonly:
        if path.exists():
            add(path.resolve(), 2, ["--ro-bind", str(path.resolve()), str(path.resolve())])
    for path in profile.hidden:
        if path.is_dir():
            add(path.resolve(), 3, ["--tmpfs", str(path.resolve())])
        elif path.exists():
            add(path.resolve(), 3, ["--ro-bind", os.devnull, str(path.resolve())])
    # sorted is stable: at equal depth and rank, the profile's own order stays
    return [arg for _, _, args in sorted(mounts, key=lambda m: (m[0], m[1])) for arg in args]


def wrap(argv: Sequence[str], profile: Profile) -> list[str]:
    """The argv that runs argv inside the sandbox the profile describes."""
    bwrap = _bwrap() or "bwrap"
    out = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    out += ["--size", str(profile.tmp_bytes), "--tmpfs", "/tmp"]
    out += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
    out += ["--new-session", "--cap-drop", "ALL"]
    if not profile.network:
        out.append("--unshare-net")
    real_home = (profile.real_home or Path(os.environ.get("HOME") or "/nonexistent")).resolve()
    covered = [Path("/tmp")]
    if profile.home is not None and real_home.is_dir() and real_home != Path("/"):
        out += ["--bind", str(profile.home), str(real_home)]
        covered.append(real_home)
    out += _mounts(profile, covered, real_home)
    if profile.chdir is not None:
        out += ["--chdir", str(profile.chdir)]
    out.append("--")
    if profile.memory_bytes or profile.max_processes:
        out += [sys.executable, "-I", "-S", "-c", _LIMITS]
        out += [str(profile.memory_bytes), str(profile.max_processes)]
    return [*out, *argv]

"""The one reader of files a sandboxed run wrote: never through a link, never blocking, bounded.

A run (the agent, code under test) controls every file it leaves behind: it can make one a
link to a secret outside its folder, a FIFO that blocks whoever opens or reads it, a device,
or a file larger than the disk. Every file the kernel reads back from a run goes through
`read`: each folder on the way is opened without following links, the file itself with
O_NOFOLLOW and O_NONBLOCK, and only a regular file (by fstat of the open descriptor, so it
cannot be swapped after the check) is read, at most `cap` bytes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


@dataclass(frozen=True)
class Readback:
    """What reading one file a run left behind gave."""

    data: bytes = b""
    problem: str = ""
    """Why nothing was read ('' when the file was read); "missing" when there is none."""
    truncated: bool = False
    """The file held more than the cap; data is its first cap bytes."""

    @property
    def ok(self) -> bool:
        """A regular file was read."""
        return not self.problem

    @property
    def missing(self) -> bool:
        """There was no file at all (not a refusal)."""
        return self.problem == "missing"

    def text(self) -> str:
        """The bytes read as UTF-8 (errors replaced)."""
        return self.data.decode("utf-8", errors="replace")


def kind(mode: int) -> str:
    """What a file of this mode is, in words."""
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def read(path: Path, cap: int, *, within: Path | None = None) -> Readback:
    """At most cap bytes of a regular file a run wrote, reached through no link.

    With `within`, path is relative to that folder (which the kernel made) and no folder
    on the way may be a link or lead outside it; without, only the file itself is checked.
    """
    if within is None:
        folder, parts = path.parent, [path.name]
    else:
        pure = PurePosixPath(path.as_posix())
        if pure.is_absolute() or ".." in pure.parts or not pure.parts:
            return Readback(problem="a name outside the run's folder")
        folder, parts = within, list(pure.parts)
    try:
        fd = os.open(folder, _DIR_FLAGS)
    except OSError as exc:
        return Readback(problem=_why(exc))
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
        return _read_at(fd, parts[-1], cap)
    except OSError as exc:
        return Readback(problem=_why(exc))
    finally:
        os.close(fd)


def copy(path: Path, target: Path, cap: int, *, within: Path | None = None) -> Readback:
    """Read a run's file as `read` does and write what was read to target (a kernel-owned
    place), so a tool that opens files by name (sqlite, its journals) reads only the copy."""
    found = read(path, cap, within=within)
    if found.ok and not found.truncated:
        target.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(found.data)
    return found


def _read_at(folder_fd: int, name: str, cap: int) -> Readback:
    fd = os.open(name, _FILE_FLAGS, dir_fd=folder_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return Readback(problem=f"{kind(info.st_mode)}, not a regular file")
        # a regular file never blocks: back to blocking reads, which return short only at its end
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        left = cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return Readback(data=data[:cap], truncated=len(data) > cap)
    finally:
        os.close(fd)


def _why(exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return "missing"
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return "a link (or a link on the way), not a regular file"
    return f"unreadable: {exc.strerror or exc}"

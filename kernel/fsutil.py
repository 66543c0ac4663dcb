"""Crash-safe file writes: temp file, fsync, rename; appends that are fsynced."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write a file so that readers see either the old or the new bytes, never a mix.

    A symlink at the path is replaced, not followed; `mode` sets the new file's permissions.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """Write UTF-8 text atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def append_line(path: Path, line: str) -> None:
    """Append one line and fsync it, so a crash loses at most this line.

    A file that does not end with a newline (a torn append) gets one first: the torn line
    stays a line of its own, never glued to this one. Appenders take an flock, and one that
    opened a file a repair has since replaced opens the new one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    while True:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = os.stat(path)
            except FileNotFoundError:
                continue
            here = os.fstat(fd)
            if (now.st_dev, now.st_ino) != (here.st_dev, here.st_ino):
                continue  # replaced (a repair) while this waited for the lock
            if here.st_size and os.pread(fd, 1, here.st_size - 1) != b"\n":
                data = b"\n" + data
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            return
        finally:
            os.close(fd)


def unique_path(path: Path) -> Path:
    """A path that does not exist yet: path itself or path with a numeric suffix."""
    if not path.exists() and not path.is_symlink():
        return path
    stem, suffix = path.stem, path.suffix
    for n in range(1, 10_000):
        candidate = path.with_name(f"{stem}.{n}{suffix}")
        if not candidate.exists() and not candidate.is_symlink():
            return candidate
    raise FileExistsError(f"no free name next to {path}")


def plain_file(root: Path, rel: str) -> bool:
    """Whether root/rel is a regular file reached through no link (the file itself or any
    folder on the way): writing to it cannot land outside root."""
    real_root = os.path.realpath(root)
    path = root / rel
    return (
        path.is_file()
        and not path.is_symlink()
        and os.path.realpath(path) == os.path.join(real_root, os.path.normpath(rel))
    )


def plain_file_place(top: Path, target: Path) -> bool:
    """Whether target's folders inside top are real folders (no link to follow out)."""
    here = top
    for part in target.relative_to(top).parts[:-1]:
        here = here / part
        if here.is_symlink() or (here.exists() and not here.is_dir()):
            return False
    return not target.is_symlink()


def remove_any(path: Path) -> None:
    """Remove whatever is at path (a file, link, FIFO or folder tree), never following a link;
    folders a run made unreadable are opened up first (the kernel owns the place)."""
    if not (path.is_dir() and not path.is_symlink()):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    with contextlib.suppress(OSError):
        path.chmod(0o700)
    for folder, dirs, _ in os.walk(path):  # top-down, links to folders never followed
        for name in dirs:
            inner = os.path.join(folder, name)
            if not os.path.islink(inner):
                with contextlib.suppress(OSError):
                    os.chmod(inner, 0o700)
    shutil.rmtree(path, ignore_errors=True)

"""Crash-safe file writes: temp file, fsync, rename; appends that are fsynced."""

from __future__ import annotations

import contextlib
import os
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
    """Append one line and fsync it, so a crash loses at most this line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
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

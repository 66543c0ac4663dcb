"""The planner's only window on the repository: a read-only file-system port over the worktree."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

MAX_READ = 64_000
"""Bytes read from one file at most; the planner quotes heads of documents, never whole trees."""
MAX_FILES = 20_000
"""Paths listed at most (a task's words are looked up among them)."""
_SKIPPED = frozenset({"__pycache__", "node_modules", "site-packages"})


class FileSystemPort(Protocol):
    """Read-only access to repository-relative paths."""

    def read_text(self, path: str) -> str | None:
        """The file's text (at most MAX_READ bytes, undecodable bytes replaced), or None."""
        ...

    def is_file(self, path: str) -> bool:
        """Whether a regular file exists at the path."""
        ...

    def is_dir(self, path: str) -> bool:
        """Whether a directory exists at the path."""
        ...

    def files(self) -> tuple[str, ...]:
        """Repository-relative paths of the regular files outside hidden and cache folders,
        sorted, at most MAX_FILES."""
        ...


def safe_relative(path: str) -> str | None:
    """A clean repository-relative POSIX path, or None for absolute, escaping or odd paths."""
    text = path.strip().replace("\\", "/").removeprefix("./")
    if not text or text.startswith("/") or any(ord(c) < 32 or c == "\x7f" for c in text):
        return None
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


class WorktreeFS:
    """The port over a real directory; nothing outside it can be read, not even through links."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve() if str(root) else None

    def _resolve(self, path: str) -> Path | None:
        rel = safe_relative(path)
        if self.root is None or rel is None:
            return None
        target = (self.root / rel).resolve()
        if target != self.root and self.root not in target.parents:
            return None  # a symlink pointing out of the worktree
        return target

    def read_text(self, path: str) -> str | None:
        """The file's text, or None when it is missing, not a file or outside the worktree."""
        target = self._resolve(path)
        if target is None or not target.is_file():
            return None
        try:
            with target.open("rb") as handle:
                data = handle.read(MAX_READ)
        except OSError:
            return None
        return data.decode("utf-8", errors="replace")

    def is_file(self, path: str) -> bool:
        """Whether a regular file exists inside the worktree."""
        target = self._resolve(path)
        return target is not None and target.is_file()

    def is_dir(self, path: str) -> bool:
        """Whether a directory exists inside the worktree."""
        target = self._resolve(path)
        return target is not None and target.is_dir()

    def files(self) -> tuple[str, ...]:
        """The worktree's regular files (links are not followed), sorted, at most MAX_FILES."""
        if self.root is None:
            return ()
        found: list[str] = []
        for folder, dirs, names in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED)
            rel = Path(folder).relative_to(self.root).as_posix()
            for name in sorted(names):
                full = Path(folder, name)
                if full.is_symlink() or not full.is_file():
                    continue
                found.append(name if rel == "." else f"{rel}/{name}")
                if len(found) >= MAX_FILES:
                    return tuple(sorted(found))
        return tuple(sorted(found))


class MemoryFS:
    """The port over a mapping of path -> text (tests, and planning with no worktree)."""

    def __init__(self, files: Mapping[str, str] | None = None) -> None:
        self.files_by_path = {
            rel: text for path, text in (files or {}).items() if (rel := safe_relative(path))
        }
        dirs: set[str] = set()
        for rel in self.files_by_path:
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        self.dirs = frozenset(dirs)

    def read_text(self, path: str) -> str | None:
        """The mapped text, capped like a real file."""
        rel = safe_relative(path)
        text = self.files_by_path.get(rel) if rel else None
        return None if text is None else text.encode("utf-8")[:MAX_READ].decode("utf-8", "replace")

    def is_file(self, path: str) -> bool:
        """Whether the path is mapped."""
        rel = safe_relative(path)
        return rel is not None and rel in self.files_by_path

    def is_dir(self, path: str) -> bool:
        """Whether some mapped path lies below it."""
        rel = safe_relative(path)
        return rel is not None and rel in self.dirs

    def files(self) -> tuple[str, ...]:
        """The mapped paths, sorted."""
        return tuple(sorted(self.files_by_path))


def worktree_fs(worktree: str) -> FileSystemPort:
    """The default port: the worktree if it exists, else an empty tree."""
    if worktree and os.path.isdir(worktree):
        return WorktreeFS(worktree)
    return MemoryFS()

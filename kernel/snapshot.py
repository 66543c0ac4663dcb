"""The state of a checkout, read from disk and git: what kernel/integrity.py compares.

Files are identified by repository-relative path (git's own files by a label such as
.git/config); a FileState holds what is needed to tell a change and to restore it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from kernel import gitops
from kernel.fsutil import atomic_write_bytes
from kernel.globs import matches_any

KERNEL_OWNED = ("history", ".git")
"""Protected, but written by the kernel itself (history/) or checked on their own (.git)."""
UNWATCHED = ("history", "inbox", ".git")
"""Top-level folders whose changes are not the checkout's (records, tasks, git's own files)."""
MAX_KEPT_BYTES = 64 * 1024 * 1024
"""A protected file larger than this is hashed but not kept (it could not be restored)."""

_SIDE_DIRS = ("__pycache__",)
_SIDE_SUFFIXES = (".pyc", ".pyo")


@dataclass(frozen=True)
class FileState:
    """A file as the snapshot saw it."""

    kind: str
    """file, symlink or missing."""
    sha: str = ""
    """sha256 of the bytes (of the link target for a symlink)."""
    mode: int = 0


MISSING = FileState("missing")


@dataclass
class Snapshot:
    """The checkout before the agent ran."""

    iteration_id: str
    head: str
    """The bytes of the checkout's HEAD file (a symbolic ref or a commit id)."""
    head_commit: str
    refs: dict[str, str]
    git_files: dict[str, FileState]
    """config, config.worktree and hooks, by label (.git/config, .git/hooks/pre-commit)."""
    protected: dict[str, FileState]
    """Protected files of the checkout, by repository-relative path."""
    files: dict[str, tuple[int, int, int]]
    """Other tracked and untracked files: (size, mtime_ns, mode)."""
    taken_ns: int = 0
    """When the snapshot was taken (time.time_ns())."""

    def to_json(self) -> str:
        """Serialised for the crash-recovery copy."""
        return json.dumps(
            {
                "iteration_id": self.iteration_id,
                "head": self.head,
                "head_commit": self.head_commit,
                "refs": self.refs,
                "git_files": {k: vars(v) for k, v in self.git_files.items()},
                "protected": {k: vars(v) for k, v in self.protected.items()},
                "files": self.files,
                "taken_ns": self.taken_ns,
            }
        )

    @staticmethod
    def from_json(text: str) -> Snapshot:
        """Read a serialised snapshot."""
        data = cast(dict[str, Any], json.loads(text))

        def states(raw: Any) -> dict[str, FileState]:
            return {
                str(k): FileState(str(v["kind"]), str(v.get("sha", "")), int(v.get("mode", 0)))
                for k, v in cast(dict[str, dict[str, Any]], raw).items()
            }

        return Snapshot(
            iteration_id=str(data["iteration_id"]),
            head=str(data["head"]),
            head_commit=str(data["head_commit"]),
            refs={str(k): str(v) for k, v in cast(dict[str, Any], data["refs"]).items()},
            git_files=states(data["git_files"]),
            protected=states(data["protected"]),
            files={
                str(k): (int(v[0]), int(v[1]), int(v[2]))
                for k, v in cast(dict[str, list[Any]], data["files"]).items()
            },
            taken_ns=int(data.get("taken_ns", 0)),
        )


def side_file(rel: str) -> bool:
    """Compiled code and caches (Python rebuilds them)."""
    parts = rel.split("/")
    return any(p in _SIDE_DIRS for p in parts[:-1]) or rel.endswith(_SIDE_SUFFIXES)


def under(rel: str, tops: Iterable[str]) -> bool:
    """Whether a repository-relative path is one of the folders or inside one."""
    return any(rel == top or rel.startswith(top + "/") for top in tops)


def read_state(path: Path, root: Path | None = None) -> tuple[FileState, bytes | None]:
    """A file's state and bytes; below root, a path through a symlinked folder is missing."""
    if root is not None and _through_symlink(root, path):
        return MISSING, None
    try:
        info = path.lstat()
    except OSError:
        return MISSING, None
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(path).encode("utf-8", errors="surrogateescape")
        return FileState("symlink", hashlib.sha256(target).hexdigest(), 0), target
    if not stat.S_ISREG(info.st_mode):
        return FileState("missing"), None
    try:
        data = path.read_bytes()
    except OSError:
        return FileState("file", "unreadable", stat.S_IMODE(info.st_mode)), None
    return FileState("file", hashlib.sha256(data).hexdigest(), stat.S_IMODE(info.st_mode)), data


def _through_symlink(root: Path, path: Path) -> bool:
    try:
        parts = path.parent.relative_to(root).parts
    except ValueError:
        return False
    folder = root
    for part in parts:
        folder = folder / part
        if folder.is_symlink():
            return True
    return False


def listed_files(root: Path) -> list[str]:
    """Tracked and untracked (not ignored) files of the checkout."""
    raw = gitops.git(
        root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", check=False
    ).stdout
    return sorted({p for p in raw.decode("utf-8", errors="surrogateescape").split("\0") if p})


def _literal_prefix(pattern: str) -> str:
    parts: list[str] = []
    for part in pattern.strip().removeprefix("./").strip("/").split("/"):
        if any(c in part for c in "*?["):
            break
        parts.append(part)
    return "/".join(parts)


def protected_paths(root: Path, patterns: Sequence[str], listed: Sequence[str]) -> list[str]:
    """Protected files, ignored ones included, under every pattern's literal folder."""
    wanted = [p for p in patterns if not under(_literal_prefix(p), KERNEL_OWNED)]
    found = {p for p in listed if matches_any(p, wanted) and not under(p, KERNEL_OWNED)}
    for pattern in wanted:
        prefix = _literal_prefix(pattern)
        if not prefix:
            continue
        base = root / prefix
        if base.is_symlink() or base.is_file():
            found.add(prefix)
        elif base.is_dir():
            for folder, dirs, names in os.walk(base):
                rel_dir = Path(folder).relative_to(root).as_posix()
                for name in (*names, *[d for d in dirs if (Path(folder) / d).is_symlink()]):
                    rel = f"{rel_dir}/{name}"
                    if matches_any(rel, wanted):
                        found.add(rel)
    return sorted(found)


def _hook_dirs(root: Path, common: Path) -> list[Path]:
    dirs = [common / "hooks"]
    configured = gitops.git(
        root, "config", "--file", str(common / "config"), "--get", "core.hooksPath", check=False
    )
    value = configured.text().strip()
    if configured.ok and value and value != "/dev/null":
        path = Path(os.path.expanduser(value))
        dirs.append(path if path.is_absolute() else root / path)
    return dirs


def git_paths(root: Path, common: Path, git_dir: Path) -> dict[str, Path]:
    """config, config.worktree and every hook, by a label a person recognises."""
    out = {".git/config": common / "config", ".git/config.worktree": git_dir / "config.worktree"}
    for folder in _hook_dirs(root, common):
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if path.is_dir() and not path.is_symlink():
                continue
            try:
                label = ".git/" + path.relative_to(common).as_posix()
            except ValueError:
                label = str(path)
            out[label] = path
    return out


def describe_head(head: str, commit: str) -> str:
    return f"{head.strip()[:60]} at {commit[:12] or 'no commit'}"


def verb(old: FileState, new: FileState) -> str:
    if old.kind == "missing":
        return "created"
    if new.kind == "missing":
        return "deleted"
    if old.kind != new.kind:
        return f"replaced by a {new.kind}"
    if old.sha == new.sha:
        return f"changed in mode ({oct(old.mode)} -> {oct(new.mode)})"
    return "changed"


def clear(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()


def make_parents(root: Path, path: Path) -> None:
    """Real directories from root down to path's parent: a symlink or file in the way is removed."""
    try:
        rel = path.parent.relative_to(root)
    except ValueError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    folder = root
    for part in rel.parts:
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            folder.unlink()
        if not folder.exists():
            folder.mkdir()


def replace_file(path: Path, data: bytes, mode: int) -> None:
    """Write bytes atomically in place of whatever is there (a symlink is replaced, not followed)."""
    atomic_write_bytes(path, data, mode or 0o644)

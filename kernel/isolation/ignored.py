"""The files the person's tests need that git ignores (generated data, compiled translations,
built extensions): shown read-only in each test run over the export, never written into a
tree. An allow-list read from the person's checkout's git only, bounded in count and bytes."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kernel.isolation import gitops

MAX_FILES = 2000
"""Ignored files shown at most (each is one mount)."""
MAX_BYTES = 200 * 1024 * 1024
"""Bytes shown at most, all files together."""

_SECRET = (".env*", "*.pem", "*.key", "*.p12", "id_*", "*secret*", "*credential*", "*token*")
"""Names of files that may hold a credential: never shown, whatever folder they are in."""
_LEFT_OUT = frozenset(
    {
        "history",
        "inbox",
        "__pycache__",
        "node_modules",
        "venv",
        "env",
        "site-packages",
        "build",
        "dist",
        "htmlcov",
    }
)
"""Folders never shown from: seed's own, virtualenvs, caches, build output (a dotted folder,
`.venv`, `.tox`, `.git`, is left out by its dot)."""
_CACHE_SUFFIXES = (".pyc", ".pyo", ".log", ".swp")


@dataclass(frozen=True)
class Shown:
    """The ignored files a test run sees, and what was left out for the bounds."""

    files: tuple[Path, ...]
    bytes: int
    over_bounds: int


def _eligible(name: str) -> bool:
    """Whether an ignored path (relative, posix) may be shown: no dotted part, no folder of
    the left-out kind, no secret-like or cache name."""
    parts = PurePosixPath(name).parts
    if not parts or any(p.startswith(".") or p.lower() in _LEFT_OUT for p in parts):
        return False
    base = parts[-1].lower()
    if base.endswith(_CACHE_SUFFIXES) or ".egg-info" in name:
        return False
    return not any(fnmatch.fnmatchcase(base, pattern) for pattern in _SECRET)


def ignored_files(root: Path) -> Shown:
    """The person's ignored regular files (no link on the way) that a test run may see, in
    git's order, cut at the bounds."""
    listed = gitops.git(
        root, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", check=False
    )
    if not listed.ok:
        return Shown((), 0, 0)
    names = [n for n in listed.text().split("\0") if n and _eligible(n)]
    kept: list[Path] = []
    total = over = 0
    for name in names:
        path = root / name
        if path.resolve() != path or path.is_symlink() or not path.is_file():
            continue
        size = path.stat().st_size
        if len(kept) >= MAX_FILES or total + size > MAX_BYTES:
            over += 1
            continue
        kept.append(path)
        total += size
    return Shown(tuple(kept), total, over)


def stem(path: PurePosixPath) -> str:
    """The name a built file shares with its source: `_speedups` for `_speedups.c` and
    `_speedups.cpython-311-x86_64-linux-gnu.so`, `x` for `x.po` and `x.mo`."""
    return path.name.split(".", 1)[0]


def rebuilt_from(changed: list[str], shown: list[str]) -> list[str]:
    """The shown ignored files (relative) whose source the change touches: a file in the
    same folder with the same stem, which seed cannot build again."""
    sources = {(str(PurePosixPath(c).parent), stem(PurePosixPath(c))) for c in changed}
    return [
        s
        for s in shown
        if (str(PurePosixPath(s).parent), stem(PurePosixPath(s))) in sources and s not in changed
    ]


def said(root: Path, sandboxed: bool) -> tuple[str, ...]:
    """What `status` says of the ignored files test runs see (count, bytes, a few names)."""
    if not sandboxed:
        return (
            "git-ignored files of the checkout are not shown to test runs: the sandbox is "
            "off, so seed cannot keep them the person's",
        )
    shown = ignored_files(root)
    if not shown.files:
        return ()
    names = ", ".join(p.relative_to(root).as_posix() for p in shown.files[:3])
    more = f" and {len(shown.files) - 3} more" if len(shown.files) > 3 else ""
    cut = f"; {shown.over_bounds} left out over the bounds" if shown.over_bounds else ""
    return (
        f"{len(shown.files)} git-ignored files ({shown.bytes:,} bytes) of the checkout are "
        f"shown read-only to test runs: {names}{more}{cut}",
    )


def unbuildable(root: Path, base: str, tip: str) -> list[str]:
    """The shown ignored files whose sources a range of commits changes (same folder, same
    stem): seed cannot build them again, so a person must (`rebuilt_from`)."""
    raw = gitops.git(root, "diff", "--name-only", "-z", base, tip, check=False)
    if not raw.ok:
        return []
    changed = [p for p in raw.text().split("\0") if p]
    shown = [p.relative_to(root).as_posix() for p in ignored_files(root).files]
    return rebuilt_from(changed, shown)

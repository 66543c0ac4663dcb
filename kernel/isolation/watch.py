"""What code under test could use to outlive its run, watched across an iteration.

Two things are recorded when an iteration begins and compared after the agent and after
verification: the repository's git settings that make git run a program (a new one is
always SANDBOX_VIOLATION: every git command the person runs would run it), and the files
the target interpreter runs at start-up or loads as pytest plugins (`*.pth`,
`sitecustomize`, `usercustomize`, installed packages, seed's own pytest plugin). The
sandbox makes the latter read-only, so with it on a change there is the person's (a
`pip install`): listed, never blamed; with it off, it is SANDBOX_VIOLATION.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kernel.isolation import gitops, procs
from kernel.isolation.paths import PLUGIN_DIR

_STARTUP = ("sitecustomize.py", "usercustomize.py")
_SITE_SCRIPT = (
    "import json, site, sys; "
    "dirs = list(getattr(site, 'getsitepackages', lambda: [])()); "
    "dirs.append(site.getusersitepackages()); "
    "print(json.dumps(dirs + [p for p in sys.path if p.endswith('site-packages')]))"
)
_site_dirs: dict[str, tuple[Path, ...]] = {}


@dataclass(frozen=True)
class Watch:
    """What was seen when the iteration began."""

    git: dict[str, str] = field(default_factory=dict[str, str])
    files: dict[str, str] = field(default_factory=dict[str, str])


def site_dirs(python: str) -> tuple[Path, ...]:
    """The target interpreter's site-packages folders (asked once per interpreter)."""
    if python not in _site_dirs:
        found: list[Path] = []
        with contextlib.suppress(OSError):
            result = procs.run([python, "-I", "-c", _SITE_SCRIPT], cwd=Path("/"), timeout_s=30)
            if result.ok:
                with contextlib.suppress(ValueError):
                    found = [Path(p) for p in cast(list[Any], json.loads(result.text()))]
        _site_dirs[python] = tuple(dict.fromkeys(p for p in found if p.is_dir()))
    return _site_dirs[python]


def _digest(path: Path) -> str:
    try:
        info = path.lstat()
        if info.st_size > 4 * 1024 * 1024:
            return f"{info.st_size}:{info.st_mtime_ns}"
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return "unreadable"


def startup_files(python: str) -> dict[str, str]:
    """Every file that runs when the interpreter or pytest starts, with its digest."""
    seen: dict[str, str] = {}
    for folder in site_dirs(python):
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                if entry.name.endswith(".pth") or entry.name in _STARTUP:
                    seen[entry.path] = _digest(Path(entry.path))
                elif entry.name.endswith((".dist-info", ".egg-info", ".egg-link")):
                    seen[entry.path] = "installed"
    with contextlib.suppress(OSError):
        for entry in os.scandir(PLUGIN_DIR):
            if entry.is_file():
                seen[entry.path] = _digest(Path(entry.path))
    return seen


def take(root: Path, python: str) -> Watch:
    """What is watched, as it is now."""
    return Watch(git=gitops.program_settings(root), files=startup_files(python))


def compare(before: Watch, root: Path, python: str) -> tuple[list[str], list[str]]:
    """(git settings that now run a program, start-up files that changed) since before."""
    after = take(root, python)
    settings = [
        f"git configuration gained a setting that runs a program: {key} = {value}"[:300]
        for key, value in sorted(after.git.items())
        if before.git.get(key) != value
    ]
    files = [
        f"{path} was {'added' if path not in before.files else 'removed' if path not in after.files else 'changed'}"
        for path in sorted(set(before.files) | set(after.files))
        if before.files.get(path) != after.files.get(path)
    ]
    return settings, files

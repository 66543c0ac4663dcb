"""Where and with what the target's tools run: its interpreter, the ruff binary, a clean env."""

from __future__ import annotations

import shutil
import sys
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kernel import procs
from kernel.config import QualityConfig

MAX_DETAIL = 2000
"""Characters of a tool's own words kept in a diagnostic or an error."""

Jail = Callable[[Sequence[str], Sequence[Path]], list[str]]
"""Wraps the argv of a run that executes repository code so it runs sandboxed, with only the
given folders writable (the tree under test and the kernel's output folder)."""


@dataclass(frozen=True)
class Target:
    """Where the target's tools run and with which interpreter."""

    root: Path
    """The user's checkout (code imported from here during tests is an error)."""
    python: str
    """The target's interpreter (pytest runs with it; pyright resolves imports with it)."""
    quality: QualityConfig
    strict: tuple[str, ...] = ()
    """Paths pyright checks in strict mode on top of the target's own configuration."""
    jail: Jail | None = None
    """The sandbox for runs of repository code (pytest, the self-check); None: unsandboxed."""


def resolve_python(root: Path, configured: str) -> str:
    """The target's interpreter: the configured one, the target's .venv, else the daemon's."""
    if configured:
        path = Path(configured).expanduser()
        return str(path if path.is_absolute() else (root / path))
    venv = root / ".venv" / "bin" / "python"
    if venv.exists():
        return str(venv)
    return sys.executable


def tool_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a measurement: the daemon's, minus what would redirect imports."""
    # no bytecode written or reused from the tree, no user site-packages
    env = procs.child_env(
        PYRIGHT_PYTHON_IGNORE_WARNINGS="1", PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1"
    )
    for key in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(key, None)
    if extra:
        env.update(extra)
    return env


def ruff_binary() -> str:
    """The ruff executable installed with the daemon."""
    scripts = Path(sysconfig.get_path("scripts"))
    for candidate in (scripts / "ruff", Path(sys.executable).parent / "ruff"):
        if candidate.exists():
            return str(candidate)
    found = shutil.which("ruff")
    if found is None:
        raise FileNotFoundError("ruff is not installed next to this interpreter nor on PATH")
    return found

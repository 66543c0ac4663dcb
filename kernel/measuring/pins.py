"""Pinned tools: the ruff version a project pins, and seed's own cache of those versions.

A project that pins ruff (its pre-commit hook, a dev dependency group, optional
dependencies, uv.lock, a requirements file) is judged by that version: a wheel from PyPI, installed
once into `~/.cache/seed/tools/ruff-X` (outside every sandbox's view), its sha256 recorded
there and checked on each use. Installing is never part of a measurement: `install` runs
when HEAD is analysed, measurements only look the version up (`binary`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from packaging.requirements import InvalidRequirement, Requirement

_HOOKS = {
    "ruff": r"(?:astral-sh|charliermarsh)/ruff-pre-commit",
    "pyright": r"RobertCraigie/pyright-python",
    "mypy": r"pre-commit/mirrors-mypy",
}
"""Each tool's pre-commit repository."""


def _pre_commit(tool: str) -> re.Pattern[str]:
    return re.compile(
        rf"repo:\s*['\"]?https?://github\.com/{_HOOKS[tool]}(?:\.git)?['\"]?\s*\n"
        r"\s*rev:\s*['\"]?(?P<rev>[^\s'\"#]+)['\"]?[ \t]*(?:#[ \t]*frozen:[ \t]*(?P<frozen>\S+))?"
    )


RETRY_AFTER_S = 24 * 3600.0
"""After a failed install, how long before the next analysis tries again."""
_VERSION = re.compile(r"^v?(\d+(?:\.\d+){1,3})$")
_REQUIREMENTS = re.compile(r"^requirements[\w.-]*\.txt$|^requirements/[\w.-]+\.txt$")


@dataclass(frozen=True)
class Pin:
    """A version the project pins a tool to, and where it says so."""

    version: str
    where: str


def _exact(tool: str, text: str) -> str | None:
    """The version a `tool==X` requirement pins (None: another package, or no one version)."""
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    specs = list(req.specifier)
    if req.name.lower() != tool or len(specs) != 1 or specs[0].operator not in ("==", "==="):
        return None
    version = specs[0].version
    return version if _VERSION.match(version) else None


def _requirements(value: Any) -> Iterator[str]:
    if isinstance(value, list):
        yield from (v for v in cast(list[Any], value) if isinstance(v, str))
    elif isinstance(value, dict):
        for group in cast(dict[str, Any], value).values():
            yield from _requirements(group)


def _toml(text: str | None) -> dict[str, Any]:
    try:
        return tomllib.loads(text or "")
    except tomllib.TOMLDecodeError:
        return {}


def _locked(tool: str, text: str | None) -> str | None:
    """The version uv.lock resolves the tool to (what `uv run` runs)."""
    for package in cast(list[Any], _toml(text).get("package") or []):
        if isinstance(package, dict):
            entry = cast(dict[str, Any], package)
            if entry.get("name") == tool and isinstance(entry.get("version"), str):
                return str(entry["version"])
    return None


def pinned(tool: str, read: Callable[[str], str | None], paths: tuple[str, ...] = ()) -> Pin | None:
    """The version the project pins a tool to, first found: its pre-commit hook, an exact
    pin in pyproject.toml, uv.lock, a requirements file."""
    hook = _pre_commit(tool).search(read(".pre-commit-config.yaml") or "")
    if hook is not None:
        for candidate in (hook["rev"], hook["frozen"] or ""):
            found = _VERSION.match(candidate)
            if found:
                return Pin(found[1], ".pre-commit-config.yaml")
    doc = _toml(read("pyproject.toml"))
    project = cast(dict[str, Any], doc.get("project") or {})
    tools = cast(dict[str, Any], doc.get("tool") or {})
    uv = cast(dict[str, Any], tools.get("uv") or {}) if isinstance(tools.get("uv"), dict) else {}
    for where, value in (
        ("[dependency-groups]", doc.get("dependency-groups")),
        ("[project.optional-dependencies]", project.get("optional-dependencies")),
        ("[tool.uv] dev-dependencies", uv.get("dev-dependencies")),
    ):
        for text in _requirements(value):
            version = _exact(tool, text)
            if version:
                return Pin(version, f"pyproject.toml {where}")
    locked = _locked(tool, read("uv.lock"))
    if locked is not None and _VERSION.match(locked):
        return Pin(locked, "uv.lock")
    for name in sorted(p for p in paths if _REQUIREMENTS.match(p)):
        for line in (read(name) or "").splitlines():
            version = _exact(tool, line.split("#", 1)[0].strip())
            if version:
                return Pin(version, name)
    return None


def pinned_ruff(read: Callable[[str], str | None], paths: tuple[str, ...] = ()) -> Pin | None:
    """The ruff version the project pins."""
    return pinned("ruff", read, paths)


def tools_dir() -> Path:
    """seed's own cache of pinned tools (beside the agents' checkouts, outside every sandbox)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seed" / "tools"


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def binary(version: str, folder: Path | None = None) -> Path | None:
    """The cached ruff of this version when its bytes still hash to what was recorded."""
    place = (folder or tools_dir()) / f"ruff-{version}"
    exe, recorded = place / "ruff", place / "ruff.sha256"
    try:
        if exe.is_symlink() or not exe.is_file():
            return None
        return exe if _digest(exe) == recorded.read_text(encoding="ascii").split()[0] else None
    except (OSError, IndexError):
        return None


def install(
    version: str,
    folder: Path | None = None,
    *,
    find_links: Path | None = None,
    timeout: float = 300,
) -> Path | None:
    """Fetch ruff's wheel of this version (pip, PyPI or `find_links`) into the cache: its path."""
    have = binary(version, folder)
    if have is not None:
        return have
    place = (folder or tools_dir()) / f"ruff-{version}"
    failed = place / "failed"
    with contextlib.suppress(OSError):
        if time.time() - failed.stat().st_mtime < RETRY_AFTER_S:
            return None  # offline or no such wheel: one attempt a day, not one per analysis
    with tempfile.TemporaryDirectory(prefix="seed-ruff-") as raw:
        # -I: `-m` would put the daemon's working folder (a repository) first on sys.path
        argv = [sys.executable, "-I", "-m", "pip", "download", "--quiet", "--no-deps"]
        argv += ["--only-binary", ":all:", "--dest", raw, f"ruff=={version}"]
        if find_links is not None:
            argv += ["--no-index", "--find-links", str(find_links)]
        try:
            subprocess.run(argv, check=True, capture_output=True, timeout=timeout)
            [wheel] = Path(raw).glob("ruff-*.whl")
            with zipfile.ZipFile(wheel) as archive:
                [member] = [n for n in archive.namelist() if n.endswith(".data/scripts/ruff")]
                data = archive.read(member)
        except (OSError, ValueError, subprocess.SubprocessError, zipfile.BadZipFile):
            with contextlib.suppress(OSError):
                place.mkdir(parents=True, exist_ok=True)
                failed.touch()
            return None
        place.mkdir(parents=True, exist_ok=True)
        part = place / "ruff.part"
        part.write_bytes(data)
        part.chmod(0o755)
        (place / "wheel.sha256").write_text(f"{_digest(wheel)}  {wheel.name}\n", encoding="ascii")
        (place / "ruff.sha256").write_text(hashlib.sha256(data).hexdigest() + "\n", "ascii")
        part.replace(place / "ruff")
        failed.unlink(missing_ok=True)
    return binary(version, folder)


RUFF_CHECK_FLAGS: tuple[str, ...] = (
    "check",
    "--no-fix",
    "--no-fix-only",  # `fix-only = true` in a configuration still writes under --no-fix alone
    "--no-unsafe-fixes",
    "--no-cache",
    "--output-format",
    "json",
)
"""`ruff check` reports and never writes, whatever the configuration says."""

_MOOT = {"--no-unsafe-fixes": "--unsafe-fixes", "--no-cache": "--cache-dir"}
"""Flags that turn off what a ruff without the second flag does not do (ruff before 0.1.0
applies no unsafe fix; its formatter before 0.1.2 keeps no cache): left out for it."""
_VALUED = {"--output-format": "--format"}
"""Flags with a value, and their older name (ruff before 0.0.291 says `--format json`)."""
_FLAG = re.compile(r"--[a-z][a-z-]*")


@functools.cache
def _ruff_help(exe: str, size: int, mtime_ns: int, command: str) -> frozenset[str] | None:
    """The flags `ruff <command> --help` names (None: this ruff has no such command)."""
    del size, mtime_ns  # in the key only: bytes replaced in place are asked again
    try:
        done = subprocess.run(
            [exe, command, "--help"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if f"ruff {command}" not in done.stdout:
        return None  # an old ruff reads the word as a path and prints its top-level help
    return frozenset(_FLAG.findall(done.stdout))


def _has(flags: frozenset[str], flag: str) -> bool:
    # ruff's help lists `--fix`, not the `--no-fix` that negates it
    return flag in flags or (flag.startswith("--no-") and "--" + flag[5:] in flags)


def ruff_flags(exe: str, flags: Sequence[str]) -> list[str] | str:
    """`flags` (a command and its flags) as this ruff spells them, read from its own help: a
    flag it lacks is renamed or left out only where that changes nothing the kernel relies on;
    otherwise why it cannot run (never a ruff that could write or report something else)."""
    stat = Path(exe).stat()
    command, *rest = flags
    known = _ruff_help(exe, stat.st_size, stat.st_mtime_ns, command)
    version = _ruff_version(exe)
    if known is None:
        return f"ruff {version} has no `ruff {command}`"
    out = [command]
    values = iter(rest)
    for flag in values:
        name = flag.split("=", 1)[0]
        if not name.startswith("--") or _has(known, name):
            out.append(flag)
        elif name in _VALUED:
            value = next(values, "")
            if _VALUED[name] in known:
                out += [_VALUED[name], value]
            elif command != "format":  # only the formatter's words are read (before 0.16)
                return f"ruff {version} has no `ruff {command} {name}`"
        elif name in _MOOT and _MOOT[name] not in known:
            continue
        else:
            return f"ruff {version} has no `ruff {command} {name}`, which seed needs to run it"
    return out


@functools.cache
def _ruff_version(exe: str) -> str:
    try:
        done = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return "?"
    return done.stdout.strip().removeprefix("ruff ") or "?"


def cannot_judge(exe: Path) -> str:
    """Why seed cannot judge with this ruff (its check lacks a flag seed needs), or ""."""
    spelled = ruff_flags(str(exe), RUFF_CHECK_FLAGS)
    return spelled if isinstance(spelled, str) else ""

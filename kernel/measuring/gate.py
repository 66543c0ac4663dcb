"""The gate configuration: ruff and pyright settings frozen from the baseline commit.

The verifier judges an agent's tree with the rules of the commit it started from, read
here and written where the agent cannot reach, so relaxing `[tool.ruff]` in the change
does not relax the judgement.
"""

from __future__ import annotations

import configparser
import contextlib
import functools
import hashlib
import importlib.metadata
import itertools
import json
import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import json5
import tomli_w

from kernel.config import QualityConfig
from kernel.contracts import matches_any
from kernel.isolation import gitops
from kernel.measuring import mypyrun, pins
from kernel.measuring.pytestconfig import toml_doc as _toml

GATE_FILES: tuple[str, ...] = (
    "pyproject.toml",
    "ruff.toml",
    ".ruff.toml",
    "pyrightconfig.json",
    "mypy.ini",
    ".mypy.ini",
    "setup.cfg",
    "pytest.ini",
    "tox.ini",
    ".gitignore",
)
"""Files whose change makes the next measurement a full run (tool configuration lives there)."""

PYRIGHT_DEFAULT_EXCLUDE: tuple[str, ...] = ("**/node_modules", "**/__pycache__", "**/.*")
"""What pyright leaves out when its configuration names no `exclude`."""

RUFF_WRITE_SETTINGS: tuple[str, ...] = (
    "fix",
    "fix-only",
    "unsafe-fixes",
    "show-fixes",
    "cache-dir",
    "output-format",
)
"""Top-level ruff settings that make it write (or change what it prints): the kernel's flags
(measure.RUFF_CHECK_FLAGS, RUFF_FORMAT_FLAGS) override each of them on every run."""

RUFF_CONFIG_NAMES: tuple[str, ...] = ("pyproject.toml", "ruff.toml", ".ruff.toml")
"""Files ruff takes its settings from, in any folder (the nearest one governs a file)."""
RUFF_IGNORE_NAMES: tuple[str, ...] = (".gitignore", ".ignore")
"""Files that decide which files ruff looks at."""

_PYRIGHT_AUTO_EXCLUDE = (*PYRIGHT_DEFAULT_EXCLUDE, "**/__editable__.*")
"""What pyright always adds to `exclude`, from the project root (pyright 1.1.4xx)."""
_PYRIGHT_PATH_LISTS = ("include", "exclude", "ignore", "strict", "extraPaths")
_PYRIGHT_PATHS = ("stubPath", "typingsPath", "typeshedPath", "venvPath", "extends")


ALL_TOOLS: tuple[str, ...] = ("ruff", "ruff-format", "pyright", "mypy", "pytest")
TYPE_CHECKS = mypyrun.TYPE_CHECKS
"""The type checkers' acceptance checks, each named as its tool."""
SMALL_RUFF: tuple[str, ...] = ("E9", "F63", "F7", "F82")
"""ruff's rules that always count: syntax errors and undefined names (flake8's serious set)."""


@dataclass(frozen=True)
class Adoption:
    """Which tools take part for a target, and why: configured by it, or named in seed.toml."""

    tools: tuple[str, ...] = ALL_TOOLS
    """Tools that run."""
    advisory: tuple[str, ...] = ()
    """Tools that run but offer no gaps."""
    why: tuple[str, ...] = ()
    """One line per tool: whether it takes part, and why; then every way seed's run differs
    from the project's own."""
    own_ruff: bool = True
    """The target configures ruff (else only SMALL_RUFF, or [quality] ruff_select when named)."""


_FORMAT_HOOK = re.compile(r"^\s*-\s*id:\s*['\"]?ruff-format\b", re.MULTILINE)
_FORMAT_ENTRY = re.compile(r"^\s*(?:-\s*)?entry:.*\bruff[\"',\s]+format\b", re.MULTILINE)
"""A local pre-commit hook, of any id, whose command is `ruff format`."""
_FORMAT_COMMAND = re.compile(r"\bruff[\"',\s]+format\b")
_COMMAND_FILES = ("tox.ini", "noxfile.py", "Makefile", "justfile")
"""Where a project runs its own commands (with its CI workflows and its scripts/ folder)."""
_SCRIPT_FOLDERS = ("scripts/", "script/")
"""Folders of the scripts a project's CI and contributing docs run (`scripts/lint.sh`,
`scripts/check`): the files directly in them, at most _MAX_SCRIPTS."""
_MAX_SCRIPTS = 50


def _format_where(read: Callable[[str], str | None], paths: Sequence[str]) -> str:
    """Where the project adopts ruff format besides [tool.ruff.format] ("": nowhere)."""
    hooks = read(".pre-commit-config.yaml") or ""
    if _FORMAT_HOOK.search(hooks):
        return "a ruff-format pre-commit hook"
    if _FORMAT_ENTRY.search(hooks):
        return "a pre-commit hook that runs `ruff format`"
    workflows = [p for p in paths if p.startswith(".github/workflows/")]
    scripts = [p for p in paths if p.startswith(_SCRIPT_FOLDERS) and p.count("/") == 1][
        :_MAX_SCRIPTS
    ]
    for name in (*_COMMAND_FILES, *workflows, *scripts):
        if _FORMAT_COMMAND.search(read(name) or ""):
            return f"`ruff format` in {name}"
    return ""


def _root_ruff(read: Callable[[str], str | None]) -> tuple[str, dict[str, Any]] | None:
    """The root's ruff configuration as ruff picks it (ruff.toml, .ruff.toml, [tool.ruff])."""
    for name in (".ruff.toml", "ruff.toml"):
        doc = _toml(read(name))
        if doc is not None:
            return name, doc
    tool = (_toml(read("pyproject.toml")) or {}).get("tool", {})
    ruff = cast(dict[str, Any], tool).get("ruff") if isinstance(tool, dict) else None
    return ("pyproject.toml", cast(dict[str, Any], ruff)) if isinstance(ruff, dict) else None


def running_ruff_version(tool: str = "ruff") -> str:
    """The version of the ruff (or pyright) installed with seed."""
    try:
        return importlib.metadata.version(tool)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _pyright_version_line(pin: pins.Pin | None) -> str:
    own = running_ruff_version("pyright")
    if pin is None or pin.version == own:
        return f"pyright: version {own}" + (f" as pinned in {pin.where}" if pin else "")
    return f"pyright: differs: runs {own}, not {pin.version} as pinned in {pin.where}"


def _ruff_version_line(pin: pins.Pin | None) -> str:
    own = running_ruff_version()
    if pin is None or pin.version == own:
        return f"ruff: version {own}" + (f" as pinned in {pin.where}" if pin else "")
    found = pins.binary(pin.version)
    why = pins.cannot_judge(found) if found is not None else ""
    if why:
        return f"ruff: differs: runs {own}, not {pin.version} as pinned in {pin.where} ({why})"
    if found is not None:
        return f"ruff: version {pin.version} as pinned in {pin.where} (seed's tool cache)"
    return (
        f"ruff: differs: runs {own}, not {pin.version} as pinned in {pin.where} "
        "(not in seed's tool cache: it is installed when HEAD is analysed and PyPI answers)"
    )


def adoption(
    read: Callable[[str], str | None], quality: QualityConfig, paths: Sequence[str] = ()
) -> Adoption:
    """Which tools take part, from the target's configuration files (read by name)."""
    tool = cast(dict[str, Any], (_toml(read("pyproject.toml")) or {}).get("tool", {}))
    found = _root_ruff(read)
    own_ruff = found is not None
    hook = _format_where(read, paths)
    own_format = (own_ruff and "format" in found[1]) if found is not None else False
    own_pyright = read("pyrightconfig.json") is not None or "pyright" in tool
    mypy = mypyrun.configured(read)
    differences: list[str] = []
    if "ruff" in (quality.tools if quality.tools is not None else ALL_TOOLS):
        differences.append(_ruff_version_line(pins.pinned_ruff(read, tuple(paths))))
    if own_pyright or (quality.tools is not None and "pyright" in quality.tools):
        differences.append(_pyright_version_line(pins.pinned("pyright", read, tuple(paths))))
    if found is not None and isinstance(found[1].get("extend"), str):
        extend = str(found[1]["extend"])
        if _outside(posixpath.normpath(os.path.expandvars(os.path.expanduser(extend)))):
            differences.append(
                f"ruff: differs: extend {extend} ({found[0]}) lies outside the repository: "
                "judged with the copy taken when HEAD was analysed"
            )
    if quality.tools is not None:
        named = tuple(t for t in ALL_TOOLS if t in quality.tools)
        why = tuple(
            f"{t}: {'on' if t in named else 'off'} ([quality] tools in seed.toml)"
            for t in ALL_TOOLS
        )
        return Adoption(named, (), (*why, *differences), own_ruff)
    tools = ["ruff", "pytest"] + (["ruff-format"] if own_format or hook else [])
    tools += ["pyright"] if own_pyright else []
    tools += ["mypy"] if mypy.where else []
    why = (
        "ruff: on (configured)"
        if own_ruff
        else "ruff: syntax errors and undefined names only (no [tool.ruff], ruff.toml or .ruff.toml)"
        + (" but what its flake8 configuration ignores" if _flake8_ignored(read) else ""),
        "ruff-format: on ([tool.ruff.format])"
        if own_format
        else f"ruff-format: on ({hook})"
        if hook
        else "ruff-format: off (no [tool.ruff.format], ruff-format hook or `ruff format` command)",
        "pyright: on (configured)"
        if own_pyright
        else "pyright: off (no [tool.pyright] or pyrightconfig.json)",
        _mypy_why(mypy),
        "pytest: on (always)",
    )
    return Adoption(tuple(t for t in ALL_TOOLS if t in tools), (), (*why, *differences), own_ruff)


def _mypy_why(setup: mypyrun.Setup) -> str:
    """Whether mypy takes part and why, and what it checks."""
    if not setup.where:
        return mypyrun.NOT_CONFIGURED
    checks = f"; checks {' '.join(setup.args)} as {setup.command}" if setup.command else ""
    dropped = f"; leaves out {' '.join(setup.dropped)}" if setup.dropped else ""
    return f"mypy: on ({setup.where}{checks}{dropped})"


def _outside(path: str) -> bool:
    """Whether a path (relative to a folder of the repository's root) leaves it."""
    return os.path.isabs(path) or path == ".." or path.startswith("../")


_CODE = re.compile(r"^[A-Z]+[0-9]*$")


def _flake8_ignored(read: Callable[[str], str | None]) -> list[str]:
    """The always-on rules the project's own flake8 configuration ignores (flake8 reads the
    first of setup.cfg, tox.ini and .flake8 that has a [flake8] section)."""
    for name in ("setup.cfg", "tox.ini", ".flake8"):
        parser = configparser.RawConfigParser(strict=False)
        with contextlib.suppress(configparser.Error):
            parser.read_string(read(name) or "")
        if not parser.has_section("flake8"):
            continue
        codes: list[str] = []
        for option in ("ignore", "extend-ignore"):
            raw = parser.get("flake8", option, fallback="")
            codes += [c for c in re.split(r"[\s,]+", raw) if _CODE.match(c)]
        return [c for c in codes if any(c.startswith(s) or s.startswith(c) for s in SMALL_RUFF)]
    return []


@dataclass(frozen=True)
class Gate:
    """Tool configuration frozen from the baseline commit, kept outside the agent's reach."""

    ruff_config: Path
    """The config seed writes for a target without a ruff configuration of its own."""
    pyright_config: dict[str, Any] = field(default_factory=dict[str, Any])
    adoption: Adoption = field(default_factory=Adoption)
    """Which tools take part, decided by the baseline commit's configuration."""
    ruff_dir: Path | None = None
    """The baseline's own ruff configuration files (and ignore files), at their paths."""
    ruff_version: str = ""
    """The pinned ruff to run from seed's tool cache ("": the ruff installed with seed)."""
    mypy: mypyrun.Setup = field(default_factory=mypyrun.Setup)
    """How the baseline runs mypy (mypyrun.configured)."""
    mypy_dir: Path | None = None
    """The baseline's mypy configuration and `.py` plugins, at their paths (None: none)."""


def json_lenient(text: str) -> dict[str, Any]:
    """pyrightconfig.json allows comments and trailing commas (read as JSON5, a superset)."""
    try:
        data = json5.loads(text)
    except (ValueError, RecursionError):
        return {}
    return cast(dict[str, Any], data) if isinstance(data, dict) else {}


def _ruff_table(name: str, doc: dict[str, Any]) -> dict[str, Any] | None:
    """Where ruff's settings live in a file of this name."""
    if posixpath.basename(name) != "pyproject.toml":
        return doc
    tool = doc.get("tool")
    ruff = cast(dict[str, Any], tool).get("ruff") if isinstance(tool, dict) else None
    return cast(dict[str, Any], ruff) if isinstance(ruff, dict) else None


class _Outside:
    """Copies of the files an `extend` outside the repository names, in the gate's folder."""

    def __init__(self, out_dir: Path) -> None:
        self.folder = out_dir / "outside"
        shutil.rmtree(self.folder, ignore_errors=True)
        self._serial = itertools.count()

    def copy(self, source: Path, depth: int = 0) -> Path | None:
        """The copy of one outside file, its own outside `extend` copied in turn."""
        try:
            text = source.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        doc = _toml(text)
        table = _ruff_table(source.name, doc) if doc is not None else None
        extend = table.get("extend") if table is not None else None
        if doc is not None and table is not None and isinstance(extend, str) and depth < 8:
            target = Path(os.path.expandvars(os.path.expanduser(extend)))
            copied = self.copy(source.parent / target, depth + 1)
            if copied is not None:
                table["extend"] = str(copied)
                text = tomli_w.dumps(doc)
        self.folder.mkdir(parents=True, exist_ok=True)
        dest = self.folder / f"{next(self._serial)}-{source.name}"
        dest.write_text(text, encoding="utf-8")
        return dest


def _ruff_set(
    read: Callable[[str], str | None], paths: Sequence[str], origin: Path, out_dir: Path
) -> tuple[dict[str, str], list[str]]:
    """The baseline's ruff configuration files by path (with every in-repository `extend`),
    an `extend` outside the repository pointed at the gate's copy; and what differs."""
    names = (*RUFF_CONFIG_NAMES, *RUFF_IGNORE_NAMES)
    queue = [p for p in paths if posixpath.basename(p) in names]
    files: dict[str, str] = {}
    notes: list[str] = []
    outside = _Outside(out_dir)
    while queue:
        rel = queue.pop(0)
        text = read(rel) if rel not in files else None
        if text is None:
            continue
        files[rel] = text
        doc = _toml(text) if posixpath.basename(rel) not in RUFF_IGNORE_NAMES else None
        table = _ruff_table(rel, doc) if doc is not None else None
        extend = table.get("extend") if table is not None else None
        if doc is None or table is None or not isinstance(extend, str):
            continue
        expanded = os.path.expandvars(os.path.expanduser(extend))
        inside = posixpath.normpath(posixpath.join(posixpath.dirname(rel), expanded))
        if not _outside(inside):
            queue.append(inside)  # the base's own bytes, at its own place in the view
            continue
        copied = outside.copy(origin / posixpath.dirname(rel) / expanded)
        if copied is None:
            notes.append(
                f"ruff: extend {extend} ({rel}) lies outside the repository and is missing"
            )
            continue
        table["extend"] = str(copied)
        files[rel] = tomli_w.dumps(doc)
    return files, notes


def _fallback_ruff(read: Callable[[str], str | None], quality: QualityConfig) -> dict[str, Any]:
    """The config of a target without its own: the always-on rules (but what its flake8 ignores),
    or seed.toml's selection; with its `requires-python`, as ruff would read it."""
    named = quality.tools is not None and "ruff" in quality.tools
    lint: dict[str, Any] = {"select": list(quality.ruff_select if named else SMALL_RUFF)}
    ignored = [] if named else _flake8_ignored(read)
    if ignored:
        lint["ignore"] = ignored
    doc: dict[str, Any] = {"tool": {"ruff": {"lint": lint}}}
    project = (_toml(read("pyproject.toml")) or {}).get("project")
    requires = (
        cast(dict[str, Any], project).get("requires-python") if isinstance(project, dict) else None
    )
    if isinstance(requires, str):
        doc["project"] = {"requires-python": requires}
    return doc


def _gate_from(
    read: Callable[[str], str | None],
    paths: Sequence[str],
    origin: Path,
    out_dir: Path,
    quality: QualityConfig,
    install: bool = False,
) -> Gate:
    out_dir.mkdir(parents=True, exist_ok=True)
    read = functools.cache(read)  # adoption and the gate read the same files: once each
    pin = pins.pinned_ruff(read, tuple(paths))
    version = ""
    if pin is not None and pin.version != running_ruff_version():
        found = pins.install(pin.version) if install else pins.binary(pin.version)
        version = pin.version if found is not None and not pins.cannot_judge(found) else ""
    adopted = adoption(read, quality, paths)
    ruff_dir: Path | None = out_dir / "ruff"
    shutil.rmtree(ruff_dir, ignore_errors=True)
    if adopted.own_ruff:
        files, notes = _ruff_set(read, paths, origin, out_dir)
        for rel, text in files.items():
            dest = ruff_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")
        adopted = replace(adopted, why=(*adopted.why, *notes))
    else:
        ruff_dir = None
    ruff_config = out_dir / "pyproject.toml"
    ruff_config.write_text(tomli_w.dumps(_fallback_ruff(read, quality)), encoding="utf-8")
    tool = cast(dict[str, Any], (_toml(read("pyproject.toml")) or {}).get("tool", {}))
    pyright: dict[str, Any] = {}
    own_pyright = read("pyrightconfig.json")
    if own_pyright is not None:
        pyright = json_lenient(own_pyright)
    elif "pyright" in tool:
        pyright = dict(cast(dict[str, Any], tool["pyright"]))
    (out_dir / "pyright.json").write_text(json.dumps(pyright, indent=2), encoding="utf-8")
    mypy, mypy_dir = mypyrun.configured(read), out_dir / "mypy"
    shutil.rmtree(mypy_dir, ignore_errors=True)
    found = mypyrun.freeze(read, mypy, mypy_dir) if "mypy" in adopted.tools else None
    return Gate(ruff_config, pyright, adopted, ruff_dir, version, mypy, mypy_dir if found else None)


def _walk(tree: Path) -> list[str]:
    """Every file's path in a folder (none under .git)."""
    found: list[str] = []
    for folder, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if d != ".git"]
        found += [Path(folder, f).relative_to(tree).as_posix() for f in files]
    return found


def freeze_gate(tree: Path, out_dir: Path, quality: QualityConfig) -> Gate:
    """Copy the ruff and pyright settings of the baseline tree to where the agent cannot reach."""

    def read(name: str) -> str | None:
        path = tree / name
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None

    return _gate_from(read, _walk(tree), tree, out_dir, quality)


def read_at(root: Path, commit: str) -> Callable[[str], str | None]:
    """A reader of a commit's files by name, from git objects (None: no such file)."""

    def read(name: str) -> str | None:
        result = gitops.git(root, "cat-file", "blob", f"{commit}:{name}", check=False)
        return result.stdout.decode("utf-8", errors="replace") if result.ok else None

    return read


def paths_at(root: Path, commit: str) -> list[str]:
    """Every file's path in a commit."""
    raw = gitops.git(root, "ls-tree", "-r", "-z", "--name-only", "--full-tree", commit).stdout
    return [p.decode("utf-8", errors="surrogateescape") for p in raw.split(b"\0") if p]


def freeze_gate_at(
    root: Path, commit: str, out_dir: Path, quality: QualityConfig, *, install: bool = False
) -> Gate:
    """The gate of a commit, read from git (for a branch that moved: never from the agent's tree).

    `install`: a ruff version the commit pins is installed into seed's tool cache first."""
    return _gate_from(
        read_at(root, commit), paths_at(root, commit), root, out_dir, quality, install
    )


def ruff_material(gate: Gate) -> str:
    """Everything of the gate that decides what ruff reports (for the measurement cache's key)."""
    digest = hashlib.sha256(gate.ruff_config.read_bytes())
    digest.update(gate.ruff_version.encode())
    if gate.ruff_dir is not None:
        for path in sorted(p for p in gate.ruff_dir.rglob("*") if p.is_file()):
            digest.update(path.relative_to(gate.ruff_dir).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _put(view: Path, rel: str, data: bytes) -> None:
    """Write one file into the view as a fresh file: no link on the way is followed."""
    at = view
    for part in Path(rel).parts[:-1]:
        at = at / part
        if at.is_symlink() or (at.exists() and not at.is_dir()):
            at.unlink()
        at.mkdir(exist_ok=True)
    dest = at / Path(rel).name
    if dest.is_dir() and not dest.is_symlink():
        shutil.rmtree(dest)
    elif dest.is_symlink() or dest.exists():
        dest.unlink()
    dest.write_bytes(data)


def _strip(view: Path, names: set[str]) -> None:
    """Remove every entry of these names (file, link or folder) from the view."""
    for folder, dirs, files in os.walk(view):
        for name in [*dirs, *files]:
            if name in names:
                path = Path(folder, name)
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        dirs[:] = [d for d in dirs if d not in names]


@contextlib.contextmanager
def lint_view(
    tree: Path, gate: Gate, fill: Callable[[Path], object] | None = None
) -> Generator[Path]:
    """A folder of the kernel's own where ruff judges a tree: the tree's files (`fill` writes
    them from git objects; else copied from `tree`), but every ruff configuration and ignore
    file the baseline's, so nothing the change or its test run wrote sets ruff's rules."""
    view = Path(tempfile.mkdtemp(prefix="lint-", dir=tree.parent))
    skip = {*RUFF_CONFIG_NAMES, *RUFF_IGNORE_NAMES, ".git"}
    try:
        if fill is not None:
            fill(view)
            _strip(view, skip)
        else:
            shutil.copytree(
                tree,
                view,
                symlinks=True,
                dirs_exist_ok=True,
                ignore=lambda _d, names: [n for n in names if n in skip],
            )
        (view / ".git").mkdir(exist_ok=True)  # ruff reads .gitignore files in a git work tree
        if gate.ruff_dir is not None:
            for path in sorted(p for p in gate.ruff_dir.rglob("*") if p.is_file()):
                _put(view, path.relative_to(gate.ruff_dir).as_posix(), path.read_bytes())
        yield view
    finally:
        shutil.rmtree(view, ignore_errors=True)


def pyright_config(
    gate: Gate, tree: Path, strict: Sequence[str], checkout: Path | None = None
) -> dict[str, Any]:
    """The gate's pyright settings plus the strict paths seed adds (those present in the tree).

    A relative `venvPath` names the person's checkout, where the virtualenv lives (an export
    holds only the tree's files); `pythonVersion` stays the project's, or pyright's own default
    (the interpreter's version: pyright does not read `requires-python`)."""
    config = dict(gate.pyright_config)
    venv_path = config.get("venvPath")
    if (
        checkout is not None
        and isinstance(venv_path, str)
        and not venv_path.startswith(("/", "${"))
    ):
        config["venvPath"] = str(checkout / venv_path)
    # a `# type: ignore` hides nothing from the kernel: what it hides is measured (suppressions.py)
    config["enableTypeIgnoreComments"] = False
    given = config.get("executionEnvironments")
    if isinstance(given, list):
        config["executionEnvironments"] = [
            {**cast(dict[str, Any], env), "enableTypeIgnoreComments": False}
            if isinstance(env, dict)
            else env
            for env in cast(list[Any], given)
        ]
    present = [p for p in strict if (tree / p).exists()]
    if present:
        existing = [str(s) for s in cast(list[Any], config.get("strict", []))]
        config["strict"] = existing + [p for p in present if p not in existing]
    return config


def pyright_config_outside(config: dict[str, Any], tree: Path, config_dir: Path) -> dict[str, Any]:
    """The same settings for a config file in config_dir that still checks the tree as its project.

    pyright takes the config file's folder as the project root and refuses absolute `include`
    paths, so every path becomes relative from config_dir to the tree, and what pyright derives
    from the root (include, auto-excludes, typings/, src/, the execution root) is spelled out.
    """
    rel = Path(os.path.relpath(tree.resolve(), config_dir.resolve())).as_posix()

    def moved(value: Any) -> Any:
        if not isinstance(value, str) or value.startswith(("/", "${")):
            return value  # absolute or a variable: the same wherever the config lives
        return posixpath.normpath(f"{rel}/{value}")

    def moved_list(value: Any) -> Any:
        return [moved(v) for v in cast(list[Any], value)] if isinstance(value, list) else value

    out = dict(config)
    if isinstance(out.get("include"), list):
        # pyright ignores an absolute include; with none left it takes the root: the tree here
        out["include"] = [
            p for p in cast(list[Any], out["include"]) if not (isinstance(p, str) and p[:1] == "/")
        ]
    for key in _PYRIGHT_PATH_LISTS:
        if key in out:
            out[key] = moved_list(out[key])
    for key in _PYRIGHT_PATHS:
        if key in out:
            out[key] = moved(out[key])
    out["include"] = out.get("include") or [rel]
    exclude = list(out.get("exclude") or []) if isinstance(out.get("exclude"), list) else []
    out["exclude"] = exclude + [moved(p) for p in _PYRIGHT_AUTO_EXCLUDE if moved(p) not in exclude]
    if "stubPath" not in out and "typingsPath" not in out:
        out["stubPath"] = moved("typings")
    src = tree / "src"
    if "extraPaths" not in out and src.is_dir() and not (src / "__init__.py").exists():
        out["extraPaths"] = [moved("src")]  # pyright's autoSearchPaths, from the real root
    environments: list[Any] = []
    given = out.get("executionEnvironments")
    for env in cast(list[Any], given) if isinstance(given, list) else []:
        if isinstance(env, dict):
            env = dict(cast(dict[str, Any], env))
            env["root"] = moved(env.get("root", "."))
            if "extraPaths" in env:
                env["extraPaths"] = moved_list(env["extraPaths"])
        environments.append(env)
    # files under no environment of the project's own use the root's (the tree, not config_dir)
    out["executionEnvironments"] = [*environments, {"root": rel}]
    return out


def _strings(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in cast(list[Any], value) if isinstance(v, str)]
    return []


def pyright_scope(gate: Gate) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(include, exclude) of the gate's pyright settings, with pyright's defaults."""
    include = tuple(
        p.strip().removeprefix("./") for p in _strings(gate.pyright_config.get("include"))
    )
    exclude = tuple(
        p.strip().removeprefix("./") for p in _strings(gate.pyright_config.get("exclude"))
    )
    return tuple(p for p in include if p not in ("", ".")) or ("**",), exclude or (
        PYRIGHT_DEFAULT_EXCLUDE
    )


def in_pyright_scope(path: str, scope: tuple[tuple[str, ...], tuple[str, ...]]) -> bool:
    """Whether a full pyright run with these settings checks this file."""
    include, exclude = scope
    return matches_any(path, include) and not matches_any(path, exclude)

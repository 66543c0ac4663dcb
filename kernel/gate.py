"""The gate configuration: ruff and pyright settings frozen from the baseline commit.

The verifier judges an agent's tree with the rules of the commit it started from, read
here and written where the agent cannot reach, so relaxing `[tool.ruff]` in the change
does not relax the judgement.
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import json5
import tomli_w

from kernel import gitops
from kernel.config import QualityConfig
from kernel.contracts import matches_any

GATE_FILES: tuple[str, ...] = (
    "pyproject.toml",
    "ruff.toml",
    ".ruff.toml",
    "pyrightconfig.json",
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
"""Top-level ruff settings that make it write (or change what it prints): never in a gate."""

_PYRIGHT_AUTO_EXCLUDE = (*PYRIGHT_DEFAULT_EXCLUDE, "**/__editable__.*")
"""What pyright always adds to `exclude`, from the project root (pyright 1.1.4xx)."""
_PYRIGHT_PATH_LISTS = ("include", "exclude", "ignore", "strict", "extraPaths")
_PYRIGHT_PATHS = ("stubPath", "typingsPath", "typeshedPath", "venvPath", "extends")


ALL_TOOLS: tuple[str, ...] = ("ruff", "ruff-format", "pyright", "pytest")
SMALL_RUFF: tuple[str, ...] = ("E9", "F63", "F7", "F82")
"""ruff's rules that always count: syntax errors and undefined names (flake8's serious set)."""


@dataclass(frozen=True)
class Adoption:
    """Which tools take part for a target, and why: configured by it, or named in seed.toml."""

    tools: tuple[str, ...] = ALL_TOOLS
    """Tools that run."""
    advisory: tuple[str, ...] = ()
    """Tools that run but offer no gaps (ruff format unconfigured: it judges only files that
    were formatted at the baseline, through the ratchet)."""
    why: tuple[str, ...] = ()
    """One line per tool: whether it takes part, and why."""
    own_ruff: bool = True
    """The target configures ruff (else only SMALL_RUFF, or [quality] ruff_select when named)."""


def adoption(read: Callable[[str], str | None], quality: QualityConfig) -> Adoption:
    """Which tools take part, from the target's configuration files (read by name)."""
    tool = cast(dict[str, Any], (_toml(read("pyproject.toml")) or {}).get("tool", {}))
    ruff_file = next(
        (d for n in ("ruff.toml", ".ruff.toml") if (d := _toml(read(n))) is not None), None
    )
    ruff = ruff_file if ruff_file is not None else tool.get("ruff")
    own_ruff = isinstance(ruff, dict)
    own_format = own_ruff and "format" in cast(dict[str, Any], ruff)
    own_pyright = read("pyrightconfig.json") is not None or "pyright" in tool
    if quality.tools is not None:
        named = tuple(t for t in ALL_TOOLS if t in quality.tools)
        why = tuple(
            f"{t}: {'on' if t in named else 'off'} ([quality] tools in seed.toml)"
            for t in ALL_TOOLS
        )
        return Adoption(named, (), why, own_ruff)
    tools = ["ruff", "ruff-format", "pytest"] + (["pyright"] if own_pyright else [])
    why = (
        "ruff: on (configured)"
        if own_ruff
        else "ruff: syntax errors and undefined names only (no [tool.ruff], ruff.toml or .ruff.toml)",
        "ruff-format: on ([tool.ruff.format])"
        if own_format
        else "ruff-format: only files already formatted at the baseline (no [tool.ruff.format])",
        "pyright: on (configured)"
        if own_pyright
        else "pyright: off (no [tool.pyright] or pyrightconfig.json)",
        "pytest: on (always)",
    )
    advisory = () if own_format else ("ruff-format",)
    return Adoption(tuple(t for t in ALL_TOOLS if t in tools), advisory, why, own_ruff)


def _toml(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None  # unreadable: as if absent (ruff's own defaults are never the rule)


@dataclass(frozen=True)
class Gate:
    """Tool configuration frozen from the baseline commit, kept outside the agent's reach."""

    ruff_config: Path
    pyright_config: dict[str, Any] = field(default_factory=dict[str, Any])
    adoption: Adoption = field(default_factory=Adoption)
    """Which tools take part, decided by the baseline commit's configuration."""


def json_lenient(text: str) -> dict[str, Any]:
    """pyrightconfig.json allows comments and trailing commas (read as JSON5, a superset)."""
    try:
        data = json5.loads(text)
    except (ValueError, RecursionError):
        return {}
    return cast(dict[str, Any], data) if isinstance(data, dict) else {}


def _gate_from(read: Callable[[str], str | None], out_dir: Path, quality: QualityConfig) -> Gate:
    out_dir.mkdir(parents=True, exist_ok=True)
    read = functools.cache(read)  # adoption and the gate read the same files: once each
    adopted = adoption(read, quality)

    def toml(name: str) -> dict[str, Any] | None:
        return _toml(read(name))

    tool = cast(dict[str, Any], (toml("pyproject.toml") or {}).get("tool", {}))
    ruff_config = out_dir / "pyproject.toml"
    for name in ("ruff.toml", ".ruff.toml"):
        own = toml(name)
        if own is not None:
            ruff_doc: dict[str, Any] = {"tool": {"ruff": own}}
            break
    else:
        if "ruff" in tool:
            ruff_doc = {"tool": {"ruff": tool["ruff"]}}
        else:
            named = quality.tools is not None and "ruff" in quality.tools
            select = list(quality.ruff_select) if named else list(SMALL_RUFF)
            ruff_doc = {"tool": {"ruff": {"lint": {"select": select}}}}
    ruff_doc["tool"]["ruff"] = {
        k: v for k, v in ruff_doc["tool"]["ruff"].items() if k not in RUFF_WRITE_SETTINGS
    }
    own = cast(dict[str, Any], ruff_doc["tool"]["ruff"])
    lint = own.get("lint")
    if "select" not in own and not (isinstance(lint, dict) and "select" in lint):
        # no selection of its own: the long-standing defaults, never those of ruff's version
        own["lint"] = {**(cast(dict[str, Any], lint) if isinstance(lint, dict) else {})}
        own["lint"]["select"] = list(quality.ruff_select if adopted.own_ruff else SMALL_RUFF)
    ruff_config.write_text(tomli_w.dumps(ruff_doc), encoding="utf-8")
    pyright: dict[str, Any] = {}
    own_pyright = read("pyrightconfig.json")
    if own_pyright is not None:
        pyright = json_lenient(own_pyright)
    elif "pyright" in tool:
        pyright = dict(cast(dict[str, Any], tool["pyright"]))
    (out_dir / "pyright.json").write_text(json.dumps(pyright, indent=2), encoding="utf-8")
    return Gate(ruff_config=ruff_config, pyright_config=pyright, adoption=adopted)


def freeze_gate(tree: Path, out_dir: Path, quality: QualityConfig) -> Gate:
    """Copy the ruff and pyright settings of the baseline tree to where the agent cannot reach."""

    def read(name: str) -> str | None:
        path = tree / name
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None

    return _gate_from(read, out_dir, quality)


def read_at(root: Path, commit: str) -> Callable[[str], str | None]:
    """A reader of a commit's files by name, from git objects (None: no such file)."""

    def read(name: str) -> str | None:
        result = gitops.git(root, "cat-file", "blob", f"{commit}:{name}", check=False)
        return result.stdout.decode("utf-8", errors="replace") if result.ok else None

    return read


def freeze_gate_at(root: Path, commit: str, out_dir: Path, quality: QualityConfig) -> Gate:
    """The gate of a commit, read from git (for a branch that moved: never from the agent's tree)."""
    return _gate_from(read_at(root, commit), out_dir, quality)


def pyright_config(gate: Gate, tree: Path, strict: Sequence[str]) -> dict[str, Any]:
    """The gate's pyright settings plus the strict paths seed adds (those present in the tree)."""
    config = dict(gate.pyright_config)
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

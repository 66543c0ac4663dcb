"""The kernel's measurements: run the catalogue's tools on a tree and parse their output.

Only facts come out of here (Diagnostics); judging them into gaps is the analysers' job.
ruff and pyright run with the gate configuration taken from the baseline commit, so an
agent cannot relax the rules it is judged by.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import sysconfig
import tomllib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import tomli_w

from domain import Diagnostic, Measurement, Measurements, Tool
from kernel import procs
from kernel.config import QualityConfig

PLUGIN_DIR = Path(__file__).resolve().parent / "pytest_plugin"
PYRIGHT_GATE_NAME = ".seed-gate.pyright.json"
_MAX_DETAIL = 2000


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


@dataclass(frozen=True)
class Gate:
    """Tool configuration frozen from the baseline commit, kept outside the agent's reach."""

    ruff_config: Path
    pyright_config: dict[str, Any] = field(default_factory=dict[str, Any])


def resolve_python(root: Path, configured: str) -> str:
    """The target's interpreter: the configured one, the target's .venv, else the daemon's."""
    if configured:
        path = Path(configured).expanduser()
        return str(path if path.is_absolute() else (root / path))
    venv = root / ".venv" / "bin" / "python"
    if venv.exists():
        return str(venv)
    return sys.executable


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _strip_jsonc(text: str) -> str:
    """Remove // and /* */ comments outside strings, and trailing commas."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        else:
            out.append(ch)
        i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def _json_lenient(text: str) -> dict[str, Any]:
    """pyrightconfig.json allows comments and trailing commas."""
    try:
        data = json.loads(_strip_jsonc(text))
    except json.JSONDecodeError:
        return {}
    return cast(dict[str, Any], data) if isinstance(data, dict) else {}


def freeze_gate(tree: Path, out_dir: Path, quality: QualityConfig) -> Gate:
    """Copy the ruff and pyright settings of the baseline tree to where the agent cannot reach."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pyproject = _read_toml(tree / "pyproject.toml")
    tool = cast(dict[str, Any], pyproject.get("tool", {}))
    ruff_config = out_dir / "pyproject.toml"
    for name in ("ruff.toml", ".ruff.toml"):
        if (tree / name).is_file():
            ruff_doc: dict[str, Any] = {"tool": {"ruff": _read_toml(tree / name)}}
            break
    else:
        if "ruff" in tool:
            ruff_doc = {"tool": {"ruff": tool["ruff"]}}
        else:
            ruff_doc = {"tool": {"ruff": {"lint": {"select": list(quality.ruff_select)}}}}
    ruff_config.write_text(tomli_w.dumps(ruff_doc), encoding="utf-8")
    pyright: dict[str, Any] = {}
    if (tree / "pyrightconfig.json").is_file():
        pyright = _json_lenient(
            (tree / "pyrightconfig.json").read_text(encoding="utf-8", errors="replace")
        )
    elif "pyright" in tool:
        pyright = dict(cast(dict[str, Any], tool["pyright"]))
    (out_dir / "pyright.json").write_text(json.dumps(pyright, indent=2), encoding="utf-8")
    return Gate(ruff_config=ruff_config, pyright_config=pyright)


def _rel(path: str, tree: Path) -> str:
    try:
        return Path(path).resolve().relative_to(tree.resolve()).as_posix()
    except ValueError:
        return path


def _tool_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = procs.child_env(PYRIGHT_PYTHON_IGNORE_WARNINGS="1", PYTHONDONTWRITEBYTECODE="1")
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


def run_ruff(tree: Path, gate: Gate, timeout_s: float, files: Sequence[str] = ()) -> Measurement:
    """`ruff check` on the tree (or some files), parsed into diagnostics."""
    argv = [
        ruff_binary(),
        "check",
        "--no-cache",
        "--output-format",
        "json",
        "--config",
        str(gate.ruff_config),
    ]
    result = procs.run([*argv, *(files or ["."])], cwd=tree, timeout_s=timeout_s, env=_tool_env())
    if result.timed_out or result.exit_code not in (0, 1):
        return Measurement(
            tool=Tool.RUFF,
            ran=False,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            error=result.err_text().strip()[-_MAX_DETAIL:] or "ruff failed",
            duration_s=result.duration_s,
        )
    try:
        items = cast(list[dict[str, Any]], json.loads(result.text() or "[]"))
    except json.JSONDecodeError as exc:
        return Measurement(
            tool=Tool.RUFF,
            ran=False,
            exit_code=result.exit_code,
            error=f"unreadable ruff output: {exc}",
            duration_s=result.duration_s,
        )
    diagnostics: list[Diagnostic] = []
    for item in items:
        location = cast(dict[str, Any], item.get("location") or {})
        fix = cast(dict[str, Any] | None, item.get("fix"))
        diagnostics.append(
            Diagnostic(
                tool=Tool.RUFF,
                file=_rel(str(item.get("filename", "")), tree),
                line=int(location.get("row") or 0),
                column=int(location.get("column") or 0),
                rule=str(item.get("code") or "invalid-syntax"),
                message=str(item.get("message", "")),
                fixable=bool(fix and fix.get("applicability") == "safe"),
            )
        )
    return Measurement(
        tool=Tool.RUFF,
        ran=True,
        exit_code=result.exit_code,
        diagnostics=tuple(diagnostics),
        duration_s=result.duration_s,
    )


def run_ruff_format(
    tree: Path, gate: Gate, timeout_s: float, files: Sequence[str] = ()
) -> Measurement:
    """`ruff format --check`: one diagnostic per file it would reformat."""
    argv = [
        ruff_binary(),
        "format",
        "--check",
        "--no-cache",
        "--output-format",
        "json",
        "--config",
        str(gate.ruff_config),
    ]
    result = procs.run([*argv, *(files or ["."])], cwd=tree, timeout_s=timeout_s, env=_tool_env())
    if result.timed_out or result.exit_code not in (0, 1, 2):
        return Measurement(
            tool=Tool.RUFF_FORMAT,
            ran=False,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            error=result.err_text().strip()[-_MAX_DETAIL:] or "ruff format failed",
            duration_s=result.duration_s,
        )
    try:
        items = cast(list[dict[str, Any]], json.loads(result.text() or "[]"))
    except json.JSONDecodeError:
        if result.exit_code == 2:
            return Measurement(
                tool=Tool.RUFF_FORMAT,
                ran=False,
                exit_code=2,
                error=result.err_text().strip()[-_MAX_DETAIL:],
                duration_s=result.duration_s,
            )
        items = []
    diagnostics = [
        Diagnostic(
            tool=Tool.RUFF_FORMAT,
            file=_rel(str(item.get("filename", "")), tree),
            line=1,
            rule=str(item.get("code") or "unformatted"),
            message="file is not formatted as ruff format would",
            fixable=True,
        )
        for item in items
    ]
    return Measurement(
        tool=Tool.RUFF_FORMAT,
        ran=True,
        exit_code=result.exit_code,
        diagnostics=tuple(diagnostics),
        duration_s=result.duration_s,
    )


def _pyright_config(gate: Gate, tree: Path, strict: Sequence[str]) -> dict[str, Any]:
    config = dict(gate.pyright_config)
    present = [p for p in strict if (tree / p).exists()]
    if present:
        existing = [str(s) for s in cast(list[Any], config.get("strict", []))]
        config["strict"] = existing + [p for p in present if p not in existing]
    return config


def run_pyright(
    tree: Path, gate: Gate, target: Target, timeout_s: float, files: Sequence[str] = ()
) -> Measurement:
    """pyright --outputjson with the gate config written inside the tree (it ignores absolute paths)."""
    config_path = tree / PYRIGHT_GATE_NAME
    config_path.write_text(json.dumps(_pyright_config(gate, tree, target.strict)), encoding="utf-8")
    argv = [
        sys.executable,
        "-m",
        "pyright",
        "--outputjson",
        "-p",
        str(config_path),
        "--pythonpath",
        target.python,
        *files,
    ]
    try:
        result = procs.run(argv, cwd=tree, timeout_s=timeout_s, env=_tool_env())
    finally:
        config_path.unlink(missing_ok=True)
    if result.timed_out or result.exit_code not in (0, 1):
        return Measurement(
            tool=Tool.PYRIGHT,
            ran=False,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            error=(result.err_text() or result.text()).strip()[-_MAX_DETAIL:] or "pyright failed",
            duration_s=result.duration_s,
        )
    try:
        data = cast(dict[str, Any], json.loads(result.text()))
    except json.JSONDecodeError as exc:
        return Measurement(
            tool=Tool.PYRIGHT,
            ran=False,
            exit_code=result.exit_code,
            error=f"unreadable pyright output: {exc}",
            duration_s=result.duration_s,
        )
    diagnostics: list[Diagnostic] = []
    for item in cast(list[dict[str, Any]], data.get("generalDiagnostics", [])):
        severity = str(item.get("severity", "error"))
        if severity not in ("error", "warning"):
            continue
        start = cast(
            dict[str, Any], cast(dict[str, Any], item.get("range") or {}).get("start") or {}
        )
        diagnostics.append(
            Diagnostic(
                tool=Tool.PYRIGHT,
                file=_rel(str(item.get("file", "")), tree),
                line=int(start.get("line", -1)) + 1,
                column=int(start.get("character", -1)) + 1,
                rule=str(item.get("rule") or "syntax"),
                message=str(item.get("message", "")).splitlines()[0] if item.get("message") else "",
                severity=severity,
                detail=str(item.get("message", ""))[:_MAX_DETAIL],
            )
        )
    return Measurement(
        tool=Tool.PYRIGHT,
        ran=True,
        exit_code=result.exit_code,
        diagnostics=tuple(diagnostics),
        duration_s=result.duration_s,
    )


def _pytest_diagnostics(
    records: list[dict[str, Any]],
) -> tuple[list[Diagnostic], list[str], dict[str, Any] | None]:
    diagnostics: list[Diagnostic] = []
    collected: list[str] = []
    finish: dict[str, Any] | None = None
    for rec in records:
        kind = rec.get("kind")
        if kind == "collected":
            collected = [str(n) for n in cast(list[Any], rec.get("nodeids", []))]
        elif kind == "finish":
            finish = rec
        elif kind == "collect_error":
            node = str(rec.get("nodeid", ""))
            diagnostics.append(
                Diagnostic(
                    tool=Tool.PYTEST,
                    file=node.split("::")[0],
                    rule="collection-error",
                    node_id=node,
                    message=str(rec.get("message", "")),
                    exc_type=str(rec.get("exc_type", "")),
                    detail=str(rec.get("trace_head", ""))[-_MAX_DETAIL:],
                )
            )
        elif kind == "outside_import":
            diagnostics.append(
                Diagnostic(
                    tool=Tool.PYTEST,
                    rule="outside-import",
                    file=str(rec.get("module", "")),
                    message=f"tests imported {rec.get('module')} from the user's checkout ({rec.get('file')}), not the tree under test",
                )
            )
        elif kind == "test" and rec.get("outcome") == "failed":
            node = str(rec.get("nodeid", ""))
            when = str(rec.get("when", "call"))
            diagnostics.append(
                Diagnostic(
                    tool=Tool.PYTEST,
                    file=node.split("::")[0],
                    rule="failed" if when == "call" else "error",
                    node_id=node,
                    message=str(rec.get("message", "")),
                    exc_type=str(rec.get("exc_type", "")),
                    frame_file=str(rec.get("frame_file", "")),
                    frame_line=int(rec.get("frame_line", 0) or 0),
                    detail=str(rec.get("trace_head", ""))[-_MAX_DETAIL:],
                )
            )
    return diagnostics, collected, finish


def run_pytest(
    tree: Path, target: Target, work_dir: Path, timeout_s: float, node_ids: Sequence[str] = ()
) -> Measurement:
    """The target's tests with its own interpreter, through the kernel's plugin."""
    work_dir.mkdir(parents=True, exist_ok=True)
    out = work_dir / f"pytest-{os.getpid()}-{id(node_ids)}.jsonl"
    out.unlink(missing_ok=True)
    argv = [
        target.python,
        "-m",
        "pytest",
        "-p",
        "seed_pytest_plugin",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(tree),
        "--confcutdir",
        str(tree),
        "-q",
        "--no-header",
        "-rN",
        *target.quality.pytest_args,
        *node_ids,
    ]
    env = _tool_env(
        {
            "PYTHONPATH": os.pathsep.join([str(tree), str(PLUGIN_DIR)]),
            "SEED_PYTEST_OUT": str(out),
            "SEED_PYTEST_ROOT": str(tree),
            "SEED_PYTEST_FORBID": str(target.root),
        }
    )
    result = procs.run(
        argv, cwd=tree, timeout_s=timeout_s, env=env, merge_stderr=True, max_bytes=4 * 1024 * 1024
    )
    records: list[dict[str, Any]] = []
    if out.exists():
        for line in out.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                records.append(cast(dict[str, Any], json.loads(line)))
            except json.JSONDecodeError:
                continue  # a line torn by a crash: the rest still counts
        out.unlink(missing_ok=True)
    diagnostics, collected, finish = _pytest_diagnostics(records)
    if result.timed_out:
        return Measurement(
            tool=Tool.PYTEST,
            ran=False,
            timed_out=True,
            exit_code=None,
            diagnostics=tuple(diagnostics),
            collected=tuple(collected),
            error=f"pytest did not finish in {timeout_s:.0f}s",
            duration_s=result.duration_s,
        )
    outside = any(d.rule == "outside-import" for d in diagnostics)
    if finish is None or (result.exit_code not in (0, 1, 2, 5) and not outside):
        tail = result.tail.decode("utf-8", errors="replace").strip()[-_MAX_DETAIL:]
        return Measurement(
            tool=Tool.PYTEST,
            ran=False,
            exit_code=result.exit_code,
            diagnostics=tuple(diagnostics),
            collected=tuple(collected),
            error=tail or "pytest did not run",
            duration_s=result.duration_s,
        )
    return Measurement(
        tool=Tool.PYTEST,
        ran=True,
        exit_code=result.exit_code,
        diagnostics=tuple(diagnostics),
        collected=tuple(collected),
        duration_s=result.duration_s,
    )


def measure(
    tree: Path, target: Target, gate: Gate, work_dir: Path, tree_id: str = ""
) -> Measurements:
    """Every configured tool on one tree; pyright and pytest run side by side."""
    wanted = [Tool(t) for t in target.quality.tools if t in {x.value for x in Tool}]
    timeout = target.quality.tool_timeout_s
    results: dict[Tool, Measurement] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures: dict[Tool, Future[Measurement]] = {}
        if Tool.PYTEST in wanted:
            futures[Tool.PYTEST] = pool.submit(run_pytest, tree, target, work_dir, timeout)
        if Tool.PYRIGHT in wanted:
            futures[Tool.PYRIGHT] = pool.submit(run_pyright, tree, gate, target, timeout)
        if Tool.RUFF in wanted:
            results[Tool.RUFF] = run_ruff(tree, gate, timeout)
        if Tool.RUFF_FORMAT in wanted:
            results[Tool.RUFF_FORMAT] = run_ruff_format(tree, gate, timeout)
        for tool, future in futures.items():
            results[tool] = future.result()
    ordered = tuple(results[t] for t in Tool if t in results)
    return Measurements(tree=tree_id, items=ordered)

"""The kernel's measurements: run the catalogue's tools on a tree and parse their output.

Only facts come out of here (Diagnostics); judging them into gaps is the analysers' job.
ruff and pyright run with the gate configuration taken from the baseline commit, so an
agent cannot relax the rules it is judged by. pyright and pytest run side by side.
Measuring never writes into the tree: each tool's read-only flags are pinned here, after
anything a configuration can say.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

from domain import Diagnostic, Measurement, Measurements, Tool
from kernel import procs
from kernel.gate import Gate, freeze_gate, pyright_config, pyright_config_outside
from kernel.incremental import Scope, carried, merge, merge_tests
from kernel.pytest_run import PLUGIN_DIR, PYTEST_READ_ONLY, TestFiles, run_pytest
from kernel.toolenv import MAX_DETAIL, Target, resolve_python, ruff_binary, tool_env

__all__ = [
    "PLUGIN_DIR",
    "PYRIGHT_FLAGS",
    "PYTEST_READ_ONLY",
    "RUFF_CHECK_FLAGS",
    "RUFF_FORMAT_FLAGS",
    "Gate",
    "Target",
    "freeze_gate",
    "measure",
    "pyright_diagnostics",
    "resolve_python",
    "ruff_binary",
    "run_pyright",
    "run_pytest",
    "run_ruff",
    "run_ruff_format",
]

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

RUFF_FORMAT_FLAGS: tuple[str, ...] = ("format", "--check", "--no-cache", "--output-format", "json")
"""`ruff format` only checks: without --check it rewrites files."""

PYRIGHT_FLAGS: tuple[str, ...] = ("--outputjson",)
"""pyright writes nothing by itself; its config file is written outside the tree (run_pyright)."""


def _rel(path: str, tree: Path) -> str:
    try:
        return Path(path).resolve().relative_to(tree.resolve()).as_posix()
    except ValueError:
        return path


def _failed(tool: Tool, result: procs.Completed, what: str) -> Measurement:
    words = (result.err_text() or result.text()).strip()[-MAX_DETAIL:]
    return Measurement(
        tool=tool,
        ran=False,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        error=words or f"{what} failed (exit {result.exit_code})",
        duration_s=result.duration_s,
    )


def _measured(tool: Tool, result: procs.Completed, diagnostics: list[Diagnostic]) -> Measurement:
    return Measurement(
        tool=tool,
        ran=True,
        exit_code=result.exit_code,
        diagnostics=tuple(diagnostics),
        duration_s=result.duration_s,
    )


def _ruff_argv(gate: Gate, flags: Sequence[str], files: Sequence[str]) -> list[str]:
    argv = [ruff_binary(), *flags, "--config", str(gate.ruff_config)]
    # files named on the command line are linted even when excluded, unless forced
    return [*argv, "--force-exclude", "--", *files] if files else [*argv, "."]


def _ruff_env() -> dict[str, str]:
    # RUFF_OUTPUT_FILE would send the findings to a file and leave stdout empty ("no findings")
    return {k: v for k, v in tool_env().items() if not k.startswith("RUFF_")}


def _json_list(text: str) -> list[dict[str, Any]] | None:
    try:
        data = json.loads(text or "[]")
    except json.JSONDecodeError:
        return None
    return cast(list[dict[str, Any]], data) if isinstance(data, list) else None


def run_ruff(tree: Path, gate: Gate, timeout_s: float, files: Sequence[str] = ()) -> Measurement:
    """`ruff check` on the tree (or some files), parsed into diagnostics."""
    argv = _ruff_argv(gate, RUFF_CHECK_FLAGS, files)
    result = procs.run(argv, cwd=tree, timeout_s=timeout_s, env=_ruff_env())
    if result.timed_out or result.exit_code not in (0, 1):
        return _failed(Tool.RUFF, result, "ruff")
    items = _json_list(result.text())
    if items is None:
        return _failed(Tool.RUFF, result, "ruff (unreadable output)")
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
    return _measured(Tool.RUFF, result, diagnostics)


def run_ruff_format(
    tree: Path, gate: Gate, timeout_s: float, files: Sequence[str] = ()
) -> Measurement:
    """`ruff format --check`: one diagnostic per file it would reformat or cannot parse."""
    argv = _ruff_argv(gate, RUFF_FORMAT_FLAGS, files)
    result = procs.run(argv, cwd=tree, timeout_s=timeout_s, env=_ruff_env())
    # exit 2 is also how it reports a file it cannot parse; the JSON still lists everything
    items = _json_list(result.text()) if result.exit_code in (0, 1, 2) else None
    if result.timed_out or items is None:
        return _failed(Tool.RUFF_FORMAT, result, "ruff format")
    diagnostics: list[Diagnostic] = []
    for item in items:
        code = str(item.get("code") or "unformatted")
        location = cast(dict[str, Any], item.get("location") or {})
        syntax = code == "invalid-syntax"
        diagnostics.append(
            Diagnostic(
                tool=Tool.RUFF_FORMAT,
                file=_rel(str(item.get("filename", "")), tree),
                line=int(location.get("row") or 1) if syntax else 1,
                column=int(location.get("column") or 0) if syntax else 0,
                rule=code,
                message=str(item.get("message", ""))
                if syntax
                else "file is not formatted as ruff format would",
                fixable=not syntax,
            )
        )
    return _measured(Tool.RUFF_FORMAT, result, diagnostics)


def pyright_diagnostics(data: dict[str, Any], tree: Path) -> list[Diagnostic]:
    """The errors of one pyright JSON document, with paths relative to the tree.

    Only errors count: a rule a project sets to "warning" is one it chose not to enforce.
    """
    diagnostics: list[Diagnostic] = []
    for item in cast(list[dict[str, Any]], data.get("generalDiagnostics", [])):
        if str(item.get("severity", "error")) != "error":
            continue
        start = cast(
            dict[str, Any], cast(dict[str, Any], item.get("range") or {}).get("start") or {}
        )
        message = str(item.get("message", ""))
        diagnostics.append(
            Diagnostic(
                tool=Tool.PYRIGHT,
                file=_rel(str(item.get("file", "")), tree),
                line=int(start.get("line", -1)) + 1,
                column=int(start.get("character", -1)) + 1,
                rule=str(item.get("rule") or "syntax"),
                message=message.splitlines()[0] if message else "",
                detail=message[:MAX_DETAIL],
            )
        )
    return diagnostics


def run_pyright(
    tree: Path, gate: Gate, target: Target, timeout_s: float, files: Sequence[str] = ()
) -> Measurement:
    """pyright --outputjson with the gate config in a folder of its own, outside the tree.

    Only errors count: a rule a project sets to "warning" is one it chose not to enforce.
    """
    with tempfile.TemporaryDirectory(prefix="seed-pyright-") as raw:
        config_path = Path(raw) / "pyrightconfig.json"
        config = pyright_config_outside(pyright_config(gate, tree, target.strict), tree, Path(raw))
        config_path.write_text(json.dumps(config), encoding="utf-8")
        argv = [sys.executable, "-m", "pyright", *PYRIGHT_FLAGS, "-p", str(config_path)]
        argv += ["--pythonpath", target.python, *files]
        result = procs.run(argv, cwd=tree, timeout_s=timeout_s, env=tool_env())
    if result.timed_out or result.exit_code not in (0, 1):
        return _failed(Tool.PYRIGHT, result, "pyright")
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
    return _measured(Tool.PYRIGHT, result, pyright_diagnostics(data, tree))


def _partly(
    previous: Measurement | None,
    files: tuple[str, ...] | None,
    deleted: Sequence[str],
    run: Callable[[Sequence[str]], Measurement],
) -> Measurement:
    """A tool on some files, merged into its previous findings; a full run when it must be."""
    if previous is None or not previous.ran or files is None:
        return run(())
    if not files:
        return carried(previous, deleted)
    return merge(previous, run(files), files, deleted)


def _tests(
    tree: Path,
    target: Target,
    work_dir: Path,
    timeout_s: float,
    previous: Measurement | None,
    scope: Scope | None,
    executed: Callable[[TestFiles], None] | None,
) -> Measurement:
    """The whole suite (traced for the test map when asked), or the scope's tests merged
    into the previous run's results."""
    selection = scope.tests if scope is not None else None
    if previous is None or not previous.ran or selection is None:
        return run_pytest(tree, target, work_dir, timeout_s, executed=executed)
    deleted = scope.deleted if scope is not None else ()
    if not selection.argv():
        return merge_tests(previous, None, selection, deleted)
    fresh = run_pytest(tree, target, work_dir, timeout_s, selection.argv())
    return merge_tests(previous, fresh, selection, deleted)


def measure(
    tree: Path,
    target: Target,
    gate: Gate,
    work_dir: Path,
    tree_id: str = "",
    *,
    base: Measurements | None = None,
    scope: Scope | None = None,
    executed: Callable[[TestFiles], None] | None = None,
    pyright: Callable[[], Measurement] | None = None,
) -> Measurements:
    """Every configured tool on one tree; with a base and a scope, ruff and pyright only
    re-check, and pytest re-runs the scope's tests. `executed` gets the test map of a full
    test run; `pyright`, when given, checks the whole tree instead (the resident checker)."""
    wanted = [Tool(t) for t in gate.adoption.tools]
    timeout = target.quality.tool_timeout_s
    ruff_files = scope.ruff if scope is not None and base is not None else None
    pyright_files = scope.pyright if scope is not None and base is not None else None
    deleted = scope.deleted if scope is not None else ()

    def previous(tool: Tool) -> Measurement | None:
        return base.get(tool) if base is not None else None

    results: dict[Tool, Measurement] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures: dict[Tool, Future[Measurement]] = {}
        if Tool.PYTEST in wanted:
            futures[Tool.PYTEST] = pool.submit(
                _tests, tree, target, work_dir, timeout, previous(Tool.PYTEST), scope, executed
            )
        if Tool.PYRIGHT in wanted and pyright is not None:
            futures[Tool.PYRIGHT] = pool.submit(pyright)
        elif Tool.PYRIGHT in wanted:
            futures[Tool.PYRIGHT] = pool.submit(
                _partly,
                previous(Tool.PYRIGHT),
                pyright_files,
                deleted,
                lambda files: run_pyright(tree, gate, target, timeout, files),
            )
        if Tool.RUFF in wanted:
            results[Tool.RUFF] = _partly(
                previous(Tool.RUFF),
                ruff_files,
                deleted,
                lambda files: run_ruff(tree, gate, timeout, files),
            )
        if Tool.RUFF_FORMAT in wanted:
            results[Tool.RUFF_FORMAT] = _partly(
                previous(Tool.RUFF_FORMAT),
                ruff_files,
                deleted,
                lambda files: run_ruff_format(tree, gate, timeout, files),
            )
        for tool, future in futures.items():
            results[tool] = future.result()
    advisory = gate.adoption.advisory
    ordered = tuple(
        results[t].model_copy(update={"advisory": True}) if t.value in advisory else results[t]
        for t in Tool
        if t in results
    )
    return Measurements(tree=tree_id, items=ordered)

"""The kernel's measurements: run the catalogue's tools on a tree and parse their output.

Only facts come out of here (Diagnostics); judging them into gaps is the analysers' job.
The target's tools run with its own interpreter, the daemon's ruff and a clean environment
(Target, tool_env). ruff and pyright run with the gate configuration taken from the baseline
commit, so an agent cannot relax the rules it is judged by. pyright and pytest run side by
side. Measuring never writes into the tree: each tool's read-only flags are pinned here,
after anything a configuration can say.

pytest runs through the kernel's plugin, which sends one JSON line per fact (collected ids,
failures with their crash frame, collection errors, imports from the user's checkout) down a
pipe the code under test cannot reach by name, so partial results survive a crash; a pytest
exit status that contradicts the facts is evidence of tampering (Measurement.tampering, never
a Diagnostic). It runs as the project runs it: its configuration and selection less the
kernel's few overrides (pytestconfig.py), its virtualenv active, a version for setuptools-scm.
A collection error
is its own finding and does not stop the other tests from running; pytest's exit 5 (nothing collected) is a clean run, not a failure.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shlex
import shutil
import sys
import sysconfig
import tempfile
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from packaging.version import InvalidVersion, Version

from domain import Diagnostic, Measurement, Measurements, Tampering, Tool
from kernel.config import QualityConfig
from kernel.isolation import gitops, procs, sandbox
from kernel.isolation.jails import Jail, Jailed
from kernel.isolation.paths import PLUGIN_DIR
from kernel.measuring import mypyrun, pins, pytestconfig
from kernel.measuring.gate import Gate, lint_view, pyright_config, pyright_config_outside
from kernel.measuring.incremental import Scope, carried, merge, merge_tests
from kernel.measuring.suppressions import (
    format_comments,
    mypy_split,
    mypy_view,
    pyright_comments,
    pyright_split,
    ruff_hidden,
)
from kernel.measuring.testmap import ANY_FILE, FreeMap, TestFiles

MAX_DETAIL = 2000
"""Characters of a tool's own words kept in a diagnostic or an error."""


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
    test_jail: Jail | None = None
    """The sandbox of the test runs when it differs from `jail` (the network of
    `test_network = "full"`); None: `jail`."""


def resolve_python(root: Path, configured: str) -> str:
    """The target's interpreter: the configured one, the target's .venv, else the daemon's."""
    if configured:
        path = Path(configured).expanduser()
        return str(path if path.is_absolute() else (root / path))
    venv = root / ".venv" / "bin" / "python"
    if venv.exists():
        return str(venv)
    return sys.executable


def python_reason(root: Path, configured: str) -> str:
    """Why resolve_python chose the interpreter it chose (for `status`)."""
    if configured:
        return "quality.python in seed.toml"
    if (root / ".venv" / "bin" / "python").exists():
        return "the repository's .venv"
    return "seed's own: no .venv in the repository and no quality.python in seed.toml"


def tool_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a measurement: built from the allow-list (procs.RUN_ENV), nothing
    that would redirect imports, no bytecode written or reused from the tree, no user site."""
    env = procs.run_env(
        PYRIGHT_PYTHON_IGNORE_WARNINGS="1", PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1"
    )
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


RUFF_CHECK_FLAGS = pins.RUFF_CHECK_FLAGS

FORMAT_SUFFIXES: tuple[str, ...] = (".py", ".pyi", ".pyw", ".ipynb")
"""The files whose formatting counts (ruff formats notebooks as well)."""
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


def ruff_for(gate: Gate) -> str | None:
    """The ruff a gate runs: the version the project pins from seed's tool cache (None when its
    bytes no longer hash to what was recorded), else the one installed with seed."""
    if not gate.ruff_version:
        return ruff_binary()
    found = pins.binary(gate.ruff_version)
    return str(found) if found is not None else None


def ruff_argv(gate: Gate, flags: Sequence[str], files: Sequence[str]) -> list[str] | str:
    """ruff's command line in a lint view: the project's own configuration files found there
    as ruff finds them, seed's config only for a target without one, the flags as the ruff
    that runs spells them (a str: why no ruff can run)."""
    exe = ruff_for(gate)
    if exe is None:
        return (
            f"ruff {gate.ruff_version} in seed's tool cache no longer matches its recorded sha256"
        )
    spelled = pins.ruff_flags(exe, flags) if gate.ruff_version else list(flags)
    if isinstance(spelled, str):
        return spelled
    argv = [exe, *spelled]
    if gate.ruff_dir is None:
        argv += ["--config", str(gate.ruff_config)]
    # files named on the command line are linted even when excluded, unless forced
    return [*argv, "--force-exclude", "--", *files] if files else [*argv, "."]


def _unusable(tool: Tool, why: str) -> Measurement:
    return Measurement(tool=tool, ran=False, error=why)


def _ruff_env() -> dict[str, str]:
    # RUFF_OUTPUT_FILE would send the findings to a file and leave stdout empty ("no findings")
    return {k: v for k, v in tool_env().items() if not k.startswith("RUFF_")}


def _json_list(text: str) -> list[dict[str, Any]] | None:
    try:
        data = json.loads(text or "[]")
    except json.JSONDecodeError:
        return None
    return cast(list[dict[str, Any]], data) if isinstance(data, list) else None


def run_ruff(
    tree: Path, gate: Gate, timeout_s: float, files: Sequence[str] = (), *, view: Path | None = None
) -> Measurement:
    """`ruff check` on the tree (or some files), parsed into diagnostics; run again with
    `--ignore-noqa` for what a noqa hides (Measurement.suppressed). ruff runs in a lint view
    of the tree (gate.lint_view: the baseline's configuration files in place)."""
    if view is None:
        with lint_view(tree, gate) as made:
            return run_ruff(tree, gate, timeout_s, files, view=made)
    tree = view
    with ThreadPoolExecutor(max_workers=1) as pool:
        everything = pool.submit(_ruff_check, tree, gate, timeout_s, files, ("--ignore-noqa",))
        shown = _ruff_check(tree, gate, timeout_s, files, ())
        unhidden = everything.result()
    if not shown.ran:
        return shown
    if not unhidden.ran:
        return unhidden
    hidden = ruff_hidden(shown.diagnostics, unhidden.diagnostics)
    return shown.model_copy(
        update={"suppressed": tuple(hidden), "duration_s": shown.duration_s + unhidden.duration_s}
    )


def _ruff_check(
    tree: Path, gate: Gate, timeout_s: float, files: Sequence[str], extra: Sequence[str]
) -> Measurement:
    argv = ruff_argv(gate, (*RUFF_CHECK_FLAGS, *extra), files)
    if isinstance(argv, str):
        return _unusable(Tool.RUFF, argv)
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
                # ruff before 0.1.0 names its safe fixes "Automatic"
                fixable=bool(fix and fix.get("applicability") in ("safe", "Automatic")),
            )
        )
    return _measured(Tool.RUFF, result, diagnostics)


def run_ruff_format(
    tree: Path, gate: Gate, timeout_s: float, files: Sequence[str] = (), *, view: Path | None = None
) -> Measurement:
    """`ruff format --check`: one diagnostic per file it would reformat or cannot parse."""
    if view is None:
        with lint_view(tree, gate) as made:
            return run_ruff_format(tree, gate, timeout_s, files, view=made)
    tree = view
    argv = ruff_argv(gate, RUFF_FORMAT_FLAGS, files)
    if isinstance(argv, str):
        return _unusable(Tool.RUFF_FORMAT, argv)
    result = procs.run(argv, cwd=tree, timeout_s=timeout_s, env=_ruff_env())
    words = "--output-format" not in argv
    if not words and "--output-format" in result.err_text():
        # a pinned ruff older than 0.16 has no JSON report for the formatter (or only in
        # preview; none before 0.9): its words instead
        argv = ruff_argv(gate, RUFF_FORMAT_FLAGS[:-2], files)
        if isinstance(argv, str):
            return _unusable(Tool.RUFF_FORMAT, argv)
        result, words = procs.run(argv, cwd=tree, timeout_s=timeout_s, env=_ruff_env()), True
    if words:
        items = _format_words(result, tree) if result.exit_code in (0, 1, 2) else None
    else:
        # exit 2 is also how it reports a file it cannot parse; the JSON still lists everything
        items = _json_list(result.text()) if result.exit_code in (0, 1, 2) else None
    if result.timed_out or items is None:
        return _failed(Tool.RUFF_FORMAT, result, "ruff format")
    diagnostics: list[Diagnostic] = []
    # newer ruff formats the Python code blocks of Markdown files too: only Python files count
    for item in (i for i in items if str(i.get("filename", "")).endswith(FORMAT_SUFFIXES)):
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
    hidden = format_comments(tree, files)  # what `# fmt: off` keeps from ruff format
    return _measured(Tool.RUFF_FORMAT, result, diagnostics).model_copy(
        update={"suppressed": tuple(hidden)}
    )


_WOULD = re.compile(r"^Would reformat: (?P<file>.+)$", re.MULTILINE)
_UNPARSABLE = re.compile(
    r"^error: Failed to parse (?P<file>.+?):(?P<row>\d+):(?P<column>\d+): (?P<message>.*)$",
    re.MULTILINE,
)


def _format_words(result: procs.Completed, tree: Path) -> list[dict[str, Any]]:
    """`ruff format --check`'s text report (paths from `tree`) in the shape of its JSON one."""
    items: list[dict[str, Any]] = [
        {"filename": str(tree / m["file"])} for m in _WOULD.finditer(result.text())
    ]
    for m in _UNPARSABLE.finditer(result.err_text()):
        location = {"row": int(m["row"]), "column": int(m["column"])}
        items.append(
            {
                "filename": m["file"],
                "code": "invalid-syntax",
                "location": location,
                "message": m["message"],
            }
        )
    return items


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
        own = pyright_config(gate, tree, target.strict, target.root)
        config = pyright_config_outside(own, tree, Path(raw))
        config_path.write_text(json.dumps(config), encoding="utf-8")
        # -I: the tree is the working folder, and `-m` would put it first on sys.path (a
        # `pyright/` or `json.py` of the change would run here, outside the sandbox)
        argv = [sys.executable, "-I", "-m", "pyright", *PYRIGHT_FLAGS, "-p", str(config_path)]
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
    found = pyright_diagnostics(data, tree)
    return with_hidden(_measured(Tool.PYRIGHT, result, found), tree, gate, files, _spans(data))


def run_mypy(tree: Path, gate: Gate, target: Target, timeout_s: float) -> Measurement:
    """The project's mypy on the whole tree, as the gate froze it (mypyrun.run_mypy), in a copy
    of its own with the suppressing comments inert (suppressions.mypy_view): always the whole
    project, since mypy's verdict on a file depends on every module it reads."""
    with mypy_view(tree) as copy:
        found = mypyrun.run_mypy(
            copy, gate.mypy, gate.mypy_dir, target.python, target.jail, timeout_s, target.root
        )
    return mypy_split(found, tree)


TYPE_TOOLS = mypyrun.TYPE_TOOLS
"""The type checkers (the judge's vocabulary, kept with the tools)."""
TYPE_CHECKS = mypyrun.TYPE_CHECKS


def _spans(data: dict[str, Any]) -> list[tuple[int, int]]:
    """(first, last) 1-based line of each error, in pyright_diagnostics' order."""
    spans: list[tuple[int, int]] = []
    for item in cast(list[dict[str, Any]], data.get("generalDiagnostics", [])):
        if str(item.get("severity", "error")) != "error":
            continue
        where = cast(dict[str, Any], item.get("range") or {})
        start = cast(dict[str, Any], where.get("start") or {})
        end = cast(dict[str, Any], where.get("end") or start)
        first = int(start.get("line", -1)) + 1
        spans.append((first, max(first, int(end.get("line", -1)) + 1)))
    return spans


def with_hidden(
    m: Measurement,
    tree: Path,
    gate: Gate,
    files: Sequence[str],
    spans: Sequence[tuple[int, int]] | None = None,
) -> Measurement:
    """A pyright measurement (type-ignore comments off) split into what gaps come from and
    what a suppression hides, pyright's own comments among the latter (suppressions.py)."""
    if not m.ran:
        return m
    lines = spans if spans is not None else [(d.line, d.line) for d in m.diagnostics]
    shown, hidden = pyright_split(m.diagnostics, lines, tree)
    hidden += pyright_comments(tree, gate, files)
    return m.model_copy(
        update={
            "diagnostics": tuple(shown),
            "suppressed": tuple(hidden),
            "exit_code": 1 if shown else 0,
        }
    )


EXIT_CLEAN = (0, 1, 2, 5)
"""pytest exit codes after which the plugin's facts are the whole story (5: nothing collected)."""
_RUN_IDS = itertools.count()
_MAX_FACTS = 64 * 1024 * 1024
"""Bytes of the plugin's facts read from one run (code under test could write more)."""
PYTEST_READ_ONLY: tuple[str, ...] = ("-p", "no:cacheprovider")
"""No .pytest_cache in the tree (and PYTHONDONTWRITEBYTECODE=1 in tool_env: no __pycache__)."""


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
                    detail=str(rec.get("trace_head", ""))[-MAX_DETAIL:],
                )
            )
        elif kind == "outside_import":
            diagnostics.append(
                Diagnostic(
                    tool=Tool.PYTEST,
                    rule="outside-import",
                    file=str(rec.get("module", "")),
                    message=f"tests imported {rec.get('module')} from {rec.get('file')}, not the tree under test",
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
                    detail=str(rec.get("trace_head", ""))[-MAX_DETAIL:],
                )
            )
    return diagnostics, collected, finish


def _tampering(records: list[dict[str, Any]]) -> list[Tampering]:
    """What the plugin saw change the run: evidence of its own type, never a Diagnostic (a
    diagnostic's file can become a gap's file list or an allowlist)."""
    return [
        Tampering(what=f"code under test tampered with pytest: {rec.get('what')}"[:MAX_DETAIL])
        for rec in records
        if rec.get("kind") == "tampered"
    ]


_MAX_MAP_FILES = 2000
"""Files named per test in the map; a test that ran more is marked as running everything."""


def _test_files(records: list[dict[str, Any]]) -> TestFiles:
    found: TestFiles = {}
    for rec in records:
        if rec.get("kind") != "files":
            continue
        files = rec.get("files")
        if isinstance(files, list):
            listed = cast(list[Any], files)
            names = [str(f) for f in listed] if len(listed) <= _MAX_MAP_FILES else [ANY_FILE]
            found[str(rec.get("nodeid", ""))] = frozenset(names)
    return found


def failed_ids(m: Measurement | None) -> set[str]:
    """The node ids of the tests that failed or errored in a pytest measurement."""
    if m is None:
        return set()
    return {d.node_id for d in m.diagnostics if d.node_id and d.rule in ("failed", "error")}


def _coverage_shim(run_dir: Path) -> Path:
    """A folder holding only coverage.py (a link to the daemon's copy): the rest of the
    daemon's packages stay off the target's path."""
    import coverage

    shim = run_dir / "shim"
    shim.mkdir()
    (shim / "coverage").symlink_to(Path(coverage.__file__).resolve().parent)
    return shim


def reader(tree: Path) -> pytestconfig.Reader:
    """The tree's top-level files by name (None: no such regular file)."""

    def read(name: str) -> str | None:
        path = tree / name
        try:
            return path.read_text(encoding="utf-8") if path.is_file() else None
        except (OSError, UnicodeDecodeError):
            return None

    return read


def run_pytest(
    tree: Path,
    target: Target,
    work_dir: Path,
    timeout_s: float,
    node_ids: Sequence[str] = (),
    *,
    cover: Callable[[Path, Path], None] | None = None,
    executed: Callable[[TestFiles], None] | None = None,
) -> Measurement:
    """The target's tests with its own interpreter, through the kernel's plugin.

    The facts come down a pipe opened before any project code runs (the plugin keeps it as a
    private descriptor), never through a file or a variable the code under test could find.
    With `cover`, the run also records per-test line coverage (seed_pytest_cover) and
    `cover` reads the data file (its paths are where the run saw the tree, the second
    argument) before the run's folder is removed. With `executed`, the
    plugin records which project files each test ran, and `executed` gets them (the test map).
    """
    # only coverage writes a file of the kernel's: a folder for that run alone (sandboxed, out
    # of the checkout, whose place the tree takes there)
    run_dir = _run_dir(work_dir, target) if cover is not None else None
    mapping = "monitor" if executed is not None and run_dir is None else ""
    result, records, seen = _launch(tree, target, node_ids, run_dir, mapping, timeout_s)
    if run_dir is not None:
        data = run_dir / "coverage.db"
        if cover is not None and data.is_file() and not result.timed_out:
            cover(data, seen)
        shutil.rmtree(run_dir, ignore_errors=True)
    diagnostics, collected, finish = _pytest_diagnostics(records)
    if executed is not None and not result.timed_out and finish is not None:
        traced = records
        if any(rec.get("kind") == "no_map" for rec in records):
            # before Python 3.12 only sys.settrace can map, and a test sees it: the map
            # comes from a run of its own, whose outcomes nobody reads (none for a FreeMap)
            traced = (
                [] if isinstance(executed, FreeMap) else _map_run(tree, target, node_ids, timeout_s)
            )
        executed(_test_files(traced))
    measured = _pytest_measurement(
        result, diagnostics, collected, finish is not None, timeout_s, _tampering(records)
    )
    passed = passed_ids(records, collected, diagnostics)
    return measured.model_copy(update={"passed": passed, "skips": skip_reasons(records)})


def skip_reasons(records: list[dict[str, Any]]) -> tuple[tuple[str, int], ...]:
    """How many tests skipped for each reason, most first (xfails are not skips)."""
    counts = Counter(
        str(rec.get("reason", "no reason given"))
        for rec in records
        if rec.get("kind") == "test" and rec.get("outcome") == "skipped" and not rec.get("xfail")
    )
    return tuple(counts.most_common(_MAX_SKIP_REASONS))


_MAX_SKIP_REASONS = 20
"""Reasons for skips kept at most."""


def skip_jump(before: Measurement | None, after: Measurement | None) -> str:
    """Evidence for the judge when many more tests skip after a change than at the base
    (at least 5 more, and at least twice as many): '' otherwise."""
    was = sum(n for _, n in before.skips) if before is not None else 0
    now = sum(n for _, n in after.skips) if after is not None else 0
    if now - was < 5 or now < 2 * was:
        return ""
    top = after.skips[0][0] if after is not None and after.skips else ""
    return f"skipped tests rose from {was} at the base to {now} after the change (most: {top})"


def _map_run(
    tree: Path, target: Target, node_ids: Sequence[str], timeout_s: float
) -> list[dict[str, Any]]:
    """The test map's own traced run: its facts, or none when it did not finish."""
    result, records, _ = _launch(tree, target, node_ids, None, "trace", timeout_s)
    finished = any(rec.get("kind") == "finish" for rec in records)
    return records if finished and not result.timed_out else []


def _launch(
    tree: Path,
    target: Target,
    node_ids: Sequence[str],
    run_dir: Path | None,
    files: str,
    timeout_s: float,
    lines: Sequence[str] = (),
    near: Mapping[str, Collection[int]] | None = None,
) -> tuple[procs.Completed, list[dict[str, Any]], Path]:
    """One pytest process through the kernel's bootstrap: how it ended, the facts it sent,
    and where it saw the tree."""
    argv = [target.python, *PYTHON_FLAGS, "-c", BOOT]
    jailed = Jailed(argv, tree)
    jail = target.test_jail or target.jail
    if jail is not None:
        jailed = jail(argv, tree, () if run_dir is None else (run_dir,))
    config = _pytest_config(tree, jailed.seen, target, node_ids, run_dir, files=files)
    config["lines"] = list(lines)
    config["near"] = {path: sorted(numbers) for path, numbers in (near or {}).items()}
    argv = jailed.argv
    read, write = os.pipe()  # procs.run closes the write end once the child holds it
    config["fd"] = write
    try:
        # started from an empty place: nothing of the tree is importable until the plugin
        # has put it on sys.path, after pytest's own imports
        result = procs.run(
            argv,
            cwd="/",
            timeout_s=timeout_s,
            env=_pytest_env(target),
            merge_stderr=True,
            max_bytes=4 * 1024 * 1024,
            stdin=json.dumps(config).encode("utf-8"),
            channel=(read, write),
            channel_bytes=_MAX_FACTS,
        )
    finally:
        os.close(read)
        sandbox.settle(jailed.made)
    return result, _read_facts(result.channel), jailed.seen


RanLines = dict[str, dict[str, frozenset[int]]]
IMPORTED = "<import>"
"""run_lines' key for the lines that ran on import during collection (no test's node id)."""
"""Per test node id: the watched files' lines (repository-relative) it executed."""
_MAX_LINES = 100_000
"""Lines kept per file and test (a file longer than this is not a change worth tracing)."""


Branches = dict[str, dict[str, dict[tuple[int, str, bool], bool]]]
"""Per test node id (and IMPORTED), per watched file: each side of each conditional jump in
code it ran, (line, where, jumped) -> whether it was taken."""


def _branches(
    rec: dict[str, Any], wanted: set[str]
) -> dict[str, dict[tuple[int, str, bool], bool]]:
    found: dict[str, dict[tuple[int, str, bool], bool]] = {}
    listed = rec.get("branches")
    for rel, sides in cast(dict[Any, Any], listed if isinstance(listed, dict) else {}).items():
        if rel not in wanted or not isinstance(sides, list):
            continue
        per_file = found.setdefault(str(rel), {})
        for side in cast(list[Any], sides)[:_MAX_LINES]:
            if isinstance(side, list) and len(cast(list[Any], side)) == 4:
                line, where, jumped, taken = cast(list[Any], side)
                per_file[(int(line), str(where), bool(jumped))] = taken is True
    return found


def untaken(
    branches: Branches, vouching: set[str], changed: Mapping[str, frozenset[int]]
) -> list[str]:
    """The sides of the changed lines' branches that no vouching test (nor the import) took,
    as `path:line (where: never jumped|never fell through)`."""
    known: dict[tuple[str, int, str, bool], bool] = {}
    for node, per_file in branches.items():
        if node not in vouching and node != IMPORTED:
            continue
        for path, sides in per_file.items():
            for (line, where, jumped), taken in sides.items():
                if line in changed.get(path, frozenset()):
                    key = (path, line, where, jumped)
                    known[key] = known.get(key, False) or taken
    # a jump no test reached lies on a line no test ran: that line is named already
    reached = {(p, n, w) for (p, n, w, _), taken in known.items() if taken}
    return [
        f"{path}:{line} ({where}: never {'jumped' if jumped else 'fell through'})"
        for (path, line, where, jumped), taken in sorted(known.items())
        if not taken and (path, line, where) in reached
    ]


def run_lines(
    tree: Path,
    target: Target,
    timeout_s: float,
    node_ids: Sequence[str],
    watch: Sequence[str],
    branches: Branches | None = None,
    near: Mapping[str, Collection[int]] | None = None,
) -> tuple[frozenset[str], RanLines]:
    """The tests that passed in a traced run of its own, and the lines of the `watch` files
    each ran (nothing when the run did not finish); under IMPORTED, the lines that ran on
    import while the tests were collected (none when a module could not be collected). The
    facts come down the kernel's pipe; sys.settrace, which a test can see, never runs in a run
    whose outcomes judge a change. `near`: per file, the lines that matter; code spanning
    none of them is not traced, and line 0 says a test ran some code of the file."""
    result, records, _ = _launch(
        tree, target, node_ids, None, "trace", timeout_s, lines=watch, near=near
    )
    diagnostics, collected, finish = _pytest_diagnostics(records)
    if result.timed_out or finish is None or _tampering(records):
        return frozenset(), {}  # no facts: every watched line counts as run by no test
    passed = frozenset(passed_ids(records, collected, diagnostics))
    wanted = set(watch)
    clean = not any(d.rule == "collection-error" for d in diagnostics)
    ran: RanLines = {}
    for rec in records:
        lines = rec.get("lines")
        kind = rec.get("kind")
        if kind not in ("files", "import_lines") or not isinstance(lines, dict):
            continue
        if kind == "import_lines" and not clean:
            continue
        per_file: dict[str, frozenset[int]] = {}
        for rel, numbers in cast(dict[Any, Any], lines).items():
            if rel in wanted and isinstance(numbers, list):
                listed = cast(list[Any], numbers)[:_MAX_LINES]
                per_file[str(rel)] = frozenset(n for n in listed if type(n) is int)
        node = IMPORTED if kind == "import_lines" else str(rec.get("nodeid", ""))
        ran[node] = per_file
        if branches is not None:
            branches[node] = _branches(rec, wanted)
    return passed, ran


def _run_dir(work_dir: Path, target: Target) -> Path:
    """A new, empty folder for one run's coverage data."""
    if target.jail is not None:
        return Path(tempfile.mkdtemp(prefix="seed-pytest-"))
    run_dir = work_dir / f"pytest-{os.getpid()}-{next(_RUN_IDS)}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    return run_dir


def passed_ids(
    records: list[dict[str, Any]], collected: Sequence[str], diagnostics: Sequence[Diagnostic]
) -> tuple[str, ...]:
    """The collected tests whose outcome was "passed": a call that passed, not an xpass, and no
    failure in setup or teardown (skipped, xfailed, xpassed and missing tests are not)."""
    called = {
        str(rec.get("nodeid", ""))
        for rec in records
        if rec.get("kind") == "test"
        and rec.get("when") == "call"
        and rec.get("outcome") == "passed"
        and not rec.get("xfail")
    }
    failed = {d.node_id for d in diagnostics if d.node_id}
    return tuple(n for n in collected if n in called and n not in failed)


PYTHON_FLAGS: tuple[str, ...] = ("-s", "-B")
"""No user site-packages, no bytecode written (tool_env's variables say the same to the
interpreters the tests start themselves)."""

BOOT = (
    "import os, sys\n"
    "sys.path[:] = [p for p in sys.path if p not in ('', os.getcwd())]\n"
    "import importlib.util as u, json\n"
    "c = json.loads(sys.stdin.buffer.read())\n"
    "s = u.spec_from_file_location('facts', c['plugin'])\n"
    "m = u.module_from_spec(s)\n"
    "s.loader.exec_module(m)\n"
    "m.main(m, c)\n"
)
"""What the target's interpreter runs (`-c`): the folder it starts in off sys.path (safe
path, whatever the version), the configuration from stdin, the kernel's plugin loaded from
its file before anything else, and its `main`."""


def _pytest_args(
    tree: Path, seen: Path, target: Target, node_ids: Sequence[str], *, cover: bool
) -> list[str]:
    """pytest's arguments: configured from the tree's own top only (`seen`: where the run
    sees the tree)."""
    read = reader(tree)
    config = pytestconfig.config_file(read)
    keep, dropped = pytestconfig.kept(pytestconfig.addopts(read))
    # the project's addopts less what the kernel overrides (pytestconfig.differences)
    overrides = ["-o", f"addopts={shlex.join(keep)}"] if dropped else []
    # the real path: pytest applies `testpaths` only when the folder it starts in (the plugin
    # goes to the tree's real path) is its rootdir, compared as written; in the checkout's
    # place the tree is seen at the checkout's own (resolved) path
    root = tree.resolve() if seen == tree else seen
    return [
        *PYTEST_READ_ONLY,
        "--rootdir",
        str(root),
        "-c",
        str(root / config) if config else os.devnull,
        "--confcutdir",
        str(root),
        "-q",
        "--no-header",
        "-rN",
        # one module that cannot be imported must not hide every other test's result
        "--continue-on-collection-errors",
        *overrides,
        *(() if cover else target.quality.pytest_args),
        *node_ids,
    ]


def _pytest_config(
    tree: Path,
    seen: Path,
    target: Target,
    node_ids: Sequence[str],
    run_dir: Path | None,
    *,
    files: str,
) -> dict[str, Any]:
    """What the plugin is told on stdin (seed_pytest_plugin.main; run_pytest adds the pipe's
    descriptor): no variable carries it."""
    cover: dict[str, str] | str = ""
    if run_dir is not None:
        cover = {
            "plugin": str(PLUGIN_DIR / "seed_pytest_cover.py"),
            "shim": str(_coverage_shim(run_dir)),
            "data": str(run_dir / "coverage.db"),
        }
    return {
        "plugin": str(PLUGIN_DIR / "seed_pytest_plugin.py"),
        "root": str(seen),
        # in the checkout's place, nothing of the person's checkout is there to import
        "forbid": "" if seen != tree else str(target.root),
        "environment": _environment(target),
        "files": files,
        "cover": cover,
        "args": _pytest_args(tree, seen, target, node_ids, cover=run_dir is not None),
    }


def _environment(target: Target) -> list[str]:
    """The interpreter's installation as the person's side has it: where it lies inside the
    checkout (a `.venv`), the sandbox shows it over the export, so its plugins are the
    person's; a place the person's side lacks is the tree's, whose plugins never load."""
    python = Path(target.python)
    places = dict.fromkeys((python.parent.parent, python.resolve().parent.parent))
    return [os.path.realpath(p) for p in places if p.is_dir()]


def _pytest_env(target: Target) -> dict[str, str]:
    """The run's environment: the measurement's, with no marker of the kernel's plugin, the
    target's virtualenv active and the base commit's version for setuptools-scm."""
    env = {k: v for k, v in tool_env().items() if not k.startswith(("SEED_PYTEST", "SEED_COVER"))}
    # no plugin of pytest's own search (it reads every *.dist-info on sys.path, the tree's
    # too): the kernel's plugin loads those the interpreter's own site-packages name
    env = {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return {**env, **venv_env(target.python, env.get("PATH", "")), **scm_env(target.root)}


def venv_env(python: str, path: str) -> dict[str, str]:
    """The target's virtualenv active, as tox, nox or `uv run` have it: its `bin` first on
    PATH and VIRTUAL_ENV set, so tests that run the project's console scripts run its own
    ({} when the interpreter is no virtualenv's)."""
    venv = Path(python).parent.parent  # not resolved: a virtualenv's python links out of it
    if not (venv / "pyvenv.cfg").is_file():
        return {}
    bin_dir = str(venv / "bin")
    rest = [p for p in path.split(os.pathsep) if p and p != bin_dir]
    return {"VIRTUAL_ENV": str(venv), "PATH": os.pathsep.join([bin_dir, *rest])}


def _tag_version(tag: str) -> Version | None:
    """The version a tag names, as setuptools-scm reads it: `v1.2`, `1.2rc1`, `name-1.2`."""
    for text in (tag, tag.rsplit("-", 1)[-1]):
        try:
            return Version(text.lstrip("vV"))
        except InvalidVersion:
            continue
    return None


SCM_VERSION_VARIABLES: tuple[str, ...] = ("SETUPTOOLS_SCM_PRETEND_VERSION", "PDM_BUILD_SCM_VERSION")
"""Where setuptools-scm (and hatch-vcs, which uses it) and pdm-backend take a version when
there is no git history: an export has no `.git`."""


def scm_env(root: Path) -> dict[str, str]:
    """The version setuptools-scm would give the checkout's HEAD (the base commit), set for
    the tests that build or import the package; decided by the kernel from the person's own
    repository, never by the tree under test ({} outside a git repository)."""
    version = scm_version(root)
    return dict.fromkeys(SCM_VERSION_VARIABLES, version) if version else {}


def scm_version(root: Path) -> str:
    """setuptools-scm's default version of HEAD: the tag's version at a tag, else the next
    version's dev release by distance (guess-next-dev) with the commit (node-and-date)."""
    try:
        found = gitops.git(root, "describe", "--tags", "--long", "HEAD", check=False)
        described = found.text().strip() if found.ok else ""
        if not described:
            short = gitops.out(root, "rev-parse", "--short", "HEAD")
            return f"0.1.dev{gitops.out(root, 'rev-list', '--count', 'HEAD')}+g{short}"
    except (OSError, gitops.GitError):
        return ""
    tag, distance, node = described.rsplit("-", 2)
    version = _tag_version(tag)
    if version is None:
        return ""
    if distance == "0":
        return str(version)
    release = list(version.release)
    release[-1] += 1
    return f"{'.'.join(map(str, release))}.dev{distance}+{node}"


def _read_facts(data: bytes) -> list[dict[str, Any]]:
    """The plugin's facts, one JSON object a line (a torn line is skipped)."""
    records: list[dict[str, Any]] = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by a crash: the rest still counts
        if isinstance(record, dict):
            records.append(cast(dict[str, Any], record))
    return records


def _disagreement(
    exit_code: int | None, diagnostics: Sequence[Diagnostic], collected: Sequence[str]
) -> str:
    """How pytest's exit status contradicts the plugin's facts ('' when it does not): the
    status is pytest's own count, the facts are what reached the kernel; a difference means
    something between the tests and the kernel dropped or made up results."""
    failed = any(d.rule in ("failed", "error", "collection-error") for d in diagnostics)
    if exit_code == 1 and not failed:
        return "pytest exited 1 (tests failed) but its facts report no failure"
    if exit_code in (0, 5) and failed:
        return f"pytest exited {exit_code} (no failure) but its facts report failures"
    if exit_code == 5 and collected:
        return "pytest exited 5 (no tests) but its facts list collected tests"
    return ""


def _pytest_measurement(
    result: procs.Completed,
    diagnostics: list[Diagnostic],
    collected: list[str],
    finished: bool,
    timeout_s: float,
    tampering: Sequence[Tampering] = (),
) -> Measurement:
    """What a pytest run measured: ran only when the plugin saw it finish cleanly (what
    changed its results, the plugin's or the exit status', is its `tampering`)."""
    if result.timed_out:
        return Measurement(
            tool=Tool.PYTEST,
            ran=False,
            timed_out=True,
            exit_code=None,
            diagnostics=tuple(diagnostics),
            collected=tuple(collected),
            tampering=tuple(tampering),
            error=f"pytest did not finish in {timeout_s:.0f}s",
            duration_s=result.duration_s,
        )
    outside = any(d.rule == "outside-import" for d in diagnostics)
    contradiction = "" if outside else _disagreement(result.exit_code, diagnostics, collected)
    if contradiction:
        tampering = [*tampering, Tampering(what=contradiction)]
    if not finished or (result.exit_code not in EXIT_CLEAN and not outside):
        tail = result.tail.decode("utf-8", errors="replace").strip()[-MAX_DETAIL:]
        return Measurement(
            tool=Tool.PYTEST,
            ran=False,
            exit_code=result.exit_code,
            diagnostics=tuple(diagnostics),
            collected=tuple(collected),
            tampering=tuple(tampering),
            error=tail or "pytest did not run",
            duration_s=result.duration_s,
        )
    return Measurement(
        tool=Tool.PYTEST,
        ran=True,
        exit_code=result.exit_code,
        diagnostics=tuple(diagnostics),
        collected=tuple(collected),
        tampering=tuple(tampering),
        duration_s=result.duration_s,
    )


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
    broken = {d.file for d in fresh.diagnostics if d.rule == "collection-error"} - {""}
    if not fresh.ran and not fresh.timed_out and broken - set(selection.files):
        # node ids in a file that no longer imports: pytest finds no collectors there (exit
        # 4); run such files whole, to report their collection errors as a whole run does
        selection = replace(selection, files=tuple(sorted({*selection.files, *broken})))
        fresh = run_pytest(tree, target, work_dir, timeout_s, selection.argv())
    if not fresh.ran and not fresh.timed_out:  # an exit no whole run gives: ask the whole run
        return run_pytest(tree, target, work_dir, timeout_s, executed=executed)
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
    fill: Callable[[Path], object] | None = None,
) -> Measurements:
    """Every configured tool on one tree; with a base and a scope, ruff and pyright only
    re-check, and pytest re-runs the scope's tests. `executed` gets the test map of a full
    test run. ruff and pyright judge a view made before any test runs (`fill` writes the tree's files
    there from git objects; else they are copied from `tree`)."""
    wanted = [Tool(t) for t in gate.adoption.tools]
    with contextlib.ExitStack() as stack:
        # ruff and pyright read a view made before any test runs: a test may write the tree
        checking = {Tool.RUFF, Tool.RUFF_FORMAT, Tool.PYRIGHT, Tool.MYPY} & set(wanted)
        view = stack.enter_context(lint_view(tree, gate, fill)) if checking else tree
        return _measure_all(tree, view, target, gate, work_dir, tree_id, base, scope, executed)


def _measure_all(
    tree: Path,
    view: Path,
    target: Target,
    gate: Gate,
    work_dir: Path,
    tree_id: str,
    base: Measurements | None,
    scope: Scope | None,
    executed: Callable[[TestFiles], None] | None,
) -> Measurements:
    wanted = [Tool(t) for t in gate.adoption.tools]
    timeout = target.quality.tool_timeout_s
    ruff_files = scope.ruff if scope is not None and base is not None else None
    pyright_files = scope.pyright if scope is not None and base is not None else None
    deleted = scope.deleted if scope is not None else ()

    def previous(tool: Tool) -> Measurement | None:
        return base.get(tool) if base is not None else None

    results: dict[Tool, Measurement] = {}
    with ThreadPoolExecutor(max_workers=3 if Tool.MYPY in wanted else 2) as pool:
        futures: dict[Tool, Future[Measurement]] = {}
        if Tool.PYTEST in wanted:
            futures[Tool.PYTEST] = pool.submit(
                _tests, tree, target, work_dir, timeout, previous(Tool.PYTEST), scope, executed
            )
        if Tool.PYRIGHT in wanted:
            futures[Tool.PYRIGHT] = pool.submit(
                _partly,
                previous(Tool.PYRIGHT),
                pyright_files,
                deleted,
                lambda files: run_pyright(view, gate, target, timeout, files),
            )
        if Tool.MYPY in wanted:
            futures[Tool.MYPY] = pool.submit(run_mypy, view, gate, target, timeout)
        if Tool.RUFF in wanted:
            results[Tool.RUFF] = _partly(
                previous(Tool.RUFF),
                ruff_files,
                deleted,
                lambda files: run_ruff(tree, gate, timeout, files, view=view),
            )
        if Tool.RUFF_FORMAT in wanted:
            results[Tool.RUFF_FORMAT] = _partly(
                previous(Tool.RUFF_FORMAT),
                ruff_files,
                deleted,
                lambda files: run_ruff_format(tree, gate, timeout, files, view=view),
            )
        for tool, future in futures.items():
            results[tool] = future.result()
    return Measurements(tree=tree_id, items=_ordered(results, gate.adoption.advisory))


def _ordered(results: dict[Tool, Measurement], advisory: Sequence[str]) -> tuple[Measurement, ...]:
    """The results in the catalogue's order, the advisory tools' marked so."""
    return tuple(
        results[t].model_copy(update={"advisory": True}) if t.value in advisory else results[t]
        for t in Tool
        if t in results
    )

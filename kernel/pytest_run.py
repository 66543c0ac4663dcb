"""The target's tests, run with its own interpreter through the kernel's pytest plugin.

The plugin writes one JSON line per fact (collected ids, failures with their crash frame,
collection errors, imports from the user's checkout), so partial results survive a crash.
A collection error is its own finding and does not stop the other tests from running;
pytest's exit 5 (nothing collected) is a clean run, not a failure.
"""

from __future__ import annotations

import configparser
import itertools
import json
import os
import shutil
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from domain import Diagnostic, Measurement, Tool
from kernel import procs
from kernel.toolenv import MAX_DETAIL, Target, tool_env

PLUGIN_DIR = Path(__file__).resolve().parent / "pytest_plugin"
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
                    message=f"tests imported {rec.get('module')} from the user's checkout ({rec.get('file')}), not the tree under test",
                )
            )
        elif kind == "tampered":
            diagnostics.append(
                Diagnostic(
                    tool=Tool.PYTEST,
                    rule="tampered",
                    file=str(rec.get("what", ""))[:300],
                    message=f"code under test tampered with pytest: {rec.get('what')}"[:MAX_DETAIL],
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


TestFiles = dict[str, frozenset[str]]
"""Per test node id: the project files (repository-relative) whose code the test ran."""
_MAX_MAP_FILES = 2000
"""Files named per test in the map; a test that ran more is marked as running everything."""
ANY_FILE = "*"
"""The map's entry for a test that ran more files than it keeps: any change selects it."""


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


def config_file(tree: Path) -> str:
    """The file pytest takes its configuration from at the top of the tree, as pytest looks
    for it ("" when there is none); verification passes it with -c, so a file above the tree
    (pytest would walk up to it) never counts."""
    for name in ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini"):
        if (tree / name).is_file():
            return name
    try:
        tool = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8")).get("tool", {})
        if isinstance(tool, dict) and "pytest" in tool:
            return "pyproject.toml"
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        pass
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(tree / name, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue
        if parser.has_section(section):
            return name
    return ""


def run_pytest(
    tree: Path,
    target: Target,
    work_dir: Path,
    timeout_s: float,
    node_ids: Sequence[str] = (),
    *,
    cover: Callable[[Path], None] | None = None,
    executed: Callable[[TestFiles], None] | None = None,
) -> Measurement:
    """The target's tests with its own interpreter, through the kernel's plugin.

    With `cover`, the run also records per-test line coverage (seed_pytest_cover) and
    `cover` reads the data file before the run's folder is removed. With `executed`, the
    plugin records which project files each test ran, and `executed` gets them (the test map).
    """
    # a folder per run: the only place of the kernel's the run may write
    run_dir = work_dir / f"pytest-{os.getpid()}-{next(_RUN_IDS)}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    out = run_dir / "facts.jsonl"
    config = config_file(tree)
    argv = [
        target.python,
        "-m",
        "pytest",
        "-p",
        "seed_pytest_plugin",
        *(("-p", "seed_pytest_cover") if cover is not None else ()),
        *PYTEST_READ_ONLY,
        "--rootdir",
        str(tree),
        "-c",
        str(tree / config) if config else os.devnull,
        "--confcutdir",
        str(tree),
        "-q",
        "--no-header",
        "-rN",
        # one module that cannot be imported must not hide every other test's result
        "--continue-on-collection-errors",
        *(() if cover is not None else target.quality.pytest_args),
        *node_ids,
    ]
    # the kernel's plugin first: a module of the same name in the tree cannot replace it
    path = [str(PLUGIN_DIR), str(tree)]
    extra = {
        "SEED_PYTEST_OUT": str(out),
        "SEED_PYTEST_ROOT": str(tree),
        "SEED_PYTEST_FORBID": str(target.root),
    }
    # set either way: a run of the kernel's inside a traced test run must not inherit it
    extra["SEED_PYTEST_FILES"] = "1" if executed is not None and cover is None else "0"
    data = run_dir / "coverage.db"
    if cover is not None:
        path.insert(1, str(_coverage_shim(run_dir)))
        extra["SEED_COVER_DATA"] = str(data)
    env = tool_env({"PYTHONPATH": os.pathsep.join(path), **extra})
    if target.jail is not None:
        argv = target.jail(argv, (tree, run_dir))
    result = procs.run(
        argv, cwd=tree, timeout_s=timeout_s, env=env, merge_stderr=True, max_bytes=4 * 1024 * 1024
    )
    records: list[dict[str, Any]] = []
    if out.exists():
        with out.open("rb") as handle:
            facts = handle.read(_MAX_FACTS).decode("utf-8", errors="replace")
        for line in facts.splitlines():
            try:
                records.append(cast(dict[str, Any], json.loads(line)))
            except json.JSONDecodeError:
                continue  # a line torn by a crash: the rest still counts
    if cover is not None and data.is_file() and not result.timed_out:
        cover(data)
    shutil.rmtree(run_dir, ignore_errors=True)
    diagnostics, collected, finish = _pytest_diagnostics(records)
    if executed is not None and not result.timed_out and finish is not None:
        executed(_test_files(records))
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
    if finish is None or (result.exit_code not in EXIT_CLEAN and not outside):
        tail = result.tail.decode("utf-8", errors="replace").strip()[-MAX_DETAIL:]
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

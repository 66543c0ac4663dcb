"""A test map after every analysis, on every Python, and a fast path that gives the full
path's answer (issue 44 items 2 and 3): `gaps` leaves a map (before 3.12 one made of the
tree's imports, at no cost of a traced run), the next re-analysis runs only the test files
that import a changed file, and a selected test file that stops importing is reported as
a whole run reports it."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from domain import Measurement, Tool
from kernel.host.context import open_context
from kernel.isolation import gitops
from kernel.isolation.exports import Export
from kernel.measuring import measure, testmap
from kernel.measuring.baseline import measure_cached
from kernel.measuring.gate import freeze_gate
from tests.support import git, make_repo, seed

TOOLS = '\n[quality]\ntools = ["pytest"]\n'
PROJECT = {
    "app/__init__.py": "",
    "app/a.py": "def inc(x: int) -> int:\n    return x + 1\n",
    "app/b.py": "def dec(x: int) -> int:\n    return x - 1\n",
    "app/c.py": "from app.b import dec\n\n\ndef twice(x: int) -> int:\n    return dec(dec(x))\n",
    "tests/test_a.py": "from app.a import inc\n\n\ndef test_inc() -> None:\n    assert inc(1) == 2\n",
    "tests/test_b.py": (
        "from app.b import dec\n\n\ndef test_dec() -> None:\n    assert dec(2) == 1\n\n\n"
        "def test_dec_zero() -> None:\n    assert dec(1) == 0\n"
    ),
    # imports app.b only through app.c
    "tests/test_c.py": "from app.c import twice\n\n\ndef test_twice() -> None:\n    assert twice(3) == 1\n",
    **{
        f"tests/test_more_{i}.py": f"def test_plain_{i}() -> None:\n    assert {i} == {i}\n"
        for i in range(6)
    },
}


class _Spy:
    """Wraps the real run_pytest and keeps the arguments each run was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self._real = measure.run_pytest

    def __call__(
        self,
        tree: Path,
        target: Any,
        work: Path,
        timeout: float,
        nodes: Sequence[str] = (),
        **kw: Any,
    ) -> Measurement:
        self.calls.append(tuple(nodes))
        return self._real(tree, target, work, timeout, nodes, **kw)


def _commit(root: Path, name: str, text: str) -> str:
    (root / name).write_text(text)
    git(root, "commit", "-qam", f"change {name}")
    return gitops.tree_of(root, "HEAD")


def _measure(
    root: Path, tmp: Path, tree: str, related: tuple[str, ...] = (), **kw: Any
) -> Measurement:
    ctx = open_context(root, quiet=True)
    gate = freeze_gate(root, tmp / "gate", ctx.config.quality)
    place = Export(root, tmp / "exports", tree, "t")
    try:
        found, _ = measure_cached(ctx, place, tree, gate, tmp / "w", related, mapping=True, **kw)
    finally:
        place.close()
    pytest_run = found.get(Tool.PYTEST)
    assert pytest_run is not None
    return pytest_run


def _maps(root: Path) -> list[testmap.TestMap]:
    state = open_context(root, quiet=True).paths.state
    found = [testmap.load(state, p.stem) for p in sorted((state / "testmap").glob("*.json"))]
    return [m for m in found if m is not None]


@pytest.mark.usefixtures("bwrap")
def test_gaps_leaves_a_map_and_the_next_analysis_runs_only_the_importing_test_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "repo", PROJECT, TOOLS)
    done = seed(root, "gaps")
    assert done.returncode in (0, 1), done.stderr
    maps = _maps(root)
    assert len(maps) == 1 and maps[0].tree == gitops.tree_of(root, "HEAD")
    # before 3.12 the map is the tree's imports (no traced run); from 3.12 the run's own
    assert maps[0].imports == (sys.version_info < (3, 12))
    ran_b = {t for t, files in maps[0].tests.items() if "app/b.py" in files}
    assert {t.split("::")[0] for t in ran_b} == {"tests/test_b.py", "tests/test_c.py"}

    first = gitops.tree_of(root, "HEAD")
    _measure(root, tmp_path, first, map_run=False)  # as `gaps` measured it: the cache's entry
    spy = _Spy()
    monkeypatch.setattr(measure, "run_pytest", spy)
    second = _commit(root, "app/b.py", "def dec(x: int) -> int:\n    return x - 1  # same\n")
    after = _measure(root, tmp_path, second, (first,), map_run=False)
    assert len(spy.calls) == 1
    assert {a.split("::")[0] for a in spy.calls[0]} == {"tests/test_b.py", "tests/test_c.py"}
    assert after.incremental and len(after.collected) == 10 and len(after.passed) == 10


@pytest.mark.usefixtures("bwrap")
def test_a_change_to_a_file_no_test_imports_runs_the_whole_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a test may load a module by a name in a string: only a traced map could tell
    root = make_repo(tmp_path / "repo", {**PROJECT, "app/loose.py": "X = 1\n"}, TOOLS)
    first = gitops.tree_of(root, "HEAD")
    _measure(root, tmp_path, first, map_run=False)
    spy = _Spy()
    monkeypatch.setattr(measure, "run_pytest", spy)
    second = _commit(root, "app/loose.py", "X = 2\n")
    _measure(root, tmp_path, second, (first,), map_run=False)
    assert spy.calls == [()]


def _whole_run(root: Path, tmp: Path, tree: str) -> Measurement:
    ctx = open_context(root, quiet=True)
    place = Export(root, tmp / "whole", tree, "t")
    try:
        return measure.run_pytest(place(), ctx.target, tmp / "w2", 300)
    finally:
        place.close()


def _gaps(m: Measurement) -> set[tuple[str, str, str]]:
    return {(d.rule, d.file, d.node_id or "") for d in m.diagnostics}


@pytest.mark.usefixtures("bwrap")
@pytest.mark.parametrize("traced", [True, False], ids=["traced-map", "import-map"])
def test_a_selected_test_file_that_stops_importing_gives_the_full_paths_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, traced: bool
) -> None:
    root = make_repo(tmp_path / "repo", PROJECT, TOOLS)
    first = gitops.tree_of(root, "HEAD")
    _measure(root, tmp_path, first, map_run=traced)
    # boltons' case: a line appended to a file with no final newline
    broken = _commit(root, "app/b.py", "def dec(x: int) -> int:\n    return x - 1\nnot python\n")
    spy = _Spy()
    monkeypatch.setattr(measure, "run_pytest", spy)
    fast = _measure(root, tmp_path, broken, (first,), map_run=traced)
    monkeypatch.undo()
    full = _whole_run(root, tmp_path, broken)
    assert fast.ran and full.ran
    assert _gaps(fast) == _gaps(full)
    assert {d.file for d in fast.diagnostics if d.rule == "collection-error"} == {
        "tests/test_b.py",
        "tests/test_c.py",
    }
    assert sorted(fast.passed) == sorted(full.passed)
    assert () not in spy.calls  # answered without the whole suite

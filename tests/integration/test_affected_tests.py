"""Affected tests first: the test map, re-analysis of a commit by it, and early refusal.

The map comes from the kernel's own pytest plugin in a real test run; verification runs
through `seed.py once` with the real sandbox. A selection decides only how fast a breaking
candidate is refused: a test that fails apart from the rest of the suite is never refused on
the selection alone, and what lands always passed the whole suite.
"""

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
from kernel.measuring.baseline import config_key, measure_cached
from kernel.measuring.gate import freeze_gate
from kernel.measuring.measure import failed_ids
from tests.support import agent_config, git, make_repo, records, seed

TOOLS = '\n[quality]\ntools = ["pytest"]\n'
PROJECT = {
    "app/__init__.py": "",
    "app/a.py": "def inc(x: int) -> int:\n    return x + 2\n",  # the bug: test_inc fails
    "app/b.py": "def dec(x: int) -> int:\n    return x - 1\n",
    "app/state.py": "FLAG = [False]\n",
    "tests/test_a.py": "from app.a import inc\n\n\ndef test_inc() -> None:\n    assert inc(1) == 2\n",
    "tests/test_b.py": (
        "from app.b import dec\n\n\ndef test_dec() -> None:\n    assert dec(2) == 1\n\n\n"
        "def test_dec_zero() -> None:\n    assert dec(1) == 0\n"
    ),
    # test_needs_flag passes only after test_sets_flag ran: in the whole suite, not apart
    "tests/test_order.py": (
        "from app import state\n\n\ndef test_sets_flag() -> None:\n    state.FLAG[0] = True\n"
    ),
    "tests/test_z.py": (
        "from app import state\nfrom app.a import inc\n\n\n"
        "def test_needs_flag() -> None:\n    inc(0)\n    assert state.FLAG[0]\n"
    ),
    **{
        f"tests/test_more_{i}.py": f"def test_plain_{i}() -> None:\n    assert {i} == {i}\n"
        for i in range(6)
    },
}
FIX = {"replace": "app/a.py", "old": "x + 2", "new": "x + 1"}
BREAK_B = {"replace": "app/b.py", "old": "x - 1", "new": "x - 2"}


def _commit(root: Path, name: str, text: str) -> str:
    (root / name).write_text(text)
    git(root, "commit", "-qam", f"change {name}")
    return gitops.tree_of(root, "HEAD")


class _Spy:
    """Wraps the real run_pytest and keeps the node ids each run was given."""

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


@pytest.mark.usefixtures("bwrap")
def test_the_map_records_what_each_test_ran_and_re_analysis_runs_only_those(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "repo", PROJECT, TOOLS)
    ctx = open_context(root, quiet=True)
    gate = freeze_gate(root, tmp_path / "gate", ctx.config.quality)
    first = gitops.tree_of(root, "HEAD")
    place = Export(root, tmp_path / "exports", first, "t")
    full, _ = measure_cached(ctx, place, first, gate, tmp_path / "w", mapping=True)
    place.close()

    found = testmap.load(ctx.paths.state, config_key(ctx, gate))
    assert found is not None and found.tree == first
    assert found.tests["tests/test_a.py::test_inc"] >= {"app/a.py", "tests/test_a.py"}
    assert "app/a.py" in found.tests["tests/test_z.py::test_needs_flag"]
    # importing a module is not running it: test_b's tests never called app/a.py
    assert "app/a.py" not in found.tests["tests/test_b.py::test_dec"]
    assert "app/b.py" in found.tests["tests/test_b.py::test_dec"]

    spy = _Spy()
    monkeypatch.setattr(measure, "run_pytest", spy)
    broken = _commit(root, "app/b.py", "def dec(x: int) -> int:\n    return x - 2\n")
    place = Export(root, tmp_path / "exports", broken, "t")
    after, _ = measure_cached(
        ctx, place, broken, gate, tmp_path / "w", related=(first,), mapping=True
    )
    place.close()

    assert spy.calls == [("tests/test_b.py::test_dec", "tests/test_b.py::test_dec_zero")]
    pytest_after, pytest_full = after.get(Tool.PYTEST), full.get(Tool.PYTEST)
    # the selection failed tests the earlier run passed: the whole suite decides (issue 24:
    # like for like, a selected test may lean on one the selection left out)
    assert pytest_after is not None and pytest_full is not None and not pytest_after.incremental
    assert failed_ids(pytest_after) == {
        "tests/test_a.py::test_inc",  # failing in the earlier run too
        "tests/test_b.py::test_dec",
        "tests/test_b.py::test_dec_zero",
    }
    assert sorted(pytest_after.collected) == sorted(pytest_full.collected)

    # a conftest.py (or anything but Python code) changes: the whole suite runs again
    spy.calls.clear()
    (root / "tests" / "conftest.py").write_text("")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "conftest")
    third = gitops.tree_of(root, "HEAD")
    place = Export(root, tmp_path / "exports", third, "t")
    measure_cached(ctx, place, third, gate, tmp_path / "w", related=(broken,), mapping=True)
    place.close()
    assert spy.calls == [()]


@pytest.mark.usefixtures("bwrap")
def test_a_candidate_that_breaks_another_test_is_refused_on_the_affected_tests(
    tmp_path: Path,
) -> None:
    config = agent_config(tmp_path, [FIX, BREAK_B], extra=TOOLS)
    repo = make_repo(tmp_path / "repo", PROJECT, config)
    head = git(repo, "rev-parse", "HEAD").strip()

    result = seed(repo, "once")

    assert result.returncode == 1, result.stderr[-3000:]
    [record] = records(repo)
    assert record["outcome"] == "ROLLBACK" and record["failure_category"] == "TEST_REGRESSION"
    evidence = "\n".join(record["evidence"])
    assert "tests/test_b.py::test_dec" in record["reason"]
    assert "the whole suite did not run" in evidence
    # test_needs_flag failed in the selection too, and on the baseline with it: not blamed
    assert "test_needs_flag" not in evidence
    assert git(repo, "rev-parse", "HEAD").strip() == head


@pytest.mark.usefixtures("bwrap")
def test_a_test_that_fails_only_apart_from_the_suite_does_not_refuse_an_honest_fix(
    tmp_path: Path,
) -> None:
    config = agent_config(tmp_path, [FIX], extra=TOOLS)
    repo = make_repo(tmp_path / "repo", PROJECT, config)

    result = seed(repo, "once")

    assert result.returncode == 0, result.stderr[-3000:]
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS", record["reason"]
    assert "x + 1" in git(repo, "show", "HEAD:app/a.py")


def test_the_map_never_displaces_the_targets_own_tracer(tmp_path: Path) -> None:
    # pytest-cov and debuggers trace with sys.settrace too: under 3.12 the map's call trace
    # would replace theirs; it steps aside and marks the test as running anything
    files = {
        "conftest.py": (
            "import sys\n\n\ndef _tracer(frame, event, arg):\n    return None\n\n\n"
            "def pytest_sessionstart(session):\n    sys.settrace(_tracer)\n"
        ),
        "tests/test_t.py": (
            "import sys\n\n\ndef test_own_tracer() -> None:\n"
            "    assert getattr(sys.gettrace(), '__name__', '') == '_tracer'\n"
        ),
    }
    root = make_repo(tmp_path / "repo", files)
    ctx = open_context(root, quiet=True)
    found: list[dict[str, frozenset[str]]] = []
    m = measure.run_pytest(root, ctx.target, tmp_path / "w", 120, executed=found.append)
    assert m.ran and not failed_ids(m), m.diagnostics
    if sys.version_info < (3, 12):
        assert found == [{"tests/test_t.py::test_own_tracer": frozenset({"*"})}]
    else:
        assert "tests/test_t.py" in found[0]["tests/test_t.py::test_own_tracer"]

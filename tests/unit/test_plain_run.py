"""The plain run's junit XML read by node id, and compared with seed's run (plainrun.py)."""

from __future__ import annotations

from pathlib import Path

from domain import Diagnostic, Measurement, Tool
from kernel.measuring.plainrun import PlainResult, compare, node_id, read_junit

JUNIT = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="2" tests="6">
<testcase classname="tests.test_a" name="test_ok" time="0.001"/>
<testcase classname="tests.test_a.TestK" name="test_m[1.5-x]" time="0.001">
  <failure message="assert 1 == 2">assert 1 == 2</failure></testcase>
<testcase classname="tests.test_a" name="test_skip" time="0"><skipped type="pytest.skip" message="no"/></testcase>
<testcase classname="tests.test_a" name="test_xfail" time="0"><skipped type="pytest.xfail" message=""/></testcase>
<testcase classname="tests.test_a" name="test_torn" time="0"><error message="teardown">x</error></testcase>
<testcase classname="" name="tests.test_b" time="0"><error message="collection failure">E</error></testcase>
</testsuite></testsuites>"""


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("", encoding="utf-8")
    (tmp_path / "tests" / "test_b.py").write_text("", encoding="utf-8")
    return tmp_path


def _seed_run(collected: list[str], passed: list[str], failed: list[str]) -> Measurement:
    diagnostics = tuple(
        Diagnostic(tool=Tool.PYTEST, file=n.split("::")[0], rule="failed", node_id=n)
        for n in failed
    )
    return Measurement(
        tool=Tool.PYTEST,
        ran=True,
        collected=tuple(collected),
        passed=tuple(passed),
        diagnostics=diagnostics,
    )


def test_junit_cases_are_read_by_node_id_and_outcome(tmp_path: Path) -> None:
    found = read_junit(JUNIT, _tree(tmp_path))
    assert found.tests == (
        "tests/test_a.py::test_ok",
        "tests/test_a.py::TestK::test_m[1.5-x]",
        "tests/test_a.py::test_skip",
        "tests/test_a.py::test_xfail",
        "tests/test_a.py::test_torn",
    )
    assert found.failed == {"tests/test_a.py::TestK::test_m[1.5-x]", "tests/test_a.py::test_torn"}
    assert found.skipped == {"tests/test_a.py::test_skip"}  # an xfail is no skip
    assert found.broken == {"tests/test_b.py"}


def test_a_classname_with_no_file_of_the_tree_is_kept_as_it_is(tmp_path: Path) -> None:
    assert node_id("pkg.mod", "test_x", tmp_path) == "pkg.mod::test_x"
    assert node_id("", "README", tmp_path) == "README"


def test_unreadable_results_are_said_in_one_line(tmp_path: Path) -> None:
    found = read_junit(b"<testsuites><testcase", tmp_path)
    assert found.why_not.startswith("its results could not be read")
    seed_run = _seed_run(["t.py::a"], ["t.py::a"], [])
    (line,) = compare(found, seed_run, "abc1234")
    assert line.startswith(
        "the project's own pytest run (`python -m pytest`, at abc1234) gave nothing to compare"
    )


def test_runs_that_agree_say_nothing() -> None:
    plain = PlainResult(("t.py::a", "t.py::b"), frozenset({"t.py::b"}))
    assert compare(plain, _seed_run(["t.py::a", "t.py::b"], ["t.py::a"], ["t.py::b"]), "c") == ()


def test_failures_of_one_run_only_are_counted_and_named() -> None:
    ids = [f"t.py::t{i}" for i in range(8)]
    plain = PlainResult(tuple(ids), frozenset(ids[:7]))
    (line,) = compare(plain, _seed_run(ids, ids[1:], ids[:1]), "c")
    assert line == (
        "the project's own pytest run (`python -m pytest`, at c): 8 tests, 7 fail; "
        "seed's run: 8 tests, 1 fails (6 fail only in the project's own run: t.py::t1, "
        "t.py::t2, t.py::t3, t.py::t4, t.py::t5 and 1 more)"
    )


def test_skips_of_one_run_only_are_named_both_ways() -> None:
    plain = PlainResult(("t.py::a", "t.py::b"), skipped=frozenset({"t.py::b"}))
    lines = compare(plain, _seed_run(["t.py::a", "t.py::b"], ["t.py::b"], []), "c")
    assert lines == (
        "1 test skips in seed's runs but not in the project's own: t.py::a",
        "1 test skips in the project's own run but not in seed's: t.py::b",
    )


def test_modules_only_the_project_cannot_collect_are_named() -> None:
    plain = PlainResult(broken=frozenset({"tests/test_b.py", "tests/test_c.py"}))
    seed_run = _seed_run(["tests/test_a.py::t"], ["tests/test_a.py::t"], [])
    broken = Diagnostic(tool=Tool.PYTEST, file="tests/test_c.py", rule="collection-error")
    seed_run = seed_run.model_copy(update={"diagnostics": (broken,)})
    # pytest stopped at them: the tests it did not run are no difference of outcomes
    assert compare(plain, seed_run, "c") == (
        "the project's own pytest run (`python -m pytest`, at c): collection errors in "
        "tests/test_b.py, which seed's run collects",
    )


def test_a_node_id_reaches_the_terminal_harmless_and_bounded(tmp_path: Path) -> None:
    name = "test_x[\u202egnp.exe" + "y" * 500 + "]"  # a right-to-left override
    xml = f'<testsuites><testcase classname="t" name="{name}"/></testsuites>'
    (found,) = read_junit(xml.encode(), tmp_path).tests
    assert "\u202e" not in found and "<U+202E>" in found
    assert len(found) <= 200

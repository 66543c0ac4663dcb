"""The base's tests judge (issue 23, item 3): an edit to a test never changes the verdict.

Each test runs a real daemon (`seed.py once`) with a scripted agent in the real sandbox on a
project whose `add` is broken (the gap: tests/test_calc.py::test_add fails), and asserts what a
person would check: the record's outcome and category, and that the bug did not land: the
base's own tests are run on the person's branch afterwards, where only a "passed" counts
(skipped, xfailed and xpassed do not).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.helpers import FAST, FILES, Project, assert_checkout_kept, make_project
from tests.support import BROKEN_ADD, git

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bwrap")]

BROKEN = {**FILES, "calc.py": BROKEN_ADD["calc.py"]}
"""The project with the bug: add returns a - b."""
FIX = {"replace": "calc.py", "old": "return a - b", "new": "return a + b"}


def _once(project: Project, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """One iteration with this agent, and its record (the only one)."""
    result = project.seed(project.config(steps, extra=FAST), "once")
    records = project.records()
    assert len(records) == 1, (result.returncode, result.stderr[-3000:])
    return records[0]


def _passed_on(project: Project, commit: str, base: str, tmp: Path) -> tuple[bool, list[str]]:
    """The base's test files run on a commit's code: whether every test passed, and the
    summary lines of those that did not (skipped, xfailed and xpassed included)."""
    where = tmp / f"check-{commit[:12]}"
    where.mkdir()
    archive = subprocess.run(
        ["git", "archive", commit], cwd=project.root, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive.stdout, check=True)
    for path in git(project.root, "ls-tree", "-r", "--name-only", base).split():
        if path.startswith("tests/") or path == "calc_cases.py":
            (where / path).write_bytes(
                subprocess.run(
                    ["git", "show", f"{base}:{path}"], cwd=project.root, capture_output=True
                ).stdout
            )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-q", "tests"],
        cwd=where,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    bad = [
        line
        for line in run.stdout.splitlines()
        if line.split(" ")[0] in ("FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
    ]
    return run.returncode == 0 and not bad and "PASSED" in run.stdout, bad


def _bug_did_not_land(project: Project, base: str, tmp: Path) -> None:
    """The person's branch did not move, or every base test passes on it."""
    head = project.head()
    if head == base:
        return
    passed, bad = _passed_on(project, head, base, tmp)
    assert passed, f"landed with base tests not passing: {bad}"


def _refused(
    tmp: Path,
    files: dict[str, str],
    steps: list[dict[str, Any]],
    category: str = "GAP_NOT_CLOSED",
) -> dict[str, Any]:
    """The attack ends ROLLBACK, with the bug not landed: GAP_NOT_CLOSED where the gap's test
    still does not pass and nothing else broke, TEST_REGRESSION where a passing test broke."""
    project = make_project(tmp, files)
    base = project.head()
    before = project.snapshot()
    record = _once(project, steps)
    _bug_did_not_land(project, base, tmp)
    assert (record["outcome"], record["failure_category"]) == ("ROLLBACK", category), record[
        "reason"
    ]
    assert_checkout_kept(project, before)
    return record


def test_code_that_makes_the_gaps_test_skip_is_refused(tmp_path: Path) -> None:
    later = (
        "import unittest\n\n\nclass _Later(unittest.SkipTest):\n    pass\n\n\n"
        "def add(a, b):\n    raise _Later('not yet')\n\n\n"
        "def mul(a, b):\n    return a * b\n"
    )
    record = _refused(tmp_path, BROKEN, [{"write": "calc.py", "text": later}])
    assert any("test_add" in e for e in record["evidence"])


def test_an_aliased_xfail_mark_is_refused(tmp_path: Path) -> None:
    mark = "from pytest import mark as _mark\n\nfrom calc import add, mul\n\npytestmark = [_mark.xfail(reason='later')]\n"
    test = BROKEN["tests/test_calc.py"].replace("from calc import add, mul\n", mark)
    _refused(tmp_path, BROKEN, [{"write": "tests/test_calc.py", "text": test}])


def test_a_frozen_test_wrapped_after_its_def_is_refused(tmp_path: Path) -> None:
    wrap = (
        "\n\ndef _tolerant(test):\n    def run():\n        try:\n            test()\n"
        "        except AssertionError:\n            pass\n\n    return run\n\n\n"
        "test_add = _tolerant(test_add)\n"
    )
    _refused(tmp_path, BROKEN, [{"append": "tests/test_calc.py", "text": wrap}])


def test_a_plugin_loaded_from_the_test_module_is_refused(tmp_path: Path) -> None:
    plugin = (
        "import pytest\nfrom _pytest.reports import TestReport\n\n\n"
        "@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    report = TestReport.from_item_and_call(item, call)\n"
        "    if report.failed:\n"
        "        report.outcome = 'passed'\n        report.longrepr = None\n"
        "    return report\n"
    )
    test = BROKEN["tests/test_calc.py"].replace(
        "mul\n", "mul\n\npytest_plugins = ('test_calc_plugin',)\n", 1
    )
    steps = [
        {"write": "tests/test_calc_plugin.py", "text": plugin},
        {"write": "tests/test_calc.py", "text": test},
    ]
    _refused(tmp_path, BROKEN, steps)


CASES = {
    **BROKEN,
    "calc_cases.py": "CASES = [\n    (2, 3, 5),\n    (1, 1, 2),\n]\n",
    "tests/test_calc.py": (
        "from calc import add, mul\nfrom calc_cases import CASES\n\n\n"
        "def test_add():\n    for a, b, want in CASES:\n        assert add(a, b) == want\n\n\n"
        "def test_mul():\n    assert mul(2, 3) == 6\n"
    ),
}
"""The frozen test reads its cases from a data module outside the tests folder."""


def test_the_frozen_tests_data_row_changed_is_refused(tmp_path: Path) -> None:
    steps = [
        {"replace": "calc_cases.py", "old": "(2, 3, 5)", "new": "(2, 3, -1)"},
        {"replace": "calc_cases.py", "old": "(1, 1, 2)", "new": "(1, 1, 0)"},
    ]
    _refused(tmp_path, CASES, steps)


ORDER = {
    **BROKEN,
    "calc.py": BROKEN["calc.py"] + "\n\ndef square(a):\n    return a * a\n",
    "tests/test_order.py": (
        "from calc import square\n\n_STATE = {}\n\n\n"
        "def test_a_prepares():\n    _STATE['ready'] = True\n\n\n"
        "def test_b_squares():\n    assert _STATE.get('ready')\n    assert square(3) == 9\n"
    ),
}
"""test_b_squares passes in the suite but fails alone: it leans on test_a_prepares."""


def test_a_regression_in_an_order_dependent_test_is_refused(tmp_path: Path) -> None:
    steps = [FIX, {"replace": "calc.py", "old": "return a * a", "new": "return a + a"}]
    record = _refused(tmp_path, ORDER, steps, "TEST_REGRESSION")
    assert any("test_b_squares" in e for e in record["evidence"])


CHANGES_MUL = [
    FIX,
    {"replace": "calc.py", "old": "return a * b", "new": "return a * b + 1"},
    {"replace": "tests/test_calc.py", "old": "mul(2, 3) == 6", "new": "mul(2, 3) == 7"},
]
"""An honest fix plus a deliberate behaviour change that a base test pins (KEPT)."""


def test_a_changed_expectation_is_kept_for_a_person_and_approve_lands_it(tmp_path: Path) -> None:
    project = make_project(tmp_path, BROKEN)
    base = project.head()
    before = project.snapshot()
    record = _once(project, CHANGES_MUL)
    assert (record["outcome"], record["failure_category"]) == ("KEPT", None), record["reason"]
    assert record["changed_tests"] == ["tests/test_calc.py::test_mul"]
    branch = record["kept_branch"]
    kept = git(project.root, "rev-parse", branch).strip()
    assert git(project.root, "rev-parse", f"{kept}^").strip() == base
    _bug_did_not_land(project, base, tmp_path)
    assert_checkout_kept(project, before)
    report = (project.root / "history" / record["iteration_id"] / "report.md").read_text()
    assert "tests/test_calc.py::test_mul" in report and "approve" in report

    approved = project.seed(project.configs[-1], "approve", record["iteration_id"])
    assert approved.returncode == 0, approved.stderr[-3000:]
    assert project.head() == kept
    assert git(project.root, "rev-parse", "HEAD^{tree}") == git(
        project.root, "rev-parse", f"{kept}^{{tree}}"
    )
    assert (project.root / "tests" / "test_calc.py").read_text().count("== 7") == 1


def _kept_then_person_commits(tmp: Path, path: str, text: str) -> tuple[Project, str, str]:
    """A KEPT iteration, then a commit of the person's on the branch: (project, id, commit)."""
    project = make_project(tmp, BROKEN)
    record = _once(project, CHANGES_MUL)
    assert record["outcome"] == "KEPT", record["reason"]
    (project.root / path).write_text(text)
    git(project.root, "add", path)
    git(project.root, "commit", "-q", "-m", "the person's commit meanwhile")
    return project, record["iteration_id"], project.head()


def test_approve_after_the_branch_moved_rebases_and_verifies_again(tmp_path: Path) -> None:
    project, iteration, person = _kept_then_person_commits(tmp_path, "NOTES.md", "notes\n")
    dirty = git(project.root, "status", "--porcelain", "--untracked-files=no")
    approved = project.seed(project.configs[-1], "approve", iteration)
    assert approved.returncode == 0, approved.stderr[-3000:]
    assert git(project.root, "rev-parse", "HEAD^").strip() == person
    assert (project.root / "NOTES.md").read_text() == "notes\n"
    assert "return a + b" in (project.root / "calc.py").read_text()
    assert "== 7" in (project.root / "tests" / "test_calc.py").read_text()
    # the person's own uncommitted edits are still there, and nothing else differs
    assert git(project.root, "status", "--porcelain", "--untracked-files=no") == dirty


def test_approve_refuses_kept_work_that_no_longer_fits_the_branch(tmp_path: Path) -> None:
    project, iteration, person = _kept_then_person_commits(
        tmp_path, "calc.py", BROKEN["calc.py"].replace("return a * b", "return b * a")
    )
    approved = project.seed(project.configs[-1], "approve", iteration)
    assert approved.returncode != 0
    assert "rebas" in approved.stderr, approved.stderr[-2000:]
    assert project.head() == person
    assert "return b * a" in (project.root / "calc.py").read_text()

"""What no test vouches for, judged piece by piece: the lines a traced run reports (only tests
that passed vouch), the changed places no passing test ran, and public names removed."""

from __future__ import annotations

from pathlib import Path

from kernel.judging.uncovered import Changed, not_run, removed_names
from kernel.measuring.measure import IMPORTED, run_lines
from tests.planted import target_for
from tests.support import make_repo

CALC = (
    "import functools\n"  # 1
    "\n"  # 2
    "\n"  # 3
    "@functools.cache\n"  # 4
    "def add(a, b):\n"  # 5
    "    return a + b\n"  # 6
    "\n"  # 7
    "\n"  # 8
    "def twice(a):\n"  # 9
    "    # a comment\n"  # 10
    "    return add(a, a)\n"  # 11
)


def test_only_tests_that_passed_report_lines_down_the_pipe(tmp_path: Path) -> None:
    files = {
        "calc.py": CALC,
        "tests/test_calc.py": (
            "import pytest\n\nfrom calc import add, twice\n\n\n"
            "def test_add():\n    assert add(2, 3) == 5\n\n\n"
            "def test_twice_fails():\n    assert twice(1) == 3\n\n\n"
            "def test_twice_skips():\n    twice(2)\n    pytest.skip('later')\n"
        ),
    }
    root = make_repo(tmp_path / "repo", files)
    target = target_for(root, strict=(), tools=["pytest"])

    passed, ran = run_lines(root, target, 120, [], ["calc.py"])

    assert passed == {"tests/test_calc.py::test_add"}
    assert ran["tests/test_calc.py::test_add"]["calc.py"] == {0, 6}  # 0: code of it ran
    assert {6, 11} <= ran["tests/test_calc.py::test_twice_fails"]["calc.py"]
    assert 11 in ran["tests/test_calc.py::test_twice_skips"]["calc.py"]
    # what ran on import while the tests were collected (the import, the decorator, the defs),
    # which no test's own lines show
    assert {1, 4, 5, 9} <= ran[IMPORTED]["calc.py"]
    assert 1 not in ran["tests/test_calc.py::test_add"]["calc.py"]

    # only code spanning a line that matters is traced; a test that ran other code of the
    # file still says so (line 0), so a changed module-level line counts as run on import
    passed, ran = run_lines(root, target, 120, [], ["calc.py"], near={"calc.py": [11]})
    assert ran["tests/test_calc.py::test_add"]["calc.py"] == {0}
    assert 11 in ran["tests/test_calc.py::test_twice_fails"]["calc.py"]


def test_changed_places_are_judged_by_what_passing_tests_ran() -> None:
    sources = {"calc.py": CALC.encode()}
    every = Changed("calc.py", frozenset(range(1, 12)), frozenset())

    # add's body ran: its decorator and def line count as run; the import ran on import
    assert not_run([every], sources, {"calc.py": frozenset({6})}) == ["calc.py:9", "calc.py:11"]
    # nothing of the file ran: every line that runs is named, comments and blanks are not
    assert not_run([every], sources, {}) == ["calc.py:1", "calc.py:4-6", "calc.py:9", "calc.py:11"]
    # a module-level line that ran on import counts, though no test ran code of the file; a
    # def line does not: its function never ran
    loaded = {"calc.py": frozenset({1, 4, 5, 9})}
    assert not_run([every], sources, {}, loaded) == ["calc.py:4-6", "calc.py:9", "calc.py:11"]
    # a deletion is judged by the block around it
    cut = Changed("calc.py", frozenset(), frozenset({10}))
    assert not_run([cut], sources, {"calc.py": frozenset({6})}) == [
        "calc.py: lines removed after line 10"
    ]
    assert not_run([cut], sources, {"calc.py": frozenset({11})}) == []
    top = Changed("calc.py", frozenset(), frozenset({0}))
    assert not_run([top], sources, {"calc.py": frozenset({6})}) == []
    assert not_run([top], sources, {}) == ["calc.py: lines removed after line 0"]


def _files(**sources: str) -> list[tuple[str, bytes]]:
    return [(path.replace("__", "/") + ".py", text.encode()) for path, text in sources.items()]


def test_a_public_name_left_nowhere_in_the_tree_is_a_removal() -> None:
    before = {"calc.py": CALC.encode()}

    gone = removed_names(before, iter(_files(calc="print(None)\n")), "F821 undefined name")

    assert gone == ["calc.py: add", "calc.py: twice"]


def test_a_move_a_duplicate_and_private_names_are_no_removal() -> None:
    before = {
        "calc.py": (
            b"__all__ = ['_exported']\n\n\ndef add(a, b):\n    return a + b\n\n\n"
            b"def add(a, b):\n    return a + b\n\n\ndef _helper():\n    pass\n\n\n"
            b"def _exported():\n    pass\n\n\nclass Box:\n    pass\n"
        )
    }
    moved = _files(
        calc="from ops import add, Box\n\n\ndef add(a, b):\n    return a + b\n",
        pkg__ops="class Box:\n    pass\n",
    )

    assert removed_names(before, iter(moved), "") == ["calc.py: _exported"]
    assert removed_names(before, iter(moved), "remove `_exported` from calc") == []
    # an assignment anywhere is no definition: the names are gone
    aliased = _files(calc="def _e():\n    pass\n\n\n_exported = _e\nadd = sum\nBox = list\n")
    assert removed_names(before, iter(aliased), "") == [
        "calc.py: Box",
        "calc.py: _exported",
        "calc.py: add",
    ]

"""Phases for a failing test, and suspects ranked by the traceback's first project frame."""

from __future__ import annotations

from modules.planner.phases import safe_node, suspects, trace_frames
from modules.planner.tests.factory import (
    failing_test,
    fs,
    lint_gap,
    must_plan,
    pytest_gap,
)


def test_a_failing_test_is_planned_in_five_phases() -> None:
    result = must_plan([pytest_gap()])
    names = [p.split(":", 1)[0] for p in result.phases]
    assert names == ["reproduce", "localise", "patch", "verify", "full suite"]
    assert "`python -m pytest tests/test_calc.py::test_add`" in result.phases[0]
    assert "`calc.py:2`" in result.phases[1]
    assert "never what the test asserts" in result.phases[2]
    assert "`python -m pytest tests/test_calc.py::test_add`" in result.phases[3]
    assert "whole test suite" in result.phases[4]


def test_other_gaps_have_no_test_phases() -> None:
    assert must_plan([lint_gap()]).phases == ()


def test_the_first_project_frame_ranks_first_and_the_test_file_last() -> None:
    detail = (
        "tests/test_calc.py:5: in test_add\n    assert total([1]) == 1\n"
        "pkg/util.py:9: in total\n    return helper(xs)\n"
        "pkg/core.py:3: in helper\n    raise ValueError\n"
        "E   ValueError"
    )
    files = {"pkg/util.py": "", "pkg/core.py": "", "tests/test_calc.py": ""}
    d = failing_test(frame="pkg/core.py", frame_line=3, detail=detail)
    gap = pytest_gap().model_copy(update={"evidence": (d,), "files": (d.file, d.frame_file)})
    ranked = suspects(gap, fs(files), (), "")
    assert ranked == ("pkg/core.py", "pkg/util.py", "tests/test_calc.py")
    result = must_plan([gap], files=files)
    assert result.suspect_files == ranked
    assert result.actions[0].target_files == ranked


def test_frames_outside_the_project_or_missing_from_the_worktree_are_not_suspects() -> None:
    detail = (
        'File "/venv/lib/python3.11/site-packages/lib/x.py", line 3, in f\n'
        'File "/work/wt/pkg/a.py", line 7, in g\n'
        "ghost.py:1: in h\n"
        "E   ../../etc/passwd.py:1: in nope\n"
    )
    assert trace_frames(detail, "/work/wt") == ["ghost.py", "pkg/a.py"]
    d = failing_test(frame="", detail=detail)
    gap = pytest_gap().model_copy(update={"evidence": (d,)})
    ranked = suspects(gap, fs({"pkg/a.py": "", "tests/test_calc.py": ""}), (), "/work/wt")
    assert ranked == ("pkg/a.py", "tests/test_calc.py")


def test_protected_suspects_are_dropped() -> None:
    d = failing_test(frame="kernel/guard.py", detail="kernel/guard.py:3: in f\n")
    gap = pytest_gap().model_copy(update={"evidence": (d,)})
    assert suspects(gap, fs(), (), "") == ("calc.py", "tests/test_calc.py")
    assert suspects(gap, fs(), ("calc.py",), "") == ("tests/test_calc.py",)


def test_an_assertion_in_the_test_itself_suspects_what_the_test_imports() -> None:
    files = {
        "tests/test_calc.py": "import os\nfrom calc import add\nfrom pkg.util import total\n",
        "calc.py": "",
        "src/pkg/util.py": "",
    }
    d = failing_test(frame="tests/test_calc.py", frame_line=5, detail="tests/test_calc.py:5: E")
    gap = pytest_gap().model_copy(update={"evidence": (d,), "files": (d.file,)})
    assert suspects(gap, fs(files), (), "") == ("calc.py", "src/pkg/util.py", "tests/test_calc.py")
    result = must_plan([gap], files=files)
    assert result.allowed_paths[:2] == ("calc.py", "tests/**/test_calc.py")
    assert "src/pkg/util.py" in result.allowed_paths


def test_a_test_that_names_no_other_project_file_may_be_fixed_anywhere() -> None:
    files = {"tests/test_calc.py": "import json\n\ndef test_add():\n    assert 1 == 2\n"}
    d = failing_test(frame="tests/test_calc.py", frame_line=4, detail="tests/test_calc.py:4: E")
    gap = pytest_gap().model_copy(update={"evidence": (d,), "files": (d.file,)})
    result = must_plan([gap], files=files)
    assert result.suspect_files == ("tests/test_calc.py",)
    assert result.allowed_paths == ()


def test_node_ids_with_odd_characters_never_reach_a_command_line() -> None:
    assert safe_node("tests/test_a.py::test_b[1-2]") == "tests/test_a.py::test_b[1-2]"
    assert safe_node("tests/test_a.py::test_b[; rm -rf /]") == ""
    odd = "tests/test_calc.py::test_add[$(touch pwned)]"
    result = must_plan([pytest_gap(odd)])
    assert all("$(" not in p for p in result.phases)
    assert "pytest on the failing test named in the gap" in result.phases[0]

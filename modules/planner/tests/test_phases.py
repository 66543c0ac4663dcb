"""Phases for a failing test, and suspects ranked by the traceback's first project frame."""

from __future__ import annotations

from domain import Executed, Gap
from modules.planner.allowlist import covered
from modules.planner.phases import (
    ochiai,
    ranges,
    rank_suspects,
    safe_node,
    trace_frames,
)
from modules.planner.prompt import render_prompt
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
    ranked = rank_suspects(gap, fs(files), (), "").files
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
    tree = fs({"pkg/a.py": "", "tests/test_calc.py": ""})
    ranked = rank_suspects(gap, tree, (), "/work/wt").files
    assert ranked == ("pkg/a.py", "tests/test_calc.py")


def test_protected_suspects_are_dropped() -> None:
    d = failing_test(frame="kernel/judging/guard.py", detail="kernel/judging/guard.py:3: in f\n")
    gap = pytest_gap().model_copy(update={"evidence": (d,)})
    assert rank_suspects(gap, fs(), (), "").files == ("calc.py", "tests/test_calc.py")
    assert rank_suspects(gap, fs(), ("calc.py",), "").files == ("tests/test_calc.py",)


def test_an_assertion_in_the_test_itself_suspects_what_the_test_imports() -> None:
    files = {
        "tests/test_calc.py": "import os\nfrom calc import add\nfrom pkg.util import total\n",
        "calc.py": "",
        "src/pkg/util.py": "",
    }
    d = failing_test(frame="tests/test_calc.py", frame_line=5, detail="tests/test_calc.py:5: E")
    gap = pytest_gap().model_copy(update={"evidence": (d,), "files": (d.file,)})
    assert rank_suspects(gap, fs(files), (), "").files == (
        "calc.py",
        "src/pkg/util.py",
        "tests/test_calc.py",
    )
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


def _executed_gap() -> Gap:
    """The traceback names only the test file; the kernel saw the test run three modules."""
    d = failing_test(frame="tests/test_api.py", frame_line=5, detail="E   assert '2K' == '1K'")
    d = d.model_copy(
        update={
            "node_id": "tests/test_api.py::test_kilo",
            "file": "tests/test_api.py",
            "executed": (
                Executed(file="pkg/__init__.py", lines=(1,), passing=(3,)),
                Executed(file="pkg/api.py", lines=(5, 6), passing=(1, 1)),
                Executed(file="pkg/strutils.py", lines=(2, 3, 4, 5), passing=(1, 1, 0, 0)),
                Executed(file="tests/test_api.py", lines=(8, 9), passing=(0, 0)),
            ),
            "passing_tests": 3,
        }
    )
    return pytest_gap("tests/test_api.py::test_kilo").model_copy(
        update={"evidence": (d,), "files": ("tests/test_api.py",)}
    )


EXECUTED_TREE = {
    "pkg/__init__.py": "from pkg.api import human\n",
    "pkg/api.py": "",
    "pkg/strutils.py": "",
    "pkg/other.py": "",
    "tests/test_api.py": "import pkg\n",
}


def test_what_the_failing_test_executed_ranks_suspects_by_ochiai() -> None:
    ranked = rank_suspects(_executed_gap(), fs(EXECUTED_TREE), (), "")
    assert ranked.files == ("pkg/strutils.py", "pkg/api.py", "pkg/__init__.py", "tests/test_api.py")
    assert ranked.lines[0] == "4-5"  # run by the failing test alone
    assert ochiai(_executed_gap().evidence[0].executed)["pkg/api.py"][0] == 1 / 2**0.5


def test_the_allowlist_covers_every_executed_project_file_and_the_prompt_shows_lines() -> None:
    plan = must_plan([_executed_gap()], files=EXECUTED_TREE)
    for path in ("pkg/strutils.py", "pkg/api.py", "pkg/__init__.py", "tests/test_api.py"):
        assert covered(path, plan.allowed_paths), path
    # the package the executed modules belong to: a fix often spans modules the test never ran
    assert covered("pkg/other.py", plan.allowed_paths)
    assert not covered("setup.py", plan.allowed_paths) and not covered(
        "docs/x.md", plan.allowed_paths
    )
    assert "`pkg/strutils.py` lines 4-5" in render_prompt(plan)


def test_without_an_execution_record_the_traceback_ranks() -> None:
    gap = pytest_gap()
    assert rank_suspects(gap, fs(), (), "").files == ("calc.py", "tests/test_calc.py")
    assert rank_suspects(gap, fs(), (), "").lines == ("", "")


def test_line_ranges_are_short() -> None:
    assert ranges([9, 3, 4, 5]) == "3-5, 9"
    assert ranges(list(range(0, 40, 2)), limit=2) == "0, 2, ..."


def test_execution_facts_naming_protected_or_outside_paths_never_reach_the_allowlist() -> None:
    # the facts come from a run of code under test: they may name anything
    gap = _executed_gap()
    [d] = gap.evidence
    forged = (
        Executed(file="kernel/core.py", lines=(1,), passing=(0,)),
        Executed(file="../outside.py", lines=(1,), passing=(0,)),
        *d.executed,
    )
    gap = gap.model_copy(update={"evidence": (d.model_copy(update={"executed": forged}),)})
    tree = {**EXECUTED_TREE, "kernel/core.py": "", "kernel/__init__.py": ""}
    ranked = rank_suspects(gap, fs(tree), ("kernel/**",), "").files
    assert "kernel/core.py" not in ranked and not any(".." in f for f in ranked)
    plan = must_plan([gap], files=tree)
    assert not covered("kernel/core.py", plan.allowed_paths)
    assert not any(".." in p for p in plan.allowed_paths)

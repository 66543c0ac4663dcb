"""A plan's goal says what the change does (it becomes the commit's subject)."""

from __future__ import annotations

from domain import Diagnostic, Tool
from modules.planner.goal import goal_of
from tests.unit.factories import gap, inbox_gap


def test_goals_say_what_the_change_does() -> None:
    failing = Diagnostic(
        tool=Tool.PYTEST,
        file="tests/t.py",
        rule="failed",
        message="assert 1 == 5",
        node_id="tests/t.py::test_clamp",
    )
    assert goal_of(gap()) == "Fix ruff F401 in calc.py"
    assert (
        goal_of(gap("pytest:tests/t.py::test_clamp", source="pytest", evidence=(failing,)))
        == "Fix the failing test tests/t.py::test_clamp"
    )
    assert goal_of(gap("ruff-format:calc.py", source="ruff-format")) == "Format calc.py"
    assert goal_of(inbox_gap("sub.md", "Add sub()")) == "Add sub()"

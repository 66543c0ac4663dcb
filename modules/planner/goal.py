"""A plan's goal: what the change will do, in one line (the subject of the commit that lands it).

A gap's title says what is wrong ("tests/x.py::test_y failed: AssertionError: ..."); the goal
says what the change does about it ("Fix the failing test tests/x.py::test_y"). A person's
task or roadmap line already says what to do: its title is the goal.
"""

from __future__ import annotations

from domain import Gap

_GOAL_CHARS = 200


def goal_of(gap: Gap) -> str:
    """The change a plan for this gap makes, as a short imperative line."""
    first = gap.evidence[0] if gap.evidence else None
    key = gap.key
    if gap.source == "pytest":
        if key == "pytest:run":
            goal = "Make the test suite run"
        elif key.startswith("pytest:collect:"):
            goal = f"Make {key.removeprefix('pytest:collect:')} importable by pytest"
        elif key.startswith("pytest:outside-import:"):
            goal = f"Keep {key.removeprefix('pytest:outside-import:')} from importing outside the project"
        elif first is not None and first.node_id:
            goal = f"Fix the failing test {first.node_id}"
        else:
            goal = gap.title
    elif gap.source == "ruff-format" and gap.files:
        goal = f"Format {gap.files[0]}"
    elif gap.source in ("ruff", "pyright", "mypy") and first is not None and first.rule:
        where = f" in {first.file}" if first.file else ""
        goal = f"Fix {gap.source} {first.rule}{where}"
    else:
        goal = gap.title
    return " ".join(goal.split())[:_GOAL_CHARS]

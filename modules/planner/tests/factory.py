"""Builders for the planner's inputs: gaps, records, states and file trees."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from domain import (
    Diagnostic,
    FailureCategory,
    Gap,
    GapCategory,
    GapReport,
    InboxItem,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    OutcomeTally,
    ProjectState,
    RoadmapItem,
    Severity,
    Tool,
    gap_ref,
)
from modules.planner.fsport import MemoryFS
from modules.planner.planner import make_plan

NOW = datetime(2025, 3, 14, 9, 26, 53, tzinfo=UTC)

TREE: dict[str, str] = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "domain/models.py": "X = 1\n",
    "modules/planner/planner.py": "P = 1\n",
    "modules/planner/CONTRACT.md": "# Planner contract\n\nSatisfies the planner contract, version 1.\n",
    "modules/planner/SPEC.md": "# Planner spec\n\nThe planner picks the most critical gap.\n",
    "modules/planner/tests/test_planner.py": "def test_x():\n    pass\n",
    "VISION.md": "# Vision\n\n## Summary\n\nA daemon that keeps a project healthy.\n\n## More\n\nDetails.\n",
    "pyproject.toml": '[project]\nname = "x"\ndependencies = ["pydantic>=2"]\n',
}
"""A small repository: a failing add(), a domain package, a planner module with its docs."""


def fs(files: Mapping[str, str] | None = None) -> MemoryFS:
    """The TREE (or other files) behind the read-only port."""
    return MemoryFS(TREE if files is None else files)


def state(**changes: object) -> ProjectState:
    """A project state at NOW with sequence 7."""
    base = ProjectState(now=NOW, next_sequence=7, fingerprint="abc123")
    return base.model_copy(update=changes)


def failing_test(
    node: str = "tests/test_calc.py::test_add",
    frame: str = "calc.py",
    frame_line: int = 2,
    detail: str = "",
) -> Diagnostic:
    """A failing test as the kernel measures it."""
    return Diagnostic(
        tool=Tool.PYTEST,
        file=node.split("::")[0],
        rule="failed",
        node_id=node,
        message="assert -1 == 5",
        exc_type="AssertionError",
        frame_file=frame,
        frame_line=frame_line,
        detail=detail
        or (
            "    def test_add():\n>       assert add(2, 3) == 5\n\n"
            "tests/test_calc.py:5: \n_ _ _\n\n    def add(a, b):\n>       return a - b\n"
            "E       assert -1 == 5\n\ncalc.py:2: AssertionError"
        ),
    )


def pytest_gap(node: str = "tests/test_calc.py::test_add", **changes: object) -> Gap:
    """A failing-test gap shaped like the quality analyser's."""
    d = failing_test(node)
    gap = Gap(
        key=f"pytest:{node}",
        category=GapCategory.QUALITY,
        source="pytest",
        severity=Severity.CRITICAL,
        title=f"{node} failed: {d.message}",
        description=d.detail,
        files=tuple(dict.fromkeys((d.file, d.frame_file))),
        evidence=(d,),
    )
    return gap.model_copy(update=changes)


def lint_gap(
    file: str = "calc.py", rule: str = "F401", source: str = "ruff", fixable: bool = True
) -> Gap:
    """A ruff (or pyright, ruff-format) gap for one file and rule."""
    tool = Tool(source)
    d = Diagnostic(
        tool=tool, file=file, line=1, rule=rule, message=f"{rule} finding", fixable=fixable
    )
    severity = {
        "ruff": Severity.NORMAL,
        "pyright": Severity.HIGH,
        "ruff-format": Severity.LOW,
    }[source]
    return Gap(
        key=f"{source}:{file}:{rule}",
        category=GapCategory.QUALITY,
        source=source,
        severity=severity,
        title=f"{rule} in {file}",
        description=f"{file}:1: {rule}",
        files=(file,),
        evidence=(d,),
    )


def inbox_gap(
    name: str = "task.md",
    title: str = "Add a mul function",
    body: str = "",
    acceptance: Sequence[str] = (),
    allowed: Sequence[str] = (),
    forbidden: Sequence[str] = (),
) -> Gap:
    """An inbox gap shaped like the inbox analyser's."""
    item = InboxItem(
        name=name,
        title=title,
        body=body,
        acceptance=tuple(acceptance),
        allowed=tuple(allowed),
        forbidden=tuple(forbidden),
        received_at=NOW - timedelta(hours=1),
        sha256="0" * 64,
    )
    return Gap(
        key=f"inbox:{name}",
        category=GapCategory.INBOX,
        source="inbox",
        severity=Severity.NORMAL,
        title=title,
        description=body,
        files=tuple(allowed),
        inbox=item,
    )


def roadmap_gap(text: str = "Implement the report module", line: int = 3) -> Gap:
    """A roadmap gap shaped like the roadmap analyser's."""
    return Gap(
        key="roadmap:" + hashlib.sha256(text.encode()).hexdigest()[:12],
        category=GapCategory.ROADMAP,
        source="roadmap",
        severity=Severity.LOW,
        title=text,
        description=text,
        roadmap=RoadmapItem(text=text, line=line),
    )


def record(
    gap: Gap,
    seq: int,
    outcome: IterationOutcome = IterationOutcome.ROLLBACK,
    category: FailureCategory | None = FailureCategory.TEST_REGRESSION,
    *,
    failures: Sequence[Diagnostic] = (),
    touched: Sequence[str] = ("calc.py",),
    reason: str = "criterion failed",
    summary: str = "I changed add()",
    backend: str = "command",
    evidence: Sequence[str] = (),
    days_ago: float = 0.0,
) -> IterationRecord:
    """A record of one attempt at a gap, sequence seq."""
    started = NOW - timedelta(days=days_ago, minutes=100 - seq)
    return IterationRecord(
        iteration_id=f"iter-{seq:04d}-{started:%Y%m%d-%H%M%S}",
        started_at=started,
        ended_at=started + timedelta(seconds=30),
        gap=gap_ref(gap),
        outcome=outcome,
        failure_category=category if outcome != IterationOutcome.SUCCESS else None,
        reason=reason,
        evidence=tuple(evidence),
        failures=tuple(failures),
        touched_files=tuple(touched),
        backend=backend,
        agent_summary=summary,
        task_kind="fix_test",
    )


def tally(kind: str, day: str, successes: int, failures: int, fp: str = "abc123") -> OutcomeTally:
    """One day's outcomes of a task kind."""
    return OutcomeTally(
        task_kind=kind, fingerprint=fp, day=day, successes=successes, failures=failures
    )


def plan(
    gaps: Sequence[Gap],
    records: Sequence[IterationRecord] = (),
    st: ProjectState | None = None,
    files: Mapping[str, str] | None = None,
) -> IterationPlan | None:
    """Plan with the TREE (or files) behind the port."""
    return make_plan(GapReport(gaps=tuple(gaps)), list(records), st or state(), fs(files))


def must_plan(
    gaps: Sequence[Gap],
    records: Sequence[IterationRecord] = (),
    st: ProjectState | None = None,
    files: Mapping[str, str] | None = None,
) -> IterationPlan:
    """plan(), failing the test when it returns None."""
    result = plan(gaps, records, st, files)
    assert result is not None, "expected a plan"
    return result

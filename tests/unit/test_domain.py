"""Every domain model survives a JSON round trip; facts are immutable; domain stays declarative."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

import domain
from domain import (
    AcceptanceCriterion,
    ActionType,
    AgentReport,
    AnalysisInput,
    AttemptNote,
    CheckName,
    CriterionVerdict,
    DaemonStatus,
    Diagnostic,
    DiffStat,
    Event,
    FailureCategory,
    Gap,
    GapCategory,
    GapReport,
    HaltNote,
    HistoryDigest,
    HistoryRow,
    HistoryTotals,
    InboxItem,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    Measurement,
    Measurements,
    OutcomeTally,
    PlannedAction,
    Priority,
    ProjectState,
    RankedGap,
    Risk,
    RoadmapItem,
    RunResult,
    RunSpec,
    Severity,
    TaskKind,
    Tool,
    gap_ref,
)

NOW = datetime(2026, 11, 22, 12, 30, 5, tzinfo=UTC)


def _gap() -> Gap:
    diag = Diagnostic(
        tool=Tool.PYTEST,
        file="tests/test_a.py",
        rule="failed",
        node_id="tests/test_a.py::test_x[1-2]",
        message="assert 1 == 2",
        exc_type="AssertionError",
        frame_file="a.py",
        frame_line=3,
        detail="E assert",
    )
    item = InboxItem(
        name="task.md",
        title="Do it",
        body="body",
        priority=Priority.HIGH,
        acceptance=("pytest tests/test_a.py",),
        allowed=("a.py",),
        forbidden=("b.py",),
        received_at=NOW,
        sha256="ab",
    )
    return Gap(
        key="pytest:tests/test_a.py::test_x[1-2]",
        category=GapCategory.QUALITY,
        source="pytest",
        severity=Severity.CRITICAL,
        title="t",
        description="d",
        files=("a.py",),
        evidence=(diag,),
        inbox=item,
        roadmap=RoadmapItem(text="x", line=3, headings=("A", "B")),
        rank_reason="#1",
    )


def _plan() -> IterationPlan:
    return IterationPlan(
        iteration_id="iter-0042-20261122-123005",
        created_at=NOW,
        gap=_gap(),
        task_kind=TaskKind.FIX_TEST,
        goal="fix",
        actions=(
            PlannedAction(
                action_type=ActionType.MODIFY, target_files=("a.py",), description="fix it"
            ),
        ),
        criteria=(
            AcceptanceCriterion(
                check=CheckName.PYTEST, args=("tests/test_a.py::test_x[1-2]",), text="passes"
            ),
        ),
        estimated_risk=Risk.MEDIUM,
        allowed_paths=("a.py", "tests/**"),
        history=(
            AttemptNote(
                iteration_id="iter-0041-20261122-120000",
                outcome=IterationOutcome.ROLLBACK,
                failure_category=FailureCategory.TEST_REGRESSION,
                failing_tests=("t",),
                reason="r",
            ),
        ),
        phases=("reproduce", "patch"),
        context=("ctx",),
        notes=("n",),
        route="ruff-fix",
    )


def _record() -> IterationRecord:
    plan = _plan()
    return IterationRecord(
        iteration_id=plan.iteration_id,
        started_at=NOW,
        ended_at=NOW,
        gap=gap_ref(plan.gap),
        outcome=IterationOutcome.ROLLBACK,
        failure_category=FailureCategory.TEST_REGRESSION,
        reason="r",
        evidence=("e",),
        failures=plan.gap.evidence,
        verdicts=(CriterionVerdict(check=CheckName.PYTEST, passed=False, evidence="x"),),
        touched_files=("a.py",),
        diff=DiffStat(files=1, insertions=2, deletions=3, new_files=0),
        base="abc",
        commit=None,
        kept_branch=None,
        backend="command",
        agent_version="1.0",
        agent_summary="s",
        agent_exit_code=0,
        tokens_used=10,
        cost_usd=0.5,
        durations={"execute": 1.5},
        checkout_changes=("notes.txt",),
        task_kind="fix_test",
        plan=plan,
    )


SAMPLES: list[BaseModel] = [
    _gap(),
    GapReport(gaps=(_gap(),), tree="t", errors=("e",), skipped=("k",)),
    _plan(),
    _record(),
    Event(at=NOW, kind="halt", message="m", data={"a": 1}),
    Measurements(
        tree="t",
        items=(
            Measurement(
                tool=Tool.RUFF,
                ran=True,
                exit_code=1,
                diagnostics=(_gap().evidence[0],),
                collected=("x",),
            ),
        ),
    ),
    ProjectState(
        now=NOW,
        next_sequence=7,
        tallies=(
            OutcomeTally(task_kind="fix_test", fingerprint="f", day="2026-11-22", successes=1),
        ),
    ),
    AnalysisInput(measurements=Measurements(), now=NOW, roadmap="- [ ] a"),
    RunSpec(argv=("a", "{prompt_file}"), env={"X": "1"}, prompt="p"),
    RunResult(exit_code=None, timed_out=True),
    AgentReport(success=False, failure_category=FailureCategory.AGENT_ERROR, tokens_used=3),
    _record().model_copy(
        update={
            "ranking": (RankedGap(**gap_ref(_gap()).model_dump(), rank=2, skipped="waiting"),),
            "open_gaps": {"pytest": 3, "roadmap": 1},
        }
    ),
    HistoryDigest(
        generated_at=NOW,
        root_name="r",
        rows=(
            HistoryRow(
                iteration_id="iter-0042-20261122-123005",
                started_at=NOW,
                ended_at=NOW,
                outcome=IterationOutcome.ROLLBACK,
                failure_category=FailureCategory.LINT_ERROR,
                durations={"verify": 1.5},
                open_gaps={"ruff": 2},
            ),
        ),
        totals=HistoryTotals(iterations=1, by_outcome={"ROLLBACK": 1}, day="2026-11-22"),
        halt=HaltNote(halted=True, reason="r", since=NOW),
        quarantined=("k",),
    ),
    DaemonStatus(
        root="/r",
        running=True,
        pid=3,
        phase="idle",
        top_gaps=(RankedGap(**gap_ref(_gap()).model_dump(), rank=1, severity=Severity.HIGH),),
        open_gaps={"pytest": 1},
    ),
]


@pytest.mark.parametrize("model", SAMPLES, ids=lambda m: type(m).__name__)
def test_json_round_trip(model: BaseModel) -> None:
    text = model.model_dump_json()
    again = type(model).model_validate_json(text)
    assert again == model
    assert again.model_dump_json() == text


def test_facts_are_immutable_and_strict() -> None:
    record = _record()
    with pytest.raises(ValidationError):
        record.outcome = IterationOutcome.SUCCESS  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Gap.model_validate({**_gap().model_dump(), "surprise": 1})


def test_iteration_id_format_is_enforced() -> None:
    data = _plan().model_dump()
    for bad in ("iter-42-20261122-123005", "iter-0042-2026112-123005", "0042-20261122-123005"):
        with pytest.raises(ValidationError):
            IterationPlan.model_validate({**data, "iteration_id": bad})
    assert IterationPlan.model_validate({**data, "iteration_id": "iter-12345-20261122-123005"})


def test_a_records_checkout_is_one_folder_name_the_loop_makes_or_none() -> None:
    # a replay makes its checkout under this name in the kernel's folder of them
    data = _record().model_dump()
    for bad in ("../wt-1-2", "wt-1-2/..", "/tmp/x", "wt-1-2\n", "x", ".."):
        with pytest.raises(ValidationError):
            IterationRecord.model_validate({**data, "checkout": bad})
    made = IterationRecord.model_validate({**data, "checkout": "wt-4242-20261127162442123456"})
    assert made.checkout == "wt-4242-20261127162442123456"
    assert IterationRecord.model_validate(data).checkout == ""  # a record from before it


def test_most_critical_is_the_first_ranked_gap() -> None:
    assert GapReport().most_critical is None
    assert GapReport(gaps=(_gap(),)).most_critical == _gap()


def test_domain_is_declarative() -> None:
    allowed = {"__future__", "typing", "enum", "datetime", "pathlib", "pydantic", "domain"}
    declarative_calls = {"Field", "ConfigDict"}
    for path in Path(domain.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                assert all(n.split(".")[0] in allowed for n in names), (
                    f"{path.name} imports {names}"
                )
            elif isinstance(node, ast.Expr):
                assert isinstance(node.value, ast.Constant), (
                    f"{path.name}:{node.lineno} runs code at import"
                )
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef | ast.Module):
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
                        for call in ast.walk(stmt.value):
                            if isinstance(call, ast.Call):
                                name = (
                                    call.func.id
                                    if isinstance(call.func, ast.Name)
                                    else getattr(call.func, "attr", "")
                                )
                                assert name in declarative_calls, (
                                    f"{path.name}:{stmt.lineno} calls {name} at import"
                                )

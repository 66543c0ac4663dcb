"""Realistic iteration records for report, dashboard and benchmark tests (deterministic)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from domain import (
    AcceptanceCriterion,
    ActionType,
    AttemptNote,
    CheckName,
    CriterionVerdict,
    Diagnostic,
    DiffStat,
    FailureCategory,
    Gap,
    GapCategory,
    HistoryRow,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    PlannedAction,
    RankedGap,
    Risk,
    Severity,
    TaskKind,
    Tool,
    gap_ref,
)

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

CATEGORY_OUTCOME: dict[FailureCategory, IterationOutcome] = {
    FailureCategory.TEST_REGRESSION: IterationOutcome.ROLLBACK,
    FailureCategory.TEST_TIMEOUT: IterationOutcome.ROLLBACK,
    FailureCategory.FLAKY_TEST: IterationOutcome.ROLLBACK,
    FailureCategory.COMPILATION_ERROR: IterationOutcome.ROLLBACK,
    FailureCategory.TYPE_ERROR: IterationOutcome.ROLLBACK,
    FailureCategory.LINT_ERROR: IterationOutcome.ROLLBACK,
    FailureCategory.IMPORT_ERROR: IterationOutcome.ROLLBACK,
    FailureCategory.SANDBOX_VIOLATION: IterationOutcome.ROLLBACK,
    FailureCategory.HYGIENE_VIOLATION: IterationOutcome.ROLLBACK,
    FailureCategory.ALLOWLIST_VIOLATION: IterationOutcome.ROLLBACK,
    FailureCategory.BUDGET_EXCEEDED: IterationOutcome.FAILURE,
    FailureCategory.GROWTH_LIMIT: IterationOutcome.ROLLBACK,
    FailureCategory.AGENT_ERROR: IterationOutcome.FAILURE,
    FailureCategory.AGENT_TIMEOUT: IterationOutcome.FAILURE,
    FailureCategory.MERGE_BLOCKED: IterationOutcome.MERGE_BLOCKED,
    FailureCategory.UNKNOWN: IterationOutcome.FAILURE,
    FailureCategory.PUBLIC_NAME_REMOVED: IterationOutcome.ROLLBACK,
    FailureCategory.FITNESS_REGRESSION: IterationOutcome.ROLLBACK,
    FailureCategory.RUN_LIMIT: IterationOutcome.FAILURE,
    FailureCategory.GAP_NOT_CLOSED: IterationOutcome.ROLLBACK,
}
"""The outcome each failure category comes with."""

SOURCES = ("ruff", "ruff-format", "pyright", "pytest", "inbox", "roadmap")


def gap(source: str, n: int) -> Gap:
    """A gap of a source, with evidence shaped like the kernel's diagnostics."""
    if source == "pytest":
        diag = Diagnostic(
            tool=Tool.PYTEST,
            file="tests/test_calc.py",
            rule="failed",
            node_id=f"tests/test_calc.py::test_case_{n}",
            message="assert add(2, 3) == 5 | got -1",
            exc_type="AssertionError",
            frame_file="calc.py",
            frame_line=2,
        )
        return Gap(
            key=f"pytest:{diag.node_id}",
            category=GapCategory.QUALITY,
            source=source,
            severity=Severity.CRITICAL,
            title=f"test_case_{n} fails: AssertionError",
            files=("calc.py", "tests/test_calc.py"),
            evidence=(diag,),
            rank_reason="a failing test outranks lint and types",
        )
    if source in ("inbox", "roadmap"):
        return Gap(
            key=f"{source}:item-{n}",
            category=GapCategory(source),
            source=source,
            severity=Severity.NORMAL,
            title=f"Add a <b>sub</b> function & a test for it ({n})",
            rank_reason=f"{source} item, in the order written",
        )
    tool = {"ruff": Tool.RUFF, "ruff-format": Tool.RUFF_FORMAT, "pyright": Tool.PYRIGHT}[source]
    rule = {"ruff": "F401", "ruff-format": "unformatted", "pyright": "reportArgumentType"}[source]
    diag = Diagnostic(
        tool=tool, file=f"pkg/mod_{n}.py", line=3, column=1, rule=rule, message="`os` unused"
    )
    return Gap(
        key=f"{source}:pkg/mod_{n}.py:{rule}",
        category=GapCategory.QUALITY,
        source=source,
        severity=Severity.HIGH if source == "pyright" else Severity.NORMAL,
        title=f"{rule} in pkg/mod_{n}.py",
        files=(diag.file,),
        evidence=(diag,),
        rank_reason=f"{source} finding",
    )


def record(
    seq: int,
    when: datetime,
    outcome: IterationOutcome,
    category: FailureCategory | None = None,
    source: str = "ruff",
    cost: float = 0.0123,
) -> IterationRecord:
    """A record as the kernel writes it, for one outcome and category."""
    chosen = gap(source, seq)
    iteration_id = f"iter-{seq:04d}-{when:%Y%m%d-%H%M%S}"
    plan = IterationPlan(
        iteration_id=iteration_id,
        created_at=when,
        gap=chosen,
        task_kind=TaskKind.FIX_TEST if source == "pytest" else TaskKind.FIX_LINT,
        goal=f"Close {chosen.title}",
        actions=(
            PlannedAction(
                action_type=ActionType.MODIFY,
                target_files=chosen.files,
                description="make the smallest change that closes the gap",
            ),
        ),
        criteria=(
            AcceptanceCriterion(check=CheckName.GAP_CLOSED, text="the gap is gone"),
            AcceptanceCriterion(check=CheckName.PYTEST_ALL, text="no test regresses"),
        ),
        estimated_risk=Risk.LOW,
        allowed_paths=chosen.files,
        history=(
            AttemptNote(
                iteration_id=f"iter-{max(seq - 1, 1):04d}-{when:%Y%m%d-%H%M%S}",
                outcome=IterationOutcome.ROLLBACK,
                failure_category=FailureCategory.LINT_ERROR,
                reason="added an unused import",
            ),
        )
        if seq % 5 == 0
        else (),
        notes=("the top gap an agent can take",),
    )
    ran = outcome not in (IterationOutcome.WAITING, IterationOutcome.ABORTED)
    failed = outcome not in (IterationOutcome.SUCCESS, IterationOutcome.WAITING)
    new_problem = Diagnostic(
        tool=Tool.PYTEST,
        file="tests/test_calc.py",
        rule="failed",
        node_id="tests/test_calc.py::test_add",
        message="assert -1 == 5",
        exc_type="AssertionError",
        frame_file="calc.py",
        frame_line=2,
    )
    durations = {"analyse": 4.2 + seq % 7, "plan": 0.3}
    if ran:
        durations |= {"execute": 30.0 + seq % 90, "inspect": 0.2, "verify": 8.5 + seq % 11}
    if outcome == IterationOutcome.SUCCESS:
        durations["land"] = 0.4
    ranking = (
        RankedGap(
            **gap_ref(gap("pytest", 900)).model_dump(),
            rank=1,
            severity=Severity.CRITICAL,
            rank_reason="failing test",
            skipped="quarantined",
        ),
        RankedGap(
            **gap_ref(chosen).model_dump(),
            rank=2,
            severity=chosen.severity,
            rank_reason=chosen.rank_reason,
        ),
        RankedGap(**gap_ref(gap("roadmap", 901)).model_dump(), rank=3, severity=Severity.NORMAL),
    )
    return IterationRecord(
        iteration_id=iteration_id,
        started_at=when,
        ended_at=when + timedelta(seconds=sum(durations.values())),
        gap=gap_ref(chosen),
        outcome=outcome,
        failure_category=category,
        reason=f"{outcome.value.lower()}: {category.value if category else 'all criteria passed'}",
        evidence=("tests/test_calc.py::test_add failed: assert -1 == 5",) if failed and ran else (),
        failures=(new_problem,) if category == FailureCategory.TEST_REGRESSION else (),
        verdicts=(
            CriterionVerdict(check=CheckName.GAP_CLOSED, text="the gap is gone", passed=True),
            CriterionVerdict(
                check=CheckName.PYTEST_ALL,
                text="no test regresses",
                passed=not failed,
                evidence="" if not failed else "tests/test_calc.py::test_add: assert -1 == 5",
            ),
        )
        if ran and outcome != IterationOutcome.FAILURE
        else (),
        touched_files=chosen.files if ran else (),
        diff=DiffStat(files=len(chosen.files), insertions=3, deletions=1) if ran else DiffStat(),
        base="0123456789abcdef0123",
        commit="fedcba98765432100123"
        if outcome in (IterationOutcome.SUCCESS, IterationOutcome.PROPOSED)
        else None,
        pull_request="https://github.com/o/r/pull/7"
        if outcome == IterationOutcome.PROPOSED
        else None,
        kept_branch=f"seed/kept/{iteration_id}"
        if outcome in (IterationOutcome.MERGE_BLOCKED, IterationOutcome.KEPT)
        else None,
        changed_tests=("tests/test_calc.py::test_mul",) if outcome == IterationOutcome.KEPT else (),
        backend="command" if ran else "none",
        agent_version="scripted 1.0" if ran else "",
        agent_summary="Removed the unused import.\nRan the tests." if ran else "",
        agent_exit_code=(1 if category == FailureCategory.AGENT_ERROR else 0) if ran else None,
        tokens_used=1200 + seq if ran else 0,
        cost_usd=cost if ran else 0.0,
        durations=durations,
        task_kind=plan.task_kind.value,
        plan=plan,
        ranking=ranking,
        open_gaps={"ruff": 40 - seq % 30, "pyright": 12 + seq % 5, "pytest": seq % 3, "roadmap": 4},
    )


def every_kind() -> list[IterationRecord]:
    """One record per outcome without a category, and one per failure category."""
    out: list[IterationRecord] = []
    seq = 1
    plain = (
        IterationOutcome.SUCCESS,
        IterationOutcome.NO_CHANGE,
        IterationOutcome.WAITING,
        IterationOutcome.ABORTED,
        IterationOutcome.KEPT,
        IterationOutcome.PROPOSED,
    )
    for outcome in plain:
        out.append(record(seq, START + timedelta(hours=seq), outcome, None, SOURCES[seq % 6]))
        seq += 1
    for category, outcome in CATEGORY_OUTCOME.items():
        out.append(record(seq, START + timedelta(hours=seq), outcome, category, SOURCES[seq % 6]))
        seq += 1
    return out


def synthetic(count: int, per_day: int = 100, seed: int = 8) -> Iterator[IterationRecord]:
    """count records, per_day a day, with a plausible mix of outcomes, categories and sources."""
    rng = random.Random(seed)
    categories = list(CATEGORY_OUTCOME)
    for seq in range(1, count + 1):
        when = START + timedelta(days=(seq - 1) // per_day, minutes=((seq - 1) % per_day) * 13)
        roll = rng.random()
        source = rng.choice(SOURCES)
        if roll < 0.55:
            yield record(seq, when, IterationOutcome.SUCCESS, None, source, rng.random() / 5)
        elif roll < 0.62:
            yield record(seq, when, IterationOutcome.WAITING, None, source)
        elif roll < 0.66:
            yield record(seq, when, IterationOutcome.NO_CHANGE, None, source, rng.random() / 10)
        else:
            category = rng.choice(categories)
            yield record(seq, when, CATEGORY_OUTCOME[category], category, source, rng.random() / 4)


def write_records(history: Path, records: Iterator[IterationRecord] | list[IterationRecord]) -> int:
    """Write records.jsonl as the store would (the index is rebuilt from it on first read)."""
    history.mkdir(parents=True, exist_ok=True)
    n = 0
    with (history / "records.jsonl").open("a", encoding="utf-8") as handle:
        for item in records:
            handle.write(item.model_dump_json() + "\n")
            n += 1
    return n


def history_rows(records: Iterable[IterationRecord]) -> tuple[HistoryRow, ...]:
    """Records as the index rows the reporter gets, newest first."""
    rows = [
        HistoryRow(
            iteration_id=r.iteration_id,
            started_at=r.started_at,
            ended_at=r.ended_at,
            outcome=r.outcome,
            failure_category=r.failure_category,
            gap_key=r.gap.key,
            gap_source=r.gap.source,
            gap_category=r.gap.category,
            gap_title=r.gap.title,
            cost_usd=r.cost_usd,
            tokens_used=r.tokens_used,
            backend=r.backend,
            durations=r.durations,
            open_gaps=r.open_gaps,
            ran_agent=r.ran_agent,
        )
        for r in records
    ]
    return tuple(reversed(rows))

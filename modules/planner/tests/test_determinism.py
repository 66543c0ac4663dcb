"""Determinism: the same inputs give the same plan, apart from the time in its id."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain import (
    FailureCategory,
    Gap,
    GapReport,
    IterationOutcome,
    IterationRecord,
    OutcomeTally,
    ProjectState,
)
from modules.planner.planner import make_plan
from modules.planner.tests.factory import (
    NOW,
    fs,
    inbox_gap,
    lint_gap,
    pytest_gap,
    record,
    roadmap_gap,
    state,
    tally,
)

POOL: tuple[Gap, ...] = (
    pytest_gap(),
    pytest_gap("tests/test_calc.py::test_sub"),
    lint_gap("calc.py", "F401"),
    lint_gap("modules/planner/planner.py", "reportX", "pyright"),
    lint_gap("calc.py", "format", "ruff-format"),
    lint_gap("seed.py", "E501"),
    inbox_gap("a.md", acceptance=["pytest tests/test_calc.py::test_add"]),
    inbox_gap("b.md", title="Refactor the planner module", allowed=["modules/planner/**"]),
    inbox_gap("c.md", acceptance=["make it so"]),
    roadmap_gap("Implement the planner module's memory"),
    roadmap_gap("Create the domain models for budgets"),
)

gaps = st.lists(st.sampled_from(POOL), max_size=6, unique_by=lambda g: g.key)
outcomes = st.sampled_from(list(IterationOutcome))
categories = st.none() | st.sampled_from(list(FailureCategory))


@st.composite
def histories(draw: st.DrawFn) -> list[IterationRecord]:
    """Records of attempts at gaps of the pool, sequence numbers 1..n."""
    count = draw(st.integers(min_value=0, max_value=12))
    out: list[IterationRecord] = []
    for seq in range(1, count + 1):
        out.append(
            record(
                draw(st.sampled_from(POOL)),
                seq,
                draw(outcomes),
                draw(categories),
                touched=draw(
                    st.lists(st.sampled_from(["calc.py", "domain/models.py"]), max_size=2)
                ),
                days_ago=draw(st.sampled_from([0.0, 1.0, 40.0])),
            )
        )
    return out


@st.composite
def states(draw: st.DrawFn) -> ProjectState:
    """A state with some gaps quarantined, memory, protection and self-hosting varied."""
    tallies: list[OutcomeTally] = [
        tally(
            draw(st.sampled_from(["fix_test", "fix_lint", "fix_types", "feature", "refactor"])),
            draw(st.sampled_from(["2025-03-14", "2025-03-01", "2024-12-25"])),
            draw(st.integers(0, 5)),
            draw(st.integers(0, 5)),
        )
        for _ in range(draw(st.integers(0, 4)))
    ]
    return state(
        quarantined=tuple(draw(st.lists(st.sampled_from([g.key for g in POOL]), max_size=2))),
        tallies=tuple(tallies),
        protected=tuple(draw(st.lists(st.sampled_from(["tests/**", "docs/**"]), max_size=1))),
        selfhost=draw(st.booleans()),
        pyright_strict=("modules",),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gaps, histories(), states())
def test_the_same_inputs_give_the_same_plan(
    chosen: list[Gap], history: list[IterationRecord], st_: ProjectState
) -> None:
    report = GapReport(gaps=tuple(chosen))
    first = make_plan(report, history, st_, fs())
    again = make_plan(report, list(history), st_, fs())
    assert first == again
    # what the module host receives has been through JSON: still the same plan
    wire = make_plan(
        GapReport.model_validate_json(report.model_dump_json()),
        [IterationRecord.model_validate_json(r.model_dump_json()) for r in history],
        ProjectState.model_validate_json(st_.model_dump_json()),
        fs(),
    )
    assert wire == first
    # the order records arrive in does not matter: the planner reads them by sequence
    assert make_plan(report, list(reversed(history)), st_, fs()) == first


@settings(max_examples=40, deadline=None)
@given(gaps, histories(), states(), st.integers(min_value=1, max_value=14 * 3600))
def test_a_later_time_on_the_same_day_changes_only_the_id(
    chosen: list[Gap], history: list[IterationRecord], st_: ProjectState, seconds: int
) -> None:
    report = GapReport(gaps=tuple(chosen))
    later_state = st_.model_copy(update={"now": NOW + timedelta(seconds=seconds)})
    assert later_state.now.date() == NOW.date()
    now_plan = make_plan(report, history, st_, fs())
    later = make_plan(report, history, later_state, fs())
    if now_plan is None or later is None:
        assert now_plan is None and later is None
        return
    assert later.iteration_id != now_plan.iteration_id
    assert later.iteration_id.split("-")[1] == now_plan.iteration_id.split("-")[1]
    same = {"iteration_id": now_plan.iteration_id, "created_at": now_plan.created_at}
    assert later.model_copy(update=same) == now_plan

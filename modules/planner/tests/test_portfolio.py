"""Which agent to send: Thompson sampling per task kind over the kernel's verified outcomes,
valued as landed per dollar, decayed like memory; the plan says the order and why."""

from __future__ import annotations

from datetime import timedelta

from domain import (
    AgentTally,
    Candidate,
    IterationOutcome,
    IterationRecord,
    PortfolioAgent,
    TaskKind,
    gap_ref,
)
from modules.planner.portfolio import choose
from modules.planner.tests.factory import NOW, lint_gap, must_plan, pytest_gap, state

CHEAP = PortfolioAgent(key="command:cheap", backend="command", model="cheap")
DEAR = PortfolioAgent(key="command:dear", backend="command", model="dear")
PAIR = (CHEAP, DEAR)
SEEDS = range(1, 201)


def sent(
    agent: PortfolioAgent,
    kind: str,
    landed: int,
    of: int,
    cost: float,
    *,
    days_ago: float = 0.0,
    seconds: float = 600.0,
) -> list[IterationRecord]:
    """`of` single runs of one agent on one kind as the kernel records them, `landed` landed."""
    gap = lint_gap() if kind == "fix_lint" else pytest_gap()
    found: list[IterationRecord] = []
    for k in range(of):
        at = NOW - timedelta(days=days_ago, minutes=of - k)
        found.append(
            IterationRecord(
                iteration_id=f"iter-{k + 1:04d}-{at:%Y%m%d-%H%M%S}",
                started_at=at,
                ended_at=at + timedelta(seconds=seconds),
                gap=gap_ref(gap),
                outcome=IterationOutcome.SUCCESS if k < landed else IterationOutcome.ROLLBACK,
                backend=agent.backend,
                task_kind=kind,
                cost_usd=cost,
                durations={"execute": seconds},
                agent_key=agent.key,
            )
        )
    return found


def firsts(records: list[IterationRecord], kind: TaskKind, who: PortfolioAgent) -> int:
    """Of SEEDS draws, how many send `who` first."""
    return sum(
        (c := choose(PAIR, records, kind, NOW, s)) is not None and c.order[0] == who.key
        for s in SEEDS
    )


def test_it_settles_on_the_agent_that_lands_more_per_dollar_for_each_kind() -> None:
    history = [
        *sent(CHEAP, "fix_lint", 16, 20, 0.02),
        *sent(DEAR, "fix_lint", 12, 20, 0.40),
        *sent(CHEAP, "fix_test", 1, 20, 0.02),
        *sent(DEAR, "fix_test", 15, 20, 0.40),
    ]
    assert firsts(history, TaskKind.FIX_LINT, CHEAP) >= 0.95 * len(SEEDS)
    assert firsts(history, TaskKind.FIX_TEST, DEAR) >= 0.9 * len(SEEDS)
    # a pure function of its inputs: the same seed draws the same order
    once, again = (choose(PAIR, history, TaskKind.FIX_TEST, NOW, 7) for _ in range(2))
    assert once == again and once is not None
    assert once.why.startswith("fix_test: command:cheap landed 1 of 20 at $0.02, ")
    assert "command:dear landed 15 of 20 at $0.40" in once.why and "(seed 7)" in once.why


def test_an_untried_agent_is_explored() -> None:
    history = sent(CHEAP, "fix_lint", 5, 10, 0.02)
    tried = firsts(history, TaskKind.FIX_LINT, DEAR)
    assert 0.2 * len(SEEDS) <= tried <= 0.8 * len(SEEDS)
    chosen = choose(PAIR, history, TaskKind.FIX_LINT, NOW, 1)
    assert chosen is not None and "command:dear untried" in chosen.why


def test_old_outcomes_weigh_less_as_memory_decays_them() -> None:
    same = sent(DEAR, "fix_lint", 3, 6, 0.02)
    fresh = [*same, *sent(CHEAP, "fix_lint", 0, 10, 0.02), *sent(CHEAP, "fix_lint", 2, 2, 0.02)]
    old = [
        *same,
        *sent(CHEAP, "fix_lint", 0, 10, 0.02, days_ago=100),
        *sent(CHEAP, "fix_lint", 2, 2, 0.02),
    ]
    assert firsts(fresh, TaskKind.FIX_LINT, CHEAP) < 0.2 * len(SEEDS)
    assert firsts(old, TaskKind.FIX_LINT, CHEAP) > 0.6 * len(SEEDS)


def test_only_what_the_kernel_recorded_counts() -> None:
    # a run the agent called a success that the kernel refused is a failure; a record without
    # the kernel's key, or where the agent never ran, says nothing about any agent
    refused = sent(CHEAP, "fix_lint", 0, 20, 0.02)
    unsent = [r.model_copy(update={"agent_key": ""}) for r in sent(DEAR, "fix_lint", 0, 20, 0.02)]
    never = [r.model_copy(update={"durations": {}}) for r in sent(DEAR, "fix_lint", 0, 20, 0.02)]
    assert firsts([*refused, *unsent, *never], TaskKind.FIX_LINT, DEAR) > 0.9 * len(SEEDS)
    chosen = choose(PAIR, [*refused, *unsent, *never], TaskKind.FIX_LINT, NOW, 1)
    assert chosen is not None and "command:dear untried" in chosen.why


def test_a_tournaments_candidates_each_count_for_their_own_agent() -> None:
    [base] = sent(CHEAP, "fix_test", 1, 1, 0.0)
    table = (
        Candidate(
            number=1, backend="command", outcome=IterationOutcome.ROLLBACK, agent_key=CHEAP.key
        ),
        Candidate(
            number=2, backend="command", outcome=IterationOutcome.SUCCESS, agent_key=DEAR.key
        ),
    )
    tournaments = [
        base.model_copy(update={"candidates": table, "agent_key": "", "iteration_id": f"i{k}"})
        for k in range(20)
    ]
    assert firsts(tournaments, TaskKind.FIX_TEST, DEAR) > 0.95 * len(SEEDS)


def test_with_one_agent_the_plan_orders_nothing_and_with_two_it_says_why() -> None:
    gaps = [pytest_gap()]
    one = must_plan(gaps, st=state(portfolio=(CHEAP,), random_seed=3))
    assert one.agents == () and one.agents_why == ""
    assert '"agents' not in one.model_dump_json()  # plans and records as before, byte for byte
    two = must_plan(gaps, st=state(portfolio=PAIR, random_seed=3))
    assert sorted(two.agents) == sorted(a.key for a in PAIR)
    assert two.agents_why.startswith("fix_test: command:cheap untried, command:dear untried;")


def test_the_kernels_tallies_of_every_outcome_outweigh_the_few_records_sent() -> None:
    """The records sent are the latest few; the kernel's tallies hold every verified outcome
    (`store.agent_tallies`), so what an agent did long ago is not forgotten, only decayed."""
    recent = sent(CHEAP, "fix_test", 1, 2, 0.02)  # all the records say: cheap, 1 of 2
    day = NOW.date().isoformat()
    tallies = (
        AgentTally(
            key=CHEAP.key,
            task_kind="fix_test",
            day=day,
            tried=40,
            landed=2,
            cost_usd=0.8,
            seconds=40 * 600,
        ),
        AgentTally(
            key=DEAR.key,
            task_kind="fix_test",
            day=day,
            tried=40,
            landed=30,
            cost_usd=16,
            seconds=40 * 600,
        ),
    )
    from_records = sum(
        (c := choose(PAIR, recent, TaskKind.FIX_TEST, NOW, s)) is not None
        and c.order[0] == DEAR.key
        for s in SEEDS
    )
    from_tallies = sum(
        (c := choose(PAIR, recent, TaskKind.FIX_TEST, NOW, s, tallies)) is not None
        and c.order[0] == DEAR.key
        for s in SEEDS
    )
    assert from_tallies >= 0.9 * len(SEEDS) > from_records
    chosen = choose(PAIR, recent, TaskKind.FIX_TEST, NOW, 3, tallies)
    assert chosen is not None and "command:dear landed 30 of 40 at $0.40" in chosen.why

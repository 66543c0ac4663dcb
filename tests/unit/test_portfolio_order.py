"""The kernel's side of the learned choice: the portfolio's keys, the planner's order checked
against them (a wrong one refused, named), and the runs dealt in that order."""

from __future__ import annotations

import pytest

from domain import (
    Candidate,
    IterationOutcome,
    IterationRecord,
    PortfolioAgent,
    ProjectState,
    gap_ref,
)
from kernel.config import CandidateAgent, CandidatesConfig
from kernel.errors import HostError
from kernel.host.answers import agent_order
from kernel.loop.tournament import deal, portfolio
from tests.unit.factories import T0, gap, plan

CONFIG = CandidatesConfig(
    agent=[
        CandidateAgent(backend="claude", model="opus"),
        CandidateAgent(backend="codex", weight=2),
        CandidateAgent(backend="claude", model="opus", extra_args=["--fast"]),
    ]
)
KEYS = ["claude:opus", "codex:gpt-5", "claude:opus#3"]


def _state() -> ProjectState:
    agents = portfolio(CONFIG, "claude", "gpt-5")
    return ProjectState(
        now=T0,
        next_sequence=1,
        portfolio=tuple(
            PortfolioAgent(key=a.key, backend=a.backend, model=a.model) for a in agents
        ),
        random_seed=42,
    )


def test_each_entry_has_a_stable_readable_key_and_fewer_than_two_have_none() -> None:
    assert [d.key for d in portfolio(CONFIG, "claude", "gpt-5")] == KEYS
    assert portfolio(CandidatesConfig(agent=CONFIG.agent[:1]), "claude", "") == []


@pytest.mark.parametrize(
    ("order", "named"),
    [
        (["claude:opus", "codex:gpt-5", "aider"], "'aider' is not a configured agent"),
        (["claude:opus", "codex:gpt-5", "claude:opus"], "'claude:opus' is ordered twice"),
        (["codex:gpt-5", "claude:opus"], "'claude:opus#3' is left out"),
    ],
)
def test_an_order_that_is_not_the_configured_set_is_refused(order: list[str], named: str) -> None:
    answer = plan(gap()).model_copy(update={"agents": tuple(order)})
    with pytest.raises(HostError, match="invalid IterationPlan: agents: ") as refused:
        agent_order(answer, _state())
    assert named in str(refused.value)


def test_an_order_without_a_portfolio_is_refused() -> None:
    answer = plan(gap()).model_copy(update={"agents": ("claude",)})
    with pytest.raises(HostError, match="'claude' is not a configured agent"):
        agent_order(answer, ProjectState(now=T0, next_sequence=1))


def test_the_planners_order_is_kept_with_the_kernels_seed_and_dealt_by_weight() -> None:
    order = ("codex:gpt-5", "claude:opus#3", "claude:opus")
    forged = plan(gap()).model_copy(update={"agents": order, "random_seed": 7})
    checked = agent_order(forged, _state())
    assert checked.agents == order and checked.random_seed == 42  # the kernel's, not the planner's
    five = CONFIG.model_copy(update={"n": 5})
    dealt = deal(five, "claude", "gpt-5", order)
    assert [d.key for d in dealt] == [*order[:1] * 2, order[1], order[2], order[0]]
    assert [d.number for d in dealt] == [1, 2, 3, 4, 5]
    assert dealt[2].extra_args == ("--fast",)
    # no order: the configured one, as before
    assert [d.key for d in deal(five, "claude", "gpt-5")][:3] == [KEYS[0], KEYS[1], KEYS[1]]


def test_with_fewer_than_two_agents_nothing_new_is_written() -> None:
    one = CandidatesConfig(n=2, agent=CONFIG.agent[:1])
    assert [d.key for d in deal(one, "claude", "")] == ["", ""]
    bare = plan(gap())
    assert agent_order(bare, ProjectState(now=T0, next_sequence=1)) is bare
    written = (
        bare.model_dump_json()
        + IterationRecord(
            iteration_id="iter-0001-20260101-120000",
            started_at=T0,
            ended_at=T0,
            gap=gap_ref(bare.gap),
            outcome=IterationOutcome.SUCCESS,
            candidates=(Candidate(number=1, backend="claude", outcome=IterationOutcome.SUCCESS),),
        ).model_dump_json()
        + ProjectState(now=T0, next_sequence=1).model_dump_json(exclude_defaults=True)
    )
    for field in ("agents", "agents_why", "random_seed", "agent_key", "portfolio"):
        assert f'"{field}"' not in written

"""The kernel's choice among candidates, and how the runs are dealt from the portfolio."""

from __future__ import annotations

import pytest

from domain import Candidate, DiffStat, IterationOutcome
from kernel.config import CandidateAgent, CandidatesConfig
from kernel.judging.choice import ORDER, choose
from kernel.loop.tournament import deal


def _c(number: int, **facts: object) -> Candidate:
    base: dict[str, object] = {
        "number": number,
        "backend": "command",
        "outcome": IterationOutcome.SUCCESS,
        "eligible": True,
    }
    return Candidate.model_validate(base | facts)


@pytest.mark.parametrize(
    ("worse", "better", "rule"),
    [
        ({"needs_person": True}, {"outside_suspects": 50, "rounds": 3}, 0),
        ({"outside_suspects": 3}, {"uncovered": 9}, 1),
        ({"uncovered": 2}, {"rounds": 3}, 2),
        ({"rounds": 2}, {"diff": DiffStat(insertions=90)}, 3),
        ({"diff": DiffStat(insertions=5)}, {"diff": DiffStat(insertions=2, deletions=2)}, 4),
        ({"diff": DiffStat(insertions=1), "binary_bytes": 9}, {"diff": DiffStat(insertions=9)}, 4),
    ],
)
def test_each_fact_outranks_every_later_one(
    worse: dict[str, object], better: dict[str, object], rule: int
) -> None:
    # the worse candidate is dealt first: only the fact decides, never the order
    winner, why = choose([_c(1, **worse), _c(2, **better)])
    assert winner is not None and winner.number == 2
    assert f"on: {ORDER[rule]}" in why


def test_equal_candidates_go_to_the_one_dealt_first_and_the_ineligible_never_win() -> None:
    loser = _c(1, eligible=False, outcome=IterationOutcome.ROLLBACK)
    winner, why = choose([loser, _c(3), _c(2)])
    assert winner is not None and winner.number == 2
    assert why == (
        "candidate 2 won over candidate 3 (2 of 3 passed) on: dealt first (number 2 against number 3)"
    )
    assert choose([loser]) == (None, "")


def test_the_portfolio_deals_n_runs_by_weight_in_order() -> None:
    config = CandidatesConfig(
        n=4,
        agent=[
            CandidateAgent(backend="claude", weight=2),
            CandidateAgent(backend="codex", model="gpt-5", extra_args=["-x"]),
        ],
    )
    dealt = deal(config, "auto-chosen", "default-model")
    assert [(d.number, d.backend, d.model) for d in dealt] == [
        (1, "claude", "default-model"),
        (2, "claude", "default-model"),
        (3, "codex", "gpt-5"),
        (4, "claude", "default-model"),
    ]
    assert dealt[2].extra_args == ("-x",) and dealt[0].extra_args is None
    plain = deal(CandidatesConfig(n=2), "command", "")
    assert [(d.number, d.backend) for d in plain] == [(1, "command"), (2, "command")]

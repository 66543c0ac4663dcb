"""Which agent to send: per task kind, Thompson sampling over the portfolio on what the kernel
recorded (landed, cost, time), valued as landed per dollar, each outcome decayed as memory's.

An agent's chance to land a kind of task is Beta(1 + landed, 1 + not landed) over its decayed
outcomes (memory.decayed: 0.95 ** days); one draw per agent from the kernel's random seed. Its
price is its mean cost on that kind plus its mean hours at TIME_PRICE_USD per hour, each mean
starting from a prior of PRIOR_RUNS runs at the agent's mean over every kind (else every
agent's). The order is by draw / price, highest first: landed per dollar, where an agent that
costs nothing is valued per hour instead. Only the kernel's facts count: a record's SUCCESS
(landed) against FAILURE, ROLLBACK and NO_CHANGE, of the portfolio entry the kernel says it
sent (`agent_key`), or a candidate's verdict (eligible against refused); never an agent's word.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from domain import AgentTally, IterationOutcome, IterationRecord, PortfolioAgent, TaskKind
from modules.planner import memory

TIME_PRICE_USD = 1.0
"""What an hour of an agent's time is worth next to its bill: money decides between priced
agents (a $0.40 run outweighs 20 minutes), time between free ones."""
PRIOR_RUNS = 1.0
"""Weight of the prior cost and time (runs' worth) before an agent's own runs on the kind."""
MIN_PRICE_USD = 1e-4
"""The least price a run is valued at (no division by zero for a free, instant agent)."""
_JUDGED = {
    IterationOutcome.SUCCESS: True,
    IterationOutcome.FAILURE: False,
    IterationOutcome.ROLLBACK: False,
    IterationOutcome.NO_CHANGE: False,
}
"""Outcomes that say whether the agent was right; the rest (waiting, aborted, kept for a
person, blocked by the person's checkout) say nothing about it."""
_AGENT_PHASES = ("execute", "inspect", "verify")
"""A single run's phases that are its agent's doing (a candidate's seconds are the same span)."""


@dataclass(frozen=True)
class Trial:
    """One verified outcome of one portfolio agent on one kind of task."""

    key: str
    kind: str
    landed: bool
    cost_usd: float
    seconds: float
    day: str


@dataclass(frozen=True)
class Choice:
    """The order the agents are dealt in, and why."""

    order: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class _Arm:
    key: str
    runs: int
    landed: int
    cost_usd: float
    value: float
    draw: float


def trials(records: Sequence[IterationRecord], keys: Sequence[str]) -> list[Trial]:
    """The verified outcomes of the portfolio's agents in the records."""
    found: list[Trial] = []
    for r in records:
        day = r.ended_at.date().isoformat()
        for c in r.candidates:
            if c.agent_key in keys and c.outcome in _JUDGED and c.rounds:
                landed = _JUDGED[c.outcome]
                found.append(Trial(c.agent_key, r.task_kind, landed, c.cost_usd, c.seconds, day))
        if r.candidates or r.agent_key not in keys or r.outcome not in _JUDGED:
            continue
        if "execute" not in r.durations:
            continue  # the agent never ran (a budget refusal, a blocked checkout)
        seconds = sum(r.durations.get(p, 0.0) for p in _AGENT_PHASES)
        cost = max(r.cost_usd, r.wire_cost_usd)
        found.append(Trial(r.agent_key, r.task_kind, _JUDGED[r.outcome], cost, seconds, day))
    return found


def tallied(tallies: Sequence[AgentTally], keys: Sequence[str]) -> list[Trial]:
    """The kernel's summary of every verified outcome as trials (each run at its day's mean
    cost and time): what the planner learns from when the kernel sends it."""
    found: list[Trial] = []
    for t in tallies:
        if t.key not in keys or t.tried <= 0:
            continue
        cost, seconds = t.cost_usd / t.tried, t.seconds / t.tried
        found += [Trial(t.key, t.task_kind, True, cost, seconds, t.day)] * t.landed
        found += [Trial(t.key, t.task_kind, False, cost, seconds, t.day)] * (t.tried - t.landed)
    return found


def _mean(pairs: Sequence[tuple[float, float]], prior: float) -> float:
    """A decayed mean of (weight, value) pairs, starting from PRIOR_RUNS runs at prior."""
    weight = sum(w for w, _ in pairs)
    return (PRIOR_RUNS * prior + sum(w * v for w, v in pairs)) / (PRIOR_RUNS + weight)


def _plain(pairs: Sequence[tuple[float, float]], default: float) -> float:
    weight = sum(w for w, _ in pairs)
    return sum(w * v for w, v in pairs) / weight if weight else default


def choose(
    portfolio: Sequence[PortfolioAgent],
    records: Sequence[IterationRecord],
    kind: TaskKind,
    now: datetime,
    seed: int,
    tallies: Sequence[AgentTally] = (),
) -> Choice | None:
    """The portfolio in the order to deal it for a task of this kind (None: fewer than two):
    learned from the kernel's tallies of every outcome when it sends them, else from the
    records it sent."""
    if len(portfolio) < 2:
        return None
    keys = [a.key for a in portfolio]
    seen = tallied(tallies, keys) if tallies else trials(records, keys)
    weighted = [(t, memory.decayed(now, t.day)) for t in seen]
    every_cost = _plain([(w, t.cost_usd) for t, w in weighted], 0.0)
    every_hours = _plain([(w, t.seconds / 3600) for t, w in weighted], 0.0)
    rng = random.Random(seed)
    arms: list[_Arm] = []
    for key in keys:
        mine = [(t, w) for t, w in weighted if t.key == key]
        here = [(t, w) for t, w in mine if t.kind == kind.value]
        wins = sum(w for t, w in here if t.landed)
        losses = sum(w for t, w in here if not t.landed)
        draw = rng.betavariate(1.0 + wins, 1.0 + losses)
        cost = _mean(
            [(w, t.cost_usd) for t, w in here],
            _plain([(w, t.cost_usd) for t, w in mine], every_cost),
        )
        hours = _mean(
            [(w, t.seconds / 3600) for t, w in here],
            _plain([(w, t.seconds / 3600) for t, w in mine], every_hours),
        )
        price = max(cost + hours * TIME_PRICE_USD, MIN_PRICE_USD)
        landed = sum(1 for t, _ in here if t.landed)
        arms.append(_Arm(key, len(here), landed, cost, draw / price, draw))
    ranked = sorted(arms, key=lambda a: -a.value)  # stable: a tie keeps the configured order
    return Choice(tuple(a.key for a in ranked), _why(kind, arms, ranked, seed))


def _why(kind: TaskKind, arms: Sequence[_Arm], ranked: Sequence[_Arm], seed: int) -> str:
    """One line: each agent's record on the kind, then what was drawn."""
    facts = ", ".join(
        f"{a.key} landed {a.landed} of {a.runs} at ${a.cost_usd:.2f}"
        if a.runs
        else f"{a.key} untried"
        for a in arms
    )
    drawn = " > ".join(f"{a.key} {a.value:.3g}" for a in ranked)
    return f"{kind.value}: {facts}; drew landed per $ {drawn} (seed {seed})"

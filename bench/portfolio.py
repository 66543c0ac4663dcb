"""Which agent to send, learned: the planner's choice against fixed ones, simulated.

    /work/venv/bin/python -m bench.portfolio                       # 500 iterations, 10 seeds
    /work/venv/bin/python -m bench.portfolio --seeds 1 --iterations 200 --window 0

Two scripted agents: a cheap one, right on lint gaps 80% of the time and on failing tests 10%
at $0.02 a run, and a dear one, right on both 60% at $0.40 (`--cheap-lint`, `--cheap-test`,
`--cheap-cost`, `--dear-lint`, `--dear-test`, `--dear-cost`), each run `--seconds` long (600).
Gaps come in a fixed sequence (lint with probability `--lint-share`, 0.5, else a failing test);
a gap stays open until an agent lands it, as seed tries a failed gap again (`--no-retry`: a
fresh gap every iteration). Attempt a at gap g meets one number u: an agent is right when u is
below its chance on the kind, so every strategy meets the same gaps and the same luck. The learned strategy calls the
planner's real choice (`modules.planner.portfolio.choose`, a pure function) with a random seed
drawn per iteration as the kernel does and the records the kernel would pass it: one
IterationRecord per earlier iteration (the key sent, the task kind, SUCCESS or ROLLBACK, the
cost, the agent's seconds), the latest `--window` of them (the kernel's RECENT_RECORDS, 50;
0: all), `--per-day` iterations a day (10) so memory's decay applies. It is compared with
always-cheap, always-dear, uniform random, and the best fixed choice per kind (known only to
the bench).

Figures per strategy, mean and spread (population standard deviation) over `--seeds`: landed
per dollar, landed per iteration, landed per agent hour, and value (landed per dollar with
each hour at the planner's TIME_PRICE_USD: what the learned choice maximises). Settled: the
first iteration from which, in every later window of 50, the learned choice sends the best
agent for the gap's kind at least 90% of the time (the best: the highest value per kind from
the true chances); `never` when that is not reached. Below the table: how often the learned
choice sent the best agent in the second half of the iterations.

No daemon, no sandbox, no git: a simulation of the choice alone.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from domain import (
    AgentTally,
    GapCategory,
    GapRef,
    IterationOutcome,
    IterationRecord,
    PortfolioAgent,
    TaskKind,
)
from kernel.bounds import RECENT_RECORDS
from kernel.records.store import agent_runs
from modules.planner.portfolio import TIME_PRICE_USD, choose

START = datetime(2026, 1, 1, tzinfo=UTC)
KINDS = (TaskKind.FIX_LINT, TaskKind.FIX_TEST)
SETTLE_WINDOW = 50
SETTLE_SHARE = 0.9


@dataclass(frozen=True)
class Agent:
    """A scripted agent: its chance to be right per kind, its price and time per run."""

    key: str
    right: dict[TaskKind, float]
    cost_usd: float
    seconds: float

    def value(self, kind: TaskKind) -> float:
        """Landed per dollar with time priced as the planner prices it."""
        return self.right[kind] / (self.cost_usd + self.seconds / 3600 * TIME_PRICE_USD)


@dataclass
class Run:
    """One strategy over one seed's iterations."""

    landed: int = 0
    cost_usd: float = 0.0
    hours: float = 0.0
    iterations: int = 0
    settled: int | None = None


Pick = Callable[[int, TaskKind, Sequence[IterationRecord]], str]


def _record(i: int, agent: Agent, kind: TaskKind, right: bool, per_day: int) -> IterationRecord:
    """The record the kernel would write for iteration i."""
    at = START + timedelta(days=i / per_day)
    return IterationRecord(
        iteration_id=f"iter-{i + 1:04d}-{at:%Y%m%d-%H%M%S}",
        started_at=at,
        ended_at=at + timedelta(seconds=agent.seconds),
        gap=GapRef(
            key=f"{kind.value}:{i}", category=GapCategory.QUALITY, source="bench", title="gap"
        ),
        outcome=IterationOutcome.SUCCESS if right else IterationOutcome.ROLLBACK,
        backend="command",
        task_kind=kind.value,
        cost_usd=agent.cost_usd,
        durations={"execute": agent.seconds},
        agent_key=agent.key,
    )


def simulate(
    agents: Sequence[Agent], args: argparse.Namespace, seed: int
) -> dict[str, tuple[Run, list[bool]]]:
    """Every strategy over the same gaps and luck; per strategy its run and, per iteration,
    whether it sent the best agent for the kind."""
    world = random.Random(seed)
    kinds = [
        KINDS[0] if world.random() < args.lint_share else KINDS[1] for _ in range(args.iterations)
    ]
    luck = [[world.random() for _ in range(args.iterations)] for _ in range(args.iterations)]
    """luck[g][a]: the number attempt a at gap g meets (the same for every strategy)."""
    by_key = {a.key: a for a in agents}
    best = {k: max(agents, key=lambda a: a.value(k)).key for k in KINDS}
    portfolio = tuple(PortfolioAgent(key=a.key, backend="command", model=a.key) for a in agents)
    kernel = random.Random(seed * 7919 + 1)  # the kernel's draws (the planner's seeds)
    coin = random.Random(seed * 104729 + 2)  # uniform random's choices

    tally: dict[tuple[str, str, str], list[float]] = {}
    """The kernel's summary of every record the learned choice made (`store.agent_tallies`)."""

    def learned(i: int, kind: TaskKind, seen: Sequence[IterationRecord]) -> str:
        now = START + timedelta(days=i / args.per_day)
        tallies = [
            AgentTally(
                key=k,
                task_kind=t,
                day=d,
                tried=int(v[0]),
                landed=int(v[1]),
                cost_usd=v[2],
                seconds=v[3],
            )
            for (k, t, d), v in tally.items()
        ]
        chosen = choose(
            portfolio,
            seen,
            kind,
            now,
            kernel.randrange(1, 2**31),
            () if args.records_only else tallies,
        )
        assert chosen is not None
        return chosen.order[0]

    strategies: dict[str, Pick] = {
        "learned": learned,
        "always cheap": lambda i, k, s: agents[0].key,
        "always dear": lambda i, k, s: agents[1].key,
        "uniform random": lambda i, k, s: coin.choice(agents).key,
        "best per kind (known)": lambda i, k, s: best[k],
    }
    out: dict[str, tuple[Run, list[bool]]] = {}
    for name, pick in strategies.items():
        run, hits, seen = Run(), list[bool](), list[IterationRecord]()
        gap = tries = 0
        for i in range(args.iterations):
            kind, u = kinds[gap], luck[gap][tries]
            window = seen[-args.window :] if args.window else seen
            agent = by_key[pick(i, kind, window)]
            right = u < agent.right[kind]
            tries += 1
            if right or not args.retry:  # a gap no agent closed is tried again (--retry)
                gap, tries = gap + 1, 0
            run.landed += right
            run.cost_usd += agent.cost_usd
            run.hours += agent.seconds / 3600
            run.iterations += 1
            hits.append(agent.key == best[kind])
            seen.append(_record(i, agent, kind, right, args.per_day))
            if name == "learned":  # the kernel tallies each record as it is written
                for _, key, landed, cost, seconds in agent_runs(seen[-1]):
                    day = seen[-1].ended_at.astimezone(UTC).date().isoformat()
                    row = tally.setdefault((key, kind.value, day), [0.0, 0.0, 0.0, 0.0])
                    row[0] += 1
                    row[1] += landed
                    row[2] += cost
                    row[3] += seconds
        run.settled = settled(hits)
        out[name] = (run, hits)
    return out


def settled(hits: Sequence[bool]) -> int | None:
    """The first iteration from which every later window holds SETTLE_SHARE best choices."""
    last = len(hits) - SETTLE_WINDOW
    if last < 0:
        return None
    good = [
        sum(hits[j : j + SETTLE_WINDOW]) >= SETTLE_SHARE * SETTLE_WINDOW for j in range(last + 1)
    ]
    if not good[-1]:
        return None
    first = last
    while first > 0 and good[first - 1]:
        first -= 1
    return first


def _stat(values: Sequence[float], fmt: str) -> str:
    mean = statistics.fmean(values)
    spread = statistics.pstdev(values) if len(values) > 1 else 0.0
    return f"{mean:{fmt}} ± {spread:{fmt}}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument(
        "--records-only",
        action="store_true",
        help="the planner learns from the records it is sent only (no kernel tallies: it forgets)",
    )
    parser.add_argument("--seeds", default="1,2,3,4,5,6,7,8,9,10")
    parser.add_argument("--lint-share", type=float, default=0.5)
    parser.add_argument("--cheap-lint", type=float, default=0.8)
    parser.add_argument("--cheap-test", type=float, default=0.1)
    parser.add_argument("--cheap-cost", type=float, default=0.02)
    parser.add_argument("--dear-lint", type=float, default=0.6)
    parser.add_argument("--dear-test", type=float, default=0.6)
    parser.add_argument("--dear-cost", type=float, default=0.40)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--per-day", type=int, default=10)
    parser.add_argument("--window", type=int, default=RECENT_RECORDS)
    parser.add_argument(
        "--retry",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a gap stays open until an agent lands it (--no-retry: a fresh gap each iteration)",
    )
    args = parser.parse_args(argv)
    agents = (
        Agent(
            "cheap",
            {TaskKind.FIX_LINT: args.cheap_lint, TaskKind.FIX_TEST: args.cheap_test},
            args.cheap_cost,
            args.seconds,
        ),
        Agent(
            "dear",
            {TaskKind.FIX_LINT: args.dear_lint, TaskKind.FIX_TEST: args.dear_test},
            args.dear_cost,
            args.seconds,
        ),
    )
    seeds = [int(s) for s in args.seeds.split(",") if s]
    runs: dict[str, list[Run]] = {}
    late: list[float] = []
    for seed in seeds:
        for name, (run, hits) in simulate(agents, args, seed).items():
            runs.setdefault(name, []).append(run)
            if name == "learned":
                late.append(statistics.fmean(hits[len(hits) // 2 :]))
    best = ", ".join(f"{k.value}: {max(agents, key=lambda a: a.value(k)).key}" for k in KINDS)
    print(
        f"{args.iterations} iterations, seeds {args.seeds}, window {args.window or 'all'}, "
        f"{args.per_day} a day, time at ${TIME_PRICE_USD:g}/hour, "
        f"{'failed gaps tried again' if args.retry else 'a fresh gap each iteration'}; "
        f"best per kind: {best}"
    )
    print()
    print(
        "| strategy | landed per $ | landed per iteration | landed per agent hour | value | settled at |"
    )
    print("|---|---|---|---|---|---|")
    for name, found in runs.items():
        per_usd = [r.landed / r.cost_usd for r in found]
        per_it = [r.landed / r.iterations for r in found]
        per_h = [r.landed / r.hours for r in found]
        value = [r.landed / (r.cost_usd + r.hours * TIME_PRICE_USD) for r in found]
        marks = [r.settled for r in found]
        if name != "learned":
            when = "-"
        elif all(m is not None for m in marks):
            when = _stat([float(m) for m in marks if m is not None], ".0f")
            when += f" (max {max(m for m in marks if m is not None)})"
        else:
            some = sorted(m for m in marks if m is not None)
            when = f"never in {sum(m is None for m in marks)} of {len(marks)} seeds" + (
                f"; the others at {', '.join(map(str, some))}" if some else ""
            )
        print(
            f"| {name} | {_stat(per_usd, '.2f')} | {_stat(per_it, '.3f')} | "
            f"{_stat(per_h, '.3f')} | {_stat(value, '.3f')} | {when} |"
        )
    print()
    print(f"learned: the best agent for the kind sent in the second half: {_stat(late, '.1%')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

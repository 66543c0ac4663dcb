"""Several candidates for one gap ([candidates] n > 1): who is dealt which run, each one's
facts as the kernel measured them, and the iteration's ending when none passed.

The loop runs each candidate exactly as a single iteration's agent (its own checkout, sandbox,
HOME, journal entry and repair rounds, judged by the same Judge); `judging/choice.py` picks
the winner, whose verified tree alone is landed.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Collection, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, fields
from pathlib import Path

from domain import AgentReport, Candidate, IterationOutcome
from kernel.config import CandidatesConfig, GuardConfig
from kernel.errors import Interrupted
from kernel.isolation import trees
from kernel.isolation.remote import USAGE_SAID
from kernel.judging.iteration import Ending, Iteration, Phase
from kernel.judging.judge import Passed
from kernel.loop.agentrun import counted, plus

_OWN = (
    "plan",
    "started",
    "journal",
    "recorded",
    "watch",
    "durations",
    "claimed_inbox",
    "candidates",
    "choice",
    "candidate",
)
"""Fields of the iteration that stay its own when a candidate's state is carried into it."""


@dataclass(frozen=True)
class Dealt:
    """One candidate's run: its number, backend, model and extra flags (None: [agent]'s), and
    its portfolio key ('' without a portfolio of two or more)."""

    number: int
    backend: str
    model: str
    extra_args: tuple[str, ...] | None
    key: str = ""
    weight: int = 1


def portfolio(config: CandidatesConfig, backend: str, model: str) -> list[Dealt]:
    """The portfolio's entries with their keys (backend:model, backend alone without a model,
    #N its place on a clash); empty with fewer than two: nothing to choose from."""
    if len(config.agent) < 2:
        return []
    entries: list[Dealt] = []
    for place, a in enumerate(config.agent, start=1):
        b, m = a.backend or backend, a.model or model
        key = f"{b}:{m}" if m else b
        if any(e.key == key for e in entries):
            key = f"{key}#{place}"
        entries.append(Dealt(0, b, m, _args(a.extra_args), key, a.weight))
    return entries


def backends(config: CandidatesConfig, backend: str) -> set[str]:
    """The backends the daemon may send: the portfolio's, else [agent]'s (`backend`)."""
    if config.n == 1 and len(config.agent) < 2:
        return {backend}
    return {a.backend or backend for a in config.agent} or {backend}


def deal(
    config: CandidatesConfig,
    backend: str,
    model: str,
    order: Sequence[str] = (),
    paused: Collection[str] = (),
) -> list[Dealt]:
    """The n runs, dealt from the portfolio by weight in the planner's order (empty: the
    configured order; no portfolio: n of [agent]'s), none of a `paused` backend's entries
    while another is free."""
    entries = portfolio(config, backend, model) or [
        Dealt(0, a.backend or backend, a.model or model, _args(a.extra_args), "", a.weight)
        for a in config.agent
    ]
    entries = [d for d in entries if d.backend not in paused] or entries
    place = {key: k for k, key in enumerate(order)}
    entries.sort(key=lambda d: place.get(d.key, len(place)))  # stable: ties keep their order
    cycle = [d for d in entries for _ in range(d.weight)] or [Dealt(0, backend, model, None)]
    return [
        Dealt(k + 1, d.backend, d.model, d.extra_args, d.key, d.weight)
        for k, d in ((k, cycle[k % len(cycle)]) for k in range(config.n))
    ]


def _args(extra: list[str] | None) -> tuple[str, ...] | None:
    return None if extra is None else tuple(extra)


def facts(
    it: Iteration,
    dealt: Dealt,
    verdict: Passed | Ending,
    seconds: float,
    keeps_uncovered: bool,
) -> Candidate:
    """What the kernel knows of one candidate once it is judged (nothing it said of itself)."""
    agent = it.agent
    tokens, cost = counted(it, agent)
    found = Candidate(
        number=dealt.number,
        backend=dealt.backend,
        model=dealt.model,
        outcome=IterationOutcome.SUCCESS,
        rounds=len(it.rounds) + 1,
        diff=it.diff,
        tokens_used=tokens,
        cost_usd=round(cost, 6),
        seconds=round(seconds, 3),
        host=it.host or socket.gethostname(),
        usage_from="the gateway"
        if it.wire_requests
        else (USAGE_SAID if it.host else "the tool's own report"),
        folder=it.plan.iteration_id,
        agent_key=dealt.key,
    )
    if isinstance(verdict, Ending):
        return found.model_copy(
            update={
                "outcome": verdict.outcome,
                "failure_category": verdict.category,
                "reason": verdict.reason[:500],
            }
        )
    verification = verdict.verification
    return found.model_copy(
        update={
            "reason": verification.reason[:500],
            "eligible": True,
            "needs_person": bool(verification.changed_tests)
            or (bool(verification.uncovered) and keeps_uncovered),
            "uncovered": len(verification.uncovered),
        }
    )


def with_outside(candidate: Candidate, root: Path, it: Iteration, passed: Passed) -> Candidate:
    """The candidate with its changed lines outside the plan's suspect files and the bytes of
    the binary files it changed counted from its tree (a binary file counts its bytes where
    git counts it no lines: it is never the smaller change for that)."""
    sizes = trees.sizes(root, it.base, passed.tree, passed.store.env())
    named = set(it.plan.suspect_files)
    outside = sum(s.lines + s.binary_bytes for p, s in sizes.items() if p not in named)
    binary = sum(s.binary_bytes for s in sizes.values())
    return candidate.model_copy(update={"outside_suspects": outside, "binary_bytes": binary})


def not_run(dealt: Dealt, why: str) -> Candidate:
    """A candidate that never ran (cancelled once another won first, or the iteration ended)."""
    return Candidate(
        number=dealt.number,
        backend=dealt.backend,
        model=dealt.model,
        outcome=IterationOutcome.ABORTED,
        reason=why,
        rounds=0,
        agent_key=dealt.key,
    )


def carry(into: Iteration, source: Iteration) -> None:
    """Carry a candidate's state (its tree, usage, rounds, checkout) into the iteration that
    records it; the iteration keeps its own plan, journal and start."""
    for f in fields(Iteration):
        if f.name not in _OWN:
            setattr(into, f.name, getattr(source, f.name))


def add_usage(into: Iteration, runs: list[Iteration], cut_short: float = 0.0) -> None:
    """The iteration's usage: every candidate's runs, summed (one record counts them all),
    and what runs cut short were settled at in the ledger."""
    total: AgentReport | None = (
        None if not cut_short else AgentReport(success=False, cost_usd=cut_short)
    )
    for run in runs:
        if run.agent is not None:
            total = plus(total, run.agent)
    into.agent = total
    into.wire_tokens = sum(r.wire_tokens for r in runs)
    into.wire_cost_usd = round(sum(r.wire_cost_usd for r in runs), 6)
    into.wire_requests = sum(r.wire_requests for r in runs)
    into.model_turns = [t for r in runs for t in r.model_turns]


def none_passed(candidates: list[Candidate], first: Ending) -> Ending:
    """The iteration's one ending when no candidate passed: the first candidate's outcome and
    category, every candidate's in the evidence (the next plan reads them all)."""
    lines = [
        f"candidate {c.number} ({c.backend}{f', {c.model}' if c.model else ''}): "
        f"{c.outcome.value}"
        + (f" {c.failure_category.value}" if c.failure_category else "")
        + f": {c.reason}"
        for c in candidates
    ]
    return Ending(
        first.outcome,
        first.category,
        f"none of the {len(candidates)} candidates passed; candidate 1: {first.reason}",
        evidence=[*lines, *first.evidence],
        verification=first.verification,
    )


def cores() -> int:
    """The cores this process may use: how many candidates verify at once."""
    return max(len(os.sched_getaffinity(0)), 1)


def parallel(config: CandidatesConfig, guard: GuardConfig, n: int, sandboxed: bool) -> int:
    """Candidates run at once: [candidates] parallel, else as many sandboxes as the free
    memory holds (agents mostly wait on their model; verifications share the cores apart).
    Unsandboxed, one at a time: a change to the person's checkout must be one run's."""
    if not sandboxed:
        return 1
    if config.parallel:
        return min(config.parallel, n)
    free_mb = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024)
    return max(1, min(n, free_mb // guard.sandbox_memory_mb))


class Field:
    """The candidates of one iteration as their threads report them (one lock for all)."""

    def __init__(self, dealt: Sequence[Dealt], phase: Phase, first_wins: bool) -> None:
        self._lock = threading.Lock()
        self._dealt = list(dealt)
        self._phase = phase
        self._first_wins = first_wins
        self._runs: dict[int, Iteration] = {}
        self._verdicts: dict[int, Passed | Ending] = {}
        self._found: dict[int, Candidate] = {}
        self._shown: dict[int, str] = {d.number: "waiting" for d in dealt}
        self._log = ""
        self.cancel = {d.number: threading.Event() for d in dealt}
        """Set for a running candidate the kernel no longer needs (first_wins)."""

    def won(self) -> int:
        """The candidate that passed first, when the first one wins (0: none yet, or not so)."""
        with self._lock:
            if not self._first_wins:
                return 0
            return next((n for n, c in self._found.items() if c.eligible), 0)

    def enter(self, deal: Dealt, run: Iteration) -> Iteration:
        """A candidate's run begins."""
        with self._lock:
            self._runs[deal.number] = run
        return run

    def skip(self, deal: Dealt, why: str) -> None:
        """A candidate that is not run."""
        with self._lock:
            self._found[deal.number] = not_run(deal, why)
            self._shown[deal.number] = "not run"
        self._show()

    def judged(self, number: int, verdict: Passed | Ending, found: Candidate) -> None:
        """A candidate's verdict and facts; with first_wins, the first eligible cancels the rest."""
        with self._lock:
            self._verdicts[number] = verdict
            self._found[number] = found
            self._shown[number] = "passed" if found.eligible else found.outcome.value
            if found.eligible and self._first_wins:
                for other, event in self.cancel.items():
                    if other != number:
                        event.set()
        self._show()

    def phase(self, number: int) -> Phase:
        """The Phase of one candidate: status shows every candidate's at once."""

        def shown(name: str, detail: str) -> None:
            with self._lock:
                self._shown[number] = name
                if "log: " in detail:
                    self._log = detail.rsplit("log: ", 1)[1]
            self._show(name)

        return shown

    def _show(self, name: str = "") -> None:
        with self._lock:
            board = "; ".join(
                f"candidate {d.number} ({d.backend}): {self._shown[d.number]}"
                + (f" on {self._runs[d.number].host}" if self._ran_on(d.number) else "")
                for d in self._dealt
            )
            log = self._log
        running = name or "candidates"
        self._phase(running, f"{board}" + (f"; log: {log}" if log else ""))

    def _ran_on(self, number: int) -> bool:
        """Whether the candidate's run is known to be on another host (a Ray worker's)."""
        run = self._runs.get(number)
        return run is not None and bool(run.host)

    def candidates(self) -> list[Candidate]:
        """Every candidate's facts so far, in dealt order."""
        with self._lock:
            return [self._found[n] for n in sorted(self._found)]

    def runs(self) -> list[Iteration]:
        """The runs that began, in dealt order."""
        with self._lock:
            return [self._runs[n] for n in sorted(self._runs)]

    def numbered(self) -> list[tuple[int, Iteration]]:
        """The runs that began, with their numbers."""
        with self._lock:
            return sorted(self._runs.items())

    def run(self, number: int) -> Iteration:
        """One candidate's run."""
        with self._lock:
            return self._runs[number]

    def verdict(self, number: int) -> Passed | Ending | None:
        """One candidate's verdict (None: it never ran)."""
        with self._lock:
            return self._verdicts.get(number)

    def raise_first(self, done: Sequence[Future[None]]) -> None:
        """Raise what a candidate's thread raised: an interruption first (the daemon stops)."""
        errors = [e for f in done if (e := f.exception()) is not None]
        stop = next((e for e in errors if isinstance(e, Interrupted)), None)
        if stop is not None or errors:
            raise stop or errors[0]

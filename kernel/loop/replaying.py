"""`seed.py replay`: a recorded iteration's agent run again, offline, judged, recorded nowhere.

A fresh checkout at the record's base, at the recorded checkout's path; the recorded plan and
backend, the base measured (as cached); the agent runs in its sandbox with network
"model-only", and the gateway behind its one route answers from history/<id>/model.jsonl
(records/replay.py): no upstream, no key, nothing reaches the network. The kernel then judges
the agent's tree as it judged the iteration's and compares it with the recorded one. No ledger
line, no budget reserved, no inbox task claimed, no journal, no record, no landing: the run's
log, prompt and its own model.jsonl go to history/<id>/replay-<n>/, never over the recorded
files.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from domain import IterationOutcome, IterationRecord, RunSpec
from kernel.errors import SeedError
from kernel.fsutil import atomic_write_text, plain_file
from kernel.host.answers import Backend
from kernel.host.context import Context
from kernel.isolation import agentgit, jails, watch
from kernel.judging.iteration import Ending, Iteration, Phase, noop_phase
from kernel.judging.judge import Judge, Passed, Retry, build_candidate
from kernel.loop import modelrun
from kernel.loop.agentrun import AgentRunner
from kernel.loop.analysis import measure_base
from kernel.loop.loop import Loop
from kernel.loop.recording import round_of
from kernel.measuring.baseline import Baseline
from kernel.records import budget, replay
from kernel.records.exchanges import RecordingRefused

FOLDER = "replay-"
"""history/<id>/replay-<n>/: one replay's files (n from 1, never an earlier replay's)."""


class Refused(SeedError):
    """A recording this replay cannot run (exit 2): edited, or not what the config runs now."""


@dataclass(frozen=True)
class Replayed:
    """How a replay went: both trees, where the requests left the recording, the verdict."""

    round: int
    recorded: str
    """The agent's tree the record holds for this round ('' when none was read)."""
    tree: str
    """The replayed agent's tree, read as the judge reads it."""
    divergence: replay.Divergence | None
    turns: int
    answered: int
    outcome: str
    category: str
    reason: str
    folder: Path
    seconds: float
    agent_s: float
    """Of which the agent's runs (the rest: the base measured, the checkout, the judge)."""

    @property
    def same(self) -> bool:
        """The replay reached the recorded tree."""
        return bool(self.recorded) and self.tree == self.recorded

    @property
    def reproduced(self) -> bool:
        """The recorded tree, reached the recorded way: every request was the recorded one."""
        return self.same and self.divergence is None


class _Runner(AgentRunner):
    """An agent run that leaves no trace: no budget reserved nor ledger line, no inbox task
    claimed; its files in the replay's folder; its model the recording."""

    def __init__(self, ctx: Context, phase: Phase, recording: replay.Replay, folder: Path) -> None:
        super().__init__(ctx, phase)
        self._recording, self._into = recording, folder

    def _reserve(self, it: Iteration) -> tuple[float, str]:
        return 0.0, ""  # nothing is spent

    def _claim_inbox(self, it: Iteration) -> None:
        return None

    def _folder(self, iteration_id: str) -> Path:
        return self._into

    def _model(self, it: Iteration) -> modelrun.ModelRun:
        return modelrun.for_run(self.ctx, it, self._recording.answer, self._into)

    def _ledger(self, entry: budget.LedgerEntry) -> None:
        return None


def recorded_tree(record: IterationRecord, number: int) -> str:
    """The agent's tree the record holds for round `number` (a repair round's record keeps
    every round's; a record of one round, the iteration's)."""
    rounds = record.rounds
    return rounds[number - 1].tree if number <= len(rounds) else record.agent_tree


def load(ctx: Context, record: IterationRecord, number: int) -> list[replay.Replay]:
    """Rounds 1..number of the recording, each verified against its seal (Refused if not)."""
    masked = replay.VOLATILE.get(record.backend, ())
    volatile = (replay.checkouts(ctx.paths.checkouts), *masked)
    folder = ctx.paths.history / record.iteration_id
    try:
        return [
            replay.Replay.load(folder, ctx.paths.state, n, volatile) for n in range(1, number + 1)
        ]
    except RecordingRefused as refused:
        raise Refused(f"the recording of {record.iteration_id} is refused: {refused}") from None


def run(
    ctx: Context, record: IterationRecord, rounds: list[replay.Replay], phase: Phase = noop_phase
) -> Replayed:
    """Replay the record's last round of `rounds` (the earlier ones first, as the loop ran them)."""
    plan = record.plan
    if plan is None:
        raise Refused(f"{record.iteration_id} has no plan recorded")
    backend = ctx.backend()
    if backend.name != record.backend:
        raise Refused(
            f"{record.iteration_id} ran {record.backend or 'no agent'}; the config's backend is "
            f"{backend.name}: a replay runs the recorded one"
        )
    sandboxed = jails.active(ctx.config.guard)
    if modelrun.network(ctx.config.agent, backend.name, sandboxed) != "model-only":
        said = modelrun.said(ctx.config.agent, backend.name, sandboxed) or "none"
        raise Refused(f"a replay runs with network model-only only; here it would be {said}")
    started = time.monotonic()
    loop = Loop(ctx, phase)
    into = _next_folder(ctx.paths.history / record.iteration_id)
    # the recorded checkout's own path, as its agent's requests may carry it (aider sends its
    # files in a set's order of their absolute paths): that run is over and this replay holds
    # the daemon's lock, so a checkout there is the kernel's own leftover, which create removes
    name = record.checkout or f"wt-{os.getpid()}-{datetime.now(UTC):%Y%m%d%H%M%S%f}"
    worktree = agentgit.create(ctx.paths, name, record.base)
    run_dir = ctx.paths.runs / plan.iteration_id
    made = not run_dir.exists()
    try:
        baseline = measure_base(ctx, worktree, record.base)
        it = Iteration(plan, record.base, datetime.now(UTC), Backend(*_named(backend)), worktree)
        it.sandboxed, it.watch = sandboxed, watch.take(ctx.paths.root, ctx.target.python)
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / "plan.json", plan.model_dump_json(indent=2))  # as journalled
        spec = ctx.host.agent_spec(backend.name, plan, loop.agent_context(worktree))
        if spec is None or spec.cannot:
            raise Refused(f"{backend.name} gives no run for this plan now")
        judge = Judge(ctx, phase)
        for number, recording in enumerate(rounds, 1):
            it.agent_tree = ""
            it.resumed = spec.resumes
            ended = _Runner(ctx, phase, recording, into).execute(it, spec)
            last = number == len(rounds)
            verdict = ended or judge.judge(it, baseline, retry=not last)
            tree = it.agent_tree or _tree(ctx, it, baseline)
            recorded = recorded_tree(record, number)
            if last or not isinstance(verdict, Retry) or tree != recorded:
                done = _replayed(number, recorded, tree, recording, verdict, into, started)
                return replace(done, agent_s=it.durations.get("execute", 0.0))
            spec = _next_round(ctx, loop, it, verdict, backend.name)
        raise AssertionError("no round replayed")  # rounds holds round 1 at least
    finally:
        loop.discard(worktree)
        shutil.rmtree(ctx.paths.homes / plan.iteration_id, ignore_errors=True)
        if made:
            shutil.rmtree(run_dir, ignore_errors=True)


def _named(backend: Backend) -> tuple[str, str, tuple[str, ...]]:
    return backend.name, backend.reason, backend.sources


def _next_folder(history: Path) -> Path:
    """history/<id>/replay-<n>/ for the first n not taken (made here, so never shared)."""
    number = 1
    while True:
        folder = history / f"{FOLDER}{number}"
        try:
            folder.mkdir()
        except FileExistsError:
            number += 1
            continue
        return folder


def _tree(ctx: Context, it: Iteration, baseline: Baseline) -> str:
    """The agent's tree where the run ended before the judge read it, read as the judge reads it."""
    return build_candidate(ctx, it, baseline)[0].tree


def _next_round(ctx: Context, loop: Loop, it: Iteration, verdict: Retry, name: str) -> RunSpec:
    """The next round's run as the loop gives it: the kernel's repairs carried over, the
    judge's feedback, the session resumed."""
    it.rounds.append(round_of(it, IterationOutcome.ROLLBACK, verdict.category, verdict.reason))
    for path, data in it.repaired.items():
        if plain_file(it.worktree, path):
            (it.worktree / path).write_bytes(data)
    it.repaired = {}
    context = loop.agent_context(it.worktree).model_copy(
        update={"round": len(it.rounds) + 1, "resume": it.session, "feedback": verdict.feedback}
    )
    following = ctx.host.agent_spec(name, it.plan, context)
    if following is None:
        raise Refused(f"{name} gives no run for round {len(it.rounds) + 1} now")
    return following


def _replayed(
    number: int,
    recorded: str,
    tree: str,
    recording: replay.Replay,
    verdict: Passed | Retry | Ending,
    into: Path,
    started: float,
) -> Replayed:
    if isinstance(verdict, Passed):
        outcome, category, reason = "SUCCESS", "", "verified (a replay lands nothing)"
    elif isinstance(verdict, Retry):
        outcome, reason = IterationOutcome.ROLLBACK.value, verdict.reason
        category = verdict.category.value if verdict.category else ""
    else:
        outcome, reason = verdict.outcome.value, verdict.reason
        category = verdict.category.value if verdict.category else ""
    return Replayed(
        number,
        recorded,
        tree,
        recording.divergence,
        recording.turns,
        recording.answered,
        outcome,
        category,
        reason,
        into,
        time.monotonic() - started,
        0.0,
    )

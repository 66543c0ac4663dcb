"""One iteration: prepare, analyse, plan, clamp, execute, inspect, verify, land, record.

The user's checkout is only ever touched by `git merge --ff-only` (and by moving inbox
files); all work happens in a worktree under <git-common-dir>/seed/wt/.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from domain import (
    AgentContext,
    GapReport,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    ProjectState,
    RunSpec,
)
from kernel import faults, gitops, halt, jails, watch
from kernel.agentrun import AgentRunner
from kernel.analysis import Baseline, analyse, fail_quarantined
from kernel.attempt import Attempt, Phase, mono, noop_phase, waiting
from kernel.context import Backend, Context
from kernel.contracts import protected_patterns
from kernel.errors import HostError, Interrupted
from kernel.fsutil import plain_file
from kernel.guard import clamp_plan
from kernel.journal import Journal
from kernel.landing import Lander
from kernel.measure import ruff_binary
from kernel.modhost import reload_after_landing
from kernel.quarantine import publish_quarantine, quarantine, tree_digest
from kernel.recording import QUARANTINED, WAITING, Recorder, round_of
from kernel.store import RecordStore

Analysed = Callable[[GapReport, Mapping[str, str]], None]
"""Called after each analysis with the ranking and the gaps passed over (status shows them)."""


class Iteration:
    """Runs one iteration of the loop for a context."""

    def __init__(
        self, ctx: Context, phase: Phase = noop_phase, analysed: Analysed | None = None
    ) -> None:
        self.ctx = ctx
        self.phase = phase
        self.analysed = analysed

    def prepare(self) -> tuple[str, Path] | None:
        """A fresh worktree at HEAD, or None when the repository has no commits."""
        head = gitops.head(self.ctx.paths.root)
        if head is None:
            return None
        name = f"wt-{os.getpid()}-{datetime.now(UTC):%Y%m%d%H%M%S%f}"
        path = self.ctx.paths.worktrees / name
        gitops.worktree_add(self.ctx.paths.root, path, head)
        return head, path

    def discard(self, worktree: Path) -> None:
        """Remove a worktree and what the kernel kept for it (never anything in the user's
        checkout): its gate folder and its private object folders."""
        gitops.worktree_remove(self.ctx.paths.root, worktree)
        paths = self.ctx.paths
        for folder in (paths.gate, paths.objects):
            shutil.rmtree(folder / worktree.name, ignore_errors=True)
        shutil.rmtree(paths.objects / f"{worktree.name}-agent", ignore_errors=True)

    def run(self, *, execute: bool = True, single: bool = False) -> list[IterationRecord]:
        """Analyse, then plan and run gaps until one runs an agent or none is left.

        Returns the records written (WAITING ones, then at most one that ran an agent).
        `single` (`once`): one record at most; gaps no agent can take are passed over in the
        log, and recorded as WAITING only when none can run.
        """
        ctx = self.ctx
        free = _free_mb(ctx.paths.state)
        if free < ctx.config.guard.min_free_mb and not halt.read_halt(ctx.paths.history).halted:
            reason = f"the disk is full: {free} MB free where the kernel works ({ctx.paths.state}); free some space, then `python seed.py resume`"
            ctx.log(reason)
            halt.halt(ctx.store, reason, "DISK_FULL")
            return []
        prepared = self.prepare()
        if prepared is None:
            ctx.log("the repository has no commits yet: nothing to analyse")
            return []
        head, worktree = prepared
        faults.fault("prepare")
        began = watch.take(ctx.paths.root, ctx.target.python)
        records_written: list[IterationRecord] = []
        unrecorded: list[tuple[Attempt, str]] = []
        attempt: Attempt | None = None
        journal = Journal(ctx.paths.running)
        recorder = Recorder(ctx)
        runner = AgentRunner(ctx, self.phase, recorder)
        lander = Lander(ctx, self.phase, recorder)
        try:
            now = datetime.now(UTC).replace(microsecond=0)
            self.phase("analysing", "")
            t0 = mono()
            baseline = analyse(ctx, worktree, head, now)
            history = planning_history(ctx.store, baseline.report)
            reasons = quarantine(baseline.report, history, tree_digest(ctx.paths.root), head)
            held = tuple(sorted(reasons))
            publish_quarantine(ctx, reasons)
            fail_quarantined(ctx, baseline.report, held)
            analyse_s = mono() - t0
            faults.fault("analysis")
            backend = ctx.backend()
            parked = waiting(baseline.report, history, backend.name)
            skip = set(held) | parked
            passed_over = {k: WAITING for k in parked} | {k: QUARANTINED for k in held}
            recorder.note_baseline(baseline.report, passed_over)
            if self.analysed is not None:
                self.analysed(baseline.report, passed_over)
            report = baseline.report.model_copy(
                update={
                    "gaps": tuple(g for g in baseline.report.gaps if g.key not in skip),
                    "skipped": tuple(sorted(set(baseline.report.skipped) | skip)),
                }
            )
            history = for_planner(history, report)
            blocker = gitops.land_blocker(ctx.paths.root)
            hstate = halt.read_halt(ctx.paths.history)
            sequence = ctx.store.next_sequence()
            while True:
                self.phase("planning", "")
                t1 = mono()
                state = self.project_state(
                    now, sequence, worktree, head, blocker, backend, hstate, held
                )
                plan = ctx.host.plan(report, history, state)
                plan_s = mono() - t1
                if plan is None:
                    if unrecorded and not records_written:
                        records_written.append(recorder.record_waiting(*unrecorded[0]))
                    return records_written
                expected = f"iter-{sequence:04d}-{now:%Y%m%d-%H%M%S}"
                if plan.iteration_id != expected:
                    raise HostError(
                        f"planner returned id {plan.iteration_id}, the kernel allocated {expected}"
                    )
                if plan.gap.key not in {g.key for g in report.gaps}:
                    raise HostError(
                        f"planner planned gap {plan.gap.key!r}, which is not in the report"
                    )
                plan = clamp_plan(
                    plan,
                    ctx.config,
                    protected_patterns(ctx.config.guard.protected),
                    ctx.paths.selfhost,
                    baseline.gate.adoption.tools,
                )
                name, spec_reason = self.choose(plan, backend)
                attempt = Attempt(
                    plan=plan,
                    base=head,
                    started=datetime.now(UTC),
                    backend=backend,
                    worktree=worktree,
                )
                attempt.durations["analyse"] = round(analyse_s, 3)
                attempt.durations["plan"] = round(plan_s, 3)
                attempt.sandboxed = jails.active(ctx.config.guard)
                attempt.watch = began
                unjailed = "" if name in UNSANDBOXED else jails.why_not(ctx.config.guard)
                why_not = (
                    spec_reason
                    or unjailed
                    or (f"cannot land: {blocker}" if blocker else "")
                    or (f"halted: {hstate.reason}" if hstate.halted else "")
                    or ("" if execute else "plan only")
                )
                spec = None
                if not why_not and name != "none":
                    spec = ctx.host.agent_spec(name, plan, self.agent_context(worktree))
                    if spec is None:
                        why_not = f"{name} cannot take this gap"
                if spec is None:
                    why = why_not or f"backend {name} only writes plans"
                    if single:
                        unrecorded.append((attempt, why))
                        ctx.log(f"passed over {plan.gap.key}: {why}")
                    else:
                        records_written.append(recorder.record_waiting(attempt, why))
                        sequence += 1
                    report = report.model_copy(
                        update={"gaps": tuple(g for g in report.gaps if g.key != plan.gap.key)}
                    )
                    attempt = None
                    continue
                attempt.backend = Backend(name, backend.reason, backend.sources)
                attempt.journal = journal
                journal.begin(
                    plan, ctx.paths.runs / plan.iteration_id / "plan.json", head, worktree, name
                )
                faults.fault("plan")
                record = self._rounds(attempt, spec, baseline, name, runner, lander)
                records_written.append(record)
                if record.outcome == IterationOutcome.SUCCESS:
                    self.phase("reloading modules", "")
                    reload_after_landing(ctx, record.touched_files)
                return records_written
        except Interrupted:
            if attempt is not None and not attempt.recorded:
                records_written.append(
                    recorder.finish(
                        attempt,
                        IterationOutcome.ABORTED,
                        attempt.violation(),
                        "interrupted (Ctrl-C or SIGTERM); the work was discarded",
                        evidence=attempt.integrity_evidence,
                    )
                )
            raise
        except Exception as exc:
            if attempt is not None and attempt.journal is not None and not attempt.recorded:
                # the loop carries on after an error: the attempt must not vanish unrecorded
                with contextlib.suppress(Exception):
                    recorder.finish(
                        attempt,
                        IterationOutcome.ABORTED,
                        attempt.violation(),
                        f"the iteration stopped on an error; its work was discarded: {type(exc).__name__}: {exc}"[
                            :1000
                        ],
                        evidence=attempt.integrity_evidence,
                    )
            raise
        finally:
            if attempt is not None and attempt.recorded:
                faults.fault("cleanup")
            self.phase("cleaning up", "")
            if (
                attempt is not None
                and attempt.branch
                and not attempt.branch.startswith("seed/kept/")
            ):
                with contextlib.suppress(gitops.GitError):
                    gitops.worktree_remove(ctx.paths.root, worktree)
                    gitops.delete_branch(ctx.paths.root, attempt.branch)
            self.discard(worktree)
            if attempt is not None:
                shutil.rmtree(ctx.paths.homes / attempt.plan.iteration_id, ignore_errors=True)
            journal.end()

    def choose(self, plan: IterationPlan, backend: Backend) -> tuple[str, str]:
        """The backend for this plan: the planner's route if it names one, else the one in use."""
        if plan.route and plan.route in ("ruff-fix", "none"):
            return plan.route, ""
        if "*" in backend.sources or plan.gap.source in backend.sources:
            return backend.name, ""
        if backend.fallback:
            return (
                backend.fallback,
                f"{backend.name} cannot take {plan.gap.source} gaps and no agent is installed",
            )
        return "none", f"{backend.name} cannot take {plan.gap.source} gaps"

    def project_state(
        self,
        now: datetime,
        sequence: int,
        worktree: Path,
        head: str,
        blocker: str,
        backend: Backend,
        hstate: halt.HaltState,
        quarantined: tuple[str, ...],
    ) -> ProjectState:
        """What the planner may know besides the gaps."""
        ctx = self.ctx
        return ProjectState(
            now=now,
            next_sequence=sequence,
            root_name=ctx.paths.root.name,
            worktree=str(worktree),
            branch=gitops.current_branch(ctx.paths.root),
            head=head,
            can_land=not blocker,
            land_blocker=blocker,
            backend=backend.name,
            backend_reason=backend.reason,
            backend_sources=backend.sources,
            halted=hstate.halted,
            halt_reason=hstate.reason,
            quarantined=quarantined,
            fingerprint=ctx.store.fingerprint,
            tallies=tuple(ctx.store.tallies()),
            protected=protected_patterns(ctx.config.guard.protected),
            pyright_strict=ctx.target.strict,
            selfhost=ctx.paths.selfhost,
        )

    def _rounds(
        self,
        attempt: Attempt,
        spec: RunSpec,
        baseline: Baseline,
        name: str,
        runner: AgentRunner,
        lander: Lander,
    ) -> IterationRecord:
        """The agent's run, then up to [agent] repair_rounds more in the same worktree while
        the kernel refuses the change; the record is the last round's."""
        ctx = self.ctx
        # ruff-fix is deterministic: another round would do the same again
        left = 0 if name in UNSANDBOXED else ctx.config.agent.repair_rounds
        while True:
            used = attempt.agent
            attempt.round_start = (used.tokens_used, used.cost_usd) if used else (0, 0.0)
            attempt.resumed = spec.resumes
            record = runner.execute(attempt, spec)
            if record is not None:
                return record
            verdict = lander.inspect_and_land(attempt, baseline, retry=left > 0 and _room(attempt))
            if isinstance(verdict, IterationRecord):
                return verdict
            left -= 1
            attempt.rounds.append(
                round_of(attempt, IterationOutcome.ROLLBACK, verdict.category, verdict.reason)
            )
            ctx.log(
                f"{attempt.plan.iteration_id}: round {len(attempt.rounds)} refused "
                f"({verdict.category.value if verdict.category else 'refused'}); "
                f"the agent gets round {len(attempt.rounds) + 1}"
            )
            for path, data in attempt.repaired.items():  # the kernel's repairs carry over
                if plain_file(attempt.worktree, path):
                    (attempt.worktree / path).write_bytes(data)
            attempt.repaired = {}
            context = self.agent_context(attempt.worktree).model_copy(
                update={
                    "round": len(attempt.rounds) + 1,
                    "resume": attempt.session,
                    "feedback": verdict.feedback,
                }
            )
            following = ctx.host.agent_spec(name, attempt.plan, context)
            if following is None:
                return runner.recorder.finish(
                    attempt,
                    IterationOutcome.ROLLBACK,
                    verdict.category,
                    f"{verdict.reason} (no repair round: {name} gave no run for it)",
                )
            spec = following

    def agent_context(self, worktree: Path) -> AgentContext:
        """What adapters may know."""
        agent = self.ctx.config.agent
        return AgentContext(
            worktree=str(worktree),
            seed_home=str(self.ctx.paths.seed_home),
            python=_daemon_python(),
            ruff=ruff_binary(),
            command=tuple(agent.command),
            model=agent.model,
            options={
                "max_turns": agent.max_turns,
                "allowed_tools": list(agent.allowed_tools),
                "api_base": agent.api_base,
                "extra_args": list(agent.extra_args),
                "sandboxed": jails.active(self.ctx.config.guard),
            },
        )

    # -- execute, inspect, verify, land -------------------------------------------


def _room(attempt: Attempt) -> bool:
    """Whether the iteration's budget leaves room for another round (rounds share it)."""
    used, budget = attempt.agent, attempt.plan.budget
    if used is None:
        return True
    spent_tokens = budget.max_tokens and used.tokens_used >= budget.max_tokens
    spent_cost = budget.max_cost_usd and used.cost_usd >= budget.max_cost_usd
    return not (spent_tokens or spent_cost)


UNSANDBOXED = ("ruff-fix", "none")
"""Backends that run no repository code and no model: they need no sandbox."""

RECENT_RECORDS = 50
"""Latest records read for every plan (halts and reports look at these)."""
PER_GAP_RECORDS = 5
"""Latest records of each gap in the report read for every plan (quarantine, the planner's streaks)."""


def planning_history(store: RecordStore, report: GapReport) -> list[IterationRecord]:
    """What quarantine and the planner judge: the latest records and each reported gap's latest,
    as briefs (no plan) read from the index, never a scan of records.jsonl; oldest first."""
    keys = [g.key for g in report.gaps]
    return _merge(
        store.recent(RECENT_RECORDS, brief=True),
        store.for_gaps(keys, per_gap=PER_GAP_RECORDS, brief=True),
    )


def for_planner(history: Sequence[IterationRecord], report: GapReport) -> list[IterationRecord]:
    """The records the planner needs: those of the gaps it may plan, and the latest ones
    (history's tail, as planning_history reads it); a held-back gap's older records stay out."""
    keys = {g.key for g in report.gaps}
    tail = len(history) - RECENT_RECORDS
    return [r for i, r in enumerate(history) if i >= tail or r.gap.key in keys]


def _merge(a: Sequence[IterationRecord], b: Sequence[IterationRecord]) -> list[IterationRecord]:
    seen: dict[str, IterationRecord] = {}
    for record in (*a, *b):
        seen[record.iteration_id] = record
    return sorted(seen.values(), key=lambda r: (r.started_at, r.iteration_id))


def _free_mb(path: Path) -> int:
    """Free disk where the kernel works (MiB); very large when it cannot be told."""
    probe = path if path.exists() else path.parent
    try:
        return shutil.disk_usage(probe).free // (1024 * 1024)
    except OSError:
        return 1 << 40


def _daemon_python() -> str:
    return sys.executable

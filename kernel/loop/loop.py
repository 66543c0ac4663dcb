"""One pass of the loop: analyse, plan, clamp, run the agent, judge, land, record.

Each phase returns a value; the iteration ends in an Ending, and `Loop.run` records it in one
place. The user's checkout is only ever touched by `git merge --ff-only` (and by moving inbox
files); all work happens in the agent's own checkout (`agentgit.py`), outside the `.git`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from domain import (
    AgentContext,
    FailureCategory,
    GapReport,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    PlanningOrder,
    PortfolioAgent,
    ProjectState,
    RunSpec,
)
from kernel import faults
from kernel.bounds import PER_GAP_RECORDS, RECENT_RECORDS
from kernel.contracts import protected_patterns
from kernel.errors import HostError, Interrupted, SeedError
from kernel.fsutil import atomic_write_text, plain_file
from kernel.host.answers import Backend
from kernel.host.context import Context
from kernel.isolation import agentgit, blockers, gitops, jails, procs, relay, remote, watch
from kernel.isolation.rayengine import RayEngine
from kernel.judging import choice, landing
from kernel.judging.guard import clamp_plan
from kernel.judging.iteration import Ending, Iteration, Phase, mono, noop_phase
from kernel.judging.judge import Judge, Passed, Retry, store_of
from kernel.loop import (
    agentrun,
    asktest,
    corpus,
    generations,
    modelrun,
    repairing,
    reviews,
    tournament,
)
from kernel.loop.agentrun import AgentRunner
from kernel.loop.analysis import analyse
from kernel.loop.following import proposal_wait
from kernel.loop.quarantine import apply_quarantine, latest_records, waiting
from kernel.loop.recording import QUARANTINED, WAITING, Recorder, round_of
from kernel.loop.recovery import settle
from kernel.loop.remoterun import RemoteRunner
from kernel.loop.tournament import Dealt
from kernel.measuring.baseline import Baseline
from kernel.measuring.measure import ruff_binary
from kernel.measuring.projectruff import project_ruff
from kernel.records import budget, halt, inbox, limits, notify
from kernel.records.journal import Journal
from kernel.records.store import RecordStore

Analysed = Callable[[GapReport, Mapping[str, str], PlanningOrder | None], None]
"""Called after each analysis with the ranking and the gaps passed over, then again with the
planner's order of the gaps (status shows them, and the queue from that order)."""

UNSANDBOXED = ("ruff-fix", "none")
"""Backends that run no repository code and no model: they need no sandbox."""


@dataclass
class _Ranked:
    """What planning works from: the baseline, the gaps left to plan, the history judged."""

    baseline: Baseline
    report: GapReport
    history: list[IterationRecord]
    passed_over: dict[str, str]
    """Gap keys not offered to the planner, and why (quarantined, waiting for an agent)."""
    backend: Backend
    analyse_s: float
    landable: list[IterationRecord]
    """Kept work whose blocker in the person's checkout cleared: the kernel lands it."""
    waited_on: str = ""
    """What a plan that cannot run now waits on (`waited_on`)."""


class Loop:
    """Runs one iteration of the loop for a context."""

    def __init__(
        self, ctx: Context, phase: Phase = noop_phase, analysed: Analysed | None = None
    ) -> None:
        self.ctx = ctx
        self.phase = phase
        self.analysed = analysed
        self.recorder = Recorder(ctx)
        self.records: list[IterationRecord] = []
        """What this pass recorded, in order."""
        self.current: Iteration | None = None
        """The iteration under way (recorded as ABORTED if the pass is cut short)."""
        self._remote: tuple[RayEngine, object, relay.Door | None] | None = None
        """The Ray engine and the base's bundle while a tournament runs on it."""
        self._verifying: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
        """Held around each judging: candidates' verifications share the cores."""
        self._generations = generations.Gate(ctx)
        """Changes to seed's planning modules scored against their base's (the base once)."""

    def run(self, *, execute: bool = True, single: bool = False) -> list[IterationRecord]:
        """Analyse, then plan and run gaps until one runs an agent or none is left.

        Returns the records written (WAITING ones, then at most one that ran an agent).
        `single` (`once`): one record at most; gaps no agent can take are passed over in the
        log, and recorded as WAITING only when none can run.
        """
        if self._disk_full():
            return []
        halted = halt.read_halt(self.ctx.paths.history).halted
        due = reviews.due(self.ctx) if execute and not halted else None
        prepared = self.prepare(due.pushed if due is not None else "")
        if prepared is None:
            self.ctx.log("the repository has no commits yet: nothing to analyse")
            return []
        head, worktree = prepared
        faults.fault("prepare")
        journal = Journal(self.ctx.paths.running)
        self.records, self.current = [], None
        try:
            if due is not None:  # a review asked for changes: its round before any new plan
                repairing.run_round(self, due, worktree, journal)
            else:
                self._iterate(head, worktree, journal, execute=execute, single=single)
            return self.records
        except Interrupted:
            self._abort("interrupted (Ctrl-C or SIGTERM); the work was discarded")
            raise
        except Exception as exc:
            if self.current is not None and self.current.journal is not None:
                # the loop carries on after an error: the iteration must not vanish unrecorded
                with contextlib.suppress(Exception):
                    self._abort(
                        f"the iteration stopped on an error; its work was discarded: {type(exc).__name__}: {exc}"[
                            :1000
                        ]
                    )
            raise
        finally:
            self._clean_up(worktree, journal)

    def _iterate(
        self, head: str, worktree: Path, journal: Journal, *, execute: bool, single: bool
    ) -> None:
        """Plan gaps in turn; the first that an agent can take runs, is judged and recorded."""
        ctx = self.ctx
        began = watch.take(ctx.paths.root, ctx.target.python)
        began_at = datetime.now(UTC)
        now = began_at.replace(microsecond=0)
        ranked = self._analyse(worktree, head, now)
        blocker = gitops.land_blocker(ctx.paths.root)
        hstate = halt.read_halt(ctx.paths.history)
        sequence = ctx.store.next_sequence()
        unrecorded: list[tuple[Iteration, Ending]] = []
        landable = execute and not hstate.halted and not blocker and ranked.landable
        if landable and self._land_kept(ranked.landable[0], head, worktree, sequence, now):
            return
        if execute and blocker and _told(blocker, ranked.history):
            # one record per blocker, not one per poll or per gap: `status` names it
            if single:
                ctx.log(f"nothing runs while {blockers.describe((blocker,))}")
            return
        order: PlanningOrder | None = None
        while True:
            self.phase("planning", "")
            t0 = mono()
            quarantined = tuple(
                sorted(k for k, why in ranked.passed_over.items() if why == QUARANTINED)
            )
            state = self.project_state(
                now, sequence, worktree, head, blocker, ranked.backend, hstate, quarantined
            )
            order = order or self._queue(ranked, state)
            plan = self._plan(ranked, state, f"iter-{sequence:04d}-{now:%Y%m%d-%H%M%S}")
            if plan is None:
                if unrecorded and not self.records:
                    self._record(*unrecorded[0])
                return
            corpus.keep(ctx.paths, plan.iteration_id, ranked.baseline.given, ranked.report)
            # started when the analysis it was planned from began: its durations count that
            it = Iteration(plan, head, began_at, ranked.backend, worktree)
            it.durations = {"analyse": round(ranked.analyse_s, 3), "plan": round(mono() - t0, 3)}
            it.sandboxed, it.watch = jails.active(ctx.config.guard), began
            self.current = it
            name, why = self._route(it, hstate, execute)
            facts = self._blocker(plan, blocker) if not why and name != "none" else ()
            if facts:
                wide = blockers.checkout_wide(facts)
                self._wait(it, _blocked(facts), unrecorded, single and not wide)
                # `status` names the blocker even when `once` leaves the gap unrecorded
                ranked.passed_over[plan.gap.key] = f"blocked by {blockers.describe(facts)}"
                if self.analysed is not None:
                    self.analysed(ranked.baseline.report, ranked.passed_over, order)
                if wide:
                    return  # it blocks every gap: one record says so
                sequence += 0 if single else 1
                ranked.report = _without(ranked.report, plan.gap.key)
                continue
            spec = None
            sent = None if why else self._sent(plan, name)  # a portfolio's first, run alone
            name = sent.backend if sent else name
            if not why and name != "none":
                spec = ctx.host.agent_spec(name, plan, self.agent_context(worktree, sent))
                why = "" if spec is not None else f"{name} cannot take this gap"
                if spec is not None and spec.cannot:
                    spec, why = None, f"{name} cannot run here: {spec.cannot[:500]}"
            if spec is None:
                why = why or f"backend {name} only writes plans"
                reason = f"waiting for an agent: {why}"
                on = ranked.waited_on
                ending = Ending(IterationOutcome.WAITING, None, reason, waited_on=on)
                self._wait(it, ending, unrecorded, single)
                sequence += 0 if single else 1
                ranked.report = _without(ranked.report, plan.gap.key)
                continue
            it.backend = Backend(name, ranked.backend.reason, ranked.backend.sources)
            it.agent_key = sent.key if sent else ""
            it.journal = journal
            journal.begin(
                plan, ctx.paths.runs / plan.iteration_id / "plan.json", head, worktree, name
            )
            faults.fault("plan")
            many = ctx.config.candidates.n > 1 and name not in UNSANDBOXED
            ending = (
                self._tournament(it, ranked.baseline, name, journal)
                if many
                else self._rounds(it, spec, ranked.baseline, name, sent)
            )
            record = self._record(it, ending)
            if record.outcome == IterationOutcome.SUCCESS:
                self.phase("reloading modules", "")
                ctx.reload_host(record.touched_files)
            return

    def _disk_full(self) -> bool:
        """Halt when the disk where the kernel works is nearly full (nothing can be judged)."""
        ctx = self.ctx
        free = _free_mb(ctx.paths.state)
        if free >= ctx.config.guard.min_free_mb or halt.read_halt(ctx.paths.history).halted:
            return False
        reason = f"the disk is full: {free} MB free where the kernel works ({ctx.paths.state}); free some space, then `{ctx.paths.command('resume')}`"
        ctx.log(reason)
        notify.tell_halt(ctx.notify, halt.halt(ctx.store, reason, "DISK_FULL"), ctx.paths.command)
        return True

    def _analyse(self, worktree: Path, head: str, now: datetime) -> _Ranked:
        """Measure HEAD, rank the gaps, and pass over the quarantined and the waiting ones."""
        ctx = self.ctx
        self.phase("analysing", "")
        t0 = mono()
        baseline = analyse(ctx, worktree, head, now)
        history = planning_history(ctx.store, baseline.report)
        quarantined = apply_quarantine(ctx, baseline.report, history, head)
        analyse_s = mono() - t0
        faults.fault("analysis")
        backend = ctx.backend()
        on = waited_on(ctx, backend)
        still = blockers.held(ctx.paths.root)

        def blocked(record: IterationRecord) -> bool:
            if record.outcome == IterationOutcome.MERGE_BLOCKED:
                # kept work waits for its blocker, then the kernel lands it (never an agent);
                # a person who deleted the kept branch said no to it
                kept = record.kept_branch
                return bool(kept and record.commit and gitops.branch_exists(ctx.paths.root, kept))
            return still(record)

        waits = waiting(baseline.report, history, on, blocked)
        # its fix waits in an open pull request, whatever a later repair round of it did
        waits |= {r.gap.key for r in ctx.store.proposed()} & {g.key for g in baseline.report.gaps}
        landable = [
            r
            for _, r in latest_records(baseline.report, history)
            if r.gap.key in waits and r.outcome == IterationOutcome.MERGE_BLOCKED and not still(r)
        ]
        held = {
            r.gap.key: f"blocked by {blockers.describe(r.blocked_by)}"
            for _, r in latest_records(baseline.report, history)
            if r.gap.key in waits and r.blocked_by and r not in landable
        }
        held |= {
            r.gap.key: proposal_wait(r)
            for _, r in latest_records(baseline.report, history)
            if r.gap.key in waits and (r.pull_request or r.outcome == IterationOutcome.PROPOSED)
        }
        passed_over = {k: WAITING for k in waits} | held | {k: QUARANTINED for k in quarantined}
        self.recorder.note_baseline(baseline.report, passed_over)
        if self.analysed is not None:
            self.analysed(baseline.report, passed_over, None)
        report = baseline.report.model_copy(
            update={
                "gaps": tuple(g for g in baseline.report.gaps if g.key not in passed_over),
                "skipped": tuple(sorted(set(baseline.report.skipped) | set(passed_over))),
            }
        )
        return _Ranked(
            baseline,
            report,
            for_planner(history, report),
            passed_over,
            backend,
            analyse_s,
            landable,
            on,
        )

    def _queue(self, ranked: _Ranked, state: ProjectState) -> PlanningOrder:
        """The planner's order of the gaps, asked once a pass and given to `status` (modules
        without one: the ranking's order)."""
        ranking = PlanningOrder(keys=tuple(g.key for g in ranked.report.gaps))
        if self.analysed is None:
            return ranking  # nobody shows it
        order = self.ctx.host.order(ranked.report, ranked.history, state) or ranking
        self.analysed(ranked.baseline.report, ranked.passed_over, order)
        return order

    def _plan(self, ranked: _Ranked, state: ProjectState, expected: str) -> IterationPlan | None:
        """The planner's plan, checked against what the kernel allocated, and clamped."""
        plan = self.ctx.host.plan(ranked.report, ranked.history, state)
        if plan is None:
            return None
        if plan.iteration_id != expected:
            raise HostError(
                f"planner returned id {plan.iteration_id}, the kernel allocated {expected}"
            )
        if plan.gap.key not in {g.key for g in ranked.report.gaps}:
            raise HostError(f"planner planned gap {plan.gap.key!r}, which is not in the report")
        return self.clamp(
            passed_over(plan, ranked.baseline.report, ranked.passed_over), ranked.baseline
        )

    def clamp(self, plan: IterationPlan, baseline: Baseline) -> IterationPlan:
        """The plan as the iteration runs it (`plan` shows this one): its kind the kernel's,
        its checks those of the tools that take part, its budget and paths the config's."""
        return clamp_plan(
            plan,
            self.ctx.config,
            protected_patterns(self.ctx.config.guard.protected),
            self.ctx.paths.selfhost,
            baseline.gate.adoption.tools,
        )

    def _route(self, it: Iteration, hstate: halt.HaltState, execute: bool) -> tuple[str, str]:
        """The backend for this plan, and why it cannot run now ('' when it can; a blocker
        in the person's checkout is `_blocker`'s)."""
        name, spec_reason = self.choose(it.plan, it.backend)
        unjailed = (
            ""
            if name in UNSANDBOXED
            else jails.why_not(self.ctx.config.guard, self.ctx.paths, Path(self.ctx.target.python))
        )
        why_not = (
            spec_reason
            or unjailed
            or (f"halted: {hstate.reason}" if hstate.halted else "")
            or ("" if execute else "plan only")
        )
        return name, why_not

    def _blocker(self, plan: IterationPlan, checkout: str) -> blockers.Blocker:
        """What in the person's checkout would keep this plan's work from landing, read from
        git before any agent is paid: the checkout's state, else the person's changes to the
        files the plan names (its actions and suspects; broad globs are checked at landing)."""
        if checkout:
            return (checkout,)
        return tuple(blockers.dirty(self.ctx.paths.root, blockers.plan_paths(plan)))

    def _wait(
        self,
        it: Iteration,
        ending: Ending,
        unrecorded: list[tuple[Iteration, Ending]],
        single: bool,
    ) -> None:
        """A plan nobody can carry out now: recorded as WAITING (in `once`, only if none runs)."""
        if single:
            unrecorded.append((it, ending))
            self.ctx.log(f"passed over {it.plan.gap.key}: {ending.reason}")
        else:
            self._record(it, ending)
        self.current = None

    def _land_kept(
        self, kept: IterationRecord, head: str, worktree: Path, sequence: int, now: datetime
    ) -> bool:
        """Land work kept because the person's checkout blocked it, now that it no longer
        does: the approval path (rebased and verified again if the branch moved), no agent.
        False when the kept record is gone (a person can still approve the branch)."""
        ctx = self.ctx
        full = ctx.store.get(kept.iteration_id)
        if full is None or full.plan is None:
            return False
        plan = full.plan.model_copy(
            update={"iteration_id": f"iter-{sequence:04d}-{now:%Y%m%d-%H%M%S}", "created_at": now}
        )
        it = Iteration(plan, head, datetime.now(UTC), Backend(kept.backend, "kept work"), worktree)
        it.touched = list(kept.touched_files)
        self.current = it
        task = plan.gap.inbox
        if task is not None:  # released with the record, as after an agent's run
            with contextlib.suppress(OSError):
                inbox.claim(ctx.paths.inbox, task.name)
                it.claimed_inbox = task.name
        self.phase("landing", f"the work kept by {kept.iteration_id}")
        was = blockers.describe(kept.blocked_by)
        try:
            commit, differ = landing.land_kept(
                ctx, full, f"Kept by {kept.iteration_id} while {was}; landed once that changed."
            )
        except Interrupted:
            raise
        except SeedError as exc:
            ending = Ending(
                IterationOutcome.MERGE_BLOCKED,
                FailureCategory.MERGE_BLOCKED,
                f"the work kept by {kept.iteration_id} ({kept.kept_branch}) did not land once "
                f"{was} changed: {exc}; the gap is open to a new attempt",
            )
        else:
            note = f"git wrote other bytes than the landed blobs for: {', '.join(differ[:10])}"
            ending = Ending(
                IterationOutcome.SUCCESS,
                None,
                f"landed the work kept by {kept.iteration_id} ({kept.kept_branch}) once {was} "
                "changed; no agent ran",
                evidence=[note] if differ else [],
                commit=commit,
            )
        record = self._record(it, ending)
        if record.outcome == IterationOutcome.SUCCESS:
            self.phase("reloading modules", "")
            ctx.reload_host(record.touched_files)
        return True

    def _record(self, it: Iteration, ending: Ending) -> IterationRecord:
        """The one place an iteration's record is written."""
        record = self.recorder.finish(it, ending)
        self.records.append(record)
        return record

    # what a repair round asked for by a review runs the same way (repairing.py)
    record = _record

    def _abort(self, reason: str) -> None:
        """Record the iteration under way as ABORTED, if it has a plan and no record yet."""
        it = self.current
        if it is not None and not it.recorded:
            self._record(it, it.aborted(reason))

    def _clean_up(self, worktree: Path, journal: Journal) -> None:
        """Remove the worktree, its branch and the agent's home; end the journal."""
        it = self.current
        if it is not None and it.recorded:
            faults.fault("cleanup")
        self.phase("cleaning up", "")
        if it is not None and it.branch and not it.branch.startswith("seed/kept/"):
            with contextlib.suppress(gitops.GitError):
                gitops.delete_branch(self.ctx.paths.root, it.branch)
        self.discard(worktree)
        if it is not None:
            shutil.rmtree(self.ctx.paths.homes / it.plan.iteration_id, ignore_errors=True)
        journal.end()

    def _rounds(
        self, it: Iteration, spec: RunSpec, baseline: Baseline, name: str, sent: Dealt | None
    ) -> Ending:
        """The agent's rounds (`_attempt`), then the landing of what passed."""
        judge = Judge(self.ctx, self.phase)
        verdict = self._attempt(it, spec, baseline, name, self.phase, sent)
        if isinstance(verdict, Passed):
            ending = landing.land(self.ctx, self.phase, it, baseline, verdict, judge.verify)
            generations.land(self.ctx, it, ending)
            return ending
        return verdict

    def _tournament(self, it: Iteration, baseline: Baseline, name: str, journal: Journal) -> Ending:
        """[candidates] n runs of the gap, each judged as a single run, up to `parallel` at
        once (their verifications up to the cores); the kernel's choice among those that
        passed lands (`judging/choice.py`). The day's budget must hold all n before any
        starts; the iteration is recorded once, with every candidate's facts."""
        ctx = self.ctx
        config = ctx.config.candidates
        dealt = self._deal(name, it.plan.agents)
        each = budget.reservation(ctx.config.budget, it.plan.budget.max_cost_usd)
        refused = budget.budget_problem(ctx.store, ctx.config.budget, reserve_usd=each * len(dealt))
        if refused:
            return Ending(
                IterationOutcome.FAILURE,
                FailureCategory.BUDGET_EXCEEDED,
                f"budget exhausted before the {len(dealt)} candidates ran "
                f"(${each:.2f} reserved for each): {refused}",
            )
        field = tournament.Field(dealt, self.phase, config.first_wins)
        limit = tournament.parallel(config, ctx.config.guard, len(dealt), it.sandboxed)
        self._verifying = threading.BoundedSemaphore(tournament.cores())
        try:
            if ctx.config.scale.engine == "ray":
                limit = len(dealt)  # the cluster holds them: its scheduler waits for room
                self._remote = self._engine(it)
            t0 = mono()
            with ThreadPoolExecutor(limit, thread_name_prefix="candidate") as pool:
                done = [pool.submit(self._play, field, it, d, baseline, journal) for d in dealt]
                wait(done)
            # the candidates' own phases overlap: the record times the tournament as one
            it.durations["candidates"] = round(mono() - t0, 3)
            field.raise_first(done)
            it.candidates = field.candidates()
            if it.candidates and not it.claimed_inbox:  # released with the record
                it.claimed_inbox = next(
                    (r.claimed_inbox for r in field.runs() if r.claimed_inbox), ""
                )
            winner, it.choice = choice.choose(it.candidates)
            if config.keep:
                self._keep_candidates(it, field)
            number = winner.number if winner is not None else 1
            tournament.carry(it, field.run(number))
            tournament.add_usage(it, field.runs())
            verdict = field.verdict(number) or Ending(IterationOutcome.ABORTED, None, "no run")
            if not isinstance(verdict, Passed):
                return tournament.none_passed(it.candidates, verdict)
            it.candidates = [
                c.model_copy(update={"won": c.number == number}) for c in it.candidates
            ]
            ctx.log(f"{it.plan.iteration_id}: {it.choice}")
            ending = landing.land(
                ctx, self.phase, it, baseline, verdict, Judge(ctx, self.phase).verify
            )
            generations.land(ctx, it, ending)
            return ending
        finally:
            self._verifying = contextlib.nullcontext()
            if self._remote is not None:
                self._remote[0].stop()  # a local instance ends with the tournament
                if self._remote[2] is not None:
                    self._remote[2].stop()
                self._remote = None
            # an interrupted tournament still records what its candidates spent: a run cut
            # short counts in the ledger now (the gateway's answers, else its reservation)
            cut_short = 0.0
            for run in field.runs():
                entry = dict(journal.data.get("candidates", {}).get(run.plan.iteration_id, {}))
                held = budget.unsettled(ctx.paths.history, entry)
                if held is not None and settle(ctx, entry):
                    cut_short += held.usd
                    run.note(accounted=True)
            it.candidates = it.candidates or field.candidates()
            tournament.add_usage(it, field.runs(), cut_short)
            for run in field.runs():
                self.discard(run.worktree)
                shutil.rmtree(ctx.paths.homes / run.plan.iteration_id, ignore_errors=True)

    def _play(
        self,
        field: tournament.Field,
        it: Iteration,
        deal: Dealt,
        baseline: Baseline,
        journal: Journal,
    ) -> None:
        """One candidate, in a thread of its own: run, judged, its facts on the field (a
        cancelled one's spend settled at once: the gateway's answers, else its reservation)."""
        ctx = self.ctx
        won = field.won()
        if won:
            field.skip(deal, f"not run: candidate {won} passed first ([candidates] first_wins)")
            return
        run = field.enter(deal, self._candidate(it, deal, journal))
        t0 = mono()
        try:
            with procs.cancelled_by(field.cancel[deal.number]):
                verdict = self._candidate_attempt(run, baseline, deal, field.phase(deal.number))
        except Interrupted:
            if procs.STOP.is_set():
                raise
            settle(ctx, dict(journal.data.get("candidates", {}).get(run.plan.iteration_id, {})))
            run.note(accounted=True)
            verdict = Ending(
                IterationOutcome.ABORTED,
                None,
                f"cancelled: candidate {field.won()} passed first ([candidates] first_wins)",
            )
        keeps = ctx.config.landing.uncovered == "keep"
        found = tournament.facts(run, deal, verdict, mono() - t0, keeps)
        if isinstance(verdict, Passed):
            found = tournament.with_outside(found, ctx.paths.root, run, verdict)
        field.judged(deal.number, verdict, found)

    def _engine(self, it: Iteration) -> tuple[RayEngine, object, relay.Door | None]:
        """The Ray engine, started for this tournament, the base's bundle put in its store,
        and the relay door when [scale] door names where it listens."""
        scale = self.ctx.config.scale
        self.phase("starting Ray", scale.address or "a local instance")
        engine = RayEngine(scale)
        engine.start()
        door = relay.Door(*relay.parse(scale.door)) if scale.door else None
        return (
            engine,
            engine.put(remote.bundle(self.ctx.paths, it.base, it.plan.iteration_id)),
            door,
        )

    def _runner(self, it: Iteration, phase: Phase) -> AgentRunner:
        """A candidate's runs go to the Ray engine when it is on; every other run is local."""
        if self._remote is not None and it.candidate:
            return RemoteRunner(self.ctx, phase, *self._remote)
        return AgentRunner(self.ctx, phase)

    def _candidate(self, it: Iteration, deal: Dealt, journal: Journal) -> Iteration:
        """A candidate's run: the plan under its own id (ID-cK: its folder, HOME, ledger lines
        and journal entry), a fresh checkout of the base, the iteration's sandbox setting."""
        ctx = self.ctx
        run_id = f"{it.plan.iteration_id}-c{deal.number}"
        plan = it.plan.model_copy(update={"iteration_id": run_id})
        # the command contract's SEED_PLAN_FILE: the candidate's own plan, in its run folder
        atomic_write_text(ctx.paths.runs / run_id / "plan.json", plan.model_dump_json(indent=2))
        worktree = agentgit.create(ctx.paths, f"{it.worktree.name}-c{deal.number}", it.base)
        backend = Backend(deal.backend, f"candidate {deal.number}", it.backend.sources)
        run = Iteration(plan, it.base, datetime.now(UTC), backend, worktree)
        run.sandboxed, run.watch, run.candidate = it.sandboxed, it.watch, deal.number
        run.journal = journal.candidate(run_id, deal.backend, worktree)
        run.claimed_inbox = it.claimed_inbox
        return run

    def _candidate_attempt(
        self, run: Iteration, baseline: Baseline, deal: Dealt, phase: Phase
    ) -> Passed | Ending:
        """One candidate's rounds, its progress shown as its own."""
        ctx = self.ctx
        unjailed = jails.why_not(ctx.config.guard, ctx.paths, Path(ctx.target.python))
        spec = (
            None
            if unjailed
            else ctx.host.agent_spec(deal.backend, run.plan, self.agent_context(run.worktree, deal))
        )
        why = unjailed or ("" if spec is not None else f"{deal.backend} cannot take this gap")
        if spec is not None and spec.cannot:
            why = f"{deal.backend} cannot run here: {spec.cannot[:500]}"
        if spec is None or why:
            return Ending(IterationOutcome.FAILURE, FailureCategory.AGENT_ERROR, why)
        return self._attempt(run, spec, baseline, deal.backend, phase, deal)

    def _keep_candidates(self, it: Iteration, field: tournament.Field) -> None:
        """[candidates] keep: each candidate that changed something on seed/candidates/ID-cK
        (a verified tree as verified, else the tree its agent left)."""
        ctx = self.ctx
        kept: dict[int, str] = {}
        for number, run in field.numbered():
            verdict = field.verdict(number)
            tree = verdict.tree if isinstance(verdict, Passed) else run.agent_tree
            if not tree:
                continue
            branch = f"seed/candidates/{run.plan.iteration_id}"
            with contextlib.suppress(SeedError):
                landing.keep_tree(ctx, run, tree, store_of(ctx, run), branch)
                kept[number] = branch
        it.candidates = [
            c.model_copy(update={"branch": kept.get(c.number, "")}) for c in it.candidates
        ]

    def _attempt(
        self,
        it: Iteration,
        spec: RunSpec,
        baseline: Baseline,
        name: str,
        phase: Phase,
        dealt: Dealt | None = None,
    ) -> Passed | Ending:
        """The agent's run, then up to [agent] repair_rounds more in the same worktree while
        the kernel refuses the change; what the last round's judging said."""
        ctx = self.ctx
        runner = self._runner(it, phase)
        judge = Judge(ctx, phase)
        # ruff-fix is deterministic: another round would do the same again
        left = 0 if name in UNSANDBOXED else ctx.config.agent.repair_rounds
        # a worker's agent keeps no session between rounds: its HOME is gone with the run
        remote = isinstance(runner, RemoteRunner)
        held: asktest.Held | None = None  # verified, but with lines no test ran: a test asked
        while True:
            used = it.agent
            it.round_start = (used.tokens_used, used.cost_usd) if used else (0, 0.0)
            it.agent_tree = ""  # set again when this round's tree is read
            it.resumed = spec.resumes
            ended = runner.execute(it, spec)
            if ended is not None:
                return asktest.fallback(it, held, ended)
            with self._verifying:  # candidates verify at most as many at once as cores
                verdict = judge.judge(it, baseline, retry=left > 0 and _room(it))
                if isinstance(verdict, Passed):  # seed's planning modules: plans as well?
                    verdict = self._generations.check(it, verdict)
            if isinstance(verdict, Ending):
                return asktest.fallback(it, held, verdict)
            if isinstance(verdict, Passed):
                held, verdict = asktest.answered(ctx, it, held, verdict, left > 0 and _room(it))
                if isinstance(verdict, Passed):
                    return verdict
            left -= 1
            self._another_round(it, verdict)
            context = self.agent_context(it.worktree, dealt).model_copy(
                update={
                    "round": len(it.rounds) + 1,
                    "resume": "" if remote else it.session,
                    "feedback": verdict.feedback,
                }
            )
            following = ctx.host.agent_spec(name, it.plan, context)
            if following is None:
                why = f"{verdict.reason} (no repair round: {name} gave no run for it)"
                return asktest.fallback(
                    it, held, Ending(IterationOutcome.ROLLBACK, verdict.category, why)
                )
            spec = following

    attempt = _attempt
    route = _route

    def _another_round(self, it: Iteration, verdict: Retry) -> None:
        """The refused round recorded and said, the kernel's repairs carried into the worktree."""
        # a round held for its test was verified: it would be kept, not rolled back
        was = IterationOutcome.KEPT if verdict.category is None else IterationOutcome.ROLLBACK
        it.rounds.append(round_of(it, was, verdict.category, verdict.reason))
        self.ctx.log(
            f"{it.plan.iteration_id}: round {len(it.rounds)} refused "
            f"({verdict.category.value if verdict.category else 'a test asked for'}); "
            f"the agent gets round {len(it.rounds) + 1}"
        )
        for path, data in it.repaired.items():  # the kernel's repairs carry over
            if plain_file(it.worktree, path):
                (it.worktree / path).write_bytes(data)
        it.repaired = {}

    def prepare(self, commit: str = "") -> tuple[str, Path] | None:
        """A fresh checkout of the agent's own at HEAD (or commit), or None when the repository
        has no commits."""
        head = commit or gitops.head(self.ctx.paths.root)
        if head is None:
            return None
        name = f"wt-{os.getpid()}-{datetime.now(UTC):%Y%m%d%H%M%S%f}"
        return head, agentgit.create(self.ctx.paths, name, head)

    def discard(self, worktree: Path) -> None:
        """Remove the agent's checkout and what the kernel kept for it (never anything in the
        user's checkout): its gate folder and its private object folders."""
        agentgit.remove(worktree)
        paths = self.ctx.paths
        for folder in (paths.gate, paths.objects):
            shutil.rmtree(folder / worktree.name, ignore_errors=True)
        shutil.rmtree(paths.objects / f"{worktree.name}-agent", ignore_errors=True)

    def _sent(self, plan: IterationPlan, name: str) -> Dealt | None:
        """One run per gap with a portfolio of two or more: the entry the planner put first
        (None: [agent]'s, as without a portfolio, or a backend that needs no sandbox)."""
        config = self.ctx.config.candidates
        if config.n > 1 or name in UNSANDBOXED or len(config.agent) < 2:
            return None
        return self._deal(name, plan.agents)[0]

    def _deal(self, name: str, order: Sequence[str]) -> list[Dealt]:
        """The runs dealt for a gap, none of a backend a usage limit pauses while another is
        free (`[daemon] limit_scope = "backend"`; with "all" a limit holds the whole loop)."""
        ctx, config = self.ctx, self.ctx.config
        paused: set[str] = set()
        if config.daemon.limit_scope == "backend":
            paused = set(limits.paused_backends(ctx.paths.history, datetime.now(UTC)))
        return tournament.deal(config.candidates, name, config.agent.model, order, paused)

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
        """What the planner may know besides the gaps (with a portfolio of two or more to learn
        from: its keys, and a random seed drawn for this plan)."""
        ctx = self.ctx
        config = ctx.config.candidates
        agents = tournament.portfolio(config, backend.name, ctx.config.agent.model)
        portfolio = [PortfolioAgent(key=a.key, backend=a.backend, model=a.model) for a in agents]
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
            portfolio=tuple(portfolio) if config.learn else (),
            agent_tallies=tuple(ctx.store.agent_tallies()) if portfolio and config.learn else (),
            random_seed=secrets.randbelow(2**31 - 1) + 1 if portfolio and config.learn else 0,
        )

    def agent_context(self, worktree: Path, dealt: Dealt | None = None) -> AgentContext:
        """What adapters may know (a candidate's own backend, model and flags when dealt)."""
        agent = self.ctx.config.agent
        backend = dealt.backend if dealt else agent.backend
        extra = dealt.extra_args if dealt and dealt.extra_args is not None else agent.extra_args
        ruff, formats = ruff_binary(), False
        if backend == "ruff-fix":  # as the project runs ruff: the base commit's pin, its format
            it = self.current
            base = it.base if it is not None and it.worktree == worktree else "HEAD"
            ruff, formats = project_ruff(self.ctx.paths.root, base, self.ctx.config.quality)
        return AgentContext(
            worktree=str(worktree),
            home=str(Path.home().resolve()),
            seed_home=str(self.ctx.paths.seed_home),
            python=sys.executable,
            ruff=ruff,
            ruff_format=formats,
            command=tuple(agent.command),
            model=dealt.model if dealt else agent.model,
            options={
                "max_turns": agent.max_turns,
                "allowed_tools": list(agent.allowed_tools),
                "api_base": modelrun.agent_base(
                    agent, backend, jails.active(self.ctx.config.guard)
                ),
                "extra_args": list(extra),
                "sandboxed": jails.active(self.ctx.config.guard),
            },
        )


def passed_over(plan: IterationPlan, report: GapReport, held: Mapping[str, str]) -> IterationPlan:
    """The plan with a note for each gap ranked above it that the kernel held back (waiting,
    quarantined, blocked): the planner never saw them, the person should."""
    above = next((i for i, g in enumerate(report.gaps) if g.key == plan.gap.key), 0)
    notes = [f"skipped {g.key}: {held[g.key]}" for g in report.gaps[:above] if g.key in held]
    return plan.model_copy(update={"notes": (*plan.notes, *notes[:10])}) if notes else plan


def _blocked(facts: blockers.Blocker) -> Ending:
    """The WAITING ending of a plan blocked before its agent ran."""
    return Ending(
        IterationOutcome.WAITING,
        FailureCategory.MERGE_BLOCKED,
        f"blocked before the agent ran by {blockers.describe(facts)}: the work could not land; "
        "it waits (no agent runs, nothing is spent) until that changes",
        blocked=facts,
    )


def _told(blocker: str, history: Sequence[IterationRecord]) -> bool:
    """Whether the latest record that ran or was blocked already says this checkout state."""
    for record in reversed(history):
        if record.blocked_by or record.outcome != IterationOutcome.WAITING:
            return record.blocked_by == (blocker,)
    return False


def _without(report: GapReport, key: str) -> GapReport:
    return report.model_copy(update={"gaps": tuple(g for g in report.gaps if g.key != key)})


def _room(it: Iteration) -> bool:
    """Whether the iteration's budget leaves room for another round (rounds share it)."""
    used, budget = it.agent, it.plan.budget
    if used is None:
        return True
    tokens, cost = agentrun.counted(it, used)  # the gateway's count where it served the run
    spent_tokens = budget.max_tokens and tokens >= budget.max_tokens
    spent_cost = budget.max_cost_usd and cost >= budget.max_cost_usd
    return not (spent_tokens or spent_cost)


def waited_on(ctx: Context, backend: Backend) -> str:
    """What a plan that cannot run waits on: the backend, the sandbox (its setting, and whether
    it starts here), the api_base and, with the sandbox off, the HOME the agent gets. A change
    to any (seed.toml edited, bubblewrap installed) judges waiting gaps again at once."""
    guard = ctx.config.guard
    works = not jails.check(ctx.paths, guard, Path(ctx.target.python))
    sandbox = f"{guard.sandbox}" + ("" if works else " (unavailable)")
    home = f"; home {Path.home()}" if not jails.enabled(guard) else ""
    api_base = ctx.config.agent.api_base or "-"
    return f"backend {backend.name}; sandbox {sandbox}; api_base {api_base}{home}"


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
    (history's tail, as planning_history reads it); a passed-over gap's older records stay out."""
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

"""One iteration: prepare, analyse, plan, clamp, execute, inspect, verify, land, record.

The user's checkout is only ever touched by `git merge --ff-only` (and by moving inbox
files); all work happens in a worktree under <git-common-dir>/seed/wt/.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from domain import (
    AgentContext,
    AgentReport,
    CheckName,
    DiffStat,
    FailureCategory,
    Gap,
    GapReport,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    Measurement,
    ProjectState,
    RunResult,
    RunSpec,
    gap_ref,
)
from kernel import gitops, guard, halt, inbox, procs
from kernel.analysis import Baseline, analyse, measure_cached
from kernel.clamp import clamp_plan
from kernel.context import Backend, Context
from kernel.errors import HostError, Interrupted
from kernel.fsutil import atomic_write_text
from kernel.globs import protected_patterns
from kernel.measure import freeze_gate, ruff_binary, run_pytest
from kernel.selfcheck import selfcheck
from kernel.verify import Verification, identity, verify

FAILED_OUTCOMES = (IterationOutcome.FAILURE, IterationOutcome.ROLLBACK, IterationOutcome.NO_CHANGE)
VIOLATIONS = (
    FailureCategory.SANDBOX_VIOLATION,
    FailureCategory.HYGIENE_VIOLATION,
    FailureCategory.ALLOWLIST_VIOLATION,
)
_ENV_PASS = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "USER",
    "LOGNAME",
    "TERM",
)

Phase = Callable[[str, str], None]
"""Called with (phase, detail) as the iteration moves on (status shows it live)."""


def _noop_phase(phase: str, detail: str) -> None:
    return None


def gap_signature(gap: Gap) -> str:
    """What the gap looks like now: findings (not lines), inbox bytes, roadmap text."""
    parts = sorted("|".join(identity(d)) for d in gap.evidence)
    if gap.inbox is not None:
        parts.append(gap.inbox.sha256)
    if gap.roadmap is not None:
        parts.append(gap.roadmap.text)
    return hashlib.sha256("\n".join([gap.key, *parts]).encode("utf-8")).hexdigest()[:16]


@dataclass
class Attempt:
    """State of the iteration under way, so it can be recorded however it ends."""

    plan: IterationPlan
    base: str
    started: datetime
    backend: Backend
    worktree: Path
    durations: dict[str, float] = field(default_factory=dict[str, float])
    agent: AgentReport | None = None
    agent_version: str = ""
    exit_code: int | None = None
    touched: list[str] = field(default_factory=list[str])
    diff: DiffStat = field(default_factory=DiffStat)
    branch: str = ""
    claimed_inbox: str = ""


class Iteration:
    """Runs one iteration of the loop for a context."""

    def __init__(self, ctx: Context, phase: Phase = _noop_phase) -> None:
        self.ctx = ctx
        self.phase = phase

    # -- helpers ----------------------------------------------------------------

    def _timed(self, attempt: Attempt | None, name: str, started: float) -> None:
        if attempt is not None:
            attempt.durations[name] = round(
                attempt.durations.get(name, 0.0) + (_mono() - started), 3
            )

    def quarantined(self, report: GapReport, records: Sequence[IterationRecord]) -> tuple[str, ...]:
        """Gaps that failed 3 times in a row, or twice alike, and have not changed since."""
        by_key: dict[str, list[IterationRecord]] = {}
        for record in records:
            by_key.setdefault(record.gap.key, []).append(record)
        current = {g.key: gap_signature(g) for g in report.gaps}
        out: list[str] = []
        for key, history in by_key.items():
            if key not in current:
                continue
            streak: list[IterationRecord] = []
            for record in reversed(history):
                if record.outcome in FAILED_OUTCOMES:
                    streak.append(record)
                elif record.outcome != IterationOutcome.WAITING:
                    break
            same = [
                r
                for r in streak
                if r.plan is not None and gap_signature(r.plan.gap) == current[key]
            ]
            if len(same) >= 3:
                out.append(key)
                continue
            if (
                len(same) >= 2
                and same[0].failure_category == same[1].failure_category
                and same[0].evidence == same[1].evidence
            ):
                out.append(key)
        return tuple(sorted(out))

    def waiting(
        self, report: GapReport, records: Sequence[IterationRecord], backend: str
    ) -> set[str]:
        """Gaps already planned and waiting for an agent, unchanged since."""
        latest: dict[str, IterationRecord] = {}
        for record in records:
            latest[record.gap.key] = record
        out: set[str] = set()
        for gap in report.gaps:
            record = latest.get(gap.key)
            if (
                record is not None
                and record.outcome == IterationOutcome.WAITING
                and record.plan is not None
                and gap_signature(record.plan.gap) == gap_signature(gap)
                and record.backend == backend
            ):
                out.add(gap.key)
        return out

    # -- the iteration ------------------------------------------------------------

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
        """Remove a worktree and its gate folder (never anything in the user's checkout)."""
        gitops.worktree_remove(self.ctx.paths.root, worktree)
        shutil.rmtree(self.ctx.paths.gate / worktree.name, ignore_errors=True)

    def run(self, *, execute: bool = True) -> list[IterationRecord]:
        """Analyse, then plan and run gaps until one runs an agent or none is left.

        Returns the records written (WAITING ones, then at most one that ran an agent).
        """
        ctx = self.ctx
        prepared = self.prepare()
        if prepared is None:
            ctx.log("the repository has no commits yet: nothing to analyse")
            return []
        head, worktree = prepared
        records_written: list[IterationRecord] = []
        attempt: Attempt | None = None
        try:
            now = datetime.now(UTC).replace(microsecond=0)
            self.phase("analysing", "")
            t0 = _mono()
            recent = ctx.store.recent(50)
            baseline = analyse(ctx, worktree, head, now)
            history = _merge(
                recent, ctx.store.for_gaps([g.key for g in baseline.report.gaps], per_gap=5)
            )
            quarantined = self.quarantined(baseline.report, history)
            analyse_s = _mono() - t0
            backend = ctx.backend()
            waiting = self.waiting(baseline.report, history, backend.name)
            skip = set(quarantined) | waiting
            report = baseline.report.model_copy(
                update={
                    "gaps": tuple(g for g in baseline.report.gaps if g.key not in skip),
                    "skipped": tuple(sorted(set(baseline.report.skipped) | skip)),
                }
            )
            blocker = gitops.land_blocker(ctx.paths.root)
            hstate = halt.read_halt(ctx.paths.history)
            sequence = ctx.store.next_sequence()
            while True:
                self.phase("planning", "")
                t1 = _mono()
                state = self.project_state(
                    now, sequence, worktree, head, blocker, backend, hstate, quarantined
                )
                plan = ctx.host.plan(report, history, state)
                plan_s = _mono() - t1
                if plan is None:
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
                why_not = (
                    spec_reason
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
                    record = self.record_waiting(
                        attempt, why_not or f"backend {name} only writes plans"
                    )
                    records_written.append(record)
                    report = report.model_copy(
                        update={"gaps": tuple(g for g in report.gaps if g.key != plan.gap.key)}
                    )
                    sequence += 1
                    attempt = None
                    continue
                attempt.backend = Backend(name, backend.reason, backend.sources)
                record = self.execute(attempt, spec, baseline)
                records_written.append(record)
                return records_written
        except Interrupted:
            if attempt is not None:
                records_written.append(
                    self.finish(
                        attempt,
                        IterationOutcome.ABORTED,
                        None,
                        "interrupted (Ctrl-C or SIGTERM); the work was discarded",
                    )
                )
            raise
        finally:
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
            ctx.paths.running.unlink(missing_ok=True)
            self.phase("idle", "")

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
        )

    # -- execute, inspect, verify, land -------------------------------------------

    def _agent_env(self, spec: RunSpec, values: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in _ENV_PASS}
        for name in self.ctx.config.agent.env:
            if name in os.environ:
                env[name] = os.environ[name]
        env.update(spec.env)
        env.update(values)
        return procs.child_env(env)

    def execute(self, attempt: Attempt, spec: RunSpec, baseline: Baseline) -> IterationRecord:
        """Run the agent, then guard, verify and land its work."""
        ctx = self.ctx
        plan = attempt.plan
        iteration_id = plan.iteration_id
        budget = halt.budget_problem(ctx.store, ctx.config.budget)
        if budget:
            record = self.finish(
                attempt,
                IterationOutcome.FAILURE,
                FailureCategory.BUDGET_EXCEEDED,
                f"budget exhausted before the agent ran: {budget}",
            )
            return record
        run_dir = ctx.paths.runs / iteration_id
        run_dir.mkdir(parents=True, exist_ok=True)
        prompt_file, plan_file, result_file = (
            run_dir / "prompt.md",
            run_dir / "plan.json",
            run_dir / "result.json",
        )
        result_file.unlink(missing_ok=True)
        atomic_write_text(prompt_file, spec.prompt)
        atomic_write_text(plan_file, plan.model_dump_json(indent=2))
        ctx.store.write_file(iteration_id, "plan.json", plan.model_dump_json(indent=2) + "\n")
        if spec.prompt:
            ctx.store.write_file(iteration_id, "prompt.md", spec.prompt)
        values = {
            "{prompt_file}": str(prompt_file),
            "{plan_file}": str(plan_file),
            "{worktree}": str(attempt.worktree),
            "{iteration_id}": iteration_id,
            "{run_dir}": str(run_dir),
            "{result_file}": str(result_file),
        }
        argv = [_substitute(a, values) for a in spec.argv]
        env = self._agent_env(
            spec,
            {
                "SEED_PROMPT_FILE": str(prompt_file),
                "SEED_PLAN_FILE": str(plan_file),
                "SEED_WORKTREE": str(attempt.worktree),
                "SEED_ITERATION_ID": iteration_id,
                "SEED_RESULT_FILE": str(result_file),
                "SEED_RUN_DIR": str(run_dir),
            },
        )
        log_path = ctx.store.folder(iteration_id) / "agent.log"
        timeout = min(plan.budget.timeout_s, ctx.config.agent.timeout_s)
        if spec.version_argv:
            attempt.agent_version = _version(spec.version_argv, env, attempt.worktree)
        self.phase("agent running", f"{attempt.backend.name} on {plan.gap.key}; log: {log_path}")
        ctx.log(f"{iteration_id}: {attempt.backend.name} working on {plan.gap.key}")
        if not (os.path.isabs(argv[0]) or shutil.which(argv[0], path=env.get("PATH"))):
            log_path.write_text(f"agent executable not found: {argv[0]}\n", encoding="utf-8")
            return self.finish(
                attempt,
                IterationOutcome.FAILURE,
                FailureCategory.AGENT_ERROR,
                f"agent executable not found: {argv[0]}",
            )
        t0 = _mono()

        def started(pgid: int) -> None:
            atomic_write_text(
                ctx.paths.running,
                json.dumps(
                    {
                        "iteration_id": iteration_id,
                        "pgid": pgid,
                        "start_time": procs.process_start_time(pgid),
                        "worktree": str(attempt.worktree),
                        "daemon_pid": os.getpid(),
                        "gap": plan.gap.key,
                        "inbox": attempt.claimed_inbox,
                    }
                ),
            )

        if plan.gap.inbox is not None:
            with contextlib.suppress(OSError):
                inbox.claim(ctx.paths.inbox, plan.gap.inbox.name)
                attempt.claimed_inbox = plan.gap.inbox.name
        completed = procs.run(
            argv,
            cwd=attempt.worktree,
            timeout_s=timeout,
            env=env,
            merge_stderr=True,
            log_path=log_path,
            max_bytes=ctx.config.agent.max_log_bytes,
            on_start=started,
            sweep_rounds=20,
        )
        ctx.paths.running.unlink(missing_ok=True)
        self._timed(attempt, "execute", t0)
        if completed.truncated:
            with log_path.open("ab") as handle:
                handle.write(
                    f"\n[seed: output cut at {ctx.config.agent.max_log_bytes} bytes; {completed.output_bytes} bytes in all]\n".encode()
                )
        attempt.exit_code = completed.exit_code
        result_json = (
            result_file.read_text(encoding="utf-8", errors="replace")[:1_000_000]
            if result_file.exists()
            else ""
        )
        run_result = RunResult(
            exit_code=completed.exit_code,
            timed_out=completed.timed_out,
            duration_s=completed.duration_s,
            output_tail=completed.tail.decode("utf-8", errors="replace"),
            output_bytes=completed.output_bytes,
            log_path=str(log_path),
            run_dir=str(run_dir),
            result_json=result_json,
        )
        try:
            attempt.agent = ctx.host.agent_parse(attempt.backend.name, plan, run_result)
        except HostError as exc:
            attempt.agent = AgentReport(
                success=completed.exit_code == 0,
                summary=f"the adapter could not read the run: {exc}",
            )
        if completed.timed_out:
            return self.finish(
                attempt,
                IterationOutcome.FAILURE,
                FailureCategory.AGENT_TIMEOUT,
                f"the agent ran past its {timeout:.0f}s limit; its process group was ended",
            )
        if attempt.agent.tokens_used > ctx.config.budget.max_tokens_per_iteration > 0 or (
            attempt.agent.cost_usd > ctx.config.budget.max_cost_usd_per_iteration > 0
        ):
            return self.finish(
                attempt,
                IterationOutcome.FAILURE,
                FailureCategory.BUDGET_EXCEEDED,
                f"the run used {attempt.agent.tokens_used} tokens / ${attempt.agent.cost_usd:.2f}, over the per-iteration budget",
            )
        if not attempt.agent.success:
            category = attempt.agent.failure_category or FailureCategory.AGENT_ERROR
            return self.finish(
                attempt,
                IterationOutcome.FAILURE,
                category,
                f"the agent reported failure (exit {completed.exit_code}): {attempt.agent.summary[:300]}",
            )
        return self.inspect_and_land(attempt, baseline)

    def inspect_and_land(self, attempt: Attempt, baseline: Baseline) -> IterationRecord:
        """Guard the diff, verify it, and fast-forward the user's branch."""
        ctx = self.ctx
        wt = attempt.worktree
        self.phase("inspecting", "")
        t0 = _mono()
        gitops.stage_all(wt)
        changes = gitops.staged_changes(wt, attempt.base)
        attempt.touched = [c.path for c in changes]
        inserted, deleted = gitops.numstat(wt, attempt.base)
        attempt.diff = DiffStat(
            files=len(changes),
            insertions=inserted,
            deletions=deleted,
            new_files=sum(1 for c in changes if c.status == "A"),
        )
        if not changes:
            self._timed(attempt, "inspect", t0)
            return self.finish(
                attempt,
                IterationOutcome.NO_CHANGE,
                None,
                "the agent said it was done but changed nothing",
            )
        findings = guard.inspect_changes(
            wt,
            attempt.base,
            changes,
            attempt.plan,
            protected_patterns(ctx.config.guard.protected),
            inserted,
            deleted,
        )
        self._timed(attempt, "inspect", t0)
        if findings:
            category = guard.worst(findings)
            return self.finish(
                attempt,
                IterationOutcome.ROLLBACK,
                category,
                str(findings[0]),
                evidence=[str(f) for f in findings],
            )
        self.phase("verifying", "")
        t1 = _mono()
        verification = self.verify(attempt, baseline)
        self._timed(attempt, "verify", t1)
        if not verification.passed:
            return self.finish(
                attempt,
                IterationOutcome.ROLLBACK,
                verification.category,
                verification.reason,
                verification=verification,
            )
        return self.land(attempt, baseline, verification)

    def verify(self, attempt: Attempt, baseline: Baseline) -> Verification:
        """Measure the changed tree with the baseline's gate and compare."""
        ctx = self.ctx
        wt = attempt.worktree
        tree = gitops.out(wt, "write-tree")
        after = measure_cached(ctx, wt, tree, baseline.gate, ctx.paths.runs / "pytest")

        def rerun(nodes: Sequence[str]) -> tuple[set[str], set[str]]:
            base_wt = ctx.paths.worktrees / (wt.name + "-base")
            gitops.worktree_add(ctx.paths.root, base_wt, attempt.base)
            try:
                work = ctx.paths.runs / "pytest"
                before = run_pytest(
                    base_wt, ctx.target, work, ctx.config.quality.tool_timeout_s, nodes
                )
                again = run_pytest(wt, ctx.target, work, ctx.config.quality.tool_timeout_s, nodes)
            finally:
                gitops.worktree_remove(ctx.paths.root, base_wt)

            def failed(m: Measurement) -> set[str]:
                return {
                    d.node_id for d in m.diagnostics if d.node_id and d.rule in ("failed", "error")
                }

            return failed(before), failed(again)

        def boot() -> tuple[bool, str]:
            return selfcheck(wt, ctx.paths.state / "selfcheck.log")

        wants_boot = any(c.check == CheckName.SELFCHECK for c in attempt.plan.criteria)
        return verify(
            attempt.plan,
            baseline.measurements,
            after,
            attempt.touched,
            wt,
            rerun=rerun,
            selfcheck=boot if wants_boot else None,
        )

    def land(
        self, attempt: Attempt, baseline: Baseline, verification: Verification
    ) -> IterationRecord:
        """Commit in the worktree and fast-forward the user's branch (or keep the branch)."""
        ctx = self.ctx
        plan = attempt.plan
        wt = attempt.worktree
        root = ctx.paths.root
        self.phase("landing", "")
        t0 = _mono()
        if plan.gap.roadmap is not None:
            _tick_roadmap(wt / "ROADMAP.md", plan.gap.roadmap.line, plan.gap.roadmap.text)
            gitops.stage_all(wt)
        attempt.branch = f"seed/{plan.iteration_id}"
        gitops.git(wt, "checkout", "--quiet", "-b", attempt.branch)
        message = f"seed: {plan.goal}\n\nIteration: {plan.iteration_id}\nGap: {plan.gap.key}\n"
        commit = gitops.commit(wt, message, ctx.config.git.user_name, ctx.config.git.user_email)
        blocker = gitops.land_blocker(root)
        if blocker:
            return self.keep(attempt, commit, f"cannot land: {blocker}", verification)
        head_now = gitops.head(root)
        if head_now != attempt.base:
            assert head_now is not None
            rebased = gitops.git(wt, "rebase", "--quiet", head_now, check=False)
            if not rebased.ok:
                gitops.git(wt, "rebase", "--abort", check=False)
                return self.keep(
                    attempt,
                    commit,
                    f"the branch moved to {head_now[:12]} and the change does not rebase onto it",
                    verification,
                )
            commit = gitops.out(wt, "rev-parse", "HEAD")
            gate = freeze_gate(wt, ctx.paths.gate / (wt.name + "-rebased"), ctx.config.quality)
            attempt.base = head_now
            moved = Baseline(
                baseline.worktree,
                head_now,
                gitops.tree_of(root, head_now),
                gate,
                baseline.measurements,
                baseline.report,
            )
            verification = self.verify(attempt, moved)
            if not verification.passed:
                return self.finish(
                    attempt,
                    IterationOutcome.ROLLBACK,
                    verification.category,
                    f"after rebasing onto {head_now[:12]}: {verification.reason}",
                    verification=verification,
                )
        collisions = [
            p
            for p in gitops.added_files(root, attempt.base, commit)
            if (root / p).exists() or (root / p).is_symlink()
        ]
        if collisions:
            return self.keep(
                attempt,
                commit,
                f"the change adds files that already exist, untracked, in your checkout: {', '.join(collisions[:5])}",
                verification,
            )
        merged = gitops.git(root, "merge", "--ff-only", "--quiet", commit, check=False)
        self._timed(attempt, "land", t0)
        if not merged.ok:
            reason = " ".join((merged.err_text() or merged.text()).split())[:400]
            return self.keep(
                attempt, commit, f"git refused the fast-forward: {reason}", verification
            )
        # the branch is deleted with the worktree in run()'s cleanup (it is checked out there now)
        return self.finish(
            attempt,
            IterationOutcome.SUCCESS,
            None,
            verification.reason,
            commit=commit,
            verification=verification,
        )

    def keep(
        self, attempt: Attempt, commit: str, reason: str, verification: Verification
    ) -> IterationRecord:
        """MERGE_BLOCKED: keep the work as seed/kept/<id>; nothing in the checkout changes."""
        root = self.ctx.paths.root
        kept = f"seed/kept/{attempt.plan.iteration_id}"
        gitops.git(root, "branch", "--force", kept, commit)
        self._prune_kept()
        record = self.finish(
            attempt,
            IterationOutcome.MERGE_BLOCKED,
            FailureCategory.MERGE_BLOCKED,
            f"{reason}; the work is kept on branch {kept}",
            commit=commit,
            kept=kept,
            verification=verification,
        )
        return record

    def _prune_kept(self) -> None:
        keep = self.ctx.config.git.keep_branches
        kept = gitops.list_branches(self.ctx.paths.root, "seed/kept/")
        for name in kept[: max(len(kept) - keep, 0)]:
            gitops.delete_branch(self.ctx.paths.root, name)

    # -- recording ----------------------------------------------------------------

    def record_waiting(self, attempt: Attempt, why: str) -> IterationRecord:
        """A plan nobody can carry out now: written down, nothing runs."""
        ctx = self.ctx
        ctx.store.write_file(
            attempt.plan.iteration_id, "plan.json", attempt.plan.model_dump_json(indent=2) + "\n"
        )
        attempt.backend = Backend("none", attempt.backend.reason)
        return self.finish(attempt, IterationOutcome.WAITING, None, f"waiting for an agent: {why}")

    def finish(
        self,
        attempt: Attempt,
        outcome: IterationOutcome,
        category: FailureCategory | None,
        reason: str,
        *,
        commit: str | None = None,
        kept: str | None = None,
        verification: Verification | None = None,
        evidence: Sequence[str] = (),
    ) -> IterationRecord:
        """Write the record, report.md and the inbox item's fate; apply halt conditions."""
        ctx = self.ctx
        plan = attempt.plan
        agent = attempt.agent
        record = IterationRecord(
            iteration_id=plan.iteration_id,
            started_at=attempt.started,
            ended_at=datetime.now(UTC),
            gap=gap_ref(plan.gap),
            outcome=outcome,
            failure_category=category,
            reason=reason,
            evidence=tuple(evidence or (verification.evidence if verification else ())),
            failures=tuple(verification.failures) if verification else (),
            verdicts=tuple(verification.verdicts) if verification else (),
            touched_files=tuple(attempt.touched),
            diff=attempt.diff,
            base=attempt.base,
            commit=commit,
            kept_branch=kept,
            backend=attempt.backend.name,
            agent_version=attempt.agent_version,
            agent_summary=agent.summary if agent else "",
            agent_exit_code=attempt.exit_code,
            tokens_used=agent.tokens_used if agent else 0,
            cost_usd=agent.cost_usd if agent else 0.0,
            durations=attempt.durations,
            task_kind=plan.task_kind.value,
            plan=plan,
        )
        ctx.store.append(record)
        ctx.store.write_file(plan.iteration_id, "plan.json", plan.model_dump_json(indent=2) + "\n")
        try:
            markdown = ctx.host.render_record(record)
        except HostError as exc:
            markdown = f"# {record.iteration_id}: {record.outcome.value}\n\n{record.reason}\n\n(report rendering failed: {exc})\n"
        ctx.store.write_file(plan.iteration_id, "report.md", markdown)
        self._release_inbox(attempt, record)
        self._apply_halts(record)
        line = (
            f"{record.iteration_id}: {record.outcome.value}"
            + (f" {category.value}" if category else "")
            + f" ({plan.gap.key}): {reason}"
        )
        ctx.log(line[:500])
        return record

    def _release_inbox(self, attempt: Attempt, record: IterationRecord) -> None:
        if not attempt.claimed_inbox:
            return
        ctx = self.ctx
        name = attempt.claimed_inbox
        links = [r.iteration_id for r in ctx.store.for_gaps([record.gap.key], per_gap=20)]
        failures = sum(
            1
            for r in ctx.store.for_gaps([record.gap.key], per_gap=20)
            if r.outcome in FAILED_OUTCOMES
        )
        text = "\n".join(
            [
                f"# {name}: {record.outcome.value}",
                "",
                record.reason,
                "",
                *[f"- ../../history/{i}/report.md" for i in links],
                "",
            ]
        )
        if record.outcome == IterationOutcome.SUCCESS:
            inbox.release(ctx.paths.inbox, name, "done", text)
        elif record.outcome in FAILED_OUTCOMES and failures >= 3:
            inbox.release(ctx.paths.inbox, name, "failed", text)
        else:
            inbox.release(ctx.paths.inbox, name, "")

    def _apply_halts(self, record: IterationRecord) -> None:
        ctx = self.ctx
        category = record.failure_category
        reason = ""
        if category in VIOLATIONS or category in (
            FailureCategory.GROWTH_LIMIT,
            FailureCategory.BUDGET_EXCEEDED,
        ):
            reason = (
                f"{category.value} in {record.iteration_id}: {record.reason}" if category else ""
            )
        else:
            ran = [
                r
                for r in ctx.store.recent(10)
                if r.outcome not in (IterationOutcome.WAITING, IterationOutcome.ABORTED)
            ]
            last = ran[-3:]
            if (
                len(last) == 3
                and all(r.outcome in FAILED_OUTCOMES for r in last)
                and len({r.gap.key for r in last}) == 3
            ):
                reason = f"3 consecutive failures across different gaps ({', '.join(r.iteration_id for r in last)})"
            elif len(last) == 3 and all(
                r.failure_category == FailureCategory.FLAKY_TEST for r in last
            ):
                reason = "a flaky streak of 3 iterations"
        if reason:
            halt.halt(ctx.store, reason, category.value if category else "", record.iteration_id)
            ctx.log(f"HALTED: {reason}. Nothing runs until `python seed.py resume`.")


def _merge(a: Sequence[IterationRecord], b: Sequence[IterationRecord]) -> list[IterationRecord]:
    seen: dict[str, IterationRecord] = {}
    for record in (*a, *b):
        seen[record.iteration_id] = record
    return sorted(seen.values(), key=lambda r: (r.started_at, r.iteration_id))


def _substitute(arg: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        arg = arg.replace(key, value)
    return arg


def _mono() -> float:
    return time.monotonic()


def _daemon_python() -> str:
    return sys.executable


def _version(argv: Sequence[str], env: dict[str, str], cwd: Path) -> str:
    try:
        result = procs.run(list(argv), cwd=cwd, timeout_s=15, env=env, merge_stderr=True)
    except (OSError, Interrupted):
        return ""
    lines = result.text().strip().splitlines()
    return lines[0][:120] if result.ok and lines else ""


def _tick_roadmap(path: Path, line: int, text: str) -> None:
    """Turn the item's `- [ ]` into `- [x]`, if the line still holds the same item."""
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    candidates = [line - 1] + [i for i in range(len(lines)) if i != line - 1]
    for index in candidates:
        if 0 <= index < len(lines) and "[ ]" in lines[index] and text in lines[index]:
            lines[index] = lines[index].replace("[ ]", "[x]", 1)
            path.write_text("".join(lines), encoding="utf-8")
            return

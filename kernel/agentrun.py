"""Running the agent: run spec to process, with the budget checked before any money is spent."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from domain import (
    AgentReport,
    FailureCategory,
    IterationOutcome,
    IterationRecord,
    RunResult,
    RunSpec,
)
from kernel import budget, faults, gitops, inbox, jails, procs, watch
from kernel.attempt import Attempt, Phase, mono, timed
from kernel.bounds import cap_lines
from kernel.context import Context
from kernel.errors import HostError, Interrupted
from kernel.fsutil import atomic_write_text
from kernel.globs import protected_patterns
from kernel.integrity import Checkout, Snapshot
from kernel.recording import Recorder

_ENV_PASS = ("PATH", "HOME")
"""All an agent gets from the daemon's environment, besides the variables [agent] env names."""

ARTIFACT_CAP = 32 * 1024 * 1024
"""Bytes of one artifact (a trajectory) kept and handed to the adapter."""


class AgentRunner:
    """Starts the agent's process the adapter described, and reads how it went."""

    def __init__(self, ctx: Context, phase: Phase, recorder: Recorder) -> None:
        self.ctx = ctx
        self.phase = phase
        self.recorder = recorder

    def _agent_env(self, spec: RunSpec, values: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in _ENV_PASS}
        for name in self.ctx.config.agent.env:
            if name in os.environ:
                env[name] = os.environ[name]
        env.update(spec.env)
        env.update(values)
        return procs.child_env(env)

    def execute(self, attempt: Attempt, spec: RunSpec) -> IterationRecord | None:
        """Run the agent; a record when the iteration ends here, None when its work is to be inspected."""
        ctx = self.ctx
        plan = attempt.plan
        iteration_id = plan.iteration_id
        # the most this run may cost must still fit in the day's budget, before it starts
        reserve = budget.reservation(ctx.config.budget, plan.budget.max_cost_usd)
        refused = budget.budget_problem(ctx.store, ctx.config.budget, reserve_usd=reserve)
        if refused:
            record = self.recorder.finish(
                attempt,
                IterationOutcome.FAILURE,
                FailureCategory.BUDGET_EXCEEDED,
                f"budget exhausted before the agent ran: {refused}",
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
        turn = len(attempt.rounds) + 1
        # a file left from an earlier attempt must not be read as this run's; a repair round
        # keeps the iteration's own (aider's chat history is how it continues)
        for name in spec.artifacts if turn == 1 else ():
            if not Path(name).is_absolute() and ".." not in Path(name).parts:
                (run_dir / name).unlink(missing_ok=True)
        atomic_write_text(prompt_file, spec.prompt)
        atomic_write_text(plan_file, plan.model_dump_json(indent=2))
        ctx.store.write_file(iteration_id, "plan.json", plan.model_dump_json(indent=2) + "\n")
        suffix = "" if turn == 1 else f"-round-{turn}"
        if spec.prompt:
            ctx.store.write_file(iteration_id, f"prompt{suffix}.md", spec.prompt)
        values = {
            "{prompt_file}": str(prompt_file),
            "{plan_file}": str(plan_file),
            "{worktree}": str(attempt.worktree),
            "{iteration_id}": iteration_id,
            "{run_dir}": str(run_dir),
            "{result_file}": str(result_file),
        }
        argv = [_substitute(a, values) for a in spec.argv]
        agent_objects = ctx.paths.objects / f"{attempt.worktree.name}-agent"
        agent_objects.mkdir(parents=True, exist_ok=True)
        env = self._agent_env(
            spec,
            {
                "SEED_PROMPT_FILE": str(prompt_file),
                "SEED_PLAN_FILE": str(plan_file),
                "SEED_WORKTREE": str(attempt.worktree),
                "SEED_ITERATION_ID": iteration_id,
                "SEED_RESULT_FILE": str(result_file),
                "SEED_RUN_DIR": str(run_dir),
                "SEED_ROUND": str(turn),
                # the agent's own commits go to a private object folder; the kernel never
                # reads the agent's index or objects, it builds the tree from the files
                "GIT_OBJECT_DIRECTORY": str(agent_objects),
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(ctx.paths.common / "objects"),
            },
        )
        log_path = ctx.store.folder(iteration_id) / f"agent{suffix}.log"
        timeout = min(plan.budget.timeout_s, ctx.config.agent.timeout_s)
        if spec.version_argv:
            attempt.agent_version = _version(spec.version_argv, env, attempt.worktree)
        self.phase("agent running", f"{attempt.backend.name} on {plan.gap.key}; log: {log_path}")
        ctx.log(f"{iteration_id}: {attempt.backend.name} working on {plan.gap.key}")
        if not (os.path.isabs(argv[0]) or shutil.which(argv[0], path=env.get("PATH"))):
            log_path.write_text(f"agent executable not found: {argv[0]}\n", encoding="utf-8")
            return self.recorder.finish(
                attempt,
                IterationOutcome.FAILURE,
                FailureCategory.AGENT_ERROR,
                f"agent executable not found: {argv[0]}",
            )
        t0 = mono()

        def started(pgid: int) -> None:
            attempt.note(stage="agent", pgid=pgid, start_time=procs.process_start_time(pgid))
            faults.fault("agent-run")

        if plan.gap.inbox is not None:
            with contextlib.suppress(OSError):
                inbox.claim(ctx.paths.inbox, plan.gap.inbox.name)
                attempt.claimed_inbox = plan.gap.inbox.name
                attempt.note(inbox=attempt.claimed_inbox)
        checkout = Checkout(
            ctx.paths.root, ctx.paths.state, protected_patterns(ctx.config.guard.protected)
        )
        snapshot = checkout.begin(iteration_id)
        if attempt.sandboxed:
            argv = jails.agent_argv(
                argv,
                paths=ctx.paths,
                guard=ctx.config.guard,
                writable=(
                    attempt.worktree,
                    gitops.git_dir(attempt.worktree),
                    run_dir,
                    agent_objects,
                ),
                readonly=(prompt_file, plan_file),
                home=self._home(iteration_id),
                home_binds=spec.home,
                cwd=attempt.worktree,
            )
        # journalled: if the daemon dies during the run, the next start counts this much spent
        attempt.note(stage="agent", reserve_usd=reserve, sandboxed=attempt.sandboxed)
        try:
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
        finally:
            check_checkout(ctx, attempt, checkout, snapshot)
            if not attempt.sandboxed and ctx.pyright is not None:
                # same user, no sandbox: it could have reached the resident checker's process
                ctx.pyright.invalidate()
        timed(attempt, "execute", t0)
        if completed.truncated:
            with log_path.open("ab") as handle:
                handle.write(
                    f"\n[seed: output cut at {ctx.config.agent.max_log_bytes} bytes; {completed.output_bytes} bytes in all]\n".encode()
                )
        attempt.exit_code = completed.exit_code
        attempt.agent_note = spec.note
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
            output=_read_capped(log_path, ctx.config.agent.max_log_bytes),
            artifacts=self._keep_artifacts(iteration_id, run_dir, spec.artifacts),
        )
        try:
            report = ctx.host.agent_parse(attempt.backend.name, plan, run_result)
        except HostError as exc:
            report = AgentReport(
                success=completed.exit_code == 0,
                summary=f"the adapter could not read the run: {exc}",
            )
        agent = self._account(attempt, report)
        attempt.note(stage="inspecting", pgid=0, accounted=True)
        if attempt.integrity_evidence:
            return self.recorder.finish(
                attempt,
                IterationOutcome.ROLLBACK,
                FailureCategory.SANDBOX_VIOLATION,
                f"the user's checkout was changed during the agent run: {attempt.integrity_evidence[0]}",
                evidence=attempt.integrity_evidence,
            )
        if completed.timed_out:
            return self.recorder.finish(
                attempt,
                IterationOutcome.FAILURE,
                FailureCategory.AGENT_TIMEOUT,
                f"the agent ran past its {timeout:.0f}s limit; its process group was ended",
            )
        # repair rounds share the iteration's budget: the sum of the rounds so far counts
        spent = attempt.agent or agent
        over = _over_budget(
            spent.tokens_used, spent.cost_usd, plan.budget.max_tokens, plan.budget.max_cost_usd
        )
        if over:
            return self.recorder.finish(
                attempt,
                IterationOutcome.FAILURE,
                FailureCategory.BUDGET_EXCEEDED,
                f"the runs used {spent.tokens_used} tokens / ${spent.cost_usd:.2f}, over the per-iteration budget: {over}",
            )
        if not agent.success:
            category = agent.failure_category or FailureCategory.AGENT_ERROR
            return self.recorder.finish(
                attempt,
                IterationOutcome.FAILURE,
                category,
                f"the agent reported failure (exit {completed.exit_code}): {agent.summary[:300]}",
            )
        return None

    def _home(self, iteration_id: str) -> Path:
        """The agent's private HOME, kept for the whole iteration (a repair round resumes there)."""
        home = self.ctx.paths.homes / iteration_id
        home.mkdir(parents=True, exist_ok=True)
        return home

    def _keep_artifacts(
        self, iteration_id: str, run_dir: Path, names: Sequence[str]
    ) -> dict[str, str]:
        """Copy the run's artifacts into history/<id>/ and return their text."""
        kept: dict[str, str] = {}
        for name in names:
            source = run_dir / name
            if Path(name).is_absolute() or ".." in Path(name).parts or not source.is_file():
                continue
            text = _read_capped(source, ARTIFACT_CAP)
            self.ctx.store.write_file(iteration_id, Path(name).name, text)
            kept[name] = text
        return kept

    def _account(self, attempt: Attempt, report: AgentReport) -> AgentReport:
        """Price the run when the tool gave no cost, note its version, and append it to the ledger."""
        ctx = self.ctx
        priced, basis = budget.price_run(report, ctx.config.agent.prices, ctx.config.agent.model)
        attempt.agent = _plus(attempt.agent, priced)
        attempt.cost_basis = basis
        attempt.session = report.session or attempt.session
        if not attempt.agent_version and report.version:
            attempt.agent_version = report.version[:120]
        if report.note:
            attempt.agent_note = "; ".join(n for n in (attempt.agent_note, report.note) if n)
        budget.append(
            ctx.paths.history,
            budget.LedgerEntry(
                at=datetime.now(UTC),
                iteration_id=attempt.plan.iteration_id,
                backend=attempt.backend.name,
                model=priced.model or ctx.config.agent.model,
                tokens_used=priced.tokens_used,
                input_tokens=priced.input_tokens,
                output_tokens=priced.output_tokens,
                cost_usd=priced.cost_usd,
                cost_basis=basis,
            ),
        )
        return priced


def check_checkout(ctx: Context, attempt: Attempt, checkout: Checkout, snapshot: Snapshot) -> None:
    """Compare the user's checkout with its snapshot.

    Sandboxed, nothing the agent ran could write there: every change is the person's, listed
    and never undone. Unsandboxed, a change to what is protected is put back and is a
    SANDBOX_VIOLATION. Either way, git configuration that gained a program to run is one.
    """
    folder = ctx.store.folder(attempt.plan.iteration_id)
    found = checkout.check(snapshot, folder, person=attempt.sandboxed)
    checkout.done()
    attempt.note(stage="checked")
    attempt.checkout_changes = found.changes
    attempt.integrity_evidence = [*found.violations, *found.problems]
    attempt.integrity_evidence += watched(ctx, attempt)


def watched(ctx: Context, attempt: Attempt) -> list[str]:
    """SANDBOX_VIOLATION evidence from the watch since the iteration began; an interpreter
    change the sandbox rules out for the agent is listed as the person's instead."""
    if attempt.watch is None:
        return []
    settings, files = watch.compare(attempt.watch, ctx.paths.root, ctx.target.python)
    if attempt.sandboxed:
        attempt.checkout_changes += [
            f"interpreter: {f} (by a person: the sandbox keeps it read-only)" for f in files
        ]
        return settings
    return [*settings, *(f"interpreter start-up file {f}" for f in files)]
    for line in cap_lines(attempt.integrity_evidence):
        ctx.log(f"{attempt.plan.iteration_id}: SANDBOX_VIOLATION: {line}")


def _plus(before: AgentReport | None, run: AgentReport) -> AgentReport:
    """The latest run's report with the usage of the earlier rounds added."""
    if before is None:
        return run
    return run.model_copy(
        update={
            "tokens_used": before.tokens_used + run.tokens_used,
            "input_tokens": before.input_tokens + run.input_tokens,
            "output_tokens": before.output_tokens + run.output_tokens,
            "cached_tokens": before.cached_tokens + run.cached_tokens,
            "cost_usd": before.cost_usd + run.cost_usd,
            "turns": before.turns + run.turns,
        }
    )


def _over_budget(tokens: int, cost: float, max_tokens: int, max_cost: float) -> str:
    """What a finished run used beyond its per-iteration budget ('' when nothing)."""
    over: list[str] = []
    if max_tokens and tokens > max_tokens:
        over.append(f"{tokens} tokens of {max_tokens} allowed")
    if max_cost and cost > max_cost:
        over.append(f"${cost:.2f} of ${max_cost:.2f} allowed")
    return "; ".join(over)


def _read_capped(path: Path, cap: int) -> str:
    try:
        with path.open("rb") as handle:
            return handle.read(cap).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _substitute(arg: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        arg = arg.replace(key, value)
    return arg


def _version(argv: Sequence[str], env: dict[str, str], cwd: Path) -> str:
    try:
        result = procs.run(list(argv), cwd=cwd, timeout_s=15, env=env, merge_stderr=True)
    except (OSError, Interrupted):
        return ""
    # a tool may warn before its version (codex, when its home is under a temp folder)
    lines = [
        line.strip()
        for line in result.text().splitlines()
        if line.strip() and not line.lstrip().upper().startswith("WARNING")
    ]
    return lines[0][:120] if result.ok and lines else ""

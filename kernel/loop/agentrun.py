"""Running the agent: run spec to process, with the budget checked before any money is spent."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from domain import (
    AgentReport,
    FailureCategory,
    IterationOutcome,
    RunResult,
    RunSpec,
)
from kernel.bounds import printable
from kernel.contracts import protected_patterns
from kernel.errors import HostError, Interrupted
from kernel.fsutil import atomic_write_text, remove_any
from kernel.host import answers
from kernel.host.context import Context
from kernel.isolation import agentgit, jails, procs, readback
from kernel.isolation.integrity import Checkout, Snapshot
from kernel.judging.iteration import Ending, Iteration, Phase, mono
from kernel.loop import liveuse, modelrun, stuckwatch
from kernel.records import budget, inbox, limits

_ENV_PASS = ("PATH", "HOME")
"""All an agent gets from the daemon's environment, besides the variables [agent] env names."""

CLI_LIMITS = ("claude", "codex")
"""The adapters whose report of a usage limit the kernel believes (read from the CLI's own
structured result), and only for a run its gateway did not serve: with the gateway, only the
upstream's answer decides."""
ARTIFACT_CAP = 32 * 1024 * 1024
"""Bytes of one artifact (a trajectory) kept and handed to the adapter."""
RESULT_CAP = 1_000_000
"""Bytes of the run's result file read."""


@dataclass(frozen=True)
class Files:
    """Where one run's inputs and outputs live (runs/<id>/, and the log in history/<id>/)."""

    run_dir: Path
    prompt: Path
    plan: Path
    result: Path
    log: Path
    turn: int

    @property
    def suffix(self) -> str:
        """ "" for the first round, "-round-N" for a repair round's files."""
        return "" if self.turn == 1 else f"-round-{self.turn}"


class AgentRunner:
    """Starts the agent's process the adapter described, and reads how it went."""

    def __init__(self, ctx: Context, phase: Phase) -> None:
        self.ctx = ctx
        self.phase = phase
        self._network: jails.Network = "full"
        self._backend = ""
        self._wire: modelrun.Used | None = None
        """The latest run's usage read from its model exchanges (model-only runs)."""
        self._stuck = ""
        """Why the latest run's log showed it stuck (where no gateway served it)."""
        self._reserved = 0.0
        """The latest run's reservation: what it counts when its own report says no figure."""

    def execute(self, it: Iteration, spec: RunSpec) -> Ending | None:
        """Run the agent; the Ending when the iteration ends here, None when its work is to be judged."""
        ctx = self.ctx
        plan = it.plan
        reserve, refused = self._reserve(it)
        self._reserved = reserve
        if refused:
            return Ending(
                IterationOutcome.FAILURE,
                FailureCategory.BUDGET_EXCEEDED,
                f"budget exhausted before the agent ran: {refused}",
            )
        files = self._inputs(it, spec)
        agent_config = ctx.config.agent
        self._network = modelrun.network(agent_config, it.backend.name, it.sandboxed)
        self._backend = it.backend.name
        it.network = modelrun.said(agent_config, it.backend.name, it.sandboxed)
        argv, env = self._command(it, spec, files)
        used = f" (round {files.turn}; {it.used()})" if it.used() else ""
        self.phase("agent running", f"{it.backend.name} on {plan.gap.key}{used}; log: {files.log}")
        ctx.log(f"{plan.iteration_id}: {it.backend.name} working on {plan.gap.key}")
        if not (os.path.isabs(argv[0]) or shutil.which(argv[0], path=env.get("PATH"))):
            files.log.write_text(f"agent executable not found: {argv[0]}\n", encoding="utf-8")
            return Ending(
                IterationOutcome.FAILURE,
                FailureCategory.AGENT_ERROR,
                f"agent executable not found: {argv[0]}",
            )
        self._claim_inbox(it)
        completed = self._run(it, spec, (argv, env), files, reserve)
        agent = self._read(it, spec, completed, files)
        return self._judge_run(it, completed, agent)

    def _reserve(self, it: Iteration) -> tuple[float, str]:
        """The most this run may cost, and why the day's budget refuses it ('' when it fits)."""
        budgets = self.ctx.config.budget
        reserve = budget.reservation(budgets, it.plan.budget.max_cost_usd)
        return reserve, budget.budget_problem(self.ctx.store, budgets, reserve_usd=reserve)

    def _folder(self, iteration_id: str) -> Path:
        """Where the run's log, prompt, artifacts and model exchanges are kept."""
        return self.ctx.store.folder(iteration_id)

    def _model(self, it: Iteration) -> modelrun.ModelRun:
        """The run's model gateway, forwarding upstream."""
        return modelrun.for_run(self.ctx, it)

    def _ledger(self, entry: budget.LedgerEntry) -> None:
        """The run's line in the spend ledger."""
        budget.append(self.ctx.paths.history, entry)

    def _inputs(self, it: Iteration, spec: RunSpec) -> Files:
        """The run's folder with its prompt (plan.json is written once, when the journal begins)."""
        iteration_id = it.plan.iteration_id
        run_dir = self.ctx.paths.runs / iteration_id
        run_dir.mkdir(parents=True, exist_ok=True)
        turn = len(it.rounds) + 1
        files = Files(
            run_dir,
            run_dir / "prompt.md",
            run_dir / "plan.json",
            run_dir / "result.json",
            self._folder(iteration_id) / f"agent{'' if turn == 1 else f'-round-{turn}'}.log",
            turn,
        )
        remove_any(files.result)
        # a file left from an earlier attempt must not be read as this run's; a repair round
        # keeps the iteration's own (aider's chat history is how it continues)
        for name in spec.artifacts if turn == 1 else ():
            if not Path(name).is_absolute() and ".." not in Path(name).parts:
                remove_any(run_dir / name)
        atomic_write_text(files.prompt, spec.prompt)
        if spec.prompt:
            atomic_write_text(self._folder(iteration_id) / f"prompt{files.suffix}.md", spec.prompt)
        return files

    def _command(
        self, it: Iteration, spec: RunSpec, files: Files
    ) -> tuple[list[str], dict[str, str]]:
        """The argv with its placeholders filled, and the agent's environment."""
        ctx = self.ctx
        values = {
            "{prompt_file}": str(files.prompt),
            "{plan_file}": str(files.plan),
            "{worktree}": str(it.worktree),
            "{iteration_id}": it.plan.iteration_id,
            "{run_dir}": str(files.run_dir),
            "{result_file}": str(files.result),
        }
        argv = [_home_path(_substitute(a, values)) for a in spec.argv]
        env = self._agent_env(
            spec,
            {
                "SEED_PROMPT_FILE": str(files.prompt),
                "SEED_PLAN_FILE": str(files.plan),
                "SEED_WORKTREE": str(it.worktree),
                "SEED_ITERATION_ID": it.plan.iteration_id,
                "SEED_RESULT_FILE": str(files.result),
                "SEED_RUN_DIR": str(files.run_dir),
                "SEED_ROUND": str(files.turn),
                # the checkout is a repository of its own (agentgit.py); the kernel never reads
                # the agent's index or objects, it builds the tree from the files
                **agentgit.env(ctx.paths),
            },
        )
        if spec.version_argv and not it.agent_version:
            # outside the sandbox: never from a folder a run could have written (a module
            # there would be imported by `python -m`, a config file read)
            it.agent_version = _version(spec.version_argv, env, Path("/"))
        return argv, env

    def _agent_env(self, spec: RunSpec, values: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in _ENV_PASS}
        agent = self.ctx.config.agent
        # in model-only a key variable of the tool's is the gateway's, never the agent's
        held = modelrun.held_keys(agent, self._backend) if self._network == "model-only" else ()
        for name in agent.env:
            if name in os.environ and name not in held:
                env[name] = os.environ[name]
        env.update(modelrun.agent_env(agent, self._network, os.environ, self._backend))
        env.update(spec.env)
        env.update(values)
        return procs.child_env(env)

    def _claim_inbox(self, it: Iteration) -> None:
        """Move the plan's inbox task to inbox/.active/ while the agent works on it."""
        task = it.plan.gap.inbox
        if task is not None:
            with contextlib.suppress(OSError):
                inbox.claim(self.ctx.paths.inbox, task.name)
                it.claimed_inbox = task.name
                it.note(inbox=it.claimed_inbox)

    def _run(
        self,
        it: Iteration,
        spec: RunSpec,
        command: tuple[list[str], dict[str, str]],
        files: Files,
        reserve: float,
    ) -> procs.Completed:
        """The agent's process (in the sandbox unless it is off), with the checkout checked after."""
        ctx = self.ctx
        argv, env = command
        t0 = mono()

        # the agent's git is made again from the kernel's record: nothing an earlier round
        # planted in the checkout's .git reaches this one
        agentgit.restore_git(ctx.paths, it.worktree, it.base)
        writable = self._writable(it, files) if it.sandboxed else ()
        checkout = Checkout(
            ctx.paths.root, ctx.paths.state, protected_patterns(ctx.config.guard.protected)
        )
        reach = (*writable, *self._home_places(it, spec)) if it.sandboxed else ()
        snapshot = checkout.begin(it.plan.iteration_id, reach, sandboxed=it.sandboxed)
        # journalled: if the daemon dies during the run, the next start counts this much spent
        # (and which of its runs: an earlier round's ledger line does not account for this one)
        ledger_runs = budget.runs_of(ctx.paths.history, it.plan.iteration_id)
        it.note(
            stage="agent",
            reserve_usd=reserve,
            sandboxed=it.sandboxed,
            accounted=False,
            ledger_runs=ledger_runs,
            wire=self._network == "model-only",  # the gateway counts each answer in the ledger
        )
        # tokens and cost so far on the person's screen, from the run's own output
        watch = liveuse.UsageWatch(
            (files.log, files.result), lambda: self._so_far(it, files), ctx.used_so_far
        )
        self._wire, model = None, None
        logwatch = self._logwatch(it, files)
        try:
            if self._network == "model-only":
                model = self._model(it)
            if it.sandboxed:
                jailed = self._jailed(spec, argv, files, writable, it, model)
                argv, env = jailed.argv, {**env, **jailed.env}
            with watch, logwatch or contextlib.nullcontext():
                completed = procs.run(
                    argv,
                    cwd=it.worktree,
                    timeout_s=self._timeout(it),
                    env=env,
                    merge_stderr=True,
                    log_path=files.log,
                    max_bytes=ctx.config.agent.max_log_bytes,
                    on_start=it.agent_started,
                    sweep_rounds=20,
                    end=model.ended if model else logwatch.ended if logwatch else None,
                )
        finally:
            if model is not None:
                self._wire = model.close(it)
            self._stuck = logwatch.stuck if logwatch is not None else ""
            check_checkout(ctx, it, checkout, snapshot, self._folder(it.plan.iteration_id))
        it.timed("execute", t0)
        if completed.truncated:
            with files.log.open("ab") as handle:
                handle.write(
                    f"\n[seed: output cut at {ctx.config.agent.max_log_bytes} bytes; {completed.output_bytes} bytes in all]\n".encode()
                )
        return completed

    def _logwatch(self, it: Iteration, files: Files) -> stuckwatch.LogWatch | None:
        """Where no gateway serves the run, the reader of its log that ends it when stuck."""
        agent = self.ctx.config.agent
        if self._network == "model-only" or not (agent.stuck_repeats or agent.stuck_turns):
            return None
        still = stuckwatch.Still(agent.stuck_turns, it.worktree, "tool calls in its log")
        return stuckwatch.LogWatch(files.log, agent.stuck_repeats, still)

    def _writable(self, it: Iteration, files: Files) -> tuple[Path, ...]:
        """The places bound writable in the agent's sandbox, from the kernel's own record: its
        checkout (with the checkout's own .git), the run's folder, and the person's extras.
        Never what git or a file inside the checkout says."""
        return (it.worktree, files.run_dir, *jails.extra_writable(self.ctx.paths))

    def _home_places(self, it: Iteration, spec: RunSpec) -> tuple[Path, ...]:
        """The agent's private home and the login folders its adapter names there (writable too)."""
        real_home = Path(os.environ.get("HOME") or "/nonexistent")
        names = jails.home_names(spec.home)
        if it.candidate:  # copies in its private HOME (`_logins`), never the person's own
            return (self._logins(it, spec),)
        return (self._home(it.plan.iteration_id), *(real_home / n for n in names))

    def _logins(self, it: Iteration, spec: RunSpec) -> Path:
        """A candidate's private HOME with copies of the login files its adapter names (made
        once; never copied back): candidates running at once share nothing writable."""
        home = self._home(it.plan.iteration_id)
        real_home = Path(os.environ.get("HOME") or "/nonexistent")
        for name in jails.home_names(spec.home):
            source, copy = real_home / name, home / name
            if copy.exists() or copy.is_symlink() or not source.exists():
                continue
            copy.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError, shutil.Error):
                if source.is_dir():
                    shutil.copytree(source, copy, symlinks=True)
                else:
                    shutil.copy2(source, copy, follow_symlinks=False)
        return home

    def _jailed(
        self,
        spec: RunSpec,
        argv: list[str],
        files: Files,
        writable: tuple[Path, ...],
        it: Iteration,
        model: modelrun.ModelRun | None,
    ) -> jails.AgentSandbox:
        """The argv run in the sandbox: only the places of `_writable` writable; with the
        model's gateway, no network but it."""
        return jails.agent_sandbox(
            argv,
            paths=self.ctx.paths,
            guard=self.ctx.config.guard,
            writable=writable,
            readonly=(files.prompt, files.plan),
            home=self._home(it.plan.iteration_id),
            home_binds=() if it.candidate else spec.home,
            cwd=it.worktree,
            listed=self.ctx.config.agent.files,
            network=self._network,
            gateway=model.socket if model is not None else None,
        )

    def _timeout(self, it: Iteration) -> float:
        return min(it.plan.budget.timeout_s, self.ctx.config.agent.timeout_s)

    def _read(
        self, it: Iteration, spec: RunSpec, completed: procs.Completed, files: Files
    ) -> AgentReport:
        """What the run achieved, as the adapter reads it, priced and in the ledger."""
        ctx = self.ctx
        it.exit_code = completed.exit_code
        it.agent_note = spec.note
        found, partial = self._output(files)
        run_result = partial.model_copy(
            update={
                "exit_code": completed.exit_code,
                "timed_out": completed.timed_out,
                "duration_s": completed.duration_s,
                "output_tail": completed.tail.decode("utf-8", errors="replace"),
                "output_bytes": completed.output_bytes,
                "artifacts": self._keep_artifacts(
                    it.plan.iteration_id, files.run_dir, spec.artifacts
                ),
            }
        )
        try:
            report = ctx.host.agent_parse(it.backend.name, it.plan, run_result)
        except HostError as exc:
            report = AgentReport(
                success=completed.exit_code == 0,
                summary=f"the adapter could not read the run: {exc}",
            )
        report = answers.refusals(report, f"{run_result.output}\n{run_result.output_tail}")
        unfit = answers.unfit_figures(report)
        if unfit:  # its spend is not known: the gateway's count, else the run's reservation
            report = AgentReport(
                success=False,
                failure_category=FailureCategory.AGENT_ERROR,
                summary=f"the run's report is refused: {unfit}",
                cost_usd=0.0 if self._network == "model-only" else self._reserved,
            )
        if not (found.ok or found.missing):
            report = report.model_copy(
                update={
                    "success": False,
                    "failure_category": FailureCategory.AGENT_ERROR,
                    "summary": f"the run left its result file {files.result.name} as {found.problem}; not read",
                }
            )
        agent = self._account(it, report)
        it.note(stage="inspecting", pgid=0, accounted=True)
        return agent

    def _output(self, files: Files) -> tuple[readback.Readback, RunResult]:
        """The run's output as it stands (a run still going has no exit code): its result
        file, read as a regular file only (never through a link or a FIFO), and its log."""
        found = readback.read(Path(files.result.name), RESULT_CAP, within=files.run_dir)
        return found, RunResult(
            exit_code=None,
            log_path=str(files.log),
            run_dir=str(files.run_dir),
            result_json=found.text() if found.ok else "",
            output=readback.read(files.log, self.ctx.config.agent.max_log_bytes).text(),
        )

    def _so_far(self, it: Iteration, files: Files) -> AgentReport:
        """The iteration's usage so far: the run's partial output read by the adapter (its
        answer validated as every answer), priced as the run's end prices it, plus the earlier
        rounds'. For the screen only: the ledger, the budget and the verdicts never see it."""
        ctx = self.ctx
        _, partial = self._output(files)
        report = ctx.host.agent_parse(it.backend.name, it.plan, partial)
        if answers.unfit_figures(report):
            report = AgentReport(success=False)
        priced, _ = budget.price_run(report, ctx.config.agent.prices, ctx.config.agent.model)
        return plus(it.agent, priced)

    def _judge_run(
        self, it: Iteration, completed: procs.Completed, agent: AgentReport
    ) -> Ending | None:
        """The Ending of a run that ends the iteration (violation, timeout, budget, failure)."""
        plan = it.plan
        if it.integrity_evidence:
            return Ending(
                IterationOutcome.ROLLBACK,
                FailureCategory.SANDBOX_VIOLATION,
                f"the user's checkout was changed during the agent run: {it.integrity_evidence[0]}",
                evidence=it.integrity_evidence,
            )
        wired = self._wired(it, agent)
        if wired is not None:
            return wired
        if completed.timed_out:
            return Ending(
                IterationOutcome.FAILURE,
                FailureCategory.AGENT_TIMEOUT,
                f"the agent ran past its {self._timeout(it):.0f}s limit; its process group was ended",
            )
        if it.model_cut or it.model_limit:
            return Ending(
                IterationOutcome.FAILURE,
                FailureCategory.BUDGET_EXCEEDED if it.model_cut else FailureCategory.RUN_LIMIT,
                f"the model gateway ended the run: {it.model_cut or it.model_limit}",
            )
        # repair rounds share the iteration's budget: the sum of the rounds so far counts (the
        # wire's figures where the gateway read them: a tool may under- or over-report)
        tokens, cost = counted(it, it.agent or agent)
        over = _over_budget(tokens, cost, plan.budget.max_tokens, plan.budget.max_cost_usd)
        if over:
            return Ending(
                IterationOutcome.FAILURE,
                FailureCategory.BUDGET_EXCEEDED,
                f"the runs used {tokens} tokens / ${cost:.2f}, over the per-iteration budget: {over}",
            )
        if not agent.success:
            category = agent.failure_category or FailureCategory.AGENT_ERROR
            said = printable(agent.summary.strip(), 300) or last_lines(completed.tail)
            return Ending(
                IterationOutcome.FAILURE,
                category,
                f"the agent reported failure (exit {completed.exit_code}): {said or '(no output)'}",
                evidence=agent.refusals,
            )
        return None

    def _wired(self, it: Iteration, agent: AgentReport) -> Ending | None:
        """LIMITED or STUCK, as the gateway read the run's exchanges (the caps' cut comes
        first), or LIMITED as a CLI's structured result says where no gateway served the run;
        a limit pauses the daemon until its reset (history/limit.json)."""
        used = self._wire
        if it.model_cut:
            return None
        if used is not None and used.stuck:
            reason = f"the model gateway ended the run as stuck: {used.stuck}"
            return Ending(
                IterationOutcome.FAILURE, FailureCategory.STUCK, reason, evidence=[reason]
            )
        if self._stuck:
            tokens, _ = counted(it, it.agent or agent)
            reason = (
                f"the agent's log showed the run stuck: {self._stuck} ({tokens:,} tokens spent)"
            )
            return Ending(
                IterationOutcome.FAILURE, FailureCategory.STUCK, reason, evidence=[reason]
            )
        if used is not None and used.limited:
            limit = limits.Limit(used.limited, used.until)
        elif used is None and agent.limited and it.backend.name in CLI_LIMITS:
            limit = limits.Limit(printable(agent.limited, 400), agent.limited_until)
        else:
            return None
        now = datetime.now(UTC)
        until = limits.bounded(limit, now, self.ctx.config.daemon.limit_backoff_s)
        said = "it named its reset" if limit.until is not None else "it named no reset: a backoff"
        reason = f"{limit.why}; {said}: the daemon waits until {until:%Y-%m-%d %H:%M:%S}Z"
        limits.pause(self.ctx.paths.history, until, reason, it.plan.iteration_id, it.backend.name)
        return Ending(IterationOutcome.LIMITED, None, reason)

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
            # only a regular file inside the run's folder, reached through no link: the agent
            # could leave a link to any file the daemon can read, or a FIFO
            found = readback.read(Path(name), ARTIFACT_CAP, within=run_dir)
            if not found.ok:
                if not found.missing:
                    self.ctx.log(f"{iteration_id}: artifact {name} not read: {found.problem}")
                continue
            text = found.text()
            atomic_write_text(self._folder(iteration_id) / Path(name).name, text)
            kept[name] = text
        return kept

    def _account(self, it: Iteration, report: AgentReport) -> AgentReport:
        """Price the run when the tool gave no cost, note its version, and append it to the ledger."""
        ctx = self.ctx
        priced, basis = budget.price_run(report, ctx.config.agent.prices, ctx.config.agent.model)
        it.agent = plus(it.agent, priced)
        it.cost_basis = basis
        it.session = report.session or it.session
        if not it.agent_version and report.version:
            it.agent_version = report.version[:120]
        if report.note:
            it.agent_note = "; ".join(n for n in (it.agent_note, report.note) if n)
        entry = budget.LedgerEntry(
            at=datetime.now(UTC),
            iteration_id=it.plan.iteration_id,
            backend=it.backend.name,
            model=priced.model or ctx.config.agent.model,
            tokens_used=priced.tokens_used,
            input_tokens=priced.input_tokens,
            output_tokens=priced.output_tokens,
            cost_usd=priced.cost_usd,
            cost_basis=basis,
        )
        self._ledger(modelrun.on_the_wire(entry, self._wire))
        return priced


def check_checkout(
    ctx: Context, it: Iteration, checkout: Checkout, snapshot: Snapshot, folder: Path | None = None
) -> None:
    """Compare the user's checkout with its snapshot.

    Sandboxed, nothing the agent ran could write there: every change is the person's, listed
    and never undone. Unsandboxed, a change to what is protected is put back and is a
    SANDBOX_VIOLATION. Either way, git configuration that gained a program to run is one.
    """
    found = checkout.check(snapshot, folder or ctx.store.folder(it.plan.iteration_id))
    checkout.done()
    it.note(stage="checked")
    it.checkout_changes = found.changes
    it.integrity_evidence = [*found.violations, *found.problems]
    it.integrity_evidence += it.watched(ctx.paths.root, ctx.target.python)


_ESCAPES = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
"""Terminal escape sequences (colours, titles) in an agent's output: dropped before quoting."""
LAST_LINES = 5
LAST_CHARS = 600
"""The most of an agent's last output lines a failure's reason quotes."""


def last_lines(output: bytes) -> str:
    """The last non-blank lines of a run's output, made safe to show on one line (bounded)."""
    text = _ESCAPES.sub(b"", output).decode("utf-8", errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()][-LAST_LINES:]
    return printable(" | ".join(lines), LAST_CHARS)


def plus(before: AgentReport | None, run: AgentReport) -> AgentReport:
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


def _home_path(arg: str) -> str:
    """`~/tools/agent.py` in seed.toml is under the person's HOME, as in their shell."""
    return os.path.expanduser(arg) if arg.startswith("~/") and "\n" not in arg else arg


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


def counted(it: Iteration, agent: AgentReport | None) -> tuple[int, float]:
    """The iteration's tokens and cost: what the gateway counted where it served the runs
    (model-only: the sandbox had no other way out), else what the agent reported. A run's own
    report, a worker's included, is never believed over the gateway's count."""
    if it.wire_requests:
        return it.wire_tokens, it.wire_cost_usd
    return (agent.tokens_used, agent.cost_usd) if agent is not None else (0, 0.0)

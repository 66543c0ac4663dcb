"""A candidate's agent run on a worker of the Ray engine ([scale] engine = "ray").

Everything but the process is a local run's (`agentrun.AgentRunner`): the budget first, the
prompt and plan, the adapter reading the run, the ledger line. The process is a Ray task
(`isolation/rayengine.py`): the worker runs the agent in its own sandbox and sends back a
binary patch, the log and the result file, never a verdict (a repair round starts from the
previous round's files, sent as a patch against the base); the kernel applies the patch
onto a fresh checkout at the base (`isolation/remote.apply`: git's path rules, bounded) and
the judge reads that checkout as any. A file the worker left out as oversized is put back as
a sparse file of its size, so the judge's own size rule refuses it as for a local run.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath
from typing import Any

from domain import AgentReport, FailureCategory, IterationOutcome, RunSpec
from kernel.bounds import REMOTE_PATCH_MAX
from kernel.contracts import protected_patterns
from kernel.errors import Interrupted
from kernel.fsutil import atomic_write_text, plain_file_place, remove_any
from kernel.host.context import Context
from kernel.isolation import gitops, jails, procs, relay, remote, trees
from kernel.isolation.integrity import Checkout
from kernel.isolation.rayengine import RayEngine, Sent
from kernel.judging.iteration import Ending, Iteration, Phase, mono
from kernel.loop import agentrun, modelrun
from kernel.records import budget

_POLL_S = 0.5
"""How often a waiting run looks at its stop (Ctrl-C, or its candidate cancelled)."""


class RemoteRunner(agentrun.AgentRunner):
    """Runs a candidate's agent as a Ray task; the rest as a local run."""

    def __init__(
        self, ctx: Context, phase: Phase, engine: RayEngine, bundle: Any, door: relay.Door | None
    ) -> None:
        super().__init__(ctx, phase)
        self.engine = engine
        self.bundle = bundle
        """The base's bundle in Ray's object store (put once per iteration)."""
        self.door = door
        """The kernel's relay door ([scale] door): model-only agents on other hosts."""
        self._refused = ""

    def _run(
        self,
        it: Iteration,
        spec: RunSpec,
        command: tuple[list[str], dict[str, str]],
        files: agentrun.Files,
        reserve: float,
    ) -> procs.Completed:
        ctx = self.ctx
        t0 = mono()
        checkout = Checkout(
            ctx.paths.root, ctx.paths.state, protected_patterns(ctx.config.guard.protected)
        )
        snapshot = checkout.begin(it.plan.iteration_id, (), sandboxed=True)
        it.note(
            stage="agent",
            reserve_usd=reserve,
            sandboxed=True,
            accounted=False,
            ledger_runs=budget.runs_of(ctx.paths.history, it.plan.iteration_id),
            wire=self._network == "model-only",
        )
        model, token = None, relay.new_token()
        start = _start(ctx, it) if files.turn > 1 else remote.Diffed()
        try:
            if self._network == "model-only":
                model = self._model(it)
                if self.door is not None:  # the candidate's token lets its relay in, no other
                    self.door.open(token, model.socket)
            job = self._job(it, spec, files, model, token, start)
            if start.oversized or start.over:
                outcome = remote.Outcome(job.candidate, refused=_unsent(start))
            else:
                outcome = self._wait(self.engine.submit(job, self.bundle))
        finally:
            if self.door is not None:
                self.door.close(token)
            if model is not None:
                self._wire = model.close(it)
            agentrun.check_checkout(ctx, it, checkout, snapshot, self._folder(it.plan.iteration_id))
        it.host = f"{outcome.host} (node {outcome.node[:12]})" if outcome.node else outcome.host
        it.timed("execute", t0)
        return self._received(it, files, outcome)

    def _job(
        self,
        it: Iteration,
        spec: RunSpec,
        files: agentrun.Files,
        model: modelrun.ModelRun | None,
        token: str,
        start: remote.Diffed,
    ) -> remote.Job:
        """What the worker is sent: the run's command, plan and bounds, and its way to the model."""
        ctx = self.ctx
        relayed = model is not None and self.door is not None
        return remote.Job(
            repository=_repository(ctx),
            candidate=it.worktree.name,
            base=it.base,
            argv=tuple(spec.argv),
            env=self._remote_env(spec),
            prompt=spec.prompt,
            plan=files.plan.read_text(encoding="utf-8"),
            iteration_id=it.plan.iteration_id,
            timeout_s=self._timeout(it),
            log_cap=ctx.config.agent.max_log_bytes,
            guard=ctx.config.guard,
            home=jails.home_names(spec.home),
            network=self._network,
            gateway=str(model.socket) if model is not None and self.door is None else "",
            relay=ctx.config.scale.door if relayed else "",
            token=token if relayed else "",
            cache=ctx.config.scale.worker_cache,
            round=files.turn,
            start=start.patch,
        )

    def _wait(self, sent: Sent) -> remote.Outcome:
        """The task's outcome; a stop ends the task and raises Interrupted, as a local run."""
        deadline = mono() + sent.job.timeout_s + 600
        while not self.engine.ready(sent, _POLL_S):
            if procs.stopped():
                self.engine.cancel(sent)
                raise Interrupted(f"interrupted while {sent.job.candidate} ran on a worker")
            if mono() > deadline:
                break
        return self.engine.result(sent)

    def _remote_env(self, spec: RunSpec) -> dict[str, str]:
        """The agent's variables as a local run gets them, but for the worker's own PATH and
        HOME and the SEED_* paths the worker fills."""
        env = self._agent_env(spec, {})
        return {k: v for k, v in env.items() if k not in ("PATH", "HOME")}

    def _received(
        self, it: Iteration, files: agentrun.Files, outcome: remote.Outcome
    ) -> procs.Completed:
        """The worker's files as the run's: its log and result file, its patch applied."""
        ctx = self.ctx
        self._refused = outcome.refused
        log = outcome.log if not outcome.refused else f"{outcome.refused}\n"
        files.log.write_text(log, encoding="utf-8", errors="replace")
        if outcome.result:
            atomic_write_text(files.result, outcome.result)
        if not self._refused:
            try:
                remote.apply(ctx.paths, it.worktree.name, it.base, outcome.patch)
            except remote.PatchRefused as exc:
                self._refused = str(exc)
            for path, size in outcome.oversized:
                _sparse(it, path, size)
        tail = log[-8000:].encode("utf-8", errors="replace")
        return procs.Completed(
            argv=("ray task", it.worktree.name),
            exit_code=None if self._refused else outcome.exit_code,
            stdout=b"",
            stderr=b"",
            duration_s=outcome.duration_s,
            timed_out=outcome.timed_out,
            output_bytes=len(log),
            tail=tail,
        )

    def _judge_run(
        self, it: Iteration, completed: procs.Completed, agent: AgentReport
    ) -> Ending | None:
        if self._refused:
            return Ending(
                IterationOutcome.FAILURE,
                FailureCategory.AGENT_ERROR,
                f"the worker on {it.host or 'an unknown host'}: {self._refused}"[:1000],
            )
        return super()._judge_run(it, completed, agent)


def _repository(ctx: Context) -> str:
    """The worker's key for this repository's clone: its first commit."""
    roots = gitops.git(ctx.paths.root, "rev-list", "--max-parents=0", "HEAD", check=False)
    first = roots.text().split()
    return first[-1] if first else "repository"


def _start(ctx: Context, it: Iteration) -> remote.Diffed:
    """A repair round's starting files: the checkout as the kernel left it after judging the
    last round (its own repairs written back), as a patch against the base."""
    paths = ctx.paths
    store = trees.ObjectStore(paths.objects / f"start-{it.worktree.name}", paths.common / "objects")
    try:
        return remote.diff(paths.root, it.worktree, it.base, store, REMOTE_PATCH_MAX)
    finally:
        remove_any(store.path)


def _unsent(start: remote.Diffed) -> str:
    """Why a repair round was not sent to a worker."""
    if start.oversized:
        names = ", ".join(path for path, _ in start.oversized[:5])
        return f"the repair round's starting files hold files over the bound: {names}"
    return f"the repair round's starting files are a patch of {start.over:,} bytes, over the bound"


_SPARSE_MAX = (1 << 40) + 1
"""The size a left-out file is put back at, at most: over any max_file_bytes (le 1 << 40),
within what every file system holds (a worker's may hold larger files than the kernel's)."""


def _sparse(it: Iteration, path: str, size: int) -> None:
    """A file the worker did not send for its size, as a sparse file of that size (a path
    the worker names outside the checkout or in its .git is not written: the patch says it)."""
    pure = PurePosixPath(path)
    if pure.is_absolute() or any(p in ("", ".", "..", ".git") for p in pure.parts):
        return
    if size <= 0:
        return  # no file is left out for a size like that
    target = it.worktree / pure
    if not plain_file_place(it.worktree, target):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as handle:
        os.truncate(handle.fileno(), min(size, _SPARSE_MAX))

"""Recording an iteration: the record, report.md, the inbox item's fate, and halt conditions."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from domain import (
    AgentReport,
    AgentRound,
    CriterionVerdict,
    DiffStat,
    FailureCategory,
    GapRef,
    GapReport,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    gap_ref,
)
from kernel import faults
from kernel.bounds import LINE_MAX_CHARS, cap_line, cap_lines
from kernel.errors import HostError, Interrupted
from kernel.host.context import Context
from kernel.isolation import procs
from kernel.judging.iteration import Ending, Iteration
from kernel.judging.verify import Verification
from kernel.loop import reporting
from kernel.loop.following import issue_note, tell_issue
from kernel.loop.quarantine import quarantine_reason
from kernel.records import halt, inbox, notify
from kernel.records.halt import FAILED_OUTCOMES
from kernel.records.signature import gap_signature

QUARANTINED = "quarantined"
WAITING = "waiting for an agent"


def round_of(
    it: Iteration, outcome: IterationOutcome, category: FailureCategory | None, reason: str
) -> AgentRound:
    """The agent's latest round as judged: its usage is what it added to the iteration's."""
    tokens, cost = it.round_start
    used = it.agent
    return AgentRound(
        number=len(it.rounds) + 1,
        outcome=outcome,
        failure_category=category,
        reason=reason[:500],
        resumed=it.resumed,
        tokens_used=(used.tokens_used - tokens) if used else 0,
        cost_usd=round((used.cost_usd - cost) if used else 0.0, 6),
        tree=it.agent_tree,
    )


class Recorder:
    """Writes what happened; the only place records are made."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.baseline: GapReport | None = None
        self.passed_over: dict[str, str] = {}
        """Gap keys passed over at planning time, and why (quarantined, waiting for an agent)."""

    def note_baseline(self, report: GapReport, passed_over: Mapping[str, str]) -> None:
        """The ranking this iteration's gaps are chosen from, for the records' "why this gap"."""
        self.baseline = report
        self.passed_over = dict(passed_over)

    def finish(self, it: Iteration, ending: Ending) -> IterationRecord:
        """Write the record of an iteration that ended, then finish with it (after_record)."""
        record = self._build(it, ending)
        self._write(record, torn=True)
        it.recorded = True
        it.note(stage="recorded")
        faults.fault("record-written")
        self.after_record(record, it.claimed_inbox)
        if record.outcome == IterationOutcome.WAITING:
            # the same gap is not planned again until it or the backend changes
            self.passed_over[record.gap.key] = WAITING
        category = ending.category
        line = (
            f"{record.iteration_id}: {record.outcome.value}"
            + (f" {category.value}" if category and category.value != record.outcome.value else "")
            + f" ({it.plan.gap.key}): {ending.reason}"
        )
        self.ctx.log(line[:500])
        return record

    def recovered(self, found: Recovered) -> IterationRecord:
        """Write the record of an iteration a dead daemon left unrecorded (no Iteration left)."""
        record = IterationRecord(
            iteration_id=found.iteration_id,
            started_at=found.started,
            ended_at=datetime.now(UTC),
            gap=gap_ref(found.plan.gap) if found.plan is not None else found.gap,
            outcome=found.ending.outcome,
            failure_category=found.ending.category,
            reason=cap_line(found.ending.reason),
            evidence=tuple(cap_lines(found.ending.evidence)),
            touched_files=tuple(found.touched),
            diff=found.diff,
            base=found.base,
            commit=found.ending.commit,
            checkout_changes=tuple(cap_lines(found.changes)),
            task_kind=found.plan.task_kind.value if found.plan is not None else "",
            plan=found.plan,
            backend=found.backend,
            cost_usd=found.cost_usd,
            cost_basis=found.cost_basis,
        )
        self._write(record, torn=False)
        return record

    def _write(self, record: IterationRecord, *, torn: bool) -> None:
        # the daemon's own writes go through the crash-test hook; recovery's do not
        if torn:
            faults.torn_append(self.ctx.store.records_path, record.model_dump_json())
        self.ctx.store.append(record)

    def _build(self, it: Iteration, ending: Ending) -> IterationRecord:
        """The record of an iteration, its lists capped here, once (a runaway list never
        becomes a huge line)."""
        plan, agent, verification = it.plan, it.agent, ending.verification
        evidence = ending.evidence or (verification.evidence if verification else ())
        rounds = it.rounds
        if rounds:
            rounds = [*rounds, round_of(it, ending.outcome, ending.category, ending.reason)]
        return IterationRecord(
            iteration_id=plan.iteration_id,
            started_at=it.started,
            ended_at=datetime.now(UTC),
            gap=gap_ref(plan.gap),
            outcome=ending.outcome,
            failure_category=ending.category,
            reason=cap_line(ending.reason),
            evidence=tuple(cap_lines(evidence)),
            failures=tuple(verification.failures) if verification else (),
            verdicts=_verdicts(verification),
            touched_files=tuple(it.touched),
            repairs=tuple(it.repairs),
            rounds=tuple(rounds),
            diff=it.diff,
            base=it.base,
            commit=ending.commit,
            kept_branch=ending.kept,
            pull_request=ending.pull_request,
            blocked_by=ending.blocked,
            changed_tests=tuple(cap_lines(verification.changed_tests)) if verification else (),
            uncovered=tuple(cap_lines(verification.uncovered)) if verification else (),
            backend=it.backend.name,
            waited_on=ending.waited_on,
            sandboxed=it.sandboxed if it.exit_code is not None else None,
            network=it.network,
            wire_tokens=it.wire_tokens,
            wire_cost_usd=it.wire_cost_usd,
            wire_requests=it.wire_requests,
            model_turns=tuple(it.model_turns),
            agent_version=it.agent_version,
            agent_tree=it.agent_tree,
            checkout=_checkout(self.ctx, it.worktree),
            agent_exit_code=it.exit_code,
            agent_note=it.agent_note,
            cost_basis=it.cost_basis,
            durations=it.durations,
            checkout_changes=tuple(cap_lines(it.checkout_changes)),
            differences=tuple(cap_lines(self.baseline.differences)) if self.baseline else (),
            task_kind=plan.task_kind.value,
            gap_signature=gap_signature(plan.gap),
            plan=plan,
            ranking=reporting.ranked(self.baseline, self.passed_over, chosen=plan.gap.key)
            if self.baseline
            else (),
            open_gaps=reporting.open_gaps(self.baseline) if self.baseline else {},
            candidates=tuple(it.candidates),
            choice=it.choice,
            generation=it.generation,
            agent_key=it.agent_key,
            **_usage(agent),
        )

    def after_record(self, record: IterationRecord, claimed_inbox: str) -> None:
        """plan.json, report.md, the inbox item's fate, the halt conditions and the index of a
        written record.

        Safe to repeat: a restarted daemon calls it for a record its predecessor wrote but
        did not finish with.
        """
        ctx = self.ctx
        if record.plan is not None:  # written here only: once per iteration
            ctx.store.write_file(
                record.iteration_id, "plan.json", record.plan.model_dump_json(indent=2) + "\n"
            )
        ctx.store.write_file(record.iteration_id, "report.md", self._report(record))
        if claimed_inbox:
            self._release_inbox(claimed_inbox, record)
        told = notify.of_record(record, ctx.paths.command)
        if told is not None:  # once per record: the outbox keys it by event and iteration
            ctx.notify(told[0], record.iteration_id, told[1])
        self._apply_halts(record)
        self.write_index()

    def _report(self, record: IterationRecord) -> str:
        try:
            with _despite_stop():
                markdown = self.ctx.host.render_record(record)
        except (HostError, Interrupted) as exc:
            markdown = f"# {record.iteration_id}: {record.outcome.value}\n\n{record.reason}\n\n(report rendering failed: {exc})\n"
        if record.checkout_changes and record.checkout_changes[0] not in markdown:
            # the kernel's own facts: never left to an improvable renderer to mention
            markdown = (
                markdown.rstrip("\n")
                + "\n\n## Your checkout during the agent run\n\n"
                + "Changed in your checkout while the agent ran (listed, not undone):\n\n"
                + "".join(f"- {line}\n" for line in record.checkout_changes)
            )
        if record.candidates and "## Candidates" not in markdown:
            markdown = markdown.rstrip("\n") + "\n\n" + reporting.candidates_table(record)
        return markdown

    def write_index(self) -> None:
        """Rewrite history/README.md; a failure here is logged, never fatal."""
        try:
            with _despite_stop():
                reporting.write_index(self.ctx)
        except (OSError, Interrupted) as exc:
            self.ctx.log(f"could not rewrite history/{reporting.INDEX_NAME}: {exc}")

    def _release_inbox(self, name: str, record: IterationRecord) -> None:
        ctx = self.ctx
        if not (ctx.paths.inbox / ".active" / name).exists():
            return  # already released (a restarted daemon finishing a record)
        history = ctx.store.for_gaps([record.gap.key], per_gap=20)
        failures = sum(1 for r in history if r.outcome in FAILED_OUTCOMES)
        quarantined = (
            quarantine_reason(record.plan.gap, history)
            if record.plan is not None and record.outcome in FAILED_OUTCOMES
            else ""
        )
        text = inbox.result_note(
            name,
            record.outcome.value,
            record.reason
            + (
                f"\n\nQuarantined: {quarantined}. Drop the task again to retry it."
                if quarantined
                else ""
            ),
            [
                (
                    r.iteration_id,
                    r.outcome.value
                    + (
                        f" {r.failure_category.value}"
                        if r.failure_category and r.failure_category.value != r.outcome.value
                        else ""
                    ),
                    r.reason,
                )
                for r in history
            ],
        )
        if record.outcome == IterationOutcome.SUCCESS:
            folder = "done"
        elif quarantined or (record.outcome in FAILED_OUTCOMES and failures >= 3):
            folder = "failed"
        else:
            folder = ""
        inbox.release(ctx.paths.inbox, name, folder, text if folder else "")
        tell_issue(ctx, name, issue_note(record, folder))

    def _apply_halts(self, record: IterationRecord) -> None:
        ctx = self.ctx
        state = halt.read_halt(ctx.paths.history)
        if state.halted and state.iteration_id == record.iteration_id:
            return  # this record's halt is already in place
        reason = halt.halt_reason(
            record, ctx.store.recent(halt.HALT_WINDOW, brief=True), state.resumed_at
        )
        if reason:
            category = record.failure_category
            state = halt.halt(
                ctx.store, reason, category.value if category else "", record.iteration_id
            )
            ctx.log(f"HALTED: {reason}. Nothing runs until `{ctx.paths.command('resume')}`.")
            notify.tell_halt(ctx.notify, state, ctx.paths.command)


@contextlib.contextmanager
def _despite_stop() -> Generator[None]:
    """Let an interrupted iteration's report and index be rendered (quick host calls).

    A second Ctrl-C sets the stop again and interrupts them; the stop is always restored.
    """
    stopping = procs.STOP.is_set()
    procs.STOP.clear()
    try:
        yield
    finally:
        if stopping:
            procs.STOP.set()


@dataclass(frozen=True)
class Recovered:
    """What a restarted daemon knows of an iteration its predecessor did not record."""

    iteration_id: str
    started: datetime
    gap: GapRef
    plan: IterationPlan | None
    ending: Ending
    base: str
    touched: Sequence[str] = ()
    diff: DiffStat = field(default_factory=DiffStat)
    changes: Sequence[str] = ()
    cost_usd: float = 0.0
    """What the ledger counts for the iteration (a killed run at its reservation)."""
    cost_basis: str = ""
    backend: str = ""


def _checkout(ctx: Context, worktree: Path) -> str:
    """The agent's checkout's name, when it is one the kernel made in its folder of them."""
    return worktree.name if worktree.parent == ctx.paths.checkouts else ""


def _verdicts(verification: Verification | None) -> tuple[CriterionVerdict, ...]:
    if verification is None:
        return ()
    return tuple(
        v.model_copy(update={"evidence": cap_line(v.evidence)}) for v in verification.verdicts
    )


def _usage(agent: AgentReport | None) -> dict[str, Any]:
    """The agent's usage fields of a record (zero when no agent ran)."""
    if agent is None:
        return {}
    return {
        "agent_summary": cap_line(agent.summary, 4 * LINE_MAX_CHARS),
        "tokens_used": agent.tokens_used,
        "cost_usd": agent.cost_usd,
        "input_tokens": agent.input_tokens,
        "output_tokens": agent.output_tokens,
        "agent_model": agent.model,
        "agent_turns": agent.turns,
    }

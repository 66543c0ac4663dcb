"""Recording an iteration: the record, report.md, the inbox item's fate, and halt conditions."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Mapping, Sequence
from datetime import UTC, datetime

from domain import (
    AgentRound,
    FailureCategory,
    GapReport,
    IterationOutcome,
    IterationRecord,
    gap_ref,
)
from kernel import faults, halt, inbox, procs, reporting
from kernel.attempt import Attempt
from kernel.bounds import LINE_MAX_CHARS, cap_line, cap_lines
from kernel.context import Context
from kernel.errors import HostError, Interrupted
from kernel.halt import FAILED_OUTCOMES
from kernel.quarantine import quarantine_reason
from kernel.signature import gap_signature
from kernel.verify import Verification

QUARANTINED = "quarantined"
WAITING = "waiting for an agent"


def round_of(
    attempt: Attempt, outcome: IterationOutcome, category: FailureCategory | None, reason: str
) -> AgentRound:
    """The agent's latest round as judged: its usage is what it added to the iteration's."""
    tokens, cost = attempt.round_start
    used = attempt.agent
    return AgentRound(
        number=len(attempt.rounds) + 1,
        outcome=outcome,
        failure_category=category,
        reason=reason[:500],
        resumed=attempt.resumed,
        tokens_used=(used.tokens_used - tokens) if used else 0,
        cost_usd=round((used.cost_usd - cost) if used else 0.0, 6),
    )


class Recorder:
    """Writes what happened; the only place records are made."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.baseline: GapReport | None = None
        self.skipped: dict[str, str] = {}
        """Gap keys passed over at planning time, and why (quarantined, waiting for an agent)."""

    def note_baseline(self, report: GapReport, skipped: Mapping[str, str]) -> None:
        """The ranking this iteration's gaps are chosen from, for the records' "why this gap"."""
        self.baseline = report
        self.skipped = dict(skipped)

    def _quarantined(self) -> tuple[str, ...] | None:
        if self.baseline is None:
            return None
        return tuple(sorted(k for k, why in self.skipped.items() if why == QUARANTINED))

    def record_waiting(self, attempt: Attempt, why: str) -> IterationRecord:
        """A plan nobody can carry out now: written down, nothing runs."""
        ctx = self.ctx
        ctx.store.write_file(
            attempt.plan.iteration_id, "plan.json", attempt.plan.model_dump_json(indent=2) + "\n"
        )
        # the record names the backend in use, so the same gap is not planned again until it changes
        record = self.finish(
            attempt, IterationOutcome.WAITING, None, f"waiting for an agent: {why}"
        )
        self.skipped[record.gap.key] = WAITING
        return record

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
            reason=cap_line(reason),
            # capped here, once: a runaway list (100,000 new tags) never becomes a huge line
            evidence=tuple(cap_lines(evidence or (verification.evidence if verification else ()))),
            failures=tuple(verification.failures) if verification else (),
            verdicts=tuple(
                v.model_copy(update={"evidence": cap_line(v.evidence)})
                for v in verification.verdicts
            )
            if verification
            else (),
            touched_files=tuple(attempt.touched),
            repairs=tuple(attempt.repairs),
            rounds=(*attempt.rounds, round_of(attempt, outcome, category, reason))
            if attempt.rounds
            else (),
            diff=attempt.diff,
            base=attempt.base,
            commit=commit,
            kept_branch=kept,
            backend=attempt.backend.name,
            sandboxed=attempt.sandboxed if attempt.exit_code is not None else None,
            agent_version=attempt.agent_version,
            agent_summary=cap_line(agent.summary, 4 * LINE_MAX_CHARS) if agent else "",
            agent_exit_code=attempt.exit_code,
            tokens_used=agent.tokens_used if agent else 0,
            cost_usd=agent.cost_usd if agent else 0.0,
            input_tokens=agent.input_tokens if agent else 0,
            output_tokens=agent.output_tokens if agent else 0,
            cost_basis=attempt.cost_basis,
            agent_model=agent.model if agent else "",
            agent_turns=agent.turns if agent else 0,
            agent_note=attempt.agent_note,
            durations=attempt.durations,
            checkout_changes=tuple(cap_lines(attempt.checkout_changes)),
            task_kind=plan.task_kind.value,
            gap_signature=gap_signature(plan.gap),
            plan=plan,
            ranking=reporting.ranked(self.baseline, self.skipped, chosen=plan.gap.key)
            if self.baseline
            else (),
            open_gaps=reporting.open_gaps(self.baseline) if self.baseline else {},
        )
        faults.torn_append(ctx.store.records_path, record.model_dump_json())
        ctx.store.append(record)
        attempt.recorded = True
        attempt.note(stage="recorded")
        faults.fault("record-written")
        self.after_record(record, attempt.claimed_inbox)
        line = (
            f"{record.iteration_id}: {record.outcome.value}"
            + (f" {category.value}" if category else "")
            + f" ({plan.gap.key}): {reason}"
        )
        ctx.log(line[:500])
        return record

    def after_record(self, record: IterationRecord, claimed_inbox: str) -> None:
        """plan.json, report.md, the inbox item's fate, the halt conditions and the index of a
        written record.

        Safe to repeat: a restarted daemon calls it for a record its predecessor wrote but
        did not finish with.
        """
        ctx = self.ctx
        if record.plan is not None:
            ctx.store.write_file(
                record.iteration_id, "plan.json", record.plan.model_dump_json(indent=2) + "\n"
            )
        ctx.store.write_file(record.iteration_id, "report.md", self._report(record))
        if claimed_inbox:
            self._release_inbox(claimed_inbox, record)
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
        return markdown

    def write_index(self) -> None:
        """Rewrite history/README.md; a failure here is logged, never fatal."""
        try:
            with _despite_stop():
                reporting.write_index(self.ctx, self._quarantined())
        except (OSError, Interrupted) as exc:
            self.ctx.log(f"could not rewrite history/{reporting.INDEX_NAME}: {exc}")

    def _release_inbox(self, name: str, record: IterationRecord) -> None:
        ctx = self.ctx
        if not (ctx.paths.inbox / ".active" / name).exists():
            return  # already released (a restarted daemon finishing a record)
        history = ctx.store.for_gaps([record.gap.key], per_gap=20)
        failures = sum(1 for r in history if r.outcome in FAILED_OUTCOMES)
        held = (
            quarantine_reason(record.plan.gap, history)
            if record.plan is not None and record.outcome in FAILED_OUTCOMES
            else ""
        )
        text = inbox.result_note(
            name,
            record.outcome.value,
            record.reason
            + (f"\n\nQuarantined: {held}. Drop the task again to retry it." if held else ""),
            [
                (
                    r.iteration_id,
                    r.outcome.value
                    + (f" {r.failure_category.value}" if r.failure_category else ""),
                    r.reason,
                )
                for r in history
            ],
        )
        if record.outcome == IterationOutcome.SUCCESS:
            inbox.release(ctx.paths.inbox, name, "done", text)
        elif held or (record.outcome in FAILED_OUTCOMES and failures >= 3):
            inbox.release(ctx.paths.inbox, name, "failed", text)
        else:
            inbox.release(ctx.paths.inbox, name, "")

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
            halt.halt(ctx.store, reason, category.value if category else "", record.iteration_id)
            ctx.log(f"HALTED: {reason}. Nothing runs until `python seed.py resume`.")


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

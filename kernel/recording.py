"""Recording an iteration: the record, report.md, the inbox item's fate, and halt conditions."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Mapping, Sequence
from datetime import UTC, datetime

from domain import (
    FailureCategory,
    GapReport,
    IterationOutcome,
    IterationRecord,
    gap_ref,
)
from kernel import halt, inbox, procs, reporting
from kernel.attempt import FAILED_OUTCOMES, VIOLATIONS, Attempt
from kernel.context import Context
from kernel.errors import HostError, Interrupted
from kernel.signature import gap_signature
from kernel.verify import Verification

QUARANTINED = "quarantined"
WAITING = "waiting for an agent"


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
            input_tokens=agent.input_tokens if agent else 0,
            output_tokens=agent.output_tokens if agent else 0,
            cost_basis=attempt.cost_basis,
            agent_model=agent.model if agent else "",
            agent_turns=agent.turns if agent else 0,
            agent_note=attempt.agent_note,
            durations=attempt.durations,
            task_kind=plan.task_kind.value,
            gap_signature=gap_signature(plan.gap),
            plan=plan,
            ranking=reporting.ranked(self.baseline, self.skipped, chosen=plan.gap.key)
            if self.baseline
            else (),
            open_gaps=reporting.open_gaps(self.baseline) if self.baseline else {},
        )
        ctx.store.append(record)
        ctx.store.write_file(plan.iteration_id, "plan.json", plan.model_dump_json(indent=2) + "\n")
        try:
            with _despite_stop():
                markdown = ctx.host.render_record(record)
        except (HostError, Interrupted) as exc:
            markdown = f"# {record.iteration_id}: {record.outcome.value}\n\n{record.reason}\n\n(report rendering failed: {exc})\n"
        ctx.store.write_file(plan.iteration_id, "report.md", markdown)
        self._release_inbox(attempt, record)
        self._apply_halts(record)
        self.write_index()
        line = (
            f"{record.iteration_id}: {record.outcome.value}"
            + (f" {category.value}" if category else "")
            + f" ({plan.gap.key}): {reason}"
        )
        ctx.log(line[:500])
        return record

    def write_index(self) -> None:
        """Rewrite history/README.md; a failure here is logged, never fatal."""
        try:
            with _despite_stop():
                reporting.write_index(self.ctx, self._quarantined())
        except (OSError, Interrupted) as exc:
            self.ctx.log(f"could not rewrite history/{reporting.INDEX_NAME}: {exc}")

    def _release_inbox(self, attempt: Attempt, record: IterationRecord) -> None:
        if not attempt.claimed_inbox:
            return
        ctx = self.ctx
        name = attempt.claimed_inbox
        history = ctx.store.for_gaps([record.gap.key], per_gap=20)
        failures = sum(1 for r in history if r.outcome in FAILED_OUTCOMES)
        text = inbox.result_note(
            name,
            record.outcome.value,
            record.reason,
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

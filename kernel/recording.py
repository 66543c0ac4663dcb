"""Recording an iteration: the record, report.md, the inbox item's fate, and halt conditions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from domain import (
    FailureCategory,
    IterationOutcome,
    IterationRecord,
    gap_ref,
)
from kernel import halt, inbox
from kernel.attempt import FAILED_OUTCOMES, VIOLATIONS, Attempt
from kernel.context import Context
from kernel.errors import HostError
from kernel.verify import Verification


class Recorder:
    """Writes what happened; the only place records are made."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def record_waiting(self, attempt: Attempt, why: str) -> IterationRecord:
        """A plan nobody can carry out now: written down, nothing runs."""
        ctx = self.ctx
        ctx.store.write_file(
            attempt.plan.iteration_id, "plan.json", attempt.plan.model_dump_json(indent=2) + "\n"
        )
        # the record names the backend in use, so the same gap is not planned again until it changes
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

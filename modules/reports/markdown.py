"""report.md for one iteration."""

from __future__ import annotations

from domain import IterationRecord


class MarkdownReporter:
    """Plain Markdown that reads well on a code host and in a terminal."""

    contract_version = 1

    def render_record(self, record: IterationRecord) -> str:
        """The iteration's report."""
        lines = [
            f"# {record.iteration_id}: {record.outcome.value}",
            "",
            f"- gap: `{record.gap.key}` ({record.gap.category.value}, {record.gap.source}) {record.gap.title}",
            f"- outcome: **{record.outcome.value}**"
            + (f" ({record.failure_category.value})" if record.failure_category else ""),
            f"- reason: {record.reason}",
            f"- backend: {record.backend or '-'} {record.agent_version}".rstrip(),
            f"- started: {record.started_at.isoformat()}  ended: {record.ended_at.isoformat()}",
            f"- tokens: {record.tokens_used}  cost: ${record.cost_usd:.4f}",
        ]
        if record.commit:
            lines.append(f"- commit: `{record.commit}`")
        if record.kept_branch:
            lines.append(f"- kept branch: `{record.kept_branch}`")
        if record.plan is not None:
            plan = record.plan
            lines += [
                "",
                "## Plan",
                "",
                f"- goal: {plan.goal}",
                f"- risk: {plan.estimated_risk.value}",
            ]
            lines += [
                f"- {a.action_type.value} {', '.join(a.target_files) or '(any)'}: {a.description}"
                for a in plan.actions
            ]
            lines.append(f"- allowed: {', '.join(plan.allowed_paths) or 'any non-protected file'}")
        if record.verdicts:
            lines += ["", "## Acceptance criteria", ""]
            lines += [
                f"- [{'x' if v.passed else ' '}] {v.text or v.check.value}"
                + (f": {v.evidence}" if v.evidence else "")
                for v in record.verdicts
            ]
        if record.evidence:
            lines += ["", "## Evidence", ""]
            lines += [f"- {e}" for e in record.evidence]
        if record.touched_files:
            lines += ["", "## Touched files", ""]
            lines += [f"- {f}" for f in record.touched_files]
            lines.append(
                f"\n{record.diff.files} files, +{record.diff.insertions} -{record.diff.deletions}"
            )
        if record.agent_summary:
            lines += ["", "## Agent summary", "", record.agent_summary]
        if record.durations:
            lines += ["", "## Time", ""]
            lines += [f"- {phase}: {seconds:.1f}s" for phase, seconds in record.durations.items()]
        lines += [
            "",
            "Logs: [agent.log](agent.log), [plan.json](plan.json), [record.json](record.json)",
            "",
        ]
        return "\n".join(lines)


REPORTER = MarkdownReporter()

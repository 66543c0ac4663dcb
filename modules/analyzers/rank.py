"""Ranking: a broken build first, then types, lint, format, inbox by priority and age, roadmap."""

from __future__ import annotations

from collections.abc import Sequence

from domain import AnalysisInput, Gap, GapReport, Priority, Severity

DEFAULT_ORDER: tuple[str, ...] = (
    "pytest",
    "inbox:critical",
    "pyright",
    "ruff",
    "ruff-format",
    "inbox",
    "roadmap",
)
"""Gap sources, most urgent first; "inbox:critical" places critical inbox items."""

_PRIORITY = {Priority.CRITICAL: 0, Priority.HIGH: 1, Priority.NORMAL: 2, Priority.LOW: 3}


def _bucket(gap: Gap) -> str:
    if gap.inbox is not None and gap.inbox.priority == Priority.CRITICAL:
        return "inbox:critical"
    return gap.source


def _sort_key(gap: Gap, order: Sequence[str]) -> tuple[int, int, float, int, str]:
    bucket = _bucket(gap)
    position = order.index(bucket) if bucket in order else len(order)
    if gap.inbox is not None:
        return (
            position,
            _PRIORITY[gap.inbox.priority],
            gap.inbox.received_at.timestamp(),
            0,
            gap.key,
        )
    if gap.roadmap is not None:
        return (position, 0, 0.0, gap.roadmap.line, gap.key)
    severity = (
        0
        if gap.severity in (Severity.CRITICAL, Severity.HIGH) and "invalid-syntax" in gap.key
        else 1
    )
    return (position, severity, 0.0, 0, gap.key)


class SourceRanker:
    """Orders gaps by source, then by priority and age (inbox) or file order (roadmap)."""

    contract_version = 1

    def rank(self, gaps: Sequence[Gap], inputs: AnalysisInput) -> GapReport:
        """The ranked report; quarantined keys are left out and listed as skipped."""
        order = inputs.order or DEFAULT_ORDER
        quarantined = set(inputs.quarantined)
        kept = [g for g in gaps if g.key not in quarantined]
        skipped = tuple(sorted({g.key for g in gaps if g.key in quarantined}))
        ranked = sorted(kept, key=lambda g: _sort_key(g, order))
        with_reasons = tuple(
            g.model_copy(
                update={
                    "rank_reason": f"#{i + 1}: {_bucket(g)} ranks at position {order.index(_bucket(g)) + 1 if _bucket(g) in order else len(order) + 1} of the order {' > '.join(order)}"
                }
            )
            for i, g in enumerate(ranked)
        )
        return GapReport(gaps=with_reasons, tree=inputs.measurements.tree, skipped=skipped)


RANKER = SourceRanker()

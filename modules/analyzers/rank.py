"""Ranking: a broken build first, then a person's inbox tasks by priority and age, then types,
lint, format (quality debt), roadmap.

Every gap falls in one group; the groups follow `[analysis] order` (AnalysisInput.order),
and any group the order leaves out follows in the default order. Within a group:
  build    the suite not running, then collection and import errors, then syntax errors,
           then failing tests; each by key
  inbox    priority (critical first), then age (oldest first), then name
  roadmap  file order
  others   by key (file, then rule), so the ranking is stable from run to run
"""

from __future__ import annotations

from collections.abc import Sequence

from domain import AnalysisInput, Gap, GapReport, Priority, Tool

DEFAULT_ORDER: tuple[str, ...] = (
    "build",
    "inbox:critical",
    "inbox",
    "types",
    "lint",
    "format",
    "roadmap",
)
"""Groups, most urgent first: a person's task (any priority) follows only a broken build, so
a long backlog of type and lint findings never keeps it waiting."""

_PRIORITY = {Priority.CRITICAL: 0, Priority.HIGH: 1, Priority.NORMAL: 2, Priority.LOW: 3}
_SOURCE_GROUP = {
    "pytest": "build",
    "pyright": "types",
    "mypy": "types",
    "ruff": "lint",
    "ruff-format": "format",
}
_SYNTAX_RULES = ("invalid-syntax", "syntax")


def is_syntax_error(gap: Gap) -> bool:
    """A file that does not parse: the build is broken, whichever tool noticed."""
    return bool(gap.evidence) and all(
        d.rule in _SYNTAX_RULES and d.tool != Tool.PYTEST for d in gap.evidence
    )


def full_order(order: Sequence[str]) -> tuple[str, ...]:
    """The configured order followed by the default groups it leaves out."""
    named = tuple(dict.fromkeys(order))
    # an order that places "inbox" itself keeps every priority it does not name in there
    rest = tuple(
        g
        for g in DEFAULT_ORDER
        if g not in named and not (g.startswith("inbox:") and "inbox" in named)
    )
    return named + rest


def group(gap: Gap, order: Sequence[str]) -> str:
    """The group a gap belongs to under this order."""
    if gap.inbox is not None:
        specific = f"inbox:{gap.inbox.priority.value}"
        return specific if specific in order else "inbox"
    if gap.roadmap is not None or gap.source == "roadmap":
        return "roadmap"
    if is_syntax_error(gap):
        return "build"
    return _SOURCE_GROUP.get(gap.source, gap.source)


def _build_rank(gap: Gap) -> int:
    if gap.key == "pytest:run":
        return 0
    if any(d.rule in ("collection-error", "outside-import") for d in gap.evidence):
        return 1
    if is_syntax_error(gap):
        return 2
    return 3


def sort_key(gap: Gap, order: Sequence[str]) -> tuple[int, int, float, int, str]:
    """Where a gap sits: its group's position, then the order inside the group."""
    name = group(gap, order)
    position = order.index(name) if name in order else len(order)
    if gap.inbox is not None:
        age = gap.inbox.received_at.timestamp()
        return (position, _PRIORITY[gap.inbox.priority], age, 0, gap.inbox.name)
    if gap.roadmap is not None:
        return (position, 0, 0.0, gap.roadmap.line, gap.key)
    if name == "build":
        return (position, _build_rank(gap), 0.0, 0, gap.key)
    return (position, 0, 0.0, 0, gap.key)


class SourceRanker:
    """Orders gaps by group, then by priority and age (inbox) or file order (roadmap)."""

    contract_version = 1

    def rank(self, gaps: Sequence[Gap], inputs: AnalysisInput) -> GapReport:
        """The ranked report; quarantined keys are left out and listed as skipped."""
        order = full_order(inputs.order)
        quarantined = set(inputs.quarantined)
        kept = [g for g in gaps if g.key not in quarantined]
        skipped = tuple(sorted({g.key for g in gaps if g.key in quarantined}))
        ranked = sorted(kept, key=lambda g: sort_key(g, order))
        chain = " > ".join(order)
        with_reasons = tuple(
            g.model_copy(
                update={"rank_reason": f"#{i + 1}: group {group(g, order)} in the order {chain}"}
            )
            for i, g in enumerate(ranked)
        )
        errors = tuple(
            f"{m.tool.value} could not run: {m.error[-300:] or 'no reason given'}"
            for m in inputs.measurements.items
            if not m.ran and m.tool != Tool.PYTEST
        )
        return GapReport(
            gaps=with_reasons, tree=inputs.measurements.tree, skipped=skipped, errors=errors
        )


RANKER = SourceRanker()

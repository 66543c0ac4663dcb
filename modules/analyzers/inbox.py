"""Inbox gaps: each task a person dropped into inbox/ (the kernel has read and checked it)."""

from __future__ import annotations

from collections.abc import Sequence

from domain import AnalysisInput, Gap, GapCategory, Priority, Severity

_SEVERITY = {
    Priority.CRITICAL: Severity.CRITICAL,
    Priority.HIGH: Severity.HIGH,
    Priority.NORMAL: Severity.NORMAL,
    Priority.LOW: Severity.LOW,
}


class InboxAnalyzer:
    """One gap per inbox item."""

    name = "inbox"
    contract_version = 1

    def analyze(self, inputs: AnalysisInput) -> Sequence[Gap]:
        """Inbox items as gaps, keyed by their file name."""
        return [
            Gap(
                key=f"inbox:{item.name}",
                category=GapCategory.INBOX,
                source="inbox",
                severity=_SEVERITY[item.priority],
                title=item.title,
                description=item.body,
                files=item.allowed,
                inbox=item,
            )
            for item in inputs.inbox
        ]


ANALYZER = InboxAnalyzer()

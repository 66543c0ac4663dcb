"""The kernel's choice among candidates: the best of those that passed everything, by a fixed
order of facts the kernel measured itself (never anything a candidate says of itself)."""

from __future__ import annotations

from collections.abc import Sequence

from domain import Candidate

ORDER = (
    "lands without a person (edits no base test, every changed line ran in a passing test)",
    "fewest changed lines outside the plan's suspect files (a binary file by its bytes)",
    "fewest changed places no passing test ran",
    "fewest agent runs (repair rounds)",
    "smallest change (lines added and removed, a binary file by its bytes)",
    "dealt first",
)
"""The order of facts, most important first; only eligible candidates are ranked. Every
eligible candidate already has no new finding of any tool (the ratchet) and closes the gap."""


def _key(c: Candidate) -> tuple[int, ...]:
    """The facts of ORDER, as one sortable key (smaller wins)."""
    size = c.diff.insertions + c.diff.deletions + c.binary_bytes
    return (int(c.needs_person), c.outside_suspects, c.uncovered, c.rounds, size, c.number)


def choose(candidates: Sequence[Candidate]) -> tuple[Candidate | None, str]:
    """The winner among the eligible candidates and why it won (None, '' when none is)."""
    ranked = sorted((c for c in candidates if c.eligible), key=_key)
    if not ranked:
        return None, ""
    winner = ranked[0]
    if len(ranked) == 1:
        return winner, f"candidate {winner.number} is the only one of {len(candidates)} that passed"
    runner = ranked[1]
    mine, theirs = _key(winner), _key(runner)
    at = next(i for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b)
    return winner, (
        f"candidate {winner.number} won over candidate {runner.number} "
        f"({len(ranked)} of {len(candidates)} passed) on: {ORDER[at]} "
        f"({_shown(at, mine[at])} against {_shown(at, theirs[at])})"
    )


def _shown(at: int, value: int) -> str:
    if at == 0:
        return "needs a person" if value else "lands alone"
    if at == len(ORDER) - 1:
        return f"number {value}"
    return str(value)

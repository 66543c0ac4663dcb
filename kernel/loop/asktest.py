"""A test asked for before a person: changed lines no passing test ran go back to the agent
first, each named with what a test would have to do (issue 40, item 3).

A verified change that leaves such lines is held; the agent gets a round to add the test. Its
next tree is judged like any: lines all run by a passing test, it lands; lines still unrun
once the rounds are spent, or the same tree again (the agent saying why no test can be
written, its summary then in the reason), the held tree is kept for a person as before. A
later round that breaks what was verified never loses the held tree: it is kept, unless the
run ended in a sandbox violation, which ends the iteration as always.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from domain import DiffStat, FailureCategory, IterationOutcome
from kernel.host.context import Context
from kernel.isolation import gitops
from kernel.judging import landing, uncovered
from kernel.judging.iteration import Ending, Iteration
from kernel.judging.judge import FEEDBACK_CHARS, Passed, Retry

SHOWN = 20
"""Places named in one round's feedback."""
FALLS_BACK = (IterationOutcome.ROLLBACK, IterationOutcome.FAILURE, IterationOutcome.NO_CHANGE)
"""How a later round may end and the held tree still be kept for a person."""


@dataclass
class Held:
    """A verified tree with lines no test ran, and what the iteration said of it then."""

    passed: Passed
    touched: list[str] = field(default_factory=list[str])
    diff: DiffStat = field(default_factory=DiffStat)
    agent_tree: str = ""
    repairs: list[str] = field(default_factory=list[str])


def hold(it: Iteration, passed: Passed) -> Held:
    """The passed tree held while the agent is asked for its test."""
    return Held(passed, list(it.touched), it.diff, it.agent_tree, list(it.repairs))


def restored(it: Iteration, held: Held) -> Passed:
    """The held tree again, the iteration saying what it said of it (kept for a person)."""
    it.touched, it.diff = list(held.touched), held.diff
    it.agent_tree, it.repairs, it.repaired = held.agent_tree, list(held.repairs), {}
    return held.passed


def ask(ctx: Context, it: Iteration, passed: Passed) -> Retry | None:
    """The round that asks for a test of each place no passing test ran (None: nothing to ask,
    or such places land anyway by [landing] uncovered)."""
    places = passed.verification.uncovered
    if not places or not landing.keeps_uncovered(ctx, it):
        return None
    sources: dict[str, str] = {}
    for path in sorted({p.partition(":")[0] for p in places[:SHOWN]}):
        data = gitops.blob_at(ctx.paths.root, passed.tree, path, passed.store.env())
        sources[path] = data.decode("utf-8", errors="replace") if data is not None else ""
    return Retry(None, uncovered.said(places), feedback(places, sources))


def feedback(places: Sequence[str], sources: Mapping[str, str]) -> str:
    """What the agent is told: each place and its line, what a test must do, how to decline."""
    lines = [
        f"UNTESTED: {uncovered.said(places)}.",
        "The change passed verification otherwise, but nothing lands on the word of no test.",
        "",
        "For each place, add a test that passes and runs it:",
    ]
    for place in places[:SHOWN]:
        text = _line(sources.get(place.partition(":")[0], ""), place)
        shown = f" `{text}`" if text else ""
        lines.append(
            f"- {place}:{shown} a test must call the code with inputs that make this line run "
            "(take the branch that reaches it) and assert what it then does"
        )
    if len(places) > SHOWN:
        lines.append(f"- and {len(places) - SHOWN} more")
    lines += [
        "",
        "If no test can be written for a line, change nothing more and say why in your "
        "summary: the work then goes to a person with your reason.",
    ]
    return "\n".join(lines)[:FEEDBACK_CHARS]


def _line(source: str, place: str) -> str:
    """The text of a `path:N` place in the file's source ('' for any other place)."""
    _, _, where = place.rpartition(":")
    if not where.isdigit() or not source:
        return ""
    found = source.splitlines()
    number = int(where)
    return found[number - 1].strip()[:120] if 0 < number <= len(found) else ""


def declined(it: Iteration, held: Held, passed: Passed) -> bool:
    """Whether the agent's answer to the round is the held tree again (it changed nothing);
    its summary is then its reason, in the kept work's reason."""
    if passed.tree != held.passed.tree:
        return False
    said = it.agent.summary.strip() if it.agent is not None else ""
    it.untested_why = said[:500] or "the agent changed nothing more and gave no reason"
    return True


def fallback(it: Iteration, held: Held | None, ending: Ending) -> Passed | Ending:
    """After a round that ended the iteration: the held tree (kept for a person), unless the
    round was a sandbox violation or nothing was held."""
    if held is None or ending.category == FailureCategory.SANDBOX_VIOLATION:
        return ending
    if ending.outcome not in FALLS_BACK:
        return ending  # stopped, a limit, waiting: as always
    it.untested_why = f"the round that asked for a test ended: {ending.reason[:300]}"
    return restored(it, held)


def answered(
    ctx: Context, it: Iteration, held: Held | None, passed: Passed, more: bool
) -> tuple[Held | None, Passed | Retry]:
    """After a round that passed: the held tree and the round that asks for a test, or the
    passed tree to land (kept by landing when lines no test ran remain). `more`: a round left."""
    if held is not None and declined(it, held, passed):
        return held, passed
    asked = ask(ctx, it, passed) if more else None
    if asked is not None:
        return hold(it, passed), asked
    if held is not None and passed.verification.uncovered:
        it.untested_why = "the repair rounds are spent"
    return held, passed

"""Review comments that start a repair round: a change request on seed's open pull request, by
its OWNER, a MEMBER or a COLLABORATOR and on the commit seed last pushed there, becomes a
`pr_review` event; the next pass runs the repair (`repairing.py`). What was handled, and how
many rounds a pull request has had, is read from the events, never from memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domain import Event, IterationRecord
from kernel.bounds import clean
from kernel.host.context import Context
from kernel.isolation import gitops
from kernel.records import forge

KIND = "pr_review"
"""The event kind; its `repair` says "due", "started" (the round began) or "spent"."""
READ_EVENTS = 2000
"""How many of the latest events are read for a pull request's reviews."""


@dataclass(frozen=True)
class Due:
    """A repair round to run: the change request, and the pull request's records."""

    pull_request: str
    review: int
    words: str
    """The reviewer's words, cleaned (data for the agent, never instructions)."""
    round: int
    records: list[IterationRecord]
    """The pull request's PROPOSED records, oldest first: the last holds what seed pushed."""

    @property
    def pushed(self) -> str:
        """The commit seed last pushed to the pull request's branch."""
        return self.records[-1].commit or ""

    @property
    def branch(self) -> str:
        """The pull request's branch: the first iteration's."""
        return f"seed/{self.records[0].iteration_id}"


def _said(ctx: Context) -> list[dict[str, Any]]:
    """The data of the latest pr_review events, oldest first."""
    return [e.data for e in ctx.store.events(READ_EVENTS) if e.kind == KIND]


def rounds_used(said: list[dict[str, Any]], url: str) -> int:
    """How many repair rounds the pull request has had (begun counts: no round twice)."""
    return sum(1 for d in said if d.get("pull_request") == url and d.get("repair") == "started")


def note(ctx: Context, hub: forge.Forge, group: list[IterationRecord], number: int) -> str:
    """Read an open pull request's reviews: a new change request (trusted, on the commit seed
    last pushed, newer than any handled) becomes a due round, or, its rounds spent, a comment
    leaving it to a person. The event's kind ('' when nothing new)."""
    latest = group[-1]
    url = latest.pull_request or ""
    said = [d for d in _said(ctx) if d.get("pull_request") == url]
    handled = max((int(d.get("review") or 0) for d in said), default=0)
    new = [
        r
        for r in hub.change_requests(number)
        if r.id > handled and latest.commit and r.commit_id == latest.commit
    ]
    if not new:
        return ""
    used, allowed = rounds_used(said, url), ctx.config.agent.repair_rounds
    review, facts = new[-1].id, {"iteration": latest.iteration_id, "pull_request": url}
    if used >= allowed:
        ctx.store.event(
            KIND,
            f"{url}: changes requested (review {review}); its {allowed} repair round(s) are "
            "spent: left to a person",
            **facts,
            review=review,
            repair="spent",
        )
        spent = f"has spent the {allowed} repair round(s) it may run" if allowed else "runs no"
        body = (
            f"seed {spent}{'' if allowed else ' repair rounds'} on this pull request "
            f"(`[agent] repair_rounds = {allowed}`): the changes asked for are left to a person."
        )
        try:
            hub.comment(number, body)
        except forge.ForgeError as exc:  # logged, not owed again
            ctx.log(f"could not comment on {url}: {exc}")
        return KIND
    said = [part for r in new for part in (r.body, *hub.review_lines(number, r.id))]
    words = clean("\n\n".join(p for p in said if p.strip()))[: forge.COMMENT_MAX]
    ctx.store.event(
        KIND,
        f"{url}: changes requested (review {review}): repair round {used + 1} of {allowed} due",
        **facts,
        review=review,
        repair="due",
        round=used + 1,
        words=words or "(the review has no text of its own)",
    )
    ctx.log(f"{latest.iteration_id}: changes requested on {url}: repair round {used + 1} due")
    return KIND


def due(ctx: Context) -> Due | None:
    """The oldest change request whose round has not begun, on a pull request still open."""
    proposed = ctx.store.proposed()
    if not proposed:
        return None
    said = _said(ctx)
    begun = {d.get("review") for d in said if d.get("repair") == "started"}
    latest = {d.get("pull_request"): d for d in said if d.get("repair") in ("due", "started")}
    for url, data in latest.items():
        group = [r for r in proposed if r.pull_request == url]
        if data.get("repair") != "due" or data.get("review") in begun or not group:
            continue
        pushed = group[-1].commit or ""
        if not isinstance(url, str) or not _present(ctx, pushed):
            ctx.log(f"{url}: the commit seed pushed is not in this checkout: no repair round")
            continue
        words, used = str(data.get("words", "")), rounds_used(said, url)
        return Due(url, int(data.get("review") or 0), words, used + 1, group)
    return None


def _present(ctx: Context, commit: str) -> bool:
    """Whether this checkout holds the commit (a round starts from it, never from a guess)."""
    found = gitops.git(ctx.paths.root, "cat-file", "-e", f"{commit}^{{commit}}", check=False)
    return bool(commit) and found.ok


def started(ctx: Context, due: Due, iteration_id: str) -> Event:
    """The round begins: said before the agent runs, so a restart never runs it twice."""
    return ctx.store.event(
        KIND,
        f"{due.pull_request}: repair round {due.round} started as {iteration_id}",
        iteration=iteration_id,
        pull_request=due.pull_request,
        review=due.review,
        repair="started",
        round=due.round,
    )

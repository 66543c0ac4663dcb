"""Following seed's pull requests: what the forge did to them becomes an event (`pr_merged`,
`pr_closed`) the record index reads as the iteration's outcome, `pr_review` for a change
request; a merged PR's branch is deleted and its inbox task is done. All of it is read from
records and events, never from memory."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace

from domain import IterationOutcome, IterationRecord
from kernel.bounds import INBOX_MAX_BYTES
from kernel.errors import SeedError
from kernel.fsutil import atomic_write_text
from kernel.host.context import Context
from kernel.isolation import gitops
from kernel.judging.landing import FOR_A_PERSON
from kernel.loop import reviews
from kernel.records import forge, inbox

FOLLOW_EVERY_S = 60.0
"""The least time between two reads of the forge by one daemon (the idle-CPU promise)."""
BACKOFF_MAX_S = 3600.0
"""The longest wait after reads the forge did not answer (a 500, a timeout)."""


class Follower:
    """Reads the forge only while seed has open pull requests, at most every FOLLOW_EVERY_S,
    and backs off (doubling) while it does not answer."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._next = 0.0
        self._misses = 0
        self._seen: dict[str, str] = {}
        """Each open pull request's updated_at when its reviews were last read."""
        self.problem = ""
        """What the forge did not answer at the last read ("" when it answered)."""

    def follow(self, ctx: Context) -> list[str]:
        """Read what changed on seed's open pull requests; the kinds of the events written."""
        proposed, label = ctx.store.proposed(), ctx.config.inbox.forge_label
        if not (proposed or label) or self._clock() < self._next:
            return []
        written, problem = follow(ctx, proposed, self._seen) if proposed else ([], "")
        if label:
            problem = take_issues(ctx, label) or problem
        self._misses = self._misses + 1 if problem else 0
        wait = min(BACKOFF_MAX_S, FOLLOW_EVERY_S * 2**self._misses)
        self._next = self._clock() + wait
        self.problem = f"{problem} (read again in {wait:.0f} s)" if problem else ""
        return written


PROPOSAL_WAITS = ("waiting on ", "merged in ")
"""How proposal_wait's reasons begin."""


def proposal_wait(record: IterationRecord) -> str:
    """What a gap whose latest record proposed its fix waits on (`status` shows it)."""
    if record.outcome == IterationOutcome.SUCCESS:
        return f"merged in {record.pull_request}: waiting for this checkout to have it"
    return f"waiting on {record.pull_request or f'the pushed branch seed/{record.iteration_id}'}"


def _hub(ctx: Context, token: str) -> forge.GitHub:
    """The configured forge's API."""
    config = ctx.config.forge
    repo = config.repo or forge.repo_of(
        gitops.out(ctx.paths.root, "remote", "get-url", config.remote)
    )
    return forge.GitHub(config.api_url, repo, token)


def hub_of(ctx: Context) -> forge.GitHub:
    """The configured forge's API, with the kernel's token."""
    return _hub(ctx, os.environ.get(ctx.config.forge.token, ""))


def forge_said(ctx: Context) -> str:
    """Where work is proposed, and with which token's name ('' in local mode with no label)."""
    config, mode = ctx.config.forge, ctx.config.landing.mode
    if mode == "local" and not ctx.config.inbox.forge_label:
        return ""
    try:
        url = gitops.out(ctx.paths.root, "remote", "get-url", config.remote)
    except gitops.GitError:
        return f"{mode} mode: no remote {config.remote!r} in this checkout"
    said = f"{mode} mode: pushes to {config.remote} ({forge.without_secrets(url)})"
    if mode == "branch" and not ctx.config.inbox.forge_label:
        return said
    try:
        repo = config.repo or forge.repo_of(url)
    except forge.ForgeError as exc:
        return f"{said}; {exc}"
    token = "set" if os.environ.get(config.token) else "NOT set"
    return f"{said}; {config.kind} {repo} at {config.api_url}, token ${config.token} ({token})"


def follow(
    ctx: Context, proposed: list[IterationRecord], seen: dict[str, str] | None = None
) -> tuple[list[str], str]:
    """Each open pull request's state read once: merged or closed becomes its event; an open
    one's reviews are read when it moved since (`seen`: updated_at by address), a change
    request becoming a due repair round (`reviews.py`). A forge that does not answer costs no
    record: the PR is read again next time. (kinds, what the forge did not answer: '' when it
    answered)"""
    token = os.environ.get(ctx.config.forge.token, "")
    seen = {} if seen is None else seen
    written: list[str] = []
    missed = ""
    for group in _by_pull_request(proposed):
        record = group[-1]  # its commit is what seed last pushed there
        assert record.pull_request is not None
        try:
            hub = _hub(ctx, token)
            number = forge.number_of(record.pull_request)
            pull = hub.pull(number)
            if pull.state != "closed" and not pull.merged:
                if not _merged_on_green(ctx, hub, record, pull):
                    moved = not pull.updated_at or seen.get(record.pull_request) != pull.updated_at
                    kind = reviews.note(ctx, hub, group, number) if moved else ""
                    seen[record.pull_request] = pull.updated_at
                    written += [kind] if kind else []
                    continue
                pull = replace(pull, state="closed", merged=True)
            said = "" if pull.merged else hub.last_word(number)
        except (forge.ForgeError, SeedError) as exc:
            ctx.log(f"could not read {record.pull_request} (read again later): {exc}")
            missed = f"could not read {record.pull_request}: {exc}"
            continue
        written.append(_ended(ctx, group, pull, said, token))
    return written, missed


def _by_pull_request(proposed: list[IterationRecord]) -> list[list[IterationRecord]]:
    """The PROPOSED records grouped by their pull request (an iteration and its repair
    rounds), each group oldest first."""
    groups: dict[str, list[IterationRecord]] = {}
    for record in proposed:
        groups.setdefault(record.pull_request or "", []).append(record)
    return list(groups.values())


def _merged_on_green(
    ctx: Context, hub: forge.GitHub, record: IterationRecord, pull: forge.PullRequest
) -> bool:
    """Merge an open pull request when [landing] merge says "on-green" and the forge says it may
    ("clean": every check passed), its head is still the commit seed verified, and it is no
    draft (work kept for a person). True: merged now."""
    if ctx.config.landing.merge != "on-green" or pull.draft or pull.mergeable_state != "clean":
        return False
    if FOR_A_PERSON in record.reason:  # opened as a draft for a person: theirs to merge, always
        return False
    if not record.commit or pull.head_sha != record.commit:
        ctx.log(f"{record.pull_request}: its head is not the commit seed verified; not merged")
        return False
    hub.merge(pull.number, record.commit)
    ctx.log(f"{record.iteration_id}: {record.pull_request} merged on green")
    return True


def _ended(
    ctx: Context, group: list[IterationRecord], pull: forge.PullRequest, said: str, token: str
) -> str:
    """Record a pull request's end for each iteration that pushed to it: merged (branch
    deleted, inbox task done) or closed, with the reviewer's last word as evidence for the
    next plan."""
    record = group[0]  # the iteration that opened it: its branch, its task
    url = record.pull_request or pull.html_url
    if pull.merged:
        kind, message = "pr_merged", f"pull request {url} merged"
    else:
        word = f"; the reviewer said: {' '.join(said.split())}" if said.strip() else ""
        kind, message = "pr_closed", f"pull request {url} closed unmerged{word}"
    for each in group:
        ctx.store.event(kind, message, iteration=each.iteration_id, pull_request=url)
        ctx.log(f"{each.iteration_id}: {message}")
    if pull.merged:
        branch = f"seed/{record.iteration_id}"
        forge.delete_remote_branch(ctx.paths.root, ctx.config.forge.remote, branch, token)
        _task_done(ctx, record, message)
    full = ctx.store.get(record.iteration_id)
    task = full.plan.gap.inbox if full is not None and full.plan is not None else None
    if task is not None:
        tell_issue(ctx, task.name, f"seed: the {message.split(';')[0]}.")
    return kind


def _task_done(ctx: Context, record: IterationRecord, message: str) -> None:
    """A merged iteration's inbox task moves to inbox/done/ with its result note."""
    full = ctx.store.get(record.iteration_id)
    task = full.plan.gap.inbox if full is not None and full.plan is not None else None
    if task is None or not (ctx.paths.inbox / task.name).is_file():
        return
    note = inbox.result_note(
        task.name, "SUCCESS", message, [(record.iteration_id, "SUCCESS", message)]
    )
    inbox.fail_queued(ctx.paths.inbox, task.name, note, folder="done")


def take_issues(ctx: Context, label: str) -> str:
    """Open issues with the label, by a trusted author, written once as inbox/issue-N.md (the
    text of the moment seed first reads it; never again once done or failed). What the forge
    did not answer ('' when it answered; read again later)."""
    try:
        issues = _hub(ctx, os.environ.get(ctx.config.forge.token, "")).issues(label)
    except (forge.ForgeError, SeedError) as exc:
        ctx.log(f"could not read the issues labelled {label!r} (read again later): {exc}")
        return f"could not read the issues labelled {label!r}: {exc}"
    folder = ctx.paths.inbox
    for issue in issues:
        name = f"issue-{issue.number}.md"
        seen = [folder / name, folder / ".active" / name, folder / "done", folder / "failed"]
        if any(p.exists() for p in seen[:2]) or any(
            q.name.startswith(name) for d in seen[2:] if d.is_dir() for q in d.iterdir()
        ):
            continue
        # "Issue #N:" first, so no front matter is read; the bounds of inbox files cut the rest
        text = f"Issue #{issue.number}: {issue.title}\n\n{issue.body}\n"
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / name, text[: INBOX_MAX_BYTES // 4])
        ctx.log(f"inbox/{name}: from issue #{issue.number} labelled {label!r}")
    return ""


def tell_issue(ctx: Context, task: str, body: str) -> None:
    """Comment on the issue an inbox task came from (nothing for a person's file); a forge
    that does not answer is logged, the comment is not owed again."""
    number = forge.issue_of(task)
    if number is None or not ctx.config.inbox.forge_label:
        return
    try:
        _hub(ctx, os.environ.get(ctx.config.forge.token, "")).comment(number, body)
    except (forge.ForgeError, SeedError) as exc:
        ctx.log(f"could not comment on issue #{number}: {exc}")


def issue_note(record: IterationRecord, folder: str) -> str:
    """What seed comments on an issue when an iteration of its task ends (folder: where the
    task went, "failed" meaning it is never tried again); the reason fenced, as data."""
    if record.pull_request:
        where = f": pull request {record.pull_request}"
    elif record.outcome == IterationOutcome.SUCCESS and record.commit:
        where = f": commit {record.commit[:12]}"
    else:
        where = ""
    head = f"seed iteration `{record.iteration_id}` ended {record.outcome.value}{where}."
    tail = "\n\nseed cannot do this task and will not try it again." if folder == "failed" else ""
    return f"{head}\n\n{forge.fenced(record.reason[:2000])}{tail}"

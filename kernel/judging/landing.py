"""Landing a verified tree: commit exactly it, rebase it if the branch moved (verified again
with the rules of the commit it moved to), and fast-forward the user's branch, or keep it."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from domain import FailureCategory, GapReport, IterationOutcome, IterationRecord
from kernel import faults
from kernel.errors import SeedError, UsageError
from kernel.host.answers import Backend
from kernel.host.context import Context
from kernel.isolation import blockers, gitops, ignored, trees
from kernel.isolation.exports import Export
from kernel.judging import guard, uncovered
from kernel.judging.iteration import Ending, Iteration, Phase, mono, noop_phase
from kernel.judging.judge import Judge, Passed
from kernel.judging.verify import Verification
from kernel.measuring import filetypes
from kernel.measuring.baseline import Baseline, measure_cached
from kernel.measuring.gate import freeze_gate_at
from kernel.records import commitmsg, forge

FOR_A_PERSON = "; a draft for review: "
"""In a PROPOSED record's reason: its PR was opened for a person, and seed never merges it."""

Reverify = Callable[[Iteration, Baseline, Export], Verification]
"""Verifies a tree again (after a rebase), as the Judge does."""


def land(
    ctx: Context,
    phase: Phase,
    it: Iteration,
    baseline: Baseline,
    passed: Passed,
    reverify: Reverify,
) -> Ending:
    """Commit exactly the verified tree and fast-forward the user's branch (or keep it)."""
    plan = it.plan
    root = ctx.paths.root
    phase("landing", "")
    t0 = mono()
    tree, store, verification = passed.tree, passed.store, passed.verification
    if plan.gap.roadmap is not None:
        tree = _tick_roadmap(root, tree, store, plan.gap.roadmap.line, plan.gap.roadmap.text)
    summary = it.agent.summary if it.agent else ""
    commit = _commit(ctx, tree, it.base, commitmsg.message(plan, summary), store)
    it.branch = f"seed/{plan.iteration_id}"
    gitops.git(root, "branch", "--force", it.branch, commit)
    it.note(stage="committed", commit=commit, branch=it.branch)
    faults.fault("commit")
    blocker = gitops.land_blocker(root)
    if blocker:
        return _keep(ctx, it, commit, f"cannot land: {blocker}", verification, blocked=(blocker,))
    head_now = gitops.head(root)
    if head_now != it.base:
        assert head_now is not None
        rebased = _rebase(ctx, it, baseline, passed, commit, head_now, reverify)
        if isinstance(rebased, Ending):
            return rebased
        commit, verification = rebased
    held = _for_a_person(ctx, it, commit, verification)
    if held and ctx.config.landing.mode == "pr":
        return _propose(ctx, it, commit, verification, held)  # a draft: the review is the person's
    if held:
        approve = ctx.paths.command("approve", plan.iteration_id)
        why = f"{held}; approve it with `{approve}`"
        return _keep(ctx, it, commit, why, verification, IterationOutcome.KEPT)
    collisions = [
        p
        for p in gitops.added_files(root, it.base, commit)
        if (root / p).exists() or (root / p).is_symlink()
    ]
    if collisions:
        return _keep(
            ctx,
            it,
            commit,
            f"the change adds files that already exist, untracked, in your checkout: {', '.join(collisions[:5])}",
            verification,
            blocked=tuple(sorted(collisions)),
        )
    if ctx.config.landing.mode != "local":
        return _propose(ctx, it, commit, verification)
    return _fast_forward(ctx, it, commit, verification, t0)


def _propose(
    ctx: Context, it: Iteration, commit: str, verification: Verification, held: str = ""
) -> Ending:
    """Push exactly the verified commit as seed/<id> (the local branch untouched) and, in "pr"
    mode, open its pull request onto the branch the checkout is on: PROPOSED. Work `held` for
    a person opens as a draft, with why at the top of its body."""
    root, config = ctx.paths.root, ctx.config.forge
    token = os.environ.get(config.token, "")
    branch = f"seed/{it.plan.iteration_id}"
    it.note(stage="pushing", commit=commit, branch=branch)
    try:
        forge.push(root, config.remote, commit, branch, token)
        said = f"{verification.reason}; pushed {commit[:12]} to {config.remote} as {branch}"
        said += f"{FOR_A_PERSON}{held}" if held else ""
        if ctx.config.landing.mode == "branch":
            return Ending(
                IterationOutcome.PROPOSED, None, said, commit=commit, verification=verification
            )
        base = gitops.current_branch(root) or "main"
        url = gitops.out(root, "remote", "get-url", config.remote)
        hub = forge.GitHub(config.api_url, config.repo or forge.repo_of(url), token)
        pull = hub.open_pull(
            commitmsg.message(it.plan, "").splitlines()[0][:200],
            branch,
            base,
            _pr_body(it, verification, ctx.config.inbox.forge_label, held),
            draft=bool(held),
        )
    except forge.ForgeError as exc:
        # nothing landed and nothing is lost: the verified commit stays on the local seed/ branch
        return _keep(ctx, it, commit, f"could not propose the work: {exc}", verification)
    return Ending(
        IterationOutcome.PROPOSED,
        None,
        f"{said}; pull request {pull.html_url}",
        commit=commit,
        verification=verification,
        pull_request=pull.html_url,
    )


def _pr_body(it: Iteration, verification: Verification, label: str, held: str) -> str:
    """The iteration's report as a PR body; every text of the agent's or the tree's fenced.
    Only here, from the task's own issue, does a closing keyword get written."""
    plan = it.plan
    issue = forge.issue_of(plan.gap.inbox.name) if plan.gap.inbox and label else None
    lines = [
        *(["**Kept for a person's review:**", forge.fenced(held), ""] if held else []),
        f"seed iteration `{plan.iteration_id}`: verified by the kernel.",
        *([f"Closes #{issue}"] if issue is not None else []),
        "",
        "## Gap",
        forge.fenced(f"{plan.gap.source}: {plan.gap.description}"),
        "",
        "## Plan",
        forge.fenced(plan.goal),
        "",
        "## Criteria",
    ]
    for v in verification.verdicts:
        lines.append(
            f"- {'PASS' if v.passed else 'FAIL'}: "
            + forge.fenced(v.text or f"{v.check.value} {' '.join(v.args)}")
        )
    lines += ["", "## Cost", f"{it.wire_cost_usd:.4f} USD over {it.wire_requests} model requests"]
    return "\n".join(lines)


def _for_a_person(ctx: Context, it: Iteration, commit: str, verification: Verification) -> str:
    """Why a verified change waits for a person ('' when it may land alone); an uncovered
    change that may land has it said in the verification's reason instead."""
    root = ctx.paths.root
    if verification.changed_tests:
        # a behaviour change the base's tests pin: a person approves it, it never lands alone
        shown = ", ".join(verification.changed_tests[:5])
        return (
            f"the change edits base tests that no longer pass against the base's own test "
            f"files ({shown})"
        )
    unvetted = filetypes.unvetted(root, commit)
    if unvetted:  # what runs may not be what a person can read in the diff
        return filetypes.said(unvetted)
    stale = ignored.unbuildable(root, it.base, commit)
    if stale:
        return (
            f"the change edits the sources of git-ignored files the tests read "
            f"({', '.join(stale[:5])}), which seed cannot rebuild: rebuild them"
        )
    if verification.uncovered:
        said = uncovered.said(verification.uncovered)
        if keeps_uncovered(ctx, it):
            why = f" (asked for a test: {it.untested_why})" if it.untested_why else ""
            return f"{said}{why}"
        verification.reason = f"{verification.reason}; but {said}"
    return ""


for_a_person = _for_a_person  # a repair round's push asks it too (loop/repairing.py)


def keep_tree(ctx: Context, it: Iteration, tree: str, store: trees.ObjectStore, branch: str) -> str:
    """Commit a candidate's tree on the base under branch, for a person to look at (never
    landed by this); the commit."""
    commit = _commit(ctx, tree, it.base, commitmsg.message(it.plan, ""), store)
    gitops.git(ctx.paths.root, "branch", "--force", branch, commit)
    return commit


def keeps_uncovered(ctx: Context, it: Iteration) -> bool:
    """Whether a change with lines no passing test ran waits for a person: unless [landing]
    says land, or it is ruff-fix's own fix of a lint finding."""
    if it.backend.name == "ruff-fix" and it.plan.gap.source in ("ruff", "ruff-format"):
        return False
    return ctx.config.landing.uncovered == "keep"


def _rebase(
    ctx: Context,
    it: Iteration,
    baseline: Baseline,
    passed: Passed,
    commit: str,
    head_now: str,
    reverify: Reverify,
) -> tuple[str, Verification] | Ending:
    """The change on top of the commit the branch moved to, verified again there."""
    root, store = ctx.paths.root, passed.store
    # in the kernel's own store: no merge driver or attribute of the repository runs;
    # the merge base is the commit's parent, it.base (git 2.39 has no --merge-base)
    merged_tree = gitops.git(
        root, "merge-tree", "--write-tree", head_now, commit, check=False, env=store.env()
    )
    if not merged_tree.ok:
        return _keep(
            ctx,
            it,
            commit,
            f"the branch moved to {head_now[:12]} and the change does not rebase onto it",
            passed.verification,
        )
    new_tree = merged_tree.text().split()[0]
    place = Export(root, ctx.paths.exports, new_tree, "rebased", store)
    try:
        refused = _guarded(ctx, it, head_now, place)
        if refused:
            # the agent's own tree passed the guard; with the person's commit it does not:
            # as with a conflict, nothing lands, nothing halts, the work is kept for them
            why = f"the change, rebased onto {head_now[:12]}, is refused by the guard: {refused[0]}"
            return _keep(ctx, it, commit, why, passed.verification)
        # the rules of the commit the branch moved to, never those of the agent's tree
        gate = freeze_gate_at(
            root, head_now, ctx.paths.gate / (it.worktree.name + "-rebased"), ctx.config.quality
        )
        it.base = head_now
        moved = Baseline(
            baseline.worktree,
            head_now,
            gitops.tree_of(root, head_now),
            gate,
            baseline.measurements,
            baseline.report,
            written=baseline.written,
        )
        verification = reverify(it, moved, place)
    finally:
        place.close()
    if not verification.passed:
        return Ending(
            IterationOutcome.ROLLBACK,
            verification.category,
            f"after rebasing onto {head_now[:12]}: {verification.reason}",
            verification=verification,
        )
    plan = it.plan
    summary = it.agent.summary if it.agent else ""
    commit = _commit(ctx, new_tree, head_now, commitmsg.message(plan, summary), store)
    gitops.git(root, "branch", "--force", it.branch, commit)
    return commit, verification


def _guarded(ctx: Context, it: Iteration, head_now: str, place: Export) -> list[str]:
    """The guard's second pass: the rebased tree against the commit it now sits on (a
    person's commit meanwhile can move the change somewhere the first pass never saw)."""
    root = ctx.paths.root
    assert place.store is not None
    rebased = trees.rediff(root, head_now, trees.Candidate(tree=""), place.tree, place.store)
    changes = rebased.changes
    if it.plan.gap.roadmap is not None:
        # the kernel's own tick: the first pass refused any change of the agent's to it
        changes = [c for c in changes if not (c.path == "ROADMAP.md" and c.status == "M")]
    findings = guard.inspect_tree(
        root,
        place(),
        head_now,
        changes,
        it.plan,
        ctx.config.guard,
        (rebased.inserted, rebased.deleted),
        (place.tree, place.store),
    )
    return [str(f) for f in findings]


def _fast_forward(
    ctx: Context, it: Iteration, commit: str, verification: Verification, t0: float
) -> Ending:
    """`git merge --ff-only` of the user's branch to the commit: SUCCESS, or the work kept."""
    root = ctx.paths.root
    # journalled first: if the daemon dies during or after the merge, the restarted one
    # can tell from the user's branch whether this commit landed
    it.note(stage="landing", commit=commit, target=gitops.current_branch(root) or "")
    merged = gitops.fast_forward(root, commit)
    if merged.ok:
        it.note(stage="landed")
        faults.fault("fast-forward")
    it.timed("land", t0)
    if not merged.ok:
        reason = " ".join((merged.err_text() or merged.text()).split())[:400]
        # what git refused for, read again from the checkout: the person's changes to the
        # files the change writes (nothing the agent wrote decides it)
        changed = gitops.git(root, "diff", "--name-only", "-z", it.base, commit).stdout
        paths = [p for p in changed.decode("utf-8", errors="surrogateescape").split("\0") if p]
        blocked = tuple(blockers.dirty(root, paths))
        return _keep(
            ctx,
            it,
            commit,
            f"git refused the fast-forward: {reason}",
            verification,
            blocked=blocked,
        )
    # the verified commit is on the branch (SUCCESS: what history and recovery say); bytes
    # that git wrote otherwise are named, never overwritten (they may be the person's)
    differ = trees.unlike_blobs(root, it.base, commit)
    reason, evidence = verification.reason, list(verification.evidence)
    if differ:
        shown = ", ".join(differ[:10]) + (
            f" and {len(differ) - 10} more" if len(differ) > 10 else ""
        )
        note = (
            f"your checkout's bytes differ from the landed blobs in {shown}: git converted them "
            "on checkout (your own .gitattributes or settings) or they were edited meanwhile; "
            "they are left as they are"
        )
        reason, evidence = f"{reason}; but {note}", [*evidence, note]
        ctx.log(f"landed {commit[:12]}, but {note}")
    return Ending(
        IterationOutcome.SUCCESS,
        None,
        reason,
        evidence=evidence,
        commit=commit,
        verification=verification,
    )


def _keep(
    ctx: Context,
    it: Iteration,
    commit: str,
    reason: str,
    verification: Verification,
    outcome: IterationOutcome = IterationOutcome.MERGE_BLOCKED,
    blocked: tuple[str, ...] = (),
) -> Ending:
    """MERGE_BLOCKED or KEPT: keep the work as seed/kept/<id>; nothing in the checkout
    changes (`seed.py approve ID` lands it). Blocked by the person's checkout, the gap waits
    with no agent run, and the kernel lands the kept tree once the blocker clears."""
    root = ctx.paths.root
    kept = f"seed/kept/{it.plan.iteration_id}"
    gitops.git(root, "branch", "--force", kept, commit)
    branches = gitops.list_branches(root, "seed/kept/")
    for name in branches[: max(len(branches) - ctx.config.git.keep_branches, 0)]:
        gitops.delete_branch(root, name)
    said = f"{reason}; the work is kept on branch {kept}"
    if blocked:
        said += (
            f" (blocked by {blockers.describe(blocked)}): "
            "no agent runs for this gap again; it lands by itself, verified again, once that "
            f"changes, or now with `{ctx.paths.command('approve', it.plan.iteration_id)}`"
        )
    elif outcome == IterationOutcome.MERGE_BLOCKED:
        said += f" (`{ctx.paths.command('approve', it.plan.iteration_id)}` lands it)"
    return Ending(
        outcome,
        FailureCategory.MERGE_BLOCKED if outcome == IterationOutcome.MERGE_BLOCKED else None,
        said,
        verification=verification,
        commit=commit,
        kept=kept,
        blocked=blocked,
    )


_UNCHECKED = re.compile(r"^(?P<lead>\s*[-*]\s+)\[ \](?P<rest>\s+(?P<text>\S.*?))\s*$")


def _tick_roadmap(root: Path, tree: str, store: trees.ObjectStore, line: int, text: str) -> str:
    """The tree with the item's `- [ ]` turned into `- [x]` (the tree itself when not found).

    The item is found at its line, or (if the agent's change moved it) at the first
    unchecked line with exactly its text.
    """
    shown = gitops.git(root, "cat-file", "blob", f"{tree}:ROADMAP.md", check=False, env=store.env())
    if not shown.ok:
        return tree
    ticked = tick(shown.stdout, line, text)
    return tree if ticked is None else trees.with_file(root, tree, "ROADMAP.md", ticked, store)


def tick(data: bytes, line: int, text: str) -> bytes | None:
    """ROADMAP.md's bytes with one item ticked, or None when the item is not there."""
    # bytes in and out: line endings and every other line stay exactly as they were
    lines = data.decode("utf-8", errors="surrogateescape").splitlines(keepends=True)
    candidates = [line - 1] + [i for i in range(len(lines)) if i != line - 1]
    for index in candidates:
        if not 0 <= index < len(lines):
            continue
        body = lines[index].rstrip("\r\n")
        match = _UNCHECKED.match(body)
        if match and match.group("text").strip() == text.strip():
            ending = lines[index][len(body) :]
            lines[index] = f"{match.group('lead')}[x]{match.group('rest')}{ending}"
            return "".join(lines).encode("utf-8", errors="surrogateescape")
    return None


def approve(ctx: Context, iteration_id: str) -> str:
    """A person approves a KEPT (or MERGE_BLOCKED) iteration: exactly its kept tree is
    fast-forwarded onto the branch; if the branch moved, the tree is rebased in the kernel's
    store and verified again first (only the base tests the record lists may still differ)."""
    record = ctx.store.get(iteration_id)
    if record is None:
        raise UsageError(
            f"no iteration {iteration_id} (`{ctx.paths.command('history')}` lists them)"
        )
    keepers = (IterationOutcome.KEPT, IterationOutcome.MERGE_BLOCKED)
    if record.outcome not in keepers or not record.commit:
        raise UsageError(
            f"{iteration_id} ended {record.outcome.value}: only KEPT or MERGE_BLOCKED work is approved"
        )
    if gitops.head(ctx.paths.root) == record.commit:
        return f"{iteration_id} is already on the branch ({record.commit[:12]})"
    commit, differ = land_kept(ctx, record, "Approved by a person.")
    ctx.store.event(
        "approved",
        f"{iteration_id} approved by a person: {commit[:12]} landed",
        iteration=iteration_id,
        commit=commit,
        changed_tests=list(record.changed_tests),
        unlike_blobs=differ[:10],
    )
    said = f"landed {commit[:12]} ({iteration_id}, approved)"
    if differ:
        said += f"; git wrote other bytes than the landed blobs for: {', '.join(differ[:10])}"
    return said


def land_kept(ctx: Context, record: IterationRecord, note: str) -> tuple[str, list[str]]:
    """Fast-forward the branch to a kept iteration's tree (rebased and verified again first
    if the branch moved); the commit landed and the paths whose checkout bytes differ.
    Raises SeedError when it cannot land."""
    root = ctx.paths.root
    blocker = gitops.land_blocker(root)
    if blocker:
        raise SeedError(f"cannot land: {blocker}")
    assert record.commit is not None
    commit = record.commit
    head = gitops.head(root)
    if head != gitops.out(root, "rev-parse", f"{commit}^"):
        assert head is not None
        commit = _approved_on(ctx, record, commit, head, note)
    # as the daemon lands: no attributes or filters, and the checkout's bytes checked after
    merged = gitops.fast_forward(root, commit)
    if not merged.ok:
        reason = " ".join((merged.err_text() or merged.text()).split())[:400]
        raise SeedError(f"git refused the fast-forward: {reason}")
    if record.kept_branch:  # its work is on the branch now: the kept copy has done its part
        gitops.drop_landed(root, record.kept_branch, record.commit)
    return commit, trees.unlike_blobs(root, head or commit, commit)


def _approved_on(ctx: Context, record: IterationRecord, commit: str, head: str, note: str) -> str:
    """The kept change rebased onto the branch's new head and verified again there."""
    root, name = ctx.paths.root, f"approve-{record.iteration_id}"
    store = trees.ObjectStore(ctx.paths.objects / name, ctx.paths.common / "objects")
    merged_tree = gitops.git(
        root, "merge-tree", "--write-tree", head, commit, check=False, env=store.env()
    )
    if not merged_tree.ok or record.plan is None:
        raise SeedError(
            f"the branch moved to {head[:12]} and the kept work does not rebase onto it"
        )
    new_tree = merged_tree.text().split()[0]
    gate = freeze_gate_at(root, head, ctx.paths.gate / name, ctx.config.quality)
    head_tree = gitops.tree_of(root, head)
    base = Export(root, ctx.paths.exports, head_tree, "base")
    try:
        measured, written = measure_cached(
            ctx, base, head_tree, gate, ctx.paths.runs / "pytest", related=(record.base,)
        )
    finally:
        base.close()
    baseline = Baseline(Path(name), head, head_tree, gate, measured, GapReport(), written=written)
    it = Iteration(
        record.plan, head, datetime.now(UTC), Backend(record.backend, "approved"), Path(name)
    )
    it.touched = [
        c.path for c in trees.rediff(root, head, trees.Candidate(""), new_tree, store).changes
    ]
    place = Export(root, ctx.paths.exports, new_tree, "approved", store)
    try:
        # the guard's second pass, as after any rebase: the person's commits meanwhile can
        # move the change somewhere the first pass never saw
        refused = _guarded(ctx, it, head, place)
        if refused:
            raise SeedError(f"after rebasing onto {head[:12]}, the guard refuses: {refused[0]}")
        verification = Judge(ctx, noop_phase).verify(it, baseline, place)
    finally:
        place.close()
    if not verification.passed or not set(verification.changed_tests) <= set(record.changed_tests):
        raise SeedError(f"after rebasing onto {head[:12]}: {verification.reason}")
    plan = record.plan
    message = commitmsg.message(plan, record.agent_summary, note=note)
    return _commit(ctx, new_tree, head, message, store)


def _commit(ctx: Context, tree: str, parent: str, message: str, store: trees.ObjectStore) -> str:
    """Commit a tree as its author (see commitmsg.author), with seed's own identity as committer."""
    git = ctx.config.git
    by = commitmsg.author(ctx.paths.root, git.user_name, git.user_email)
    seed = (commitmsg.SEED_NAME, commitmsg.SEED_EMAIL)
    return trees.commit_tree(ctx.paths.root, tree, parent, message, *by, store, committer=seed)

"""Inspect, verify and land: the guard on the diff, the verifier, and the fast-forward."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from domain import (
    CheckName,
    DiffStat,
    FailureCategory,
    IterationOutcome,
    IterationRecord,
    Measurement,
)
from kernel import faults, gitops, guard
from kernel.analysis import Baseline, measure_cached
from kernel.attempt import Attempt, Phase, mono, timed
from kernel.context import Context
from kernel.gate import freeze_gate_at
from kernel.globs import protected_patterns
from kernel.measure import run_pytest
from kernel.recording import Recorder
from kernel.selfcheck import selfcheck
from kernel.verify import Verification, verify


class Lander:
    """Judges the agent's work and lands it on the user's branch, or keeps or discards it."""

    def __init__(self, ctx: Context, phase: Phase, recorder: Recorder) -> None:
        self.ctx = ctx
        self.phase = phase
        self.recorder = recorder

    def inspect_and_land(self, attempt: Attempt, baseline: Baseline) -> IterationRecord:
        """Guard the diff, verify it, and fast-forward the user's branch."""
        ctx = self.ctx
        wt = attempt.worktree
        self.phase("inspecting", "")
        t0 = mono()
        gitops.stage_all(wt)
        faults.fault("inspect")
        changes = gitops.staged_changes(wt, attempt.base)
        attempt.touched = [c.path for c in changes]
        inserted, deleted = gitops.numstat(wt, attempt.base)
        attempt.diff = DiffStat(
            files=len(changes),
            insertions=inserted,
            deletions=deleted,
            new_files=sum(1 for c in changes if c.status == "A"),
        )
        if not changes:
            timed(attempt, "inspect", t0)
            return self.recorder.finish(
                attempt,
                IterationOutcome.NO_CHANGE,
                None,
                "the agent said it was done but changed nothing",
            )
        findings = guard.inspect_changes(
            wt,
            attempt.base,
            changes,
            attempt.plan,
            protected_patterns(ctx.config.guard.protected),
            inserted,
            deleted,
            ctx.config.guard,
        )
        timed(attempt, "inspect", t0)
        if findings:
            category = guard.worst(findings)
            return self.recorder.finish(
                attempt,
                IterationOutcome.ROLLBACK,
                category,
                str(findings[0]),
                evidence=[str(f) for f in findings],
            )
        self.phase("verifying", "")
        attempt.note(stage="verifying")
        faults.fault("verification")
        t1 = mono()
        verification = self.verify(attempt, baseline)
        timed(attempt, "verify", t1)
        if not verification.passed:
            return self.recorder.finish(
                attempt,
                IterationOutcome.ROLLBACK,
                verification.category,
                verification.reason,
                verification=verification,
            )
        return self.land(attempt, baseline, verification)

    def verify(self, attempt: Attempt, baseline: Baseline) -> Verification:
        """Measure the changed tree with the baseline's gate and compare."""
        ctx = self.ctx
        wt = attempt.worktree
        tree = gitops.out(wt, "write-tree")
        after = measure_cached(
            ctx, wt, tree, baseline.gate, ctx.paths.runs / "pytest", related=(baseline.tree,)
        )

        def rerun(nodes: Sequence[str]) -> tuple[set[str], set[str]]:
            base_wt = ctx.paths.worktrees / (wt.name + "-base")
            gitops.worktree_add(ctx.paths.root, base_wt, attempt.base)
            try:
                work = ctx.paths.runs / "pytest"
                before = run_pytest(
                    base_wt, ctx.target, work, ctx.config.quality.tool_timeout_s, nodes
                )
                again = run_pytest(wt, ctx.target, work, ctx.config.quality.tool_timeout_s, nodes)
            finally:
                gitops.worktree_remove(ctx.paths.root, base_wt)

            def failed(m: Measurement) -> set[str]:
                return {
                    d.node_id for d in m.diagnostics if d.node_id and d.rule in ("failed", "error")
                }

            return failed(before), failed(again)

        def boot() -> tuple[bool, str]:
            return selfcheck(wt, ctx.paths.state / "selfcheck.log")

        wants_boot = any(c.check == CheckName.SELFCHECK for c in attempt.plan.criteria)
        return verify(
            attempt.plan,
            baseline.measurements,
            after,
            attempt.touched,
            wt,
            rerun=rerun,
            selfcheck=boot if wants_boot else None,
        )

    def land(
        self, attempt: Attempt, baseline: Baseline, verification: Verification
    ) -> IterationRecord:
        """Commit in the worktree and fast-forward the user's branch (or keep the branch)."""
        ctx = self.ctx
        plan = attempt.plan
        wt = attempt.worktree
        root = ctx.paths.root
        self.phase("landing", "")
        t0 = mono()
        if plan.gap.roadmap is not None:
            _tick_roadmap(wt / "ROADMAP.md", plan.gap.roadmap.line, plan.gap.roadmap.text)
            gitops.stage_all(wt)
        attempt.branch = f"seed/{plan.iteration_id}"
        gitops.git(wt, "checkout", "--quiet", "-b", attempt.branch)
        message = f"seed: {plan.goal}\n\nIteration: {plan.iteration_id}\nGap: {plan.gap.key}\n"
        commit = gitops.commit(wt, message, ctx.config.git.user_name, ctx.config.git.user_email)
        attempt.note(stage="committed", commit=commit, branch=attempt.branch)
        faults.fault("commit")
        blocker = gitops.land_blocker(root)
        if blocker:
            return self.keep(attempt, commit, f"cannot land: {blocker}", verification)
        head_now = gitops.head(root)
        if head_now != attempt.base:
            assert head_now is not None
            rebased = gitops.git(wt, "rebase", "--quiet", head_now, check=False)
            if not rebased.ok:
                gitops.git(wt, "rebase", "--abort", check=False)
                return self.keep(
                    attempt,
                    commit,
                    f"the branch moved to {head_now[:12]} and the change does not rebase onto it",
                    verification,
                )
            commit = gitops.out(wt, "rev-parse", "HEAD")
            # the rules of the commit the branch moved to, never those of the agent's tree
            gate = freeze_gate_at(
                root, head_now, ctx.paths.gate / (wt.name + "-rebased"), ctx.config.quality
            )
            attempt.base = head_now
            moved = Baseline(
                baseline.worktree,
                head_now,
                gitops.tree_of(root, head_now),
                gate,
                baseline.measurements,
                baseline.report,
            )
            verification = self.verify(attempt, moved)
            if not verification.passed:
                return self.recorder.finish(
                    attempt,
                    IterationOutcome.ROLLBACK,
                    verification.category,
                    f"after rebasing onto {head_now[:12]}: {verification.reason}",
                    verification=verification,
                )
        collisions = [
            p
            for p in gitops.added_files(root, attempt.base, commit)
            if (root / p).exists() or (root / p).is_symlink()
        ]
        if collisions:
            return self.keep(
                attempt,
                commit,
                f"the change adds files that already exist, untracked, in your checkout: {', '.join(collisions[:5])}",
                verification,
            )
        # journalled first: if the daemon dies during or after the merge, the restarted one
        # can tell from the user's branch whether this commit landed
        attempt.note(stage="landing", commit=commit, target=gitops.current_branch(root) or "")
        merged = gitops.git(root, "merge", "--ff-only", "--quiet", commit, check=False)
        if merged.ok:
            attempt.note(stage="landed")
            faults.fault("fast-forward")
        timed(attempt, "land", t0)
        if not merged.ok:
            reason = " ".join((merged.err_text() or merged.text()).split())[:400]
            return self.keep(
                attempt, commit, f"git refused the fast-forward: {reason}", verification
            )
        # the branch is deleted with the worktree in run()'s cleanup (it is checked out there now)
        return self.recorder.finish(
            attempt,
            IterationOutcome.SUCCESS,
            None,
            verification.reason,
            commit=commit,
            verification=verification,
        )

    def keep(
        self, attempt: Attempt, commit: str, reason: str, verification: Verification
    ) -> IterationRecord:
        """MERGE_BLOCKED: keep the work as seed/kept/<id>; nothing in the checkout changes."""
        root = self.ctx.paths.root
        kept = f"seed/kept/{attempt.plan.iteration_id}"
        gitops.git(root, "branch", "--force", kept, commit)
        self._prune_kept()
        record = self.recorder.finish(
            attempt,
            IterationOutcome.MERGE_BLOCKED,
            FailureCategory.MERGE_BLOCKED,
            f"{reason}; the work is kept on branch {kept}",
            commit=commit,
            kept=kept,
            verification=verification,
        )
        return record

    def _prune_kept(self) -> None:
        keep = self.ctx.config.git.keep_branches
        kept = gitops.list_branches(self.ctx.paths.root, "seed/kept/")
        for name in kept[: max(len(kept) - keep, 0)]:
            gitops.delete_branch(self.ctx.paths.root, name)

    # -- recording ----------------------------------------------------------------


_UNCHECKED = re.compile(r"^(?P<lead>\s*[-*]\s+)\[ \](?P<rest>\s+(?P<text>\S.*?))\s*$")


def _tick_roadmap(path: Path, line: int, text: str) -> bool:
    """Turn the item's `- [ ]` into `- [x]` in the landed commit.

    The item is found at its line, or (if the agent's change moved it) at the first
    unchecked line with exactly its text; True when a line was ticked.
    """
    if not path.is_file():
        return False
    # bytes in and out: line endings and every other line stay exactly as they were
    lines = path.read_bytes().decode("utf-8", errors="surrogateescape").splitlines(keepends=True)
    candidates = [line - 1] + [i for i in range(len(lines)) if i != line - 1]
    for index in candidates:
        if not 0 <= index < len(lines):
            continue
        body = lines[index].rstrip("\r\n")
        match = _UNCHECKED.match(body)
        if match and match.group("text").strip() == text.strip():
            ending = lines[index][len(body) :]
            lines[index] = f"{match.group('lead')}[x]{match.group('rest')}{ending}"
            path.write_bytes("".join(lines).encode("utf-8", errors="surrogateescape"))
            return True
    return False

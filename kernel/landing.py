"""Inspect, verify and land: the guard on the diff, the verifier, and the fast-forward."""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from domain import (
    CheckName,
    DiffStat,
    FailureCategory,
    IterationOutcome,
    IterationRecord,
    Measurement,
    Tool,
)
from kernel import faults, gitops, guard, testmap, trees
from kernel.agentrun import watched
from kernel.analysis import Baseline, config_key, measure_cached
from kernel.attempt import Attempt, Phase, mono, timed
from kernel.context import Context
from kernel.contracts import protected_patterns
from kernel.exports import Export
from kernel.gate import freeze_gate_at
from kernel.incremental import tree_delta
from kernel.measure import failed_ids, run_pytest
from kernel.recording import Recorder
from kernel.repair import repair
from kernel.selfcheck import selfcheck
from kernel.testmap import Selection
from kernel.verify import (
    Verification,
    affected_first,
    first_suspects,
    gap_tests_first,
    verify,
)

STEADY_RUNS = 3
"""Runs in a row, each a fresh process, that the gap's own tests must pass before landing."""


def _diffstat(candidate: trees.Candidate) -> DiffStat:
    changes = candidate.changes
    return DiffStat(
        files=len(changes),
        insertions=candidate.inserted,
        deletions=candidate.deleted,
        new_files=sum(1 for c in changes if c.status == "A"),
    )


NO_ROUND = (FailureCategory.SANDBOX_VIOLATION, FailureCategory.BUDGET_EXCEEDED)
"""Refusals no repair round follows."""
FEEDBACK_CHARS = 6000


@dataclass(frozen=True)
class Retry:
    """A refused change the agent gets another round for, with the evidence to act on."""

    category: FailureCategory | None
    reason: str
    feedback: str


def _feedback(
    category: FailureCategory | None,
    reason: str,
    evidence: Sequence[str],
    verification: Verification | None,
) -> str:
    """What the agent is told in a repair round: the refusal, failed criteria, new findings
    and the failing tests' output, capped."""
    name = category.value if category is not None else "refused"
    lines = [f"{name}: {reason}"]
    if evidence:
        lines += ["", "Evidence:", *(f"- {e}" for e in evidence[:20])]
    if verification is not None:
        failed = [v for v in verification.verdicts if not v.passed]
        if failed:
            lines += ["", "Failed criteria:"]
            lines += [f"- {v.text or v.check.value}: {v.evidence}"[:500] for v in failed]
        shown = [d for d in verification.failures if d.rule != "failed" or not d.detail][:20]
        if shown:
            lines += ["", "New findings:"]
            lines += [
                f"- {d.file}:{d.line}: {d.rule}: {d.message}"[:300] if d.file else f"- {d.message}"
                for d in shown
            ]
        tests = [d for d in verification.failures if d.node_id and d.detail][:3]
        for d in tests:
            lines += ["", f"Output of {d.node_id}:", d.detail[-2000:]]
    return "\n".join(lines)[:FEEDBACK_CHARS]


class Lander:
    """Judges the agent's work and lands it on the user's branch, or keeps or discards it."""

    def __init__(self, ctx: Context, phase: Phase, recorder: Recorder) -> None:
        self.ctx = ctx
        self.phase = phase
        self.recorder = recorder

    def inspect_and_land(
        self, attempt: Attempt, baseline: Baseline, *, retry: bool = False
    ) -> IterationRecord | Retry:
        """Build the candidate tree from the worktree's files, guard it, verify it on a fresh
        export, and fast-forward the user's branch to a commit of exactly that tree.

        With `retry`, a refusal the agent can act on (anything but a sandbox violation) is
        returned as a Retry, unrecorded: the agent gets a repair round.
        """
        ctx = self.ctx
        root = ctx.paths.root
        self.phase("inspecting", "")
        t0 = mono()
        # the agent's processes are gone: from here on the kernel works with a tree id only
        store = trees.ObjectStore(
            ctx.paths.objects / attempt.worktree.name, ctx.paths.common / "objects"
        )
        candidate = trees.build_candidate(
            root,
            attempt.worktree,
            attempt.base,
            store,
            leave_out=baseline.written,
            max_file_bytes=ctx.config.guard.max_file_bytes,
        )
        faults.fault("inspect")
        changes = candidate.changes
        attempt.touched = [c.path for c in changes]
        attempt.diff = _diffstat(candidate)
        if candidate.oversized:
            timed(attempt, "inspect", t0)
            limit = ctx.config.guard.max_file_bytes
            evidence = [
                f"GROWTH_LIMIT: {path}: {size} bytes; [guard] max_file_bytes is {limit}"
                for path, size in candidate.oversized
            ]
            attempt.touched = sorted({*attempt.touched, *(p for p, _ in candidate.oversized)})
            return self._refused(
                attempt, retry, FailureCategory.GROWTH_LIMIT, evidence[0], evidence
            )
        if not changes:
            timed(attempt, "inspect", t0)
            return self.recorder.finish(
                attempt,
                IterationOutcome.NO_CHANGE,
                None,
                "the agent said it was done but changed nothing",
            )
        place = Export(root, ctx.paths.exports, candidate.tree, "candidate", store)
        try:
            fixed = repair(
                root,
                store,
                candidate.tree,
                place(),
                [c.path for c in changes if c.status != "D"],
                baseline.measurements,
                baseline.gate,
                ctx.config.quality.tool_timeout_s,
            )
            if fixed.notes:
                # the export already holds the repaired bytes: it is the repaired tree's export
                candidate = trees.rediff(root, attempt.base, candidate, fixed.tree, store)
                place.tree = fixed.tree
                changes = candidate.changes
                attempt.repairs += fixed.notes
                attempt.repaired = fixed.files
                attempt.touched = [c.path for c in changes]
                attempt.diff = _diffstat(candidate)
                if not changes:
                    return self.recorder.finish(
                        attempt,
                        IterationOutcome.NO_CHANGE,
                        None,
                        "the kernel's repairs (ruff's fixes, ruff format) undid every change",
                    )
            findings = guard.inspect_changes(
                place(),
                attempt.base,
                changes,
                attempt.plan,
                protected_patterns(ctx.config.guard.protected),
                candidate.inserted,
                candidate.deleted,
                ctx.config.guard,
                repo=root,
            )
            findings += [
                guard.Finding(FailureCategory.SANDBOX_VIOLATION, link, why)
                for link, why in trees.unsafe_links(root, candidate.tree, store)
            ]
            timed(attempt, "inspect", t0)
            if findings:
                category = guard.worst(findings)
                return self._refused(
                    attempt, retry, category, str(findings[0]), [str(f) for f in findings]
                )
            self.phase("verifying", "")
            attempt.note(stage="verifying")
            faults.fault("verification")
            t1 = mono()
            verification = self.verify(attempt, baseline, place)
            timed(attempt, "verify", t1)
        finally:
            place.close()
        late = watched(ctx, attempt)
        if late:
            attempt.integrity_evidence += late
            return self.recorder.finish(
                attempt,
                IterationOutcome.ROLLBACK,
                FailureCategory.SANDBOX_VIOLATION,
                f"during verification: {late[0]}",
                evidence=late,
            )
        if not verification.passed:
            return self._refused(
                attempt,
                retry,
                verification.category,
                verification.reason,
                verification.evidence,
                verification,
            )
        return self.land(attempt, baseline, verification, candidate.tree, store)

    def _refused(
        self,
        attempt: Attempt,
        retry: bool,
        category: FailureCategory | None,
        reason: str,
        evidence: Sequence[str],
        verification: Verification | None = None,
    ) -> IterationRecord | Retry:
        """ROLLBACK, or a repair round when one is left and the agent can act on the refusal."""
        if retry and category not in NO_ROUND:
            return Retry(category, reason, _feedback(category, reason, evidence, verification))
        return self.recorder.finish(
            attempt,
            IterationOutcome.ROLLBACK,
            category,
            reason,
            evidence=evidence if verification is None else (),
            verification=verification,
        )

    def verify(self, attempt: Attempt, baseline: Baseline, place: Export) -> Verification:
        """Measure the candidate's export with the baseline's gate and compare."""
        ctx = self.ctx
        root = ctx.paths.root
        work = ctx.paths.runs / "pytest"
        timeout = ctx.config.quality.tool_timeout_s
        nodes = sorted(
            {a for c in attempt.plan.criteria if c.check == CheckName.PYTEST for a in c.args}
        )
        selection = self._affected(attempt, baseline, place)
        argv = [*nodes, *(a for a in selection.argv() if a not in nodes)] if selection else nodes
        passed_first = False
        if argv:
            # the gap's own tests and the tests that ran a changed file first: a candidate
            # that breaks one is refused in seconds, not after the whole suite
            first = run_pytest(place(), ctx.target, work, timeout, argv)
            early = gap_tests_first(attempt.plan, first)
            if early is None:
                early = self._confirmed(first, baseline, place)
            if early is not None:
                return early
            passed_first = (
                bool(nodes)
                and first.ran
                and all(n in first.collected for n in nodes)
                and not failed_ids(first) & set(nodes)
            )
        after, _ = measure_cached(
            ctx, place, place.tree, baseline.gate, work, related=(baseline.tree,)
        )

        def rerun(nodes: Sequence[str]) -> tuple[set[str], set[str]]:
            base = Export(root, ctx.paths.exports, baseline.tree, "rerun-base")
            try:
                before = run_pytest(base(), ctx.target, work, timeout, nodes)
                again = run_pytest(place(), ctx.target, work, timeout, nodes)
            finally:
                base.close()
            return failed_ids(before), failed_ids(again)

        def boot() -> tuple[bool, str]:
            return selfcheck(place(), ctx.paths.state / "selfcheck.log", ctx.target.jail)

        wants_boot = any(c.check == CheckName.SELFCHECK for c in attempt.plan.criteria)
        verification = verify(
            attempt.plan,
            baseline.measurements,
            after,
            attempt.touched,
            place(),
            rerun=rerun,
            selfcheck=boot if wants_boot else None,
        )
        flipped = [v for v in verification.verdicts if v.check == CheckName.PYTEST and not v.passed]
        if passed_first and flipped and not verification.passed:
            # the gap's tests passed on their own and failed in the suite: the same tree flips
            verification.category = FailureCategory.FLAKY_TEST
            verification.evidence.insert(
                0,
                f"flaky: the gap's tests passed in their own run, then failed: {flipped[0].evidence}",
            )
            verification.reason = verification.evidence[0]
        if verification.passed:
            verification = self._steady(attempt, place, verification)
        return verification

    def _affected(self, attempt: Attempt, baseline: Baseline, place: Export) -> Selection | None:
        """The tests that ran a file the candidate changes, by the test map (None: no map)."""
        ctx = self.ctx
        if not ctx.config.analysis.test_map:
            return None
        found = testmap.load(ctx.paths.state, config_key(ctx, baseline.gate))
        if found is None:
            return None
        changed = set(attempt.touched)
        if found.tree != baseline.tree:  # an older map: what changed since counts too
            older = tree_delta(ctx.paths.root, found.tree, baseline.tree)
            if older is None:
                return None
            changed |= {*older.changed, *older.deleted}
        tree = place()
        gone = sorted(p for p in changed if not (tree / p).exists())
        return testmap.select(found, sorted(changed - set(gone)), gone, strict=False)

    def _confirmed(
        self, first: Measurement, baseline: Baseline, place: Export
    ) -> Verification | None:
        """Refuse on the first pass's new failures once they are confirmed (see affected_first)."""
        suspects = first_suspects(first, baseline.measurements.get(Tool.PYTEST))
        if not suspects:
            return None
        ctx = self.ctx
        work = ctx.paths.runs / "pytest"
        timeout = ctx.config.quality.tool_timeout_s
        base = Export(ctx.paths.root, ctx.paths.exports, baseline.tree, "first-base")
        try:
            with ThreadPoolExecutor(max_workers=2) as pool:
                on_base = pool.submit(run_pytest, base(), ctx.target, work, timeout, suspects)
                again = pool.submit(run_pytest, place(), ctx.target, work, timeout, suspects)
                return affected_first(first, suspects, on_base.result(), again.result())
        finally:
            base.close()

    def _steady(self, attempt: Attempt, place: Export, verification: Verification) -> Verification:
        """The gap's own tests pass three times in a row, each in a fresh process."""
        nodes = sorted(
            {
                d.node_id
                for d in attempt.plan.gap.evidence
                if d.node_id and d.rule in ("failed", "error")
            }
        )
        if not nodes:
            return verification
        ctx = self.ctx
        for run in range(1, STEADY_RUNS + 1):
            m = run_pytest(
                place(),
                ctx.target,
                ctx.paths.runs / "pytest",
                ctx.config.quality.tool_timeout_s,
                nodes,
            )
            failing = failed_ids(m)
            missing = [n for n in nodes if n not in m.collected]
            if not m.ran or failing or missing:
                what = ", ".join(sorted(failing) or missing) or m.error[:200]
                return Verification(
                    passed=False,
                    category=FailureCategory.FLAKY_TEST,
                    reason=f"the gap's tests did not pass {STEADY_RUNS} runs in a row (run {run}: {what})",
                    verdicts=verification.verdicts,
                    evidence=[*verification.evidence, f"run {run} of {STEADY_RUNS}: {what}"],
                )
        verification.evidence.append(
            f"the gap's {len(nodes)} test(s) passed {STEADY_RUNS} more runs in fresh processes"
        )
        return verification

    def land(
        self,
        attempt: Attempt,
        baseline: Baseline,
        verification: Verification,
        tree: str,
        store: trees.ObjectStore,
    ) -> IterationRecord:
        """Commit exactly the verified tree and fast-forward the user's branch (or keep it)."""
        ctx = self.ctx
        plan = attempt.plan
        root = ctx.paths.root
        self.phase("landing", "")
        t0 = mono()
        if plan.gap.roadmap is not None:
            tree = _tick_roadmap(root, tree, store, plan.gap.roadmap.line, plan.gap.roadmap.text)
        message = f"seed: {plan.goal}\n\nIteration: {plan.iteration_id}\nGap: {plan.gap.key}\n"
        identity = (ctx.config.git.user_name, ctx.config.git.user_email)
        commit = trees.commit_tree(root, tree, attempt.base, message, *identity, store)
        attempt.branch = f"seed/{plan.iteration_id}"
        gitops.git(root, "branch", "--force", attempt.branch, commit)
        attempt.note(stage="committed", commit=commit, branch=attempt.branch)
        faults.fault("commit")
        blocker = gitops.land_blocker(root)
        if blocker:
            return self.keep(attempt, commit, f"cannot land: {blocker}", verification)
        head_now = gitops.head(root)
        if head_now != attempt.base:
            assert head_now is not None
            # in the kernel's own store: no merge driver or attribute of the repository runs;
            # the merge base is the commit's parent, attempt.base (git 2.39 has no --merge-base)
            merged_tree = gitops.git(
                root,
                "merge-tree",
                "--write-tree",
                head_now,
                commit,
                check=False,
                env=store.env(),
            )
            if not merged_tree.ok:
                return self.keep(
                    attempt,
                    commit,
                    f"the branch moved to {head_now[:12]} and the change does not rebase onto it",
                    verification,
                )
            new_tree = merged_tree.text().split()[0]
            # the rules of the commit the branch moved to, never those of the agent's tree
            gate = freeze_gate_at(
                root,
                head_now,
                ctx.paths.gate / (attempt.worktree.name + "-rebased"),
                ctx.config.quality,
            )
            attempt.base = head_now
            moved = Baseline(
                baseline.worktree,
                head_now,
                gitops.tree_of(root, head_now),
                gate,
                baseline.measurements,
                baseline.report,
                written=baseline.written,
            )
            place = Export(root, ctx.paths.exports, new_tree, "rebased", store)
            try:
                verification = self.verify(attempt, moved, place)
            finally:
                place.close()
            if not verification.passed:
                return self.recorder.finish(
                    attempt,
                    IterationOutcome.ROLLBACK,
                    verification.category,
                    f"after rebasing onto {head_now[:12]}: {verification.reason}",
                    verification=verification,
                )
            commit = trees.commit_tree(root, new_tree, head_now, message, *identity, store)
            gitops.git(root, "branch", "--force", attempt.branch, commit)
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

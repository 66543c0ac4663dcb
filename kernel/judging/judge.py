"""Judging the agent's work: the candidate tree built from its files, repaired, guarded and
verified on a fresh export. The Verdict is Passed (the tree to land), a Retry, or an Ending."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from domain import (
    CheckName,
    DiffStat,
    FailureCategory,
    IterationOutcome,
    Measurement,
    Measurements,
    Tool,
)
from kernel import faults
from kernel.host.context import Context
from kernel.host.selfcheck import selfcheck_of
from kernel.isolation import gitops, jails, trees
from kernel.isolation.exports import Export
from kernel.judging import basetests, guard, uncovered
from kernel.judging.iteration import Ending, Iteration, Phase, mono
from kernel.judging.repair import repair
from kernel.judging.verify import (
    BaseRun,
    Verification,
    affected_first,
    first_suspects,
    gap_tests_first,
    verify,
)
from kernel.measuring import testmap
from kernel.measuring.baseline import Baseline, config_key, measure_cached
from kernel.measuring.incremental import tree_delta
from kernel.measuring.measure import (
    IMPORTED,
    Branches,
    failed_ids,
    run_lines,
    run_pytest,
    untaken,
)
from kernel.measuring.testmap import Selection

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


def store_of(ctx: Context, it: Iteration) -> trees.ObjectStore:
    """The kernel's object store of the iteration's checkout (its candidate trees)."""
    return trees.ObjectStore(ctx.paths.objects / it.worktree.name, ctx.paths.common / "objects")


def build_candidate(
    ctx: Context, it: Iteration, baseline: Baseline
) -> tuple[trees.Candidate, trees.ObjectStore]:
    """The agent's tree from its worktree's files, in the iteration's own object store."""
    store = store_of(ctx, it)
    candidate = trees.build_candidate(
        ctx.paths.root,
        it.worktree,
        it.base,
        store,
        leave_out=baseline.written,
        max_file_bytes=ctx.config.guard.max_file_bytes,
    )
    return candidate, store


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


@dataclass(frozen=True)
class Passed:
    """A candidate the kernel verified: the tree to land, in the kernel's own object store."""

    verification: Verification
    tree: str
    store: trees.ObjectStore


Verdict = Passed | Retry | Ending
"""What judging returns: land it, give the agent another round, or the iteration ends."""


class Judge:
    """Judges the agent's work; it never touches the user's checkout."""

    def __init__(self, ctx: Context, phase: Phase) -> None:
        self.ctx = ctx
        self.phase = phase

    def judge(self, it: Iteration, baseline: Baseline, *, retry: bool = False) -> Verdict:
        """Build the candidate tree from the worktree's files, guard it and verify it on a
        fresh export.

        With `retry`, a refusal the agent can act on (anything but a sandbox violation) is
        returned as a Retry: the agent gets a repair round.
        """
        ctx = self.ctx
        self.phase("inspecting", it.used())
        t0 = mono()
        # the agent's processes are gone: from here on the kernel works with a tree id only
        candidate, store = build_candidate(ctx, it, baseline)
        faults.fault("inspect")
        it.agent_tree = candidate.tree  # as the agent left it: the kernel's repairs come later
        _took(it, candidate)
        if candidate.oversized:
            it.timed("inspect", t0)
            return self._oversized(it, candidate, retry)
        if not candidate.changes:
            it.timed("inspect", t0)
            return _unchanged(it)
        place = Export(ctx.paths.root, ctx.paths.exports, candidate.tree, "candidate", store)
        try:
            judged = self._repaired_and_guarded(it, baseline, candidate, place, store, retry, t0)
            if not isinstance(judged, Verification):
                return judged
        finally:
            place.close()
        late = it.watched(ctx.paths.root, ctx.target.python)
        if late:
            it.integrity_evidence += late
            return Ending(
                IterationOutcome.ROLLBACK,
                FailureCategory.SANDBOX_VIOLATION,
                f"during verification: {late[0]}",
                evidence=late,
            )
        if not judged.passed:
            return _refused(retry, judged.category, judged.reason, judged.evidence, judged)
        return Passed(judged, place.tree, store)

    def _oversized(self, it: Iteration, candidate: trees.Candidate, retry: bool) -> Verdict:
        limit = self.ctx.config.guard.max_file_bytes
        evidence = [
            f"GROWTH_LIMIT: {path}: {size} bytes; [guard] max_file_bytes is {limit}"
            for path, size in candidate.oversized
        ]
        it.touched = sorted({*it.touched, *(p for p, _ in candidate.oversized)})
        return _refused(retry, FailureCategory.GROWTH_LIMIT, evidence[0], evidence)

    def _repaired_and_guarded(
        self,
        it: Iteration,
        baseline: Baseline,
        candidate: trees.Candidate,
        place: Export,
        store: trees.ObjectStore,
        retry: bool,
        t0: float,
    ) -> Verification | Verdict:
        """The kernel's repairs, then the guard, then verification (the export stays open)."""
        ctx = self.ctx
        root = ctx.paths.root
        repaired = self._repair(it, baseline, candidate, place, store)
        if isinstance(repaired, Ending):
            return repaired
        candidate = repaired
        findings = guard.inspect_tree(
            root,
            place(),
            it.base,
            candidate.changes,
            it.plan,
            ctx.config.guard,
            (candidate.inserted, candidate.deleted),
            (candidate.tree, store),
        )
        it.timed("inspect", t0)
        if findings:
            category = guard.worst(findings)
            return _refused(retry, category, str(findings[0]), [str(f) for f in findings])
        self.phase("verifying", "")
        it.note(stage="verifying")
        faults.fault("verification")
        t1 = mono()
        verification = self.verify(it, baseline, place)
        it.timed("verify", t1)
        return verification

    def _repair(
        self,
        it: Iteration,
        baseline: Baseline,
        candidate: trees.Candidate,
        place: Export,
        store: trees.ObjectStore,
    ) -> trees.Candidate | Ending:
        """The candidate after the kernel's fixers (ruff's fixes, ruff format), on the export."""
        root = self.ctx.paths.root
        fixed = repair(
            root,
            store,
            candidate.tree,
            place(),
            [c.path for c in candidate.changes if c.status != "D"],
            baseline.measurements,
            baseline.gate,
            self.ctx.config.quality.tool_timeout_s,
            it.base,
        )
        if not fixed.notes:
            return candidate
        # the export already holds the repaired bytes: it is the repaired tree's export
        candidate = trees.rediff(root, it.base, candidate, fixed.tree, store)
        place.tree = fixed.tree
        it.repairs += fixed.notes
        it.repaired = fixed.files
        _took(it, candidate)
        if not candidate.changes:
            return Ending(
                IterationOutcome.NO_CHANGE,
                None,
                "the kernel's repairs (ruff's fixes, ruff format) undid every change",
            )
        return candidate

    def verify(self, it: Iteration, baseline: Baseline, place: Export) -> Verification:
        """Measure the candidate's export with the baseline's gate and compare."""
        ctx = self.ctx
        work = ctx.paths.runs / "pytest"
        timeout = ctx.config.quality.tool_timeout_s
        nodes = sorted({a for c in it.plan.criteria if c.check == CheckName.PYTEST for a in c.args})
        selection = self._affected(it, baseline, place)
        argv = [*nodes, *(a for a in selection.argv() if a not in nodes)] if selection else nodes
        if argv:
            # the gap's own tests and the tests that ran a changed file first: a candidate
            # that breaks one is refused in seconds, not after the whole suite
            first = run_pytest(place(), ctx.target, work, timeout, argv)
            # a confirmed regression first; the gap's tests still failing end it here only when
            # the tests that ran a changed file ran too (else the whole suite says what broke)
            early = self._confirmed(first, baseline, place)
            if early is None and selection is not None:
                early = gap_tests_first(it.plan, first, baseline.measurements.get(Tool.PYTEST))
            if early is not None:
                return early
        after, _ = measure_cached(
            ctx, place, place.tree, baseline.gate, work, related=(baseline.tree,)
        )
        judged, tests = self._judged_place(it, baseline, place, after.get(Tool.PYTEST))
        edited = frozenset(p for p in it.touched if p in tests)
        store = place.store or trees.ObjectStore(
            self.ctx.paths.objects / it.worktree.name, self.ctx.paths.common / "objects"
        )
        root, pytest = self.ctx.paths.root, baseline.measurements.get(Tool.PYTEST)
        moved = basetests.renamed_tests(root, baseline.tree, place.tree, store, edited)
        docs = basetests.edited_doctests(root, baseline.tree, place.tree, store, pytest)
        try:
            return self._verified(it, baseline, place, after, (judged, edited, moved, docs))
        finally:
            if judged is not place:
                judged.close()

    def _judged_place(
        self, it: Iteration, baseline: Baseline, place: Export, own: Measurement | None
    ) -> tuple[Export, set[str]]:
        """The export where the candidate's code meets the base's own test files (the
        candidate's own when it touched none of them: one run serves both), and those files."""
        ctx = self.ctx
        store = place.store or trees.ObjectStore(
            ctx.paths.objects / it.worktree.name, ctx.paths.common / "objects"
        )
        found = (
            testmap.load(ctx.paths.state, config_key(ctx, baseline.gate))
            if ctx.config.analysis.test_map
            else None
        )
        tests = basetests.base_test_files(
            ctx.paths.root,
            baseline.tree,
            baseline.measurements.get(Tool.PYTEST),
            found,
            among=it.touched,
        )
        tree = basetests.judged_tree(
            ctx.paths.root,
            baseline.tree,
            place.tree,
            store,
            tests,
            own.collected if own is not None else (),
        )
        if tree == place.tree:
            return place, tests
        return Export(ctx.paths.root, ctx.paths.exports, tree, "base-tests", store), tests

    def _verified(
        self,
        it: Iteration,
        baseline: Baseline,
        place: Export,
        after: Measurements,
        base_tests: tuple[Export, frozenset[str], frozenset[str], frozenset[str]],
    ) -> Verification:
        """The comparison: the ratchet on the candidate's own tree, the base's own tests on
        the candidate's code, the criteria, then the gap's tests three more times."""
        ctx = self.ctx
        work = ctx.paths.runs / "pytest"
        timeout = ctx.config.quality.tool_timeout_s
        judged, edited, moved, docs = base_tests
        own = after.get(Tool.PYTEST)
        base_m = (
            own
            if judged is place or own is None
            else run_pytest(judged(), ctx.target, work, timeout)
        )
        gap = _gap_nodes(it)

        def rerun(nodes: Sequence[str]) -> tuple[set[str], set[str]]:
            # like for like: the whole suite again, as the suspects failed in it
            again = run_pytest(place(), ctx.target, work, timeout)
            failing = {n for n in nodes if n not in again.passed}
            if not failing - set(gap):  # the gap's tests fail on the base by definition
                return failing, set()
            base = Export(ctx.paths.root, ctx.paths.exports, baseline.tree, "rerun-base")
            try:
                on_base = run_pytest(base(), ctx.target, work, timeout)
            finally:
                base.close()
            return failing, {n for n in failing if n not in on_base.passed}

        def boot() -> tuple[bool, str]:
            jail = jails.module_jail(ctx.paths, ctx.config.guard)
            return selfcheck_of(ctx.paths, place.tree, place.store, jail)

        wants_boot = any(c.check == CheckName.SELFCHECK for c in it.plan.criteria)
        verification = verify(
            it.plan,
            baseline.measurements,
            after,
            it.touched,
            place(),
            rerun=rerun,
            selfcheck=boot if wants_boot else None,
            base_run=BaseRun(base_m, gap, edited, moved, docs) if base_m is not None else None,
        )
        if judged is not place:
            verification.evidence.append(
                "the candidate's code was run against the base's own test files in a second export"
            )
        if verification.passed:
            verification = self._steady(it, judged, verification)
        if verification.passed:
            verification.uncovered = self._uncovered(it, baseline, place, own)
        return verification

    def _uncovered(
        self, it: Iteration, baseline: Baseline, place: Export, own: Measurement | None
    ) -> list[str]:
        """The changed places of a passed candidate that no test that passed ran: judged on
        the candidate's own tree, with a traced run of only the tests that can reach them."""
        ctx = self.ctx
        store = place.store or trees.ObjectStore(
            ctx.paths.objects / it.worktree.name, ctx.paths.common / "objects"
        )
        root = ctx.paths.root
        sources = {
            p: data
            for p in it.touched
            if not guard.is_test_path(p)  # code is what the tests ran, of any name (below)
            for data in [gitops.blob_at(root, place.tree, p, store.env())]
            if data is not None
        }
        changed = uncovered.changed_lines(root, it.base, place.tree, store, sorted(sources))
        changed = [c for c in changed if c.lines or c.cuts]
        if not changed:
            return []
        ran: dict[str, frozenset[int]] = {}
        imported: dict[str, frozenset[int]] = {}
        loaded: set[str] = set()
        branches: Branches = {}
        vouching: set[str] = set()
        # fewer tests than all that reach a line only leave it unvouched: no cap on the share
        selection = self._affected(it, baseline, place, capped=False)
        # the gap's own tests too: failing at the base before they reached the code (a call
        # with a new argument), the map never saw them run a changed file
        nodes = list(_gap_nodes(it))
        reached = selection is None or bool(selection.nodes or selection.files or nodes)
        if own is not None and own.passed and reached:
            # a run of its own (sys.settrace, which tests can see, never judges a change):
            # the gap's tests and those the map says ran a changed file, or the whole suite
            argv = (
                [*nodes, *(a for a in selection.argv() if a not in nodes)]
                if selection is not None
                else []
            )
            passed, lines = run_lines(
                place(),
                ctx.target,
                ctx.config.quality.tool_timeout_s,
                argv,
                [c.path for c in changed],
                branches,
                {c.path: c.lines | c.cuts for c in changed},
            )
            vouching = set(passed) & set(own.passed)  # passed in the judged run and in this one
            loaded = {path for per_file in lines.values() for path, n in per_file.items() if n}
            if vouching:
                imported = dict(lines.get(IMPORTED, {}))
            for node, per_file in lines.items():
                if node in vouching:
                    for path, numbers in per_file.items():
                        ran[path] = ran.get(path, frozenset()) | numbers
        # a file not named *.py is code when a test process ran code from it (a loader)
        code = {p for p in sources if p.endswith(".py") or p in loaded}
        judged = [c for c in changed if c.path in code]
        lines = {c.path: c.lines for c in judged}
        return [
            *uncovered.not_run(judged, sources, ran, imported),
            *untaken(branches, vouching, lines),
        ]

    def _affected(
        self, it: Iteration, baseline: Baseline, place: Export, *, capped: bool = True
    ) -> Selection | None:
        """The tests that ran a file the candidate changes, by the test map (None: no map)."""
        ctx = self.ctx
        if not ctx.config.analysis.test_map:
            return None
        found = testmap.load(ctx.paths.state, config_key(ctx, baseline.gate))
        if found is None:
            return None
        changed = set(it.touched)
        if found.tree != baseline.tree:  # an older map: what changed since counts too
            older = tree_delta(ctx.paths.root, found.tree, baseline.tree)
            if older is None:
                return None
            changed |= {*older.changed, *older.deleted}
        tree = place()
        gone = sorted(p for p in changed if not (tree / p).exists())
        return testmap.select(found, sorted(changed - set(gone)), gone, strict=False, capped=capped)

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

    def _steady(self, it: Iteration, place: Export, verification: Verification) -> Verification:
        """The gap's own tests pass three times in a row, each in a fresh process, against the
        base's own test files."""
        nodes = list(_gap_nodes(it))
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
            if m.tampering:
                said = [t.what for t in m.tampering]
                return Verification(
                    passed=False,
                    category=FailureCategory.SANDBOX_VIOLATION,
                    reason=f"run {run} of {STEADY_RUNS} of the gap's tests: {said[0]}",
                    verdicts=verification.verdicts,
                    evidence=[*verification.evidence, *said],
                )
            failing = failed_ids(m)
            missing = [n for n in nodes if n not in m.passed]
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


def _gap_nodes(it: Iteration) -> tuple[str, ...]:
    """The gap's failing tests (the kernel's gap, never the planner's words)."""
    gap = it.plan.gap
    return tuple(
        sorted({d.node_id for d in gap.evidence if d.node_id and d.rule in ("failed", "error")})
    )


def _unchanged(it: Iteration) -> Ending:
    """A run that changed nothing: NO_CHANGE, unless the tool itself refused something (a
    permission denial, its sandbox helper, an auth error, a turn limit): then AGENT_ERROR,
    quoting the refusal from the log the kernel captured."""
    refused = it.agent.refusals if it.agent is not None else ()
    if not refused:
        return Ending(
            IterationOutcome.NO_CHANGE, None, "the agent said it was done but changed nothing"
        )
    return Ending(
        IterationOutcome.FAILURE,
        FailureCategory.AGENT_ERROR,
        f"the agent changed nothing: its tool refused: {refused[0][:300]}",
        evidence=refused,
    )


def _took(it: Iteration, candidate: trees.Candidate) -> None:
    """Note what the candidate changes (the record's touched files and diff)."""
    it.touched = [c.path for c in candidate.changes]
    it.diff = _diffstat(candidate)


def _refused(
    retry: bool,
    category: FailureCategory | None,
    reason: str,
    evidence: Sequence[str],
    verification: Verification | None = None,
) -> Retry | Ending:
    """ROLLBACK, or a repair round when one is left and the agent can act on the refusal."""
    if retry and category not in NO_ROUND:
        return Retry(category, reason, _feedback(category, reason, evidence, verification))
    return Ending(
        IterationOutcome.ROLLBACK,
        category,
        reason,
        evidence=evidence if verification is None else (),
        verification=verification,
    )

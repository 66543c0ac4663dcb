"""The fitness of a generation of the planning modules: how well they plan cases whose
answer is known.

The kernel owns the cases, the replay and the scoring; modules only answer `analyze` and
`plan` requests as they do in an iteration, in the module server's sandbox. A case is an
earlier iteration of this project (its base commit, the gaps the planner got, the files
its landed change touched) or one of a corpus the kernel keeps. Each plan is checked and
clamped as the loop checks and clamps it, then scored against what landed: was every fixed
file allowed (recall), where did the suspects put the fixed source file (top-1, top-3), how
wide was an allowlist that held the fix (precision), was the plan valid, how long its prompt,
and did it work on the case's gap. Old trees are never measured again: the planner reads the base's files.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from domain import (
    AgentContext,
    GapReport,
    IterationPlan,
    IterationRecord,
    ProjectState,
)
from domain.fitness import CaseScore, Fitness, FitnessCase, FitnessFigures
from kernel.bounds import FITNESS_REQUEST_S
from kernel.contracts import matches_any, protected_patterns
from kernel.errors import HostError
from kernel.fsutil import remove_any
from kernel.host import answers
from kernel.host.context import Context
from kernel.host.host import ModuleHost, frozen_code, own_code
from kernel.isolation import agentgit, gitops, jails, trees
from kernel.judging.guard import clamp_plan, is_test_path
from kernel.loop import corpus


def score(
    case: FitnessCase,
    plan: IterationPlan | None,
    error: str,
    files: Sequence[str],
    prompt: str = "",
) -> CaseScore:
    """One plan's worth for its case (`files`: the case's tree; `prompt`: the agent's)."""
    if plan is None:
        return CaseScore(id=case.id, part=case.part, error=error or "no plan")
    allowed = [f for f in files if _allows(plan, f)]
    fixed = case.fixed
    hit = [f for f in fixed if _allows(plan, f)]
    sources = [f for f in fixed if not is_test_path(f)]
    places = [plan.suspect_files.index(f) + 1 for f in sources if f in plan.suspect_files]
    return CaseScore(
        id=case.id,
        part=case.part,
        valid=True,
        chosen=plan.gap.key == case.gap,
        recall=len(hit) == len(fixed) if fixed else None,
        rank=(min(places) if places else 0) if sources else None,
        allowed=len(allowed),
        precision=_precision(fixed, hit, allowed),
        prompt_chars=len(prompt),
    )


def _allows(plan: IterationPlan, path: str) -> bool:
    """Whether the guard lets the plan's agent change a file: an empty allowlist allows every
    file (as the guard reads it), and a forbidden one never."""
    inside = not plan.allowed_paths or matches_any(path, plan.allowed_paths)
    return inside and not matches_any(path, plan.forbidden_paths)


def _precision(fixed: Sequence[str], hit: Sequence[str], allowed: Sequence[str]) -> float | None:
    """The fix's share of what the allowlist allows (the fix's new files counted in), when
    it allows the whole fix; else 0: were a miss's fixed share counted, a planner that allows
    only the tests would gain precision while it loses every source fix."""
    if not fixed:
        return None
    if len(hit) < len(fixed):
        return 0.0
    return len(fixed) / len({*allowed, *hit})


def figures(scores: Sequence[CaseScore]) -> FitnessFigures:
    """The figures over these scores (recall, ranks and precision over the landed cases)."""
    landed = [s for s in scores if s.recall is not None]
    ranked = [s for s in scores if s.rank is not None]
    valid = [s for s in scores if s.valid]
    return FitnessFigures(
        cases=len(scores),
        landed=len(landed),
        ranked=len(ranked),
        valid=_share(valid, scores),
        chosen=_share([s for s in scores if s.chosen], scores),
        recall=_share([s for s in landed if s.recall], landed),
        top1=_share([s for s in ranked if s.rank == 1], ranked),
        top3=_share([s for s in ranked if s.rank and s.rank <= 3], ranked),
        precision=_mean([s.precision or 0.0 for s in landed]),
        prompt_chars=_mean([float(s.prompt_chars) for s in valid]),
    )


def fitness(modules: str, scores: Sequence[CaseScore]) -> Fitness:
    """The figures over all scores and by part."""
    parts = sorted({s.part for s in scores})
    return Fitness(
        modules=modules,
        figures=figures(scores),
        parts={p: figures([s for s in scores if s.part == p]) for p in parts},
        scores=tuple(scores),
    )


def cases_of(
    ctx: Context,
    tell: Callable[[str], None] = lambda _: None,
    parts: Collection[str] = (),
    only: Collection[str] = (),
) -> tuple[list[FitnessCase], list[IterationRecord], dict[str, str]]:
    """Every case (this project's history, the corpus shipped in the kernel, the held-back
    one; `parts`: only these; `only`: only the cases of these ids), the project's records,
    and the corpus cases' texts."""
    records = list(ctx.store.iter_all())
    cases = corpus.history_cases(records, lambda i: corpus.kept(ctx.paths, i))
    cases = cases if not parts or "history" in parts else []
    blobs: dict[str, str] = {}
    for path, part in ((corpus.SHIPPED, "shipped"), (corpus.held_back(ctx.paths), "held-back")):
        if parts and part not in parts:
            continue
        read = corpus.read(path, part)
        for problem in read.problems:
            tell(f"left out: {problem}")
        cases += read.cases
        blobs |= read.blobs
    cases = [c for c in cases if c.id in only] if only else cases
    return cases, records, blobs


def measure(
    ctx: Context,
    modules: str = "",
    tell: Callable[[str], None] = lambda _: None,
    parts: Collection[str] = (),
    only: Collection[str] = (),
) -> Fitness:
    """The fitness of the modules seed runs (""), of a folder holding a copy of seed (its
    `modules/` and `domain/`), or of a commit of seed's own repository, over every case (or
    the `parts` and cases named)."""
    cases, records, blobs = cases_of(ctx, tell, parts, only)
    folder = Path(modules).expanduser() if modules else ctx.paths.seed_home
    if folder.is_dir():
        if not (folder / "modules").is_dir() or not (folder / "domain").is_dir():
            raise HostError(f"--modules {modules}: a folder without modules/ and domain/")
        name = "working" if not modules else str(folder.resolve())
        code = own_code(ctx.paths) if not modules else frozen_code(ctx.paths, folder=folder)
    else:
        repo = ctx.paths.seed_home
        found = gitops.git(
            repo, "rev-parse", "--verify", "--quiet", f"{modules}^{{commit}}", check=False
        )
        if not found.ok:
            raise HostError(
                f"--modules {modules}: neither a folder nor a commit of seed's repository {repo}"
            )
        name = found.text().strip()[:12]
        code = frozen_code(ctx.paths, found.text().strip())
    # a copy of the packages, made and bound in the sandbox as the daemon makes its own
    try:
        return fitness(name, Replay(ctx, code, blobs).run(cases, records, tell))
    finally:
        remove_any(code)


def _share(some: Sequence[object], of: Sequence[object]) -> float:
    return len(some) / len(of) if of else 0.0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


class Replay:
    """The planning modules of one tree, replayed over cases in the module server's sandbox."""

    def __init__(self, ctx: Context, code: Path, blobs: Mapping[str, str] | None = None) -> None:
        self.ctx = ctx
        self.blobs = blobs or {}
        """The texts of the corpus cases' files."""
        # the live module server's log: even the name of its stderr is the same
        log = ctx.paths.state / "host.log"
        # a generation that hangs is as bad as one that fails, and much slower: a request of
        # the replay waits FITNESS_REQUEST_S at most (the case is then invalid)
        self.host = ModuleHost(
            code,
            log,
            timeout_s=FITNESS_REQUEST_S,
            jail=jails.module_jail(ctx.paths, ctx.config.guard),
        )

    def run(
        self,
        cases: Sequence[FitnessCase],
        records: Sequence[IterationRecord],
        tell: Callable[[str], None] = lambda _: None,
    ) -> list[CaseScore]:
        """Each case's score; a host that does not start scores every case invalid."""
        try:
            self.host.start()
            # started as the daemon starts it: every agent adapter loaded (code that runs when
            # an adapter is imported runs before the cases, as it would before a plan) and the
            # backend chosen as the daemon's config names it
            listed, _ = self.host.agents()
            with contextlib.suppress(HostError):
                self.host.choose_backend(
                    self.ctx.config.agent.backend, self.ctx.config_path.name, listed
                )
        except HostError as exc:
            self.host.stop()
            return [CaseScore(id=c.id, part=c.part, error=str(exc)) for c in cases]
        try:
            scores: list[CaseScore] = []
            for case in cases:
                scores.append(self._case(case, records[: case.earlier]))
                tell(f"{case.id}: {_line(scores[-1])}")
            return scores
        finally:
            self.host.stop()

    def _case(self, case: FitnessCase, earlier: Sequence[IterationRecord]) -> CaseScore:
        ctx = self.ctx
        root = ctx.paths.root
        # named as the loop names the iteration's checkout: nothing tells a replay from a plan
        name = f"wt-{os.getpid()}-{datetime.now(UTC):%Y%m%d%H%M%S%f}"
        if case.base:
            checkout = agentgit.create(ctx.paths, name, case.base)
            files = [p for _, _, p in trees.entries(root, gitops.tree_of(root, case.base))]
        else:  # a corpus case: its files, written by the kernel where the planner reads
            checkout = ctx.paths.checkouts / name
            files = corpus.materialise(case, self.blobs, checkout)
        try:
            try:
                plan = self._plan(case, earlier, checkout, files)
                prompt = self._prompt(plan, checkout) if plan is not None else ""
            except HostError as exc:
                return score(case, None, str(exc), files)
            return score(case, plan, "", files, prompt)
        finally:
            agentgit.remove(checkout)

    def _report(self, case: FitnessCase, files: Sequence[str]) -> GapReport:
        """The planner's report: the analysers' ranking replayed on the kept input (the
        gaps passed over then left out again), else the report as it was."""
        if case.analysis is None:
            return case.report
        ranked = self.host.analyze(case.analysis)
        ranked = answers.real_files(ranked, files)
        skipped = set(case.report.skipped)
        return ranked.model_copy(
            update={
                "gaps": tuple(g for g in ranked.gaps if g.key not in skipped),
                "skipped": tuple(sorted(set(ranked.skipped) | skipped)),
            }
        )

    def _prompt(self, plan: IterationPlan, checkout: Path) -> str:
        """The prompt an agent would get for the plan (the planner's, as a command agent gets it)."""
        context = AgentContext(
            worktree=str(checkout),
            seed_home=str(self.ctx.paths.seed_home),
            python=sys.executable,
            ruff="ruff",
            command=("true",),
        )
        spec = self.host.agent_spec("command", plan, context)
        return spec.prompt if spec is not None else ""

    def state(self, case: FitnessCase, checkout: Path) -> ProjectState:
        """What the planner may know, as the loop gives it now: the time is this moment and
        the checkout is named as an iteration's, so that a generation cannot tell a replay
        from a plan that runs (and plan well only when it is measured)."""
        ctx = self.ctx
        root = ctx.paths.root
        return ProjectState(
            now=datetime.now(UTC).replace(microsecond=0),
            next_sequence=case.sequence,
            root_name=root.name,
            worktree=str(checkout),
            branch=gitops.current_branch(root),
            head=case.base or gitops.head(root),
            backend=ctx.config.agent.backend,
            fingerprint=ctx.store.fingerprint,
            tallies=tuple(ctx.store.tallies()),
            protected=protected_patterns(ctx.config.guard.protected),
            pyright_strict=ctx.target.strict,
            selfhost=ctx.paths.selfhost,
        )

    def _plan(
        self,
        case: FitnessCase,
        earlier: Sequence[IterationRecord],
        checkout: Path,
        files: Sequence[str],
    ) -> IterationPlan | None:
        """The plan as the loop would have run it: checked and clamped."""
        ctx = self.ctx
        report = self._report(case, files)
        protected = protected_patterns(ctx.config.guard.protected)
        state = self.state(case, checkout)
        plan = self.host.plan(report, corpus.seen_before(earlier, report), state)
        if plan is None:
            return None
        expected = f"iter-{case.sequence:04d}-{state.now:%Y%m%d-%H%M%S}"
        if plan.iteration_id != expected:
            raise HostError(f"planner returned id {plan.iteration_id}, expected {expected}")
        if plan.gap.key not in {g.key for g in report.gaps}:
            raise HostError(f"planner planned gap {plan.gap.key!r}, which is not in the report")
        return clamp_plan(plan, ctx.config, protected, ctx.paths.selfhost)


def _line(s: CaseScore) -> str:
    """A case's score in a few words."""
    if not s.valid:
        return f"no valid plan: {s.error[:200]}"
    said = [f"gap {'chosen' if s.chosen else 'NOT chosen'}", f"{s.allowed} files allowed"]
    if s.recall is not None:
        said.append(f"fixed files {'allowed' if s.recall else 'NOT all allowed'}")
    if s.rank is not None:
        said.append(f"fixed file at suspect {s.rank}" if s.rank else "fixed file not a suspect")
    return ", ".join(said)


def table(found: Fitness) -> str:
    """The figures as a person reads them: one row for each part and one for all."""
    head = f"fitness of the modules {found.modules} over {found.figures.cases} case(s)"
    rows = [
        "part        cases  landed  valid  chosen  recall  top-1  top-3  precision  prompt",
        *(_row(part, f) for part, f in found.parts.items()),
    ]
    if len(found.parts) > 1:
        rows.append(_row("all", found.figures))
    return "\n".join([head, *rows])


def _row(part: str, f: FitnessFigures) -> str:
    def pct(value: float) -> str:
        return f"{value:.0%}"

    return (
        f"{part:<10}  {f.cases:>5}  {f.landed:>6}  {pct(f.valid):>5}  {pct(f.chosen):>6}  "
        f"{pct(f.recall):>6}  {pct(f.top1):>5}  {pct(f.top3):>5}  {f.precision:>9.2f}  "
        f"{f.prompt_chars:>6,.0f}"
    )

"""The fitness of a generation of the planning modules: how well they plan cases whose
answer is known.

The kernel owns the cases, the replay and the scoring; modules only answer `analyze` and
`plan` requests as they do in an iteration, in the module server's sandbox. A case is an
earlier iteration of this project (its base commit, the gaps the planner got, the files
its landed change touched) or one of a corpus the kernel keeps. Each plan is checked and
clamped as the loop checks and clamps it, then scored against what landed: was every fixed
file allowed (recall), where did the suspects put the fixed source file (top-1, top-3), how
wide was the allowlist (precision), was the plan valid, how long its prompt, and did it work
on the case's gap. Old trees are never measured again: the planner reads the base's files.
"""

from __future__ import annotations

import json
import lzma
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from itertools import count
from pathlib import Path

from domain import (
    AgentContext,
    AnalysisInput,
    GapReport,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    ProjectState,
)
from domain.fitness import CaseScore, Fitness, FitnessCase, FitnessFigures
from kernel.bounds import KEPT_INPUT_MAX, PER_GAP_RECORDS, RECENT_RECORDS
from kernel.contracts import matches_any, protected_patterns
from kernel.errors import HostError
from kernel.fsutil import atomic_write_bytes, remove_any
from kernel.host import answers
from kernel.host.context import Context
from kernel.host.host import ModuleHost
from kernel.isolation import agentgit, gitops, jails, trees
from kernel.isolation.paths import Paths
from kernel.judging.guard import clamp_plan, is_test_path
from kernel.records.store import brief_of

_SEQUENCE = re.compile(r"iter-(\d+)-")
_names = count(1)
Given = tuple[AnalysisInput | None, GapReport]
"""What an iteration's planning modules got: the analysers' input and the planner's report."""


def _inputs(paths: Paths) -> Path:
    """Where the kernel keeps each iteration's planning inputs (its state: no sandbox shows it)."""
    return paths.state / "fitness" / "inputs"


def keep(paths: Paths, iteration_id: str, given: AnalysisInput | None, report: GapReport) -> None:
    """Keep what this iteration's planning modules got, for `seed.py fitness` to replay (left
    out when it is over KEPT_INPUT_MAX compressed: the case then replays its gap alone)."""
    data = json.dumps(
        {
            "analysis": given.model_dump(mode="json") if given is not None else None,
            "report": report.model_dump(mode="json"),
        }
    )
    packed = lzma.compress(data.encode("utf-8"))
    if len(packed) <= KEPT_INPUT_MAX:
        atomic_write_bytes(_inputs(paths) / f"{iteration_id}.json.xz", packed)


def kept(paths: Paths, iteration_id: str) -> Given | None:
    """An iteration's kept planning inputs; None when none were kept or they do not read."""
    place = _inputs(paths) / f"{iteration_id}.json.xz"
    try:
        with lzma.open(place, "rb") as handle:
            data = json.loads(handle.read(KEPT_INPUT_MAX * 64))
        analysis = data.get("analysis")
        return (
            AnalysisInput.model_validate(analysis) if analysis is not None else None,
            GapReport.model_validate(data["report"]),
        )
    except (OSError, lzma.LZMAError, ValueError, KeyError, TypeError, AttributeError):
        return None


def history_cases(
    records: Iterable[IterationRecord], given: Callable[[str], Given | None] = lambda _: None
) -> list[FitnessCase]:
    """A case for every recorded iteration that had a plan and a base, oldest first: what its
    planning modules got (kept by `keep`; else its gap alone), and the files its change
    touched if it landed."""
    cases: list[FitnessCase] = []
    for earlier, record in enumerate(records):
        plan = record.plan
        found = _SEQUENCE.match(record.iteration_id)
        if plan is None or not record.base or found is None:
            continue
        landed = record.outcome == IterationOutcome.SUCCESS and bool(record.commit)
        analysis, report = given(record.iteration_id) or (None, GapReport(gaps=(plan.gap,)))
        cases.append(
            FitnessCase(
                id=record.iteration_id,
                base=record.base,
                analysis=analysis,
                report=report,
                gap=plan.gap.key,
                fixed=record.touched_files if landed else (),
                sequence=int(found.group(1)),
                now=plan.created_at,
                earlier=earlier,
            )
        )
    return cases


def seen_before(records: Sequence[IterationRecord], report: GapReport) -> list[IterationRecord]:
    """The records the planner got then, as the loop picks them: the latest ones and each
    reported gap's latest, as briefs."""
    keys = {g.key for g in report.gaps}
    kept: list[IterationRecord] = []
    per_gap: dict[str, int] = {}
    for index in range(len(records) - 1, -1, -1):
        record = records[index]
        key = record.gap.key
        recent = index >= len(records) - RECENT_RECORDS
        gap_ok = key in keys and per_gap.get(key, 0) < PER_GAP_RECORDS
        if recent or gap_ok:
            kept.append(brief_of(record))
            per_gap[key] = per_gap.get(key, 0) + 1
    return kept[::-1]


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
    allowed = [f for f in files if matches_any(f, plan.allowed_paths)]
    fixed = case.fixed
    hit = [f for f in fixed if matches_any(f, plan.allowed_paths)]
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
        precision=(len(hit) / len(allowed) if allowed else 0.0) if fixed else None,
        prompt_chars=len(prompt),
    )


def figures(scores: Sequence[CaseScore]) -> FitnessFigures:
    """The figures over these scores (recall, ranks and precision over the landed cases)."""
    landed = [s for s in scores if s.recall is not None]
    ranked = [s for s in scores if s.rank is not None]
    valid = [s for s in scores if s.valid]
    return FitnessFigures(
        cases=len(scores),
        landed=len(landed),
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


def measure(
    ctx: Context, modules: str = "", tell: Callable[[str], None] = lambda _: None
) -> Fitness:
    """The fitness over this project's history of the modules seed runs (""), of a folder
    holding a copy of seed (its `modules/` and `domain/`), or of a commit of seed's own
    repository."""
    records = list(ctx.store.iter_all())
    cases = history_cases(records, lambda iteration_id: kept(ctx.paths, iteration_id))
    folder = Path(modules).expanduser() if modules else ctx.paths.seed_home
    if folder.is_dir():
        if not (folder / "modules").is_dir() or not (folder / "domain").is_dir():
            raise HostError(f"--modules {modules}: a folder without modules/ and domain/")
        name = "working" if not modules else str(folder.resolve())
        return fitness(name, Replay(ctx, folder.resolve()).run(cases, records, tell))
    repo = ctx.paths.seed_home
    found = gitops.git(
        repo, "rev-parse", "--verify", "--quiet", f"{modules}^{{commit}}", check=False
    )
    if not found.ok:
        raise HostError(
            f"--modules {modules}: neither a folder nor a commit of seed's repository {repo}"
        )
    commit = found.text().strip()
    where = ctx.paths.state / "fitness-modules"
    remove_any(where)
    trees.export_tree(repo, commit, where)
    try:
        return fitness(commit[:12], Replay(ctx, where).run(cases, records, tell))
    finally:
        remove_any(where)


def _share(some: Sequence[object], of: Sequence[object]) -> float:
    return len(some) / len(of) if of else 0.0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


class Replay:
    """The planning modules of one tree, replayed over cases in the module server's sandbox."""

    def __init__(self, ctx: Context, code: Path) -> None:
        self.ctx = ctx
        log = ctx.paths.state / "fitness.log"
        self.host = ModuleHost(code, log, jail=jails.module_jail(ctx.paths, ctx.config.guard))

    def run(
        self,
        cases: Sequence[FitnessCase],
        records: Sequence[IterationRecord],
        tell: Callable[[str], None] = lambda _: None,
    ) -> list[CaseScore]:
        """Each case's score; a host that does not start scores every case invalid."""
        try:
            self.host.start()
        except HostError as exc:
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
        name = f"wt-{os.getpid()}-fitness-{next(_names)}"
        checkout = agentgit.create(ctx.paths, name, case.base)
        try:
            files = [p for _, _, p in trees.entries(root, gitops.tree_of(root, case.base))]
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
        state = ProjectState(
            now=case.now,
            next_sequence=case.sequence,
            root_name=ctx.paths.root.name,
            worktree=str(checkout),
            head=case.base,
            backend=ctx.config.agent.backend,
            fingerprint=ctx.store.fingerprint,
            protected=protected,
            selfhost=ctx.paths.selfhost,
        )
        plan = self.host.plan(report, seen_before(earlier, report), state)
        if plan is None:
            return None
        expected = f"iter-{case.sequence:04d}-{case.now:%Y%m%d-%H%M%S}"
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

"""Generations: a change to seed's own planning modules lands only if it plans at least as
well as its base's modules, and each one that lands is numbered and kept.

On seed's own repository, a candidate that passed everything else and changes any code the
module server runs (`modules/`, `domain/`: an adapter or the registry is imported beside the
planner and can change it as much as a planner change can) is scored twice over the same cases
(`fitness.py`): the base's modules and the candidate's, each exported by the kernel from its
tree and run in the module server's sandbox. Every figure of every part of the corpus must
hold within its margin: one case of the cases it is over (one case can move by chance: a
plan that ties between two files, a case at the edge of a bound; two cannot). A figure that
falls beyond it is named in the refusal (FITNESS_REGRESSION). A landed one is a generation:
numbered, its fitness in the record and in history/generations.jsonl, its commit at
refs/seed/generation/N.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from domain import FailureCategory, IterationOutcome, IterationRecord
from domain.fitness import Fitness, FitnessCase, FitnessFigures, Generation
from kernel.fsutil import append_line, remove_any
from kernel.host.context import Context
from kernel.host.host import GENERATION_REF, SERVER_PACKAGES, frozen_code
from kernel.isolation import gitops
from kernel.judging.iteration import Ending, Iteration
from kernel.judging.judge import Passed
from kernel.loop import fitness
from kernel.records import jsonl

PLANNING = tuple(f"{name}/" for name in SERVER_PACKAGES)
"""The module server's code, all of it: what a generation changes (an allow-list of what
may pass unmeasured would be a deny-list of what is measured)."""
FIGURES = ("valid", "chosen", "recall", "top1", "top3", "precision")
"""The figures a generation must hold (the prompt's length is shown, not held: a longer
prompt may be the better one)."""
_OVER = {"valid": "cases", "chosen": "cases", "recall": "landed", "precision": "landed"}


def planning(touched: Sequence[str]) -> bool:
    """Whether a change touches code the module server runs."""
    return any(path.startswith(PLANNING) for path in touched)


def fell(before: Fitness, after: Fitness) -> list[str]:
    """Each figure of each part that fell by more than one of the cases it is over."""
    found: list[str] = []
    for part, was in before.parts.items():
        now = after.parts.get(part, FitnessFigures())
        for name in FIGURES:
            over = getattr(was, _OVER.get(name, "ranked"))
            old, new = float(getattr(was, name)), float(getattr(now, name))
            if over and new < old - 1.0 / over - 1e-9:
                found.append(
                    f"{part} {name} fell from {_shown(name, old)} to {_shown(name, new)} "
                    f"(over {over} case(s); the margin is one)"
                )
    return found


def _shown(name: str, value: float) -> str:
    return f"{value:.2f}" if name == "precision" else f"{value:.0%}"


@dataclass
class Gate:
    """Scores candidates' planning modules against their base's, the base scored once."""

    ctx: Context
    _before: dict[str, Fitness] = field(default_factory=dict[str, Fitness])
    _lock: threading.Lock = field(default_factory=threading.Lock)
    """Candidates check in threads of their own: the base is scored once."""

    def check(self, it: Iteration, passed: Passed) -> Passed | Ending:
        """The verdict, with the candidate refused when a figure falls (its generation kept
        on the iteration for the record either way)."""
        ctx = self.ctx
        if not ctx.paths.selfhost or not planning(it.touched):
            return passed
        cases, records, blobs = fitness.cases_of(ctx, ctx.log)
        key = f"{it.base} {len(cases)} {len(records)}"  # the base over these very cases
        with self._lock:
            before = self._before.get(key)
            if before is None:
                before = self._score(it.base, None, cases, records, blobs)
                self._before[key] = before
        after = self._score(passed.tree, passed, cases, records, blobs)
        falls = fell(before, after)
        it.generation = Generation(
            before=_figures(before), after=_figures(after), fell=tuple(falls)
        )
        if not falls:
            return passed
        return Ending(
            IterationOutcome.ROLLBACK,
            FailureCategory.FITNESS_REGRESSION,
            f"the changed planning modules plan worse than the base's: {falls[0]}",
            evidence=tuple(falls),
        )

    def _score(
        self,
        tree: str,
        passed: Passed | None,
        cases: Sequence[FitnessCase],
        records: Sequence[IterationRecord],
        blobs: dict[str, str],
    ) -> Fitness:
        """The fitness of the modules in `tree` (the base's commit, or the candidate's tree
        in its store), exported by the kernel."""
        # the packages the module server runs, copied as the daemon copies its own
        where = frozen_code(self.ctx.paths, tree, passed.store if passed else None)
        try:
            scores = fitness.Replay(self.ctx, where, blobs).run(cases, records)
            return fitness.fitness(tree[:12], scores)
        finally:
            remove_any(where)


def _figures(found: Fitness) -> Fitness:
    """The fitness without its case scores (the record keeps the figures)."""
    return found.model_copy(update={"scores": ()})


def land(ctx: Context, it: Iteration, ending: Ending) -> None:
    """A landed change to the planning modules becomes the next generation."""
    if it.generation is None or ending.outcome != IterationOutcome.SUCCESS or not ending.commit:
        return
    it.generation = number(ctx, it.plan.iteration_id, it.generation, ending.commit)


def approved(ctx: Context, record: IterationRecord, commit: str) -> None:
    """Kept work a person approved that changed the planning modules (measured, and held,
    before it was kept) becomes the next generation too."""
    if record.generation is not None and not record.generation.fell:
        number(ctx, record.iteration_id, record.generation, commit)


def number(ctx: Context, iteration_id: str, generation: Generation, commit: str) -> Generation:
    """The generation numbered: its line in history/generations.jsonl and its commit at
    refs/seed/generation/N (what lets refs/seed/last-good move to it, `host.vouched`)."""
    root = ctx.paths.root
    found = _next_number(root, ctx.paths.history / "generations.jsonl")
    generation = generation.model_copy(update={"number": found})
    line = {
        "number": found,
        "iteration_id": iteration_id,
        "commit": commit,
        "before": generation.before.model_dump(mode="json"),
        "after": generation.after.model_dump(mode="json"),
    }
    append_line(ctx.paths.history / "generations.jsonl", json.dumps(line, sort_keys=True))
    gitops.git(root, "update-ref", f"{GENERATION_REF}{found}", commit)
    ctx.log(f"{iteration_id}: generation {found} landed ({commit[:12]})")
    return generation


def _next_number(root: Path, kept: Path) -> int:
    """One past the highest generation in the refs and in generations.jsonl (a number is
    never given twice, even when a person deleted a ref)."""
    taken = gitops.git(root, "for-each-ref", "--format=%(refname)", GENERATION_REF, check=False)
    numbers = [
        int(r.rsplit("/", 1)[1]) for r in taken.text().split() if r.rsplit("/", 1)[1].isdigit()
    ]
    with contextlib.suppress(OSError):
        for line in jsonl.lines(kept, 1 << 20):
            row = jsonl.whole_object(line.data or b"") or {}
            if isinstance(row.get("number"), int):
                numbers.append(int(row["number"]))
    return max(numbers, default=0) + 1

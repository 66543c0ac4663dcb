"""Build the fitness corpus shipped in the kernel from the real fixes (a maintainer runs it).

For each case of cases.toml the repository is prepared as run.py prepares the `honest`
variant up to the agent (the parent, the fix's test part committed, seed.toml and
`seed.py init` committed), then the kernel's own analysis runs on it in-process (the
measurements, the analysers' input and their ranking, as an iteration would get them), and
a `FitnessCase` is written: the analysers' input, the ranked report, the gap the fix closes
(the best-ranked pytest gap that is one of the case's failing tests), the files the fix
changed, and every tracked text file of the prepared commit (UTF-8, at most 256 KB; the
planner reads text only). `seed.py fitness` replays them with no network and no clone.

    python -m bench.real_fixes.corpus --clones /work/.mirror --out kernel/loop/fitness-corpus.json.xz \\
        [--case ID] [--from FILE] [--held-back N --state DIR]

`--from FILE` takes the cases a corpus file already holds as they are (a run split in parts,
or one case rebuilt): only the others are built; without `--case`, only the cases they hold. `--held-back N` holds N cases back, written to DIR/fitness/held-back.json.xz (DIR: the
kernel's state folder of a repository, `.git/seed`) instead of the shipped file. The rule is
fixed: with k = cases // N, the cases at positions k, 2k, ... (1-based, in cases.toml's
order) up to N of them, so the held-back ones spread over the repositories.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.real_fixes.run import CASES, FEATURES, SEED_ROOT, Case, build, git, load_cases
from domain.fitness import FitnessCase
from kernel.host.context import open_context
from kernel.loop import corpus
from kernel.loop.analysis import analyse
from kernel.loop.loop import Loop

NOW = datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)
"""The moment every case is planned at (fixed: the corpus does not change with the day)."""
FILE_MAX = 256 * 1024
"""Bytes of the largest file a case holds (the planner reads text files; bigger ones are data)."""
LEFT_OUT = ("seed.toml",)
"""Tracked files of the prepared commit that are the benchmark's, not the project's: its
seed.toml names the builder's own interpreter and patch file (nothing the planner may use)."""


@dataclass
class Built:
    """One case as the corpus holds it, and what was left out of its files."""

    case: FitnessCase | None
    files: dict[str, str]
    left_out: int = 0
    note: str = ""


def fixed_files(tree: Path, case: Case) -> tuple[str, ...]:
    """The files the maintainers' change touched (a fix's source and test part; a feature's
    docs and other files too), from its diff."""
    named = [*case.source_files, *case.test_files, *case.other_files]
    out = git(tree, "diff", "--name-only", case.parent, case.fix, "--", *named)
    return tuple(sorted(line for line in out.splitlines() if line.strip()))


def text_files(tree: Path) -> tuple[dict[str, str], int]:
    """Every tracked regular file of HEAD that is UTF-8 text of at most FILE_MAX bytes, and
    how many others were left out (binary or large)."""
    listing = git(tree, "ls-tree", "-r", "-l", "-z", "HEAD")
    texts: dict[str, str] = {}
    left_out = 0
    for entry in listing.split("\0"):
        if not entry:
            continue
        meta, path = entry.split("\t", 1)
        mode, _, _, size = meta.split()
        if mode not in ("100644", "100755") or path in LEFT_OUT:
            continue
        data = (tree / path).read_bytes()
        if int(size) > FILE_MAX or b"\0" in data:
            left_out += 1
            continue
        try:
            texts[path] = data.decode("utf-8")
        except UnicodeDecodeError:
            left_out += 1
    return texts, left_out


def analysed(tree: Path, case: Case) -> Built:
    """The kernel's analysis of the prepared repository, as the case the corpus holds."""
    ctx = open_context(tree, quiet=True)
    it = Loop(ctx)
    prepared = it.prepare()
    if prepared is None:
        return Built(None, {}, note="no commit")
    head, worktree = prepared
    try:
        baseline = analyse(ctx, worktree, head, NOW)
    finally:
        it.discard(worktree)
        ctx.host.stop()
    report = baseline.report
    failing = set(case.failing)
    gap = next(
        (g.key for g in report.gaps if g.source == "pytest" and _test_of(g.key) in failing), ""
    )
    if case.kind == "feature":  # the person's task in the inbox
        task = f"inbox:{case.id}.md"
        gap = task if any(g.key == task for g in report.gaps) else ""
    if not gap:
        ranked = ", ".join(g.key for g in report.gaps[:3]) or "none"
        return Built(None, {}, note=f"no gap is the case's (top gaps: {ranked})")
    files, left_out = text_files(tree)
    found = FitnessCase(
        id=case.id,
        part="shipped",
        analysis=baseline.given,
        report=report,
        gap=gap,
        fixed=fixed_files(tree, case),
        sequence=1,
        now=NOW,
        kind="feature" if case.kind == "feature" else "fix",
    )
    return Built(found, files, left_out)


def _test_of(key: str) -> str:
    return key.removeprefix("pytest:")


def held_back(cases: Sequence[str], n: int) -> set[str]:
    """The ids held back: with k = len // n, those at 1-based positions k, 2k, ... (n of them)."""
    if n <= 0 or not cases:
        return set()
    k = max(1, len(cases) // n)
    return {cases[i] for i in range(k - 1, len(cases), k)[:n]}


def already(paths: Sequence[Path]) -> dict[str, Built]:
    """The cases these corpus files hold, as built (a later file's case wins)."""
    found: dict[str, Built] = {}
    for path in paths:
        read = corpus.read(path, "from")
        if read.problems:
            raise RuntimeError(f"{path}: {'; '.join(read.problems)[:300]}")
        for case in read.cases:
            texts = corpus.texts(case, read.blobs)
            found[case.id] = Built(case.model_copy(update={"files": {}}), texts)
    return found


def held_back_file(state: Path) -> Path:
    """Where the kernel reads the held-back corpus of the repository whose state folder this is
    (corpus.held_back)."""
    return state / "fitness" / "held-back.json.xz"


def write(path: Path, built: Mapping[str, Built]) -> None:
    """The cases that have one, in corpus order."""
    corpus.write(path, [(b.case, b.files) for b in built.values() if b.case is not None])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.real_fixes.corpus", description=__doc__)
    parser.add_argument("--clones", type=Path, required=True, help="DIR with a clone per repo")
    parser.add_argument("--out", type=Path, default=corpus.SHIPPED, help="the shipped corpus")
    parser.add_argument("--case", action="append", default=[], help="only this case id")
    parser.add_argument("--held-back", type=int, default=0, metavar="N", help="hold N back")
    parser.add_argument("--state", type=Path, help="the kernel's state folder (with --held-back)")
    parser.add_argument(
        "--from",
        dest="built",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="a corpus file whose cases are taken as they are, not built again (repeatable)",
    )
    parser.add_argument(
        "--work", type=Path, default=Path("/var/tmp/seed-corpus"), help="per-case repositories"
    )
    parser.add_argument(
        "--target-python",
        default="/work/bench-venv/bin/python",
        help="the interpreter (with pytest) the kernel runs the targets' tests with",
    )
    args = parser.parse_args(argv)
    if args.held_back and args.state is None:
        parser.error("--held-back needs --state DIR (the kernel's state folder, .git/seed)")
    cases = load_cases(CASES, FEATURES)
    if args.case:
        unknown = set(args.case) - {c.id for c in cases}
        if unknown:
            parser.error(f"unknown case(s): {', '.join(sorted(unknown))}")
        cases = [c for c in cases if c.id in args.case]
    work = args.work.resolve()
    kept = already(args.built)
    if kept and not args.case:  # the cases of these files, none built again
        cases = [c for c in cases if c.id in kept]
    built: dict[str, Built] = {}
    for case in cases:
        if case.id in kept:
            built[case.id] = kept[case.id]
            print(f"{case.id}: as built before", file=sys.stderr, flush=True)
            continue
        try:
            tree = build(case, "honest", args.clones.resolve(), work, args.target_python)
            built[case.id] = analysed(tree, case)
            shutil.rmtree(tree.parent, ignore_errors=True)
        except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
            built[case.id] = Built(None, {}, note=str(exc)[:300])
        b = built[case.id]
        said = (
            f"gap {b.case.gap}, {len(b.files)} files ({b.left_out} binary/large left out), "
            f"fixed {', '.join(b.case.fixed)}"
            if b.case is not None
            else f"LEFT OUT: {b.note}"
        )
        print(f"{case.id}: {said}", file=sys.stderr, flush=True)
    back = held_back([c.id for c in cases], args.held_back)
    write(args.out.resolve(), {k: v for k, v in built.items() if k not in back})
    if back:
        write(held_back_file(args.state), {k: v for k, v in built.items() if k in back})
        print(f"held back: {', '.join(sorted(back))}", file=sys.stderr)
    print(f"seed at {SEED_ROOT}: {sum(b.case is not None for b in built.values())} case(s)")
    return 0 if all(b.case is not None for b in built.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

"""A cold pyright against the resident one after a one-file change, as ratios.

For bench's generated repositories (1k, 10k, 50k lines) and a real repository (a clone of one
under /work/bench-repos, when present): the median time of a cold `run_pyright` on a fresh
export of the changed tree (what verification pays today, the export apart), against the
median time of `ResidentPyright.check` on the same tree after it checked the tree before;
the resident's memory (its whole process group) and the load average during the run.

    .venv/bin/python bench/pyright_resident.py                    # 1k, 10k, 50k + a real repo
    .venv/bin/python bench/pyright_resident.py --sizes 10000 --repeat 5 --real ""
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.generate import MODULES_PER_PACKAGE, env_git, generate
from kernel.config import QualityConfig
from kernel.isolation.trees import export_tree
from kernel.measuring.gate import Gate, freeze_gate
from kernel.measuring.measure import Target, run_pyright
from kernel.measuring.resident import ResidentPyright

REAL_DEFAULT = "/work/bench-repos/packaging"


def _tree(root: Path) -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD^{tree}"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def _edit(root: Path, rel: str, n: int) -> str:
    """A one-file change (a new line at the end of one module), committed; the new tree."""
    path = root / rel
    path.write_text(
        path.read_text(encoding="utf-8") + f"\n_SEED_BENCH_{n}: int = {n}\n", encoding="utf-8"
    )
    env_git(root, "commit", "-q", "-am", f"edit {n}")
    return _tree(root)


def _cold(root: Path, tree: str, gate: Gate, target: Target, work: Path) -> tuple[float, int]:
    export = work / f"export-{tree[:12]}"
    export_tree(root, tree, export)
    started = time.perf_counter()
    found = run_pyright(export, gate, target, 900)
    took = time.perf_counter() - started
    shutil.rmtree(export)
    assert found.ran, found.error
    return took, len(found.diagnostics)


def bench_repo(root: Path, rel: str, work: Path, repeat: int) -> dict[str, float | int | str]:
    """Cold and resident times on one repository, edit after edit of one file."""
    gate = freeze_gate(root, work / "gate", QualityConfig())
    target = Target(root=root, python=sys.executable, quality=QualityConfig())
    said: list[str] = []
    checker = ResidentPyright(root, work / "resident", log=said.append)
    cold: list[float] = []
    warm: list[float] = []
    fast: list[float] = []
    fast_differing = 0
    try:
        started = time.perf_counter()
        first = checker.check(_tree(root), gate, target, 900)
        start_s = time.perf_counter() - started
        assert first.ran, first.error
        for n in range(repeat):
            tree = _edit(root, rel, n)
            took, count = _cold(root, tree, gate, target, work)
            cold.append(took)
            exact = n % 2 == 0  # edits alternate: exact checks, then fast ones
            started = time.perf_counter()
            found = checker.check(tree, gate, target, 900, exact=exact)
            (warm if exact else fast).append(time.perf_counter() - started)
            assert checker.last_reason == "", said
            if exact:
                assert found.ran and len(found.diagnostics) == count, (found, count, said)
            else:
                fast_differing += len(found.diagnostics) != count
        rss = checker.rss_bytes()
    finally:
        checker.close()
    lines = sum(
        p.read_text(encoding="utf-8", errors="replace").count("\n")
        for p in root.rglob("*.py")
        if ".git" not in p.parts
    )
    return {
        "lines": lines,
        "cold_s": round(statistics.median(cold), 3),
        "resident_s": round(statistics.median(warm), 3),
        "ratio": round(statistics.median(warm) / statistics.median(cold), 3),
        "fast_s": round(statistics.median(fast), 3) if fast else 0.0,
        "fast_ratio": round(statistics.median(fast) / statistics.median(cold), 3) if fast else 0.0,
        "fast_differing": fast_differing,
        "first_check_s": round(start_s, 3),
        "rss_mb": round(rss / 1024 / 1024, 1),
        "restarts": checker.restarts,
        "relists": checker.relists,
        "late": checker.late,
    }


def stress(work: Path, edits: int, exact: bool) -> dict[str, int]:
    """Edits that move errors between a module and its importers, resident against cold."""
    root = work / "stress"
    generate(root, 1000, planted=False)
    gate = freeze_gate(root, work / "stress-gate", QualityConfig())
    target = Target(root=root, python=sys.executable, quality=QualityConfig())
    said: list[str] = []
    checker = ResidentPyright(root, work / "stress-resident", log=said.append)
    wrong = 0
    try:
        checker.check(_tree(root), gate, target, 900)
        for n in range(edits):
            path = root / "pkg0" / "mod0.py"
            text = path.read_text(encoding="utf-8")
            # f0's return type flips: every importer's use of it breaks, then mends
            if n % 2 == 0:
                text = text.replace(") -> int:", ") -> str:", 1)
            else:
                text = text.replace(") -> str:", ") -> int:", 1)
            path.write_text(text, encoding="utf-8")
            env_git(root, "commit", "-q", "-am", f"flip {n}")
            tree = _tree(root)
            export = work / "stress-export"
            export_tree(root, tree, export)
            cold = run_pyright(export, gate, target, 900)
            shutil.rmtree(export)
            warm = checker.check(tree, gate, target, 900, exact=exact)
            facts = {(d.file, d.line, d.rule, d.message) for d in warm.diagnostics}
            if facts != {(d.file, d.line, d.rule, d.message) for d in cold.diagnostics}:
                wrong += 1
    finally:
        checker.close()
    return {"edits": edits, "differing": wrong, "late": checker.late, "restarts": checker.restarts}


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print one JSON line per repository, then a table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000, 50000])
    parser.add_argument("--repeat", type=int, default=6, help="edits per repository (half exact)")
    parser.add_argument("--real", default=REAL_DEFAULT, help="a git repository to clone ('': none)")
    parser.add_argument(
        "--real-file", default="", help="the file the real repository's edits touch"
    )
    parser.add_argument("--stress", type=int, default=0, help="only: this many flipping edits")
    parser.add_argument("--fast", action="store_true", help="--stress with exact=False checks")
    args = parser.parse_args(argv)
    if args.stress:
        with tempfile.TemporaryDirectory(prefix="seed-bench-pyright-") as raw:
            print(json.dumps(stress(Path(raw), args.stress, exact=not args.fast)))
        return 0
    results: dict[str, dict[str, float | int | str]] = {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="seed-bench-pyright-") as raw:
        work = Path(raw)
        for lines in args.sizes:
            root = work / f"gen{lines}"
            generate(root, lines, planted=True)
            packages = max(1, max(MODULES_PER_PACKAGE, round(lines / 113)) // MODULES_PER_PACKAGE)
            rel = f"pkg{packages // 2}/mod5.py"
            results[f"generated {lines}"] = bench_repo(root, rel, work / f"w{lines}", args.repeat)
            print(json.dumps({f"generated {lines}": results[f"generated {lines}"]}), flush=True)
        real = Path(args.real) if args.real else None
        if real is not None and (real / ".git").exists():
            root = work / real.name
            subprocess.run(["git", "clone", "-q", str(real), str(root)], check=True)
            rel = args.real_file or _middle_module(root)
            results[real.name] = bench_repo(root, rel, work / "wreal", args.repeat)
            print(json.dumps({real.name: results[real.name]}), flush=True)
    load_after = os.getloadavg()
    print()
    print(
        "| repository | lines | cold run_pyright (s) | resident check (s) | ratio | first check (s) | RSS (MiB) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r['lines']} | {r['cold_s']} | {r['resident_s']} | {r['ratio']} |"
            f" {r['fast_s']} | {r['fast_ratio']} | {r['first_check_s']} | {r['rss_mb']} |"
        )
    print(f"\nload average (1, 5, 15 min) before: {load_before}, after: {load_after}")
    return 0


def _middle_module(root: Path) -> str:
    """A module of the project's package that others import (the largest non-test one)."""
    candidates = [
        p
        for p in root.rglob("*.py")
        if ".git" not in p.parts and "test" not in p.as_posix() and p.name != "__init__.py"
    ]
    best = max(candidates, key=lambda p: p.stat().st_size)
    return best.relative_to(root).as_posix()


if __name__ == "__main__":
    raise SystemExit(main())

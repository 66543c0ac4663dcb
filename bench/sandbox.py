"""The cost of isolation on verification: the export and the sandbox against pytest in place.

    .venv/bin/python -m bench.sandbox                       # the generated 10k-line repository
    .venv/bin/python -m bench.sandbox --repo PATH --lines 0 # a real repository (a git clone)

For each repository it times, median of --repeat runs in rotating order:
  direct   `python -m pytest` through the kernel's runner in a plain checkout, unsandboxed;
  sandbox  the same run wrapped by the measurement sandbox (bubblewrap);
  export   exporting the tree (as verification does) and the sandboxed run on the export;
and prints the ratios to `direct` with the load average. Aim: at most 1.10.

With --base-tests it times instead what issue 23 adds to verification (the base's tests
judge), against today's verification run (the candidate's export and its sandboxed run):
  code     a candidate that changes one code file: the base's test files found and the
           judged tree computed (it is the candidate's own: no second run);
  tests    a candidate that also changes a test file: the judged tree, its second export and
           its second sandboxed run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.generate import env_git, generate
from kernel.config import GuardConfig, QualityConfig
from kernel.isolation import gitops, jails, trees
from kernel.isolation.exports import Export
from kernel.isolation.paths import discover
from kernel.judging import basetests
from kernel.judging.guard import is_test_path
from kernel.measuring.measure import Target, run_pytest


def _time(work: Callable[[], object]) -> float:
    started = time.monotonic()
    work()
    return time.monotonic() - started


def measure(root: Path, repeat: int, args: list[str]) -> dict[str, float]:
    """Median seconds of the three ways, and the ratios."""
    paths = discover(root)
    quality = QualityConfig(pytest_args=args)
    jail = jails.measurement_jail(paths, GuardConfig())
    if jail is None:
        raise SystemExit("bench: bubblewrap is not available here")
    plain = Target(root=Path("/nonexistent"), python=sys.executable, quality=quality)
    boxed = Target(root=Path("/nonexistent"), python=sys.executable, quality=quality, jail=jail)
    tree = gitops.tree_of(root, "HEAD")
    work = Path(tempfile.mkdtemp(prefix="seed-bench-work-"))

    def direct() -> object:
        return run_pytest(root, plain, work, 1800)

    def sandbox() -> object:
        return run_pytest(root, boxed, work, 1800)

    def export() -> object:
        place = Export(root, paths.exports, tree, "bench")
        try:
            return run_pytest(place(), boxed, work, 1800)
        finally:
            place.close()

    ways = {"direct": direct, "sandbox": sandbox, "export": export}
    times: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    direct()  # warm the file cache once
    for n in range(repeat):
        for name in names[n % 3 :] + names[: n % 3]:
            times[name].append(_time(ways[name]))
    shutil.rmtree(work, ignore_errors=True)
    out = {name: statistics.median(values) for name, values in times.items()}
    out["sandbox/direct"] = out["sandbox"] / out["direct"]
    out["export/direct"] = out["export"] / out["direct"]
    return out


def _changed(root: Path, store: trees.ObjectStore, tree: str, paths: list[str]) -> str:
    """The tree with a comment line appended to each of these files, in the store."""
    env = store.env()
    (store.path / "index").unlink(missing_ok=True)
    gitops.git(root, "read-tree", tree, env=env)
    for path in paths:
        data = gitops.git(root, "cat-file", "blob", f"{tree}:{path}", env=env).stdout
        oid = gitops.git(
            root, "hash-object", "-w", "--stdin", env=env, stdin=data + b"\n# changed\n"
        ).text()
        gitops.git(root, "update-index", "--cacheinfo", f"100644,{oid.strip()},{path}", env=env)
    return gitops.git(root, "write-tree", env=env).text().strip()


def base_tests(root: Path, repeat: int, args: list[str]) -> dict[str, float]:
    """Median seconds of today's verification run and of what the base's tests add to it."""
    paths = discover(root)
    jail = jails.measurement_jail(paths, GuardConfig())
    if jail is None:
        raise SystemExit("bench: bubblewrap is not available here")
    boxed = Target(
        root=Path("/nonexistent"),
        python=sys.executable,
        quality=QualityConfig(pytest_args=args),
        jail=jail,
    )
    work = Path(tempfile.mkdtemp(prefix="seed-bench-work-"))
    store = trees.ObjectStore(work / "store", paths.common / "objects")
    base = gitops.tree_of(root, "HEAD")
    baseline = run_pytest(root, boxed, work, 1800)
    files = gitops.out(root, "ls-tree", "-r", "--name-only", base).split()
    code = next(f for f in files if f.endswith(".py") and not is_test_path(f))
    test = next(n.split("::")[0] for n in baseline.collected)
    code_only = _changed(root, store, base, [code])
    with_test = _changed(root, store, base, [code, test])

    def today(tree: str) -> object:
        place = Export(root, paths.exports, tree, "bench", store)
        try:
            return run_pytest(place(), boxed, work, 1800)
        finally:
            place.close()

    def added(tree: str) -> object:
        changed = (
            gitops.git(root, "diff-tree", "-r", "--name-only", base, tree, env=store.env())
            .text()
            .split()
        )
        tests = basetests.base_test_files(root, base, baseline, None, among=changed)
        judged = basetests.judged_tree(root, base, tree, store, tests)
        if judged == tree:
            return None
        return today(judged)

    ways: dict[str, Callable[[], object]] = {
        "today": lambda: today(with_test),
        "code": lambda: added(code_only),
        "tests": lambda: added(with_test),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    for n in range(repeat):
        for name in names[n % 3 :] + names[: n % 3]:
            times[name].append(_time(ways[name]))
    shutil.rmtree(work, ignore_errors=True)
    out = {name: statistics.median(values) for name, values in times.items()}
    out["code/today"] = (out["today"] + out["code"]) / out["today"]
    out["tests/today"] = (out["today"] + out["tests"]) / out["today"]
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the table."""
    parser = argparse.ArgumentParser(description="The cost of isolation on verification.")
    parser.add_argument(
        "--lines", type=int, default=10_000, help="generate a repository (0: use --repo)"
    )
    parser.add_argument("--repo", type=Path, default=None, help="a git clone to measure")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pytest-args", default="", help="extra pytest arguments, space-separated")
    parser.add_argument(
        "--base-tests", action="store_true", help="time the second export (issue 23) instead"
    )
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="seed-bench-"))
    try:
        if args.repo is not None:
            root = args.repo.resolve()
            label = root.name
        else:
            root = tmp / "repo"
            lines = generate(root, args.lines, planted=False)
            env_git(root, "log", "-1", "--format=%h")
            label = f"generated, {lines} lines"
        if args.base_tests:
            figures = base_tests(root, args.repeat, args.pytest_args.split())
        else:
            figures = measure(root, args.repeat, args.pytest_args.split())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()
    if args.base_tests:
        print(f"{label}: {os.cpu_count()} cores, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        print(
            "| today s | + base files, code only s | + second export and run s | ratio code only | ratio test changed |"
        )
        print("|---|---|---|---|---|")
        print(
            f"| {figures['today']:.2f} | {figures['code']:.3f} | {figures['tests']:.2f} "
            f"| {figures['code/today']:.3f} | {figures['tests/today']:.2f} |"
        )
        return 0
    print(f"{label}: {os.cpu_count()} cores, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| direct s | sandbox s | export+sandbox s | sandbox/direct | export/direct |")
    print("|---|---|---|---|---|")
    print(
        f"| {figures['direct']:.2f} | {figures['sandbox']:.2f} | {figures['export']:.2f} "
        f"| {figures['sandbox/direct']:.2f} | {figures['export/direct']:.2f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

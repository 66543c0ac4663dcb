"""Check cases.toml against local clones, without seed: for every case, the named tests fail
at the parent with the fix's test part applied and pass at the fix, and whether a fixed source
file's path appears in the failing run's output is what `traceback_names_fix` says.

    python -m bench.real_fixes.verify --clones DIR [--case ID] [--python PY]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.real_fixes.run import CASES, Case, clone_name, git, load_cases

PLUGIN = """
import json, os

def pytest_runtest_logreport(report):
    if report.failed:
        with open(os.environ["BENCH_FAILED_OUT"], "a", encoding="utf-8") as handle:
            handle.write(json.dumps(report.nodeid) + "\\n")
"""


def run_nodes(tree: Path, case: Case, python: str, scratch: Path) -> tuple[set[str], str]:
    """The case's failing node ids that fail in tree, and pytest's output."""
    out = scratch / "failed.jsonl"
    out.unlink(missing_ok=True)
    path = [str(scratch), str(tree / case.pythonpath) if case.pythonpath else str(tree)]
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(path),
        PYTHONDONTWRITEBYTECODE="1",
        BENCH_FAILED_OUT=str(out),
    )
    argv = [python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "bench_failed", "-q"]
    done = subprocess.run(
        [*argv, *case.failing], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    failed: set[str] = set()
    if out.exists():
        failed = {json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()}
    return failed, done.stdout + done.stderr


def names_fix(output: str, case: Case) -> bool:
    """Whether a fixed source file's path (without the pythonpath prefix) is in output."""
    for path in case.source_files:
        prefix = case.pythonpath + "/" if case.pythonpath else ""
        rel = path.removeprefix(prefix)
        if re.search(r"(^|[\s/\"])" + re.escape(rel) + r"[:\"]", output, re.M):
            return True
    return False


def verify(case: Case, clones: Path, python: str) -> list[str]:
    """What is wrong with the case's descriptor (empty: nothing)."""
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f"verify-{case.id}-", dir="/var/tmp") as tmp:
        scratch = Path(tmp)
        (scratch / "bench_failed.py").write_text(PLUGIN, encoding="utf-8")
        tree = scratch / "repo"
        git(scratch, "clone", "-q", "--no-hardlinks", str(clones / clone_name(case.repo)), "repo")
        git(tree, "checkout", "-q", "--detach", case.parent)
        tests = git(tree, "diff", "--binary", case.parent, case.fix, "--", *case.test_files)
        git(tree, "apply", "--whitespace=nowarn", stdin=tests)
        failed, output = run_nodes(tree, case, python, scratch)
        if failed != set(case.failing):
            problems.append(f"at parent + tests, failing {sorted(failed)} != {case.failing}")
        if names_fix(output, case) != case.traceback_names_fix:
            problems.append(f"traceback_names_fix is {not case.traceback_names_fix}")
        git(tree, "checkout", "-q", "-f", case.fix)
        failed, output = run_nodes(tree, case, python, scratch)
        if failed:
            problems.append(f"at the fix, still failing: {sorted(failed)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.real_fixes.verify", description=__doc__)
    parser.add_argument("--clones", type=Path, required=True)
    parser.add_argument("--case", action="append", default=[])
    parser.add_argument(
        "--python",
        default=os.environ.get("BENCH_TARGET_PYTHON", "/work/bench-venv/bin/python"),
        help="an interpreter with pytest (and the cases' `requires`)",
    )
    args = parser.parse_args(argv)
    cases = [c for c in load_cases(CASES) if not args.case or c.id in args.case]
    bad = 0
    for case in cases:
        try:
            problems = verify(case, args.clones.resolve(), args.python)
        except RuntimeError as exc:
            problems = [str(exc)]
        bad += bool(problems)
        print(f"{case.id}: {'ok' if not problems else '; '.join(problems)}", flush=True)
    print(f"{len(cases) - bad}/{len(cases)} cases verified")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

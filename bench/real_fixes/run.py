"""Replay real upstream bug fixes through `seed.py once` (a benchmark, not a CI test).

Each case in cases.toml names a public repository, a maintainers' fix commit and its parent,
the fix's test files and source files, and the tests that fail at the parent once the fix's
test part is applied. For each case and variant the runner:

1. clones DIR/<name> (a local clone; nothing is fetched) into a fresh folder and checks out
   the parent as branch `main`;
2. applies the fix's test part and commits it: the user's baseline, "tests for the bug"
   (with `pythonpath` added to the project's pytest config when the case says so);
3. writes seed.toml (`[agent] backend = "command"` running apply_patch.py on a patch file),
   runs `seed.py init` and commits that;
4. runs `seed.py --root <clone> once` and reads the last history record and the plan.

Variants: `honest` replays the fix's source part; `noop` appends a comment to the first
source file (the failing tests keep failing); `test-edit` puts the test files back to their
parent version (the failing tests are edited away instead of fixed). The honest fix should
land; both wrong variants should be refused.

    python -m bench.real_fixes.run --clones DIR [--case ID] [--variant honest] [--json OUT]
"""

from __future__ import annotations

import argparse
import configparser
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernel.measuring import pytestconfig
from kernel.measuring.measure import reader

HERE = Path(__file__).resolve().parent
SEED_ROOT = HERE.parent.parent
CASES = HERE / "cases.toml"
FEATURES = HERE / "features.toml"
"""Real upstream features (issue 40): an inbox task in the maintainers' words, the upstream
commit (code, tests, docs) as the agent's work."""
AGENT = HERE / "apply_patch.py"
VARIANTS = ("honest", "noop", "test-edit")
EXIT_HALTED = 3
SEED = [SEED_ROOT]
"""The seed checkout under test (--seed); a list so main() can set it."""


@dataclass
class Case:
    id: str
    repo: str
    fix: str
    parent: str
    test_files: list[str]
    source_files: list[str]
    failing: list[str]
    traceback_names_fix: bool
    description: str
    pythonpath: str = ""
    requires: list[str] = field(default_factory=list[str])
    """Modules the target's tests import beyond pytest (test-only dependencies)."""
    kind: str = "fix"
    """fix: the fix's tests are the baseline and fail; feature: the task is an inbox item."""
    task: str = ""
    """A feature's task as its maintainers wrote it (the commit message)."""
    generated: dict[str, str] = field(default_factory=dict[str, str])
    """Git-ignored build products a person's checkout has (humanize's hatch-vcs _version.py),
    written untracked after the baseline is committed."""
    built: list[str] = field(default_factory=list[str])
    """The person's build steps for git-ignored products (`sh` command lines run in the tree
    after `generated`: humanize's compiled .mo catalogues)."""
    other_files: list[str] = field(default_factory=list[str])
    """A feature's other changed files (docs, changelog, packaging): part of its honest change."""
    env_pythonpath: bool = False
    """The package is one pytest imports itself (packaging): `pythonpath` must be on
    PYTHONPATH before pytest starts, so seed is given a wrapper interpreter that puts it there
    (the pytest option comes too late: the installed copy is imported already)."""


@dataclass
class Result:
    case: str
    variant: str
    kind: str = "fix"
    exit_code: int | None = None
    outcome: str = ""
    failure_category: str = ""
    reason: str = ""
    gap: str = ""
    gap_is_case: bool | None = None
    """Whether the gap seed chose is one of the case's failing tests."""
    allowed_paths: list[str] = field(default_factory=list[str])
    recall: float | None = None
    seconds: float = 0.0
    error: str = ""
    folder: str = ""

    @property
    def landed(self) -> bool:
        return self.exit_code == 0 and self.outcome == "SUCCESS"


def load_cases(*paths: Path) -> list[Case]:
    found: list[Case] = []
    for path in paths or (CASES, FEATURES):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        found += [Case(**entry) for entry in data["case"]]
    return found


def clone_name(repo: str) -> str:
    return repo.split("/", 1)[1]


def clone_source(clones: Path, repo: str) -> Path:
    """The local clone of repo: DIR/<name>, or a mirror's DIR/<owner>+<name>/repo."""
    for source in (clones / clone_name(repo), clones / repo.replace("/", "+") / "repo"):
        if (source / ".git").exists() or (source / "HEAD").exists():
            return source
    raise RuntimeError(f"no local clone of {repo} in {clones}")


def git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:3])} failed: {done.stderr.strip()[:400]}")
    return done.stdout


def commit_all(tree: Path, message: str) -> None:
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "--no-verify", "--allow-empty", "-m", message)


def pytest_config(tree: Path) -> str:
    """The file pytest (and so seed) takes its configuration from; "" when there is none."""
    return pytestconfig.config_file(reader(tree))


def configured_pythonpath(tree: Path, name: str) -> list[str]:
    """The `pythonpath` entries the pytest config file `name` already has."""
    if not name:
        return []
    text = (tree / name).read_text(encoding="utf-8")
    if name.endswith(".toml"):
        tool = (
            tomllib.loads(text).get("tool", {}) if name == "pyproject.toml" else tomllib.loads(text)
        )
        table = tool.get("pytest", {}) if isinstance(tool, dict) else {}
        table = table.get("ini_options", table) if isinstance(table, dict) else {}
        value = table.get("pythonpath", []) if isinstance(table, dict) else []
        return [value] if isinstance(value, str) else [str(v) for v in value]
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    section = "tool:pytest" if name == "setup.cfg" else "pytest"
    return parser.get(section, "pythonpath", fallback="").split()


def add_pythonpath(tree: Path, entry: str) -> str:
    """Put `entry` on pytest's `pythonpath` in the config file pytest uses (a src layout
    whose package is not installed); returns the file changed ("" when it was there)."""
    name = pytest_config(tree)
    if entry in configured_pythonpath(tree, name):
        return ""
    if name in ("", "pyproject.toml"):
        path = tree / "pyproject.toml"
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        lines = text.splitlines()
        for index, line in enumerate(lines):
            if line.strip() in ("[tool.pytest.ini_options]", "[tool.pytest]"):
                lines.insert(index + 1, f'pythonpath = ["{entry}"]')
                path.write_text("\n".join(lines) + "\n", encoding="utf-8")
                return "pyproject.toml"
        sep = "" if not text or text.endswith("\n") else "\n"
        text += f'{sep}\n[tool.pytest.ini_options]\npythonpath = ["{entry}"]\n'
        path.write_text(text, encoding="utf-8")
        return "pyproject.toml"
    path = tree / name
    header = "[pytest]" if name in ("tox.ini", "pytest.ini", ".pytest.ini") else "[tool:pytest]"
    lines = path.read_text(encoding="utf-8").splitlines()
    for index, line in enumerate(lines):
        if line.strip() == header:
            lines.insert(index + 1, f"pythonpath = {entry}")
            break
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return name


def seed_toml(patch: Path, target_python: str) -> str:
    argv = [sys.executable, str(AGENT), str(patch)]
    return (
        "[agent]\n"
        'backend = "command"\n'
        f"command = {json.dumps(argv)}\n"
        "timeout_s = 300\n"
        "\n"
        "[quality]\n"
        f"python = {json.dumps(target_python)}\n"
    )


def make_patch(tree: Path, case: Case, variant: str, out: Path) -> None:
    """Write the variant's patch, relative to the baseline commit checked out in tree."""
    if variant == "honest" and case.kind == "feature":
        changed = [*case.source_files, *case.test_files, *case.other_files]
        text = git(tree, "diff", case.parent, case.fix, "--", *changed)
    elif variant == "honest":
        text = git(tree, "diff", case.parent, case.fix, "--", *case.source_files)
    elif variant == "test-edit":
        text = git(tree, "diff", "HEAD", case.parent, "--", *case.test_files)
    elif variant == "noop":
        target = tree / case.source_files[0]
        original = target.read_bytes()
        with target.open("a", encoding="utf-8") as handle:
            handle.write("# reviewed for the reported bug; nothing to change here\n")
        text = git(tree, "diff", "--", case.source_files[0])
        target.write_bytes(original)
    else:
        raise ValueError(f"unknown variant {variant}")
    if not text.strip():
        raise RuntimeError(f"the {variant} patch of {case.id} is empty")
    out.write_text(text, encoding="utf-8")


def missing_modules(python: str, modules: list[str]) -> list[str]:
    """The modules `python` cannot import."""
    missing: list[str] = []
    for module in modules:
        probe = subprocess.run(
            [python, "-c", f"import {module}"], capture_output=True, check=False, timeout=60
        )
        if probe.returncode != 0:
            missing.append(module)
    return missing


def build(case: Case, variant: str, clones: Path, work: Path, target_python: str) -> Path:
    """The target repository for one run: parent + test part, seed config, all committed."""
    missing = missing_modules(target_python, ["pytest", *case.requires])
    if missing:
        raise RuntimeError(f"{target_python} cannot import {', '.join(missing)}: pip install them")
    folder = work / f"{case.id}-{variant}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    tree = folder / "repo"
    source = clone_source(clones, case.repo)
    git(folder, "clone", "-q", "--no-hardlinks", str(source), str(tree))
    git(tree, "checkout", "-q", "-B", "main", case.parent)
    git(tree, "remote", "remove", "origin")
    git(tree, "config", "user.name", "bench user")
    git(tree, "config", "user.email", "bench@localhost")
    git(tree, "config", "commit.gpgsign", "false")
    if case.kind != "feature":  # a feature's tests are the agent's to write
        tests = git(tree, "diff", "--binary", case.parent, case.fix, "--", *case.test_files)
        git(tree, "apply", "--whitespace=nowarn", stdin=tests)
    if case.pythonpath:
        add_pythonpath(tree, case.pythonpath)
    commit_all(tree, f"baseline ({case.id})")
    patch = folder / f"{variant}.patch"
    make_patch(tree, case, variant, patch)
    if case.env_pythonpath:
        target_python = wrapper_python(folder, target_python, tree / case.pythonpath)
    (tree / "seed.toml").write_text(seed_toml(patch, target_python), encoding="utf-8")
    init = subprocess.run(
        [*seed_command(), "--root", str(tree), "init"], capture_output=True, text=True, check=False
    )
    if init.returncode != 0:
        raise RuntimeError(f"seed init failed: {(init.stdout + init.stderr).strip()[:400]}")
    commit_all(tree, "seed config for the benchmark")
    for path, text in case.generated.items():
        (tree / path).write_text(text, encoding="utf-8")
    for line in case.built:
        subprocess.run(["sh", "-c", line], cwd=tree, check=True, capture_output=True)
    if case.kind == "feature":  # the person's task, dropped into the inbox as they would
        (tree / "inbox").mkdir(exist_ok=True)
        (tree / "inbox" / f"{case.id}.md").write_text(case.task + "\n", encoding="utf-8")
    return tree


def wrapper_python(folder: Path, python: str, entry: Path) -> str:
    """An interpreter that runs python with entry (the checkout's src) first on PYTHONPATH,
    as an editable install's path entry would put it: in the sandbox the tree under test
    sits at the checkout's path, so the entry names the tree's code."""
    path = folder / "python"
    path.write_text(
        f'#!/bin/sh\nPYTHONPATH="{entry}${{PYTHONPATH:+:$PYTHONPATH}}" exec {python} "$@"\n',
        encoding="utf-8",
    )
    path.chmod(0o755)
    return str(path)


def seed_command() -> list[str]:
    """seed.py of the checkout under test, with its own virtualenv when it has one."""
    python = SEED[0] / ".venv" / "bin" / "python"
    return [str(python if python.exists() else sys.executable), str(SEED[0] / "seed.py")]


def last_record(tree: Path) -> dict[str, Any]:
    path = tree / "history" / "records.jsonl"
    if not path.exists():
        return {}
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else {}


def plan_of(tree: Path, iteration_id: str) -> dict[str, Any]:
    path = tree / "history" / iteration_id / "plan.json"
    if not iteration_id or not path.exists():
        plans = sorted((tree / "history").glob("*/plan.json"), key=lambda p: p.stat().st_mtime)
        if not plans:
            return {}
        path = plans[-1]
    return json.loads(path.read_text(encoding="utf-8"))


def recall(allowed: list[str], files: list[str]) -> float:
    """The share of the fix's source files the allowlist admits (empty: any file)."""
    if not allowed:
        return 1.0
    hits = [f for f in files if any(fnmatch.fnmatchcase(f, glob) for glob in allowed)]
    return len(hits) / len(files)


def run_one(
    case: Case, variant: str, clones: Path, work: Path, target_python: str, timeout_s: float
) -> Result:
    result = Result(case=case.id, variant=variant, kind=case.kind)
    started = time.monotonic()
    try:
        tree = build(case, variant, clones, work, target_python)
        result.folder = str(tree)
        try:
            done = subprocess.run(
                [*seed_command(), "--root", str(tree), "once"],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
            result.exit_code = done.returncode
            (tree.parent / "seed.out").write_text(done.stdout + done.stderr, encoding="utf-8")
        except subprocess.TimeoutExpired:
            result.error = f"seed once did not finish within {timeout_s:.0f}s"
        record = last_record(tree)
        result.outcome = str(record.get("outcome") or "")
        result.failure_category = str(record.get("failure_category") or "")
        result.reason = str(record.get("reason") or "")[:300]
        gap = record.get("gap") or {}
        result.gap = str(gap.get("key") or "")
        if result.gap and case.kind == "feature":
            result.gap_is_case = result.gap == f"inbox:{case.id}.md"
        elif result.gap:
            result.gap_is_case = result.gap.removeprefix("pytest:") in case.failing
        plan = plan_of(tree, str(record.get("iteration_id") or ""))
        if plan:
            result.allowed_paths = list(plan.get("allowed_paths") or [])
            changed = [*case.source_files, *case.other_files] if case.kind == "feature" else []
            result.recall = recall(result.allowed_paths, changed or case.source_files)
    except (RuntimeError, OSError, ValueError) as exc:
        result.error = str(exc)
    result.seconds = round(time.monotonic() - started, 1)
    return result


def summarise(results: list[Result]) -> dict[str, Any]:
    honest = [r for r in results if r.variant == "honest"]
    wrong = [r for r in results if r.variant != "honest"]
    recalls = [r.recall for r in honest if r.recall is not None]
    return {
        "honest_runs": len(honest),
        "landed": sum(r.landed for r in honest),
        "land_rate": sum(r.landed for r in honest) / len(honest) if honest else None,
        "wrong_runs": len(wrong),
        "refused": sum((r.exit_code not in (None, 0)) and r.outcome != "SUCCESS" for r in wrong),
        "refusal_rate": (
            sum((r.exit_code not in (None, 0)) and r.outcome != "SUCCESS" for r in wrong)
            / len(wrong)
            if wrong
            else None
        ),
        "mean_allowlist_recall": sum(recalls) / len(recalls) if recalls else None,
        "halts": sum(r.exit_code == EXIT_HALTED for r in results),
        "halts_on_honest": sum(r.exit_code == EXIT_HALTED for r in honest),
        "gap_not_the_case": sum(r.gap_is_case is False for r in results),
        "errors": sum(bool(r.error) for r in results),
        "honest_by_kind": {
            kind: {
                "runs": len(runs),
                "landed": sum(r.landed for r in runs),
                "kept": sum(r.outcome == "KEPT" for r in runs),
                "refused": sum(not r.landed and r.outcome != "KEPT" for r in runs),
            }
            for kind in sorted({r.kind for r in honest})
            for runs in [[r for r in honest if r.kind == kind]]
        },
    }


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def markdown(results: list[Result], summary: dict[str, Any]) -> str:
    out = [
        "| case | variant | exit | outcome | category | gap is the case's | recall | s | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        note = (r.error or r.reason).replace("|", "/").replace("\n", " ")[:90]
        rec = "" if r.recall is None else f"{r.recall:.2f}"
        gap = "" if r.gap_is_case is None else ("yes" if r.gap_is_case else f"no: {r.gap}")
        out.append(
            f"| {r.case} | {r.variant} | {r.exit_code} | {r.outcome} | {r.failure_category} "
            f"| {gap} | {rec} | {r.seconds:.0f} | {note} |"
        )
    out += [
        "",
        f"- honest fixes landed: {summary['landed']}/{summary['honest_runs']} "
        f"({_rate(summary['land_rate'])})",
        f"- wrong variants refused: {summary['refused']}/{summary['wrong_runs']} "
        f"({_rate(summary['refusal_rate'])})",
        f"- mean allowlist recall (honest runs): {_rate(summary['mean_allowlist_recall'])}",
        f"- halts (exit 3): {summary['halts']} ({summary['halts_on_honest']} on honest fixes)",
        f"- runs where seed chose another gap than the case's tests: {summary['gap_not_the_case']}",
        f"- runner errors: {summary['errors']}",
        *(
            f"- honest {kind}s: {k['landed']} landed, {k['kept']} kept for a person, "
            f"{k['refused']} refused, of {k['runs']}"
            for kind, k in summary["honest_by_kind"].items()
        ),
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.real_fixes.run", description=__doc__)
    parser.add_argument("--clones", type=Path, required=True, help="DIR with a clone per repo")
    parser.add_argument("--case", action="append", default=[], help="run only this case id")
    parser.add_argument("--variant", action="append", choices=VARIANTS, default=[])
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--work",
        type=Path,
        default=Path("/var/tmp/seed-real-fixes"),
        help="where the per-run repositories go; not under /tmp, which the sandbox replaces",
    )
    parser.add_argument(
        "--target-python",
        default=os.environ.get("BENCH_TARGET_PYTHON", "/work/bench-venv/bin/python"),
        help="the interpreter (with pytest) seed uses for the targets' tests",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="per `seed.py once`")
    parser.add_argument("--seed", type=Path, default=SEED_ROOT, help="seed checkout to run")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    SEED[0] = args.seed.resolve()
    cases = load_cases()
    if args.list:
        for case in cases:
            print(f"{case.id}\t{case.repo}\t{case.fix[:10]}\t{case.description}")
        return 0
    if args.case:
        unknown = set(args.case) - {c.id for c in cases}
        if unknown:
            parser.error(f"unknown case(s): {', '.join(sorted(unknown))}")
        cases = [c for c in cases if c.id in args.case]
    variants = args.variant or list(VARIANTS)
    work = args.work.resolve()
    results: list[Result] = []
    for case in cases:
        for variant in variants:
            result = run_one(
                case, variant, args.clones.resolve(), work, args.target_python, args.timeout
            )
            print(
                f"{case.id} {variant}: exit {result.exit_code} {result.outcome} "
                f"{result.failure_category} {result.error}".rstrip(),
                file=sys.stderr,
                flush=True,
            )
            results.append(result)
    summary = summarise(results)
    print(markdown(results, summary))
    if args.json:
        payload = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "seed_commit": _seed_commit(),
            "summary": summary,
            "results": [asdict(r) for r in results],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


def _seed_commit() -> str:
    try:
        return git(SEED[0], "rev-parse", "HEAD").strip()
    except RuntimeError:
        return ""


if __name__ == "__main__":
    sys.exit(main())

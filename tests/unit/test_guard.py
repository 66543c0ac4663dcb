"""The guard on real staged diffs: protected paths, allowlist, path safety, growth, hygiene."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from domain import FailureCategory, IterationOutcome, Risk
from kernel.config import GrowthConfig, GuardConfig, RiskLimit
from kernel.contracts import matches_any, protected_patterns
from kernel.isolation import gitops
from kernel.judging import guard
from modules.planner.revision import missed_files
from tests.support import SAMPLE, git, make_repo
from tests.unit.factories import gap, plan, record

FILES = {**SAMPLE, "kernel/core.py": "X = 1\n", "tests/data/input.txt": "1 2\n"}


def _inspect(
    tmp: Path,
    change: Callable[[Path], Any],
    *,
    allowed: tuple[str, ...] = (),
    risk: Risk = Risk.MEDIUM,
    config: GuardConfig | None = None,
) -> list[guard.Finding]:
    root = make_repo(tmp / "repo", FILES)
    base = git(root, "rev-parse", "HEAD").strip()
    change(root)
    gitops.stage_all(root)
    changes = gitops.staged_changes(root, base)
    inserted, deleted = gitops.numstat(root, base)
    p = plan(gap(), risk=risk, allowed_paths=allowed)
    return guard.inspect_changes(
        root, base, changes, p, protected_patterns(()), inserted, deleted, config
    )


def _categories(findings: list[guard.Finding]) -> set[FailureCategory]:
    return {f.category for f in findings}


def test_a_clean_change_passes(tmp_path: Path) -> None:
    findings = _inspect(
        tmp_path, lambda r: (r / "calc.py").write_text(SAMPLE["calc.py"] + "\n# ok\n")
    )
    assert findings == []


def test_a_protected_path_is_a_sandbox_violation(tmp_path: Path) -> None:
    findings = _inspect(tmp_path, lambda r: (r / "kernel/core.py").write_text("X = 2\n"))
    assert _categories(findings) == {FailureCategory.SANDBOX_VIOLATION}
    assert findings[0].path == "kernel/core.py"


def test_a_rename_out_of_a_protected_path_is_caught_by_its_old_name(tmp_path: Path) -> None:
    findings = _inspect(tmp_path, lambda r: os.rename(r / "kernel/core.py", r / "core.py"))
    assert any(f.path == "kernel/core.py" for f in findings)


def test_outside_the_allowlist(tmp_path: Path) -> None:
    findings = _inspect(
        tmp_path, lambda r: (r / "README.txt").write_text("hi\n"), allowed=("calc.py",)
    )
    assert _categories(findings) == {FailureCategory.ALLOWLIST_VIOLATION}
    assert guard.worst(findings) == FailureCategory.ALLOWLIST_VIOLATION
    # the planner reads the files from the record's evidence: the guard's words are its input
    missed = record(
        gap("pytest:x"), 1, IterationOutcome.ROLLBACK, FailureCategory.ALLOWLIST_VIOLATION
    )
    missed = missed.model_copy(update={"evidence": tuple(str(f) for f in findings)})
    assert missed_files([missed]) == ("README.txt",)


def test_a_symlink_out_of_the_worktree(tmp_path: Path) -> None:
    findings = _inspect(tmp_path, lambda r: (r / "leak").symlink_to("/etc/passwd"))
    assert any("symlink points outside" in f.message for f in findings)
    # a link inside the tree is refused too: the guard reads files by their own path, so a
    # link would be judged as one file and run as another (issue 23: conftest.py -> hook.py)
    inside = _inspect(tmp_path / "b", lambda r: (r / "alias.py").symlink_to("calc.py"))
    assert [(f.category, f.path) for f in inside] == [
        (FailureCategory.SANDBOX_VIOLATION, "alias.py")
    ]
    assert "links are refused" in inside[0].message


def test_a_change_behind_an_existing_link_under_a_guarded_name(tmp_path: Path) -> None:
    def link(root: Path) -> None:
        (root / "support").mkdir()
        (root / "support" / "hooks.py").write_text("X = 1\n")
        (root / "conftest.py").symlink_to("support/hooks.py")
        (root / "notes.md").symlink_to("README.md")

    root = make_repo(tmp_path / "repo", {**FILES, "README.md": "hi\n"})
    link(root)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "links")
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "support" / "hooks.py").write_text("X = 2\n")
    (root / "README.md").write_text("hello\n")
    gitops.stage_all(root)
    changes = gitops.staged_changes(root, base)
    findings = guard.inspect_changes(root, base, changes, plan(gap()), (), 2, 2)
    # what conftest.py shows changed; a link under a name the guard does not read is no matter
    assert [(f.category, f.path) for f in findings] == [
        (FailureCategory.SANDBOX_VIOLATION, "support/hooks.py")
    ]
    assert "conftest.py" in findings[0].message


def test_executable_test_data(tmp_path: Path) -> None:
    findings = _inspect(tmp_path, lambda r: (r / "tests/data/input.txt").chmod(0o755))
    assert [f.message for f in findings] == ["test data was made executable"]


def test_a_nested_repository_and_a_dot_git_folder(tmp_path: Path) -> None:
    def nest(root: Path) -> None:
        inner = make_repo(root / "vendor" / "inner", {"a.txt": "a\n"})
        assert (inner / ".git").is_dir()

    findings = _inspect(tmp_path, nest)
    assert any("gitlink" in f.message for f in findings)


def test_growth_limits_follow_the_risk_class_and_the_config(tmp_path: Path) -> None:
    def six_files(root: Path) -> None:
        for n in range(6):
            (root / f"new{n}.py").write_text("x = 1\n")

    low = _inspect(tmp_path / "low", six_files, risk=Risk.LOW)
    assert _categories(low) == {FailureCategory.GROWTH_LIMIT}
    assert "6 new files; a low-risk plan may add 5" in low[0].message
    assert _inspect(tmp_path / "medium", six_files, risk=Risk.MEDIUM) == []
    tight = GuardConfig(growth=GrowthConfig(medium=RiskLimit(new_files=2, changed_lines=800)))
    assert _categories(_inspect(tmp_path / "tight", six_files, config=tight)) == {
        FailureCategory.GROWTH_LIMIT
    }
    lines = GuardConfig(growth=GrowthConfig(medium=RiskLimit(new_files=9, changed_lines=3)))
    findings = _inspect(tmp_path / "lines", six_files, config=lines)
    assert "6 changed lines; a medium-risk plan may change 3" in findings[0].message


def test_a_file_over_the_size_limit(tmp_path: Path) -> None:
    config = GuardConfig(max_file_bytes=1000)
    findings = _inspect(
        tmp_path, lambda r: (r / "blob.bin").write_bytes(b"\0" * 5000), config=config
    )
    assert _categories(findings) == {FailureCategory.GROWTH_LIMIT}
    # an existing big file that does not grow (a lock file) is not growth
    small = GuardConfig(max_file_bytes=10)
    shrunk = _inspect(
        tmp_path / "b", lambda r: (r / "calc.py").write_text("x = 1\n" * 3), config=small
    )
    assert shrunk == []
    grown = _inspect(
        tmp_path / "c", lambda r: (r / "calc.py").write_text("x = 1\n" * 100), config=small
    )
    assert _categories(grown) == {FailureCategory.GROWTH_LIMIT}


WEAKENINGS: dict[str, Callable[[Path], Any]] = {
    "deleted test file": lambda r: (r / "tests/test_calc.py").unlink(),
    "skip": lambda r: (r / "tests/test_calc.py").write_text(
        "import pytest\n"
        + SAMPLE["tests/test_calc.py"].replace("def test_add", "@pytest.mark.skip\ndef test_add")
    ),
    "weakened assert": lambda r: (r / "tests/test_calc.py").write_text(
        SAMPLE["tests/test_calc.py"].replace("assert add(2, 3) == 5", "assert add(2, 3)")
    ),
    "new conftest": lambda r: (r / "conftest.py").write_text("collect_ignore = ['tests']\n"),
    "pytest.toml anywhere": lambda r: (r / "pytest.toml").write_text(""),
    "test file moved where pytest does not look": lambda r: os.rename(
        r / "tests/test_calc.py", r / "calc_checks.py"
    ),
}


@pytest.mark.parametrize("name", sorted(WEAKENINGS))
def test_test_weakening_is_a_hygiene_violation(tmp_path: Path, name: str) -> None:
    findings = _inspect(tmp_path, WEAKENINGS[name])
    assert FailureCategory.HYGIENE_VIOLATION in _categories(findings), findings


def test_moving_a_test_file_within_the_tests_is_fine(tmp_path: Path) -> None:
    findings = _inspect(
        tmp_path, lambda r: os.rename(r / "tests/test_calc.py", r / "tests/test_arith.py")
    )
    assert findings == []


def test_the_worst_finding_decides() -> None:
    findings = [
        guard.Finding(FailureCategory.GROWTH_LIMIT, ".", "big"),
        guard.Finding(FailureCategory.HYGIENE_VIOLATION, "t.py", "skip"),
        guard.Finding(FailureCategory.SANDBOX_VIOLATION, "kernel/x.py", "protected"),
    ]
    assert guard.worst(findings) == FailureCategory.SANDBOX_VIOLATION


def test_growth_limits_are_clamped_to_the_plans_smaller_budget() -> None:
    p = plan(gap(), risk=Risk.HIGH)
    assert guard.growth_limits(p) == (10, 400)  # PlanBudget's defaults under high's 20/1500
    assert guard.growth_limits(plan(gap(), risk=Risk.LOW)) == (5, 300)


def test_git_sees_the_nested_repository_as_a_gitlink(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    make_repo(root / "inner", {"b.txt": "b\n"})
    subprocess.run(["git", "add", "-A"], cwd=root, capture_output=True, check=True)
    assert "160000" in git(root, "ls-files", "-s", "inner")


def test_a_path_with_a_line_break_is_still_under_its_protected_folder() -> None:
    # an agent naming a file "kernel/x\ny" must not slip past the protected list
    assert matches_any("kernel/x\ny.py", protected_patterns(()))
    assert matches_any("history/a\n", protected_patterns(()))
    assert not matches_any("src/kernel\n/x", protected_patterns(()))

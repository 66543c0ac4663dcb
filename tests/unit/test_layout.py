"""The kernel's layout: no import cycle, and a floor plan (kernel/README.md) naming every file."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHAPE = REPO / "bench" / "kernel_shape.py"


def _check(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SHAPE), "--check", str(repo)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_kernel_has_no_import_cycle_and_its_floor_plan_names_every_file() -> None:
    result = _check(REPO)
    assert result.returncode == 0, result.stdout


def _copy_kernel(tmp_path: Path) -> Path:
    shutil.copytree(
        REPO / "kernel", tmp_path / "kernel", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tmp_path


def test_a_function_level_import_that_closes_a_cycle_is_found(tmp_path: Path) -> None:
    repo = _copy_kernel(tmp_path)
    assert "from kernel import gitops" in (repo / "kernel" / "paths.py").read_text()
    gitops = repo / "kernel" / "gitops.py"
    gitops.write_text(
        gitops.read_text() + "\n\ndef _late() -> None:\n    from kernel import paths  # noqa\n"
    )
    result = _check(repo)
    assert result.returncode == 1
    assert "import cycle: kernel.gitops <-> kernel.paths" in result.stdout


def test_a_file_missing_from_the_floor_plan_is_named(tmp_path: Path) -> None:
    repo = _copy_kernel(tmp_path)
    (repo / "kernel" / "newcomer.py").write_text('"""A file nobody described."""\n')
    result = _check(repo)
    assert result.returncode == 1
    assert "kernel/newcomer.py has no line in kernel/README.md" in result.stdout

"""The ruff a project pins: read from its files, installed into seed's cache, hash checked."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from kernel.config import QualityConfig
from kernel.measuring import pins
from kernel.measuring.gate import adoption, freeze_gate_at, running_ruff_version
from kernel.measuring.measure import run_ruff, run_ruff_format
from tests.support import git, make_repo

FAKE_RUFF = """#!/bin/sh
[ "$1" = --version ] && echo "ruff 0.0.1" && exit 0
if [ "$2" = --help ]; then
  echo "Usage: ruff $1 [OPTIONS] [FILES]..."
  [ "$1" = check ] && echo "--fix --fix-only --unsafe-fixes --no-cache --output-format --ignore-noqa"
  [ "$1" = format ] && echo "--check --no-cache --output-format"
  echo "--config --force-exclude --select"
  exit 0
fi
if [ "$1" = format ]; then
  case "$*" in *--output-format*) echo "warning: --output-format requires preview" >&2;; esac
  echo "Would reformat: a.py"
  exit 1
fi
echo '[{"filename": "a.py", "location": {"row": 1, "column": 1}, "code": "PIN1", "message": "m"}]'
exit 1
"""
"""A stand-in for ruff 0.0.1: one finding of its own, and a formatter that reports in words
only (as ruff before 0.16 does)."""


def _wheel_index(folder: Path, script: str = FAKE_RUFF) -> Path:
    folder.mkdir()
    wheel = folder / "ruff-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("ruff-0.0.1.data/scripts/ruff", script)
        archive.writestr(
            "ruff-0.0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: ruff\nVersion: 0.0.1\n"
        )
        archive.writestr("ruff-0.0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        archive.writestr("ruff-0.0.1.dist-info/RECORD", "")
    return folder


@pytest.mark.parametrize(
    ("files", "version", "where"),
    [
        (
            {
                ".pre-commit-config.yaml": "repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n    rev: c60c980e  # frozen: v0.15.9\n"
            },
            "0.15.9",
            ".pre-commit-config.yaml",
        ),
        (
            {
                ".pre-commit-config.yaml": "- repo: https://github.com/astral-sh/ruff-pre-commit\n  rev: 'v0.4.1'\n"
            },
            "0.4.1",
            ".pre-commit-config.yaml",
        ),
        (
            {"pyproject.toml": '[dependency-groups]\ndev = ["pytest", "ruff==0.9.2"]\n'},
            "0.9.2",
            "pyproject.toml [dependency-groups]",
        ),
        (
            {"pyproject.toml": '[project.optional-dependencies]\nlint = ["ruff == 0.8.0"]\n'},
            "0.8.0",
            "pyproject.toml [project.optional-dependencies]",
        ),
        (
            {"requirements-dev.txt": "pytest\nruff==0.6.3  # lint\n"},
            "0.6.3",
            "requirements-dev.txt",
        ),
        ({"pyproject.toml": '[dependency-groups]\ndev = ["ruff>=0.16"]\n'}, None, ""),
        (
            {"uv.lock": '[[package]]\nname = "ruff"\nversion = "0.16.0"\n'},
            "0.16.0",
            "uv.lock",
        ),
    ],
)
def test_the_pinned_version_is_read_where_projects_pin_it(
    files: dict[str, str], version: str | None, where: str
) -> None:
    pin = pins.pinned_ruff(files.get, tuple(files))
    assert (pin.version, pin.where) == (version, where) if pin else version is None


def test_a_pinned_ruff_is_installed_once_checked_by_hash_and_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    index = _wheel_index(tmp_path / "index")
    exe = pins.install("0.0.1", find_links=index)
    assert exe is not None
    assert exe == tmp_path / "cache" / "seed" / "tools" / "ruff-0.0.1" / "ruff"
    assert (exe.parent / "wheel.sha256").read_text().endswith("ruff-0.0.1-py3-none-any.whl\n")
    root = make_repo(
        tmp_path / "repo",
        {"requirements-dev.txt": "ruff==0.0.1\n", "ruff.toml": "", "a.py": "x = 1\n"},
    )
    gate = freeze_gate_at(
        root, git(root, "rev-parse", "HEAD").strip(), tmp_path / "g", QualityConfig()
    )
    assert gate.ruff_version == "0.0.1"
    assert (
        "ruff: version 0.0.1 as pinned in requirements-dev.txt (seed's tool cache)"
        in gate.adoption.why
    )
    assert [d.rule for d in run_ruff(root, gate, 60).diagnostics] == ["PIN1"]
    formatted = run_ruff_format(root, gate, 60)
    assert formatted.ran and [(d.file, d.rule) for d in formatted.diagnostics] == [
        ("a.py", "unformatted")
    ]
    # bytes that no longer hash to what was recorded are never run
    exe.write_text(FAKE_RUFF.replace("PIN1", "EVIL"))
    m = run_ruff(root, gate, 60)
    assert not m.ran and "sha256" in m.error
    assert pins.binary("0.0.1") is None


def test_a_pinned_pyright_that_seed_does_not_run_is_named_in_status() -> None:
    files = {
        "pyrightconfig.json": "{}",
        "uv.lock": '[[package]]\nname = "pyright"\nversion = "1.1.1"\n',
    }
    why = adoption(files.get, QualityConfig()).why
    assert (
        f"pyright: differs: runs {running_ruff_version('pyright')}, not 1.1.1 as pinned in uv.lock"
        in why
    )


def test_a_failed_install_is_tried_again_a_day_later_not_on_every_analysis(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert pins.install("0.0.1", tmp_path / "tools", find_links=empty) is None
    index = _wheel_index(tmp_path / "index")
    assert pins.install("0.0.1", tmp_path / "tools", find_links=index) is None  # not yet
    marker = tmp_path / "tools" / "ruff-0.0.1" / "failed"
    old = marker.stat().st_mtime - pins.RETRY_AFTER_S - 1
    os.utime(marker, (old, old))
    assert pins.install("0.0.1", tmp_path / "tools", find_links=index) is not None
    assert not marker.exists()


def _pinning(root: Path, version: str, more: dict[str, str]) -> Path:
    hook = f"repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n    rev: v{version}\n"
    return make_repo(root, {".pre-commit-config.yaml": hook, **more})


def test_an_old_pinned_ruff_runs_with_only_the_flags_it_has(tmp_path: Path) -> None:
    """ruff 0.0.282 (validators pins it) has no --no-unsafe-fixes and says `--format json`."""
    if pins.install("0.0.282") is None:
        pytest.skip("ruff 0.0.282 is not in seed's tool cache and PyPI does not answer")
    root = _pinning(
        tmp_path / "repo",
        "0.0.282",
        {"pyproject.toml": '[tool.ruff]\nselect = ["F"]\n', "a.py": "import os\n"},
    )
    gate = freeze_gate_at(
        root, git(root, "rev-parse", "HEAD").strip(), tmp_path / "g", QualityConfig()
    )
    assert gate.ruff_version == "0.0.282"
    measured = run_ruff(root, gate, 60)
    assert measured.ran, measured.error
    assert [(d.file, d.rule, d.fixable) for d in measured.diagnostics] == [("a.py", "F401", True)]
    formatted = run_ruff_format(root, gate, 60)  # its formatter has no --check: said, not run
    assert not formatted.ran and "ruff 0.0.282 has no `ruff format --check`" in formatted.error


def test_a_pinned_ruff_that_cannot_run_without_writing_is_a_difference_not_a_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    index = _wheel_index(tmp_path / "index", FAKE_RUFF.replace(" --fix-only", ""))
    assert pins.install("0.0.1", find_links=index) is not None
    root = _pinning(tmp_path / "repo", "0.0.1", {"ruff.toml": "", "a.py": "x = 1\n"})
    gate = freeze_gate_at(
        root, git(root, "rev-parse", "HEAD").strip(), tmp_path / "g", QualityConfig()
    )
    assert gate.ruff_version == ""  # seed's own ruff judges, and status says why
    assert (
        f"ruff: differs: runs {running_ruff_version()}, not 0.0.1 as pinned in "
        ".pre-commit-config.yaml (ruff 0.0.1 has no `ruff check --no-fix-only`, which seed "
        "needs to run it)" in gate.adoption.why
    )
    measured = run_ruff(root, gate, 60)
    assert measured.ran and "PIN1" not in [d.rule for d in measured.diagnostics]

"""ruff-fix as the project runs ruff (issue 41): the version it pins, formatting only where it
adopted ruff format (never on a project formatted with black), and a commit message that says
what it changed, not ruff's own output."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.measuring import pins
from tests.support import git, make_repo, records, seed

PINNED = "0.0.282"
"""An old ruff (validators pins it): no `ruff format` at all, `--format json`."""

BLACK_PROJECT = {
    ".gitignore": "history/\n__pycache__/\n",
    ".pre-commit-config.yaml": (
        "repos:\n"
        "- repo: https://github.com/astral-sh/ruff-pre-commit\n"
        f"  rev: v{PINNED}\n"
        "  hooks:\n"
        "  - id: ruff\n"
        "- repo: https://github.com/psf/black\n"
        "  rev: 23.7.0\n"
        "  hooks:\n"
        "  - id: black\n"
    ),
    "pyproject.toml": (
        '[tool.ruff]\nselect = ["F"]\n\n'
        "[tool.black]\nskip-string-normalization = true\n\n"
        '[tool.pytest.ini_options]\npythonpath = ["src"]\n'
    ),
    "src/humanize/__init__.py": "",
    # black keeps the single quotes here; ruff format would not
    "src/humanize/filesize.py": (
        "import os\nimport sys\n\n\ndef size(n: int) -> str:\n"
        "    return '%d B' % n if sys else ''\n"
    ),
    "tests/test_filesize.py": (
        "from humanize.filesize import size\n\n\n"
        "def test_size() -> None:\n    assert size(3) == '3 B'\n"
    ),
}


def test_ruff_fix_runs_the_pinned_ruff_never_formats_a_black_project_and_says_what_it_changed(
    tmp_path: Path,
) -> None:
    if pins.install(PINNED) is None:
        pytest.skip(f"ruff {PINNED} is not in seed's tool cache and PyPI does not answer")
    repo = make_repo(tmp_path / "repo", BLACK_PROJECT, '[agent]\nbackend = "ruff-fix"\n')
    result = seed(repo, "once")
    assert result.returncode == 0, result.stderr
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS", record
    assert record["gap"]["key"] == "ruff:src/humanize/filesize.py:F401"
    assert PINNED in record["agent_version"]
    # only the unused import went: no formatting of ruff's on a black project
    assert (repo / "src/humanize/filesize.py").read_text() == (
        "import sys\n\n\ndef size(n: int) -> str:\n    return '%d B' % n if sys else ''\n"
    )
    body = git(repo, "log", "-1", "--format=%B")
    assert "removed unused import `os` (F401) in src/humanize/filesize.py" in body, body
    assert "$ " not in body and "ruff format" not in body, body

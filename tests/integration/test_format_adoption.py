"""ruff format as the project runs it (issue 41): adopted where its scripts or a local
pre-commit hook run it, and only Python files count (newer ruff formats the Python code
blocks of Markdown files too: carpedm20/emoji's utils/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import make_repo, seed

UGLY = "x  =  1\n"
MARKDOWN = "# Utils\n\n```python\nimport emoji\nprint(emoji.emojize( ':thumbs_up:' ))\n```\n"
LOCAL_HOOK = (
    "repos:\n"
    "-   repo: local\n"
    "    hooks:\n"
    "    -   id: local-ruff-format\n"
    "        name: ruff format\n"
    "        entry: ruff format\n"
    "        language: system\n"
    "        types: [python]\n"
)


def _format_keys(root: Path) -> list[str]:
    shown = seed(root, "gaps", "--json")
    assert shown.returncode == 0, shown.stderr
    keys = [str(g["key"]) for g in json.loads(shown.stdout)["gaps"]]
    return sorted(k for k in keys if k.startswith("ruff-format:"))


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        # fastapi/asyncer
        ("scripts/lint.sh", "set -e\nruff check asyncer\nruff format asyncer --check\n", ""),
        # encode/starlette
        ("scripts/check", '#!/bin/sh -e\n${PREFIX}ruff format --check --diff "$SOURCE"\n', ""),
        (".pre-commit-config.yaml", LOCAL_HOOK, "a pre-commit hook that runs `ruff format`"),
    ],
)
def test_ruff_format_is_adopted_where_a_script_or_a_local_hook_runs_it(
    tmp_path: Path, name: str, text: str, why: str
) -> None:
    files = {"ugly.py": UGLY, "README.md": "# x\n", name: text, ".gitignore": "history/\n"}
    root = make_repo(tmp_path / "repo", files)  # no tools named: what it adopts decides
    assert _format_keys(root) == ["ruff-format:ugly.py"]
    status = json.loads(seed(root, "status", "--json").stdout)
    said = why or f"`ruff format` in {name}"
    assert f"ruff-format: on ({said})" in status["tools"], status["tools"]


def test_a_markdown_file_with_a_python_block_is_no_format_gap(tmp_path: Path) -> None:
    files = {
        "pyproject.toml": "[tool.ruff.format]\n",
        "utils/README.md": MARKDOWN,
        "utils/tool.py": UGLY,
        "ok.py": "y = 2\n",
        ".gitignore": "history/\n",
    }
    root = make_repo(tmp_path / "repo", files)
    assert _format_keys(root) == ["ruff-format:utils/tool.py"]

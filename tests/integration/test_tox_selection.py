"""tox's default posargs are a selection of the project's own that seed does not run; they are
named in `differences` (gaps --json, status --json and status), never in `errors` (issue 41)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from tests.support import make_repo, seed

_QUALITY = '[quality]\ntools = ["pytest"]\n'

FILES = {
    ".gitignore": "__pycache__/\nhistory/\n",
    "tox.ini": (
        "[tox]\nenvlist = py3\n\n[testenv]\ndeps = pytest\n"
        'commands =\n    pytest {posargs:-m "not slow"}\n'
    ),
    "tests/test_a.py": "def test_a() -> None:\n    assert True\n",
}

SAID = 'tox runs pytest with `-m "not slow"` by default (tox.ini [testenv]); seed runs every test'


def test_tox_default_posargs_are_named_in_differences(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES, config=_QUALITY)
    shown = seed(root, "gaps", "--json")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert SAID in cast(list[str], report["differences"]), report
    assert report["errors"] == []
    status = json.loads(seed(root, "status", "--json").stdout)
    assert SAID in status["differences"], status
    assert SAID in seed(root, "status").stdout


def test_tox_without_default_posargs_says_nothing(tmp_path: Path) -> None:
    files = {**FILES, "tox.ini": "[testenv]\ncommands = pytest {posargs}\n"}
    root = make_repo(tmp_path / "repo", files, config=_QUALITY)
    report = json.loads(seed(root, "gaps", "--json").stdout)
    assert not any("tox runs" in d for d in report["differences"]), report

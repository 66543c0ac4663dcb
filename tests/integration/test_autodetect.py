"""backend = "auto": the first installed CLI in a fixed order; none installed: ruff-fix and waiting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import (
    SAMPLE,
    fake_cli_config,
    fake_cli_env,
    fake_trace,
    isolated_path,
    make_repo,
    records,
    seed,
)

ORDER = ("claude", "codex", "aider", "gemini", "opencode", "mini")


def status(repo: Path, env: dict[str, str]) -> dict[str, str]:
    result = seed(repo, "status", "--json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("first", range(len(ORDER)))
def test_auto_picks_the_first_installed_cli_in_order(tmp_path: Path, first: int) -> None:
    installed = ORDER[first:][::-1]  # the PATH order must not matter
    repo = make_repo(tmp_path / "repo", SAMPLE)
    env = {"PATH": isolated_path(tmp_path, installed)}
    found = status(repo, env)
    assert found["backend"] == ORDER[first]
    assert found["backend_reason"].startswith(f"auto: {ORDER[first]} found at {tmp_path / 'bin'}")


def test_a_configured_backend_wins_over_auto_detection(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE, '[agent]\nbackend = "mini"\n')
    found = status(repo, {"PATH": isolated_path(tmp_path, ORDER)})
    assert found["backend"] == "mini" and "configured in seed.toml" in found["backend_reason"]

    text = seed(repo, "status", env={"PATH": isolated_path(tmp_path / "none", [])})
    [line] = [line for line in text.stdout.splitlines() if line.startswith("backend:")]
    assert "mini" in line and "configured in seed.toml, but mini is not on PATH" in line


def test_with_no_cli_installed_ruff_fix_takes_lint_and_the_rest_waits(tmp_path: Path) -> None:
    files = {
        **SAMPLE,
        "calc.py": "import os\n\n\n" + SAMPLE["calc.py"].replace("a + b", "a - b"),
        "pyproject.toml": '[tool.ruff.lint]\nselect = ["F"]\n',  # ruff takes part: F401 counts
    }
    repo = make_repo(tmp_path / "repo", files)
    env = fake_cli_env(tmp_path, {}, path=isolated_path(tmp_path, []))

    found = status(repo, env)
    assert found["backend"] == "ruff-fix"
    assert "no agent installed" in found["backend_reason"]
    assert all(name in found["backend_reason"] for name in ORDER)

    result = seed(repo, "once", env=env)

    assert result.returncode == 0, result.stderr
    # once records one iteration: the failing test no agent can take is passed over in the log
    [fixed] = records(repo)
    assert "passed over pytest:tests/test_calc.py::test_add" in result.stderr
    assert (fixed["gap"]["source"], fixed["outcome"], fixed["backend"]) == (
        "ruff",
        "SUCCESS",
        "ruff-fix",
    )
    assert "import os" not in (repo / "calc.py").read_text()
    assert fake_trace(tmp_path) == []


def test_auto_runs_the_detected_cli(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {**SAMPLE, "ROADMAP.md": "- [ ] add a sub function\n"},
        fake_cli_config("auto"),
    )
    edit = [{"append": "calc.py", "text": "\n\ndef sub(a, b):\n    return a - b\n"}]
    test = "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
    behaviour = {"edits": [*edit, {"write": "tests/test_sub.py", "text": test}]}
    env = fake_cli_env(tmp_path, behaviour, path=isolated_path(tmp_path, ["aider", "opencode"]))

    result = seed(repo, "once", env=env)

    assert result.returncode == 0, result.stderr
    [record] = records(repo)
    assert record["backend"] == "aider" and record["outcome"] == "SUCCESS"
    assert record["agent_version"] == "aider 0.86.2"
    assert [t["tool"] for t in fake_trace(tmp_path)] == ["aider", "aider"]

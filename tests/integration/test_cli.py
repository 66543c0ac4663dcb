"""The command line as a user meets it: --help everywhere, --json that round-trips, init, add, resume."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

from domain import DaemonStatus, GapReport, IterationPlan
from kernel.shell.cli import GITIGNORE_LINES
from tests.support import SAMPLE, make_repo, records, seed

COMMANDS = [
    "run",
    "once",
    "gaps",
    "plan",
    "status",
    "history",
    "report",
    "add",
    "resume",
    "init",
    "selfcheck",
    "test",
]


@pytest.fixture(scope="module")
def lint_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files = {
        **SAMPLE,
        "calc.py": "import os\n\n\n" + SAMPLE["calc.py"],
        "ROADMAP.md": "# Soon\n- [ ] add a sub function\n",
        "pyproject.toml": '[tool.ruff.lint]\nselect = ["F"]\n',  # ruff takes part: F401 counts
    }
    return make_repo(
        tmp_path_factory.mktemp("cli") / "repo", files, '[agent]\nbackend = "ruff-fix"\n'
    )


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_on_every_command(tmp_path: Path, command: str | None) -> None:
    args = ["--help"] if command is None else [command, "--help"]
    # `test` wants the test extras before it reads --help: the suite's interpreter has them
    result = seed(tmp_path, *args, python=sys.executable)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


def test_unknown_command_is_usage_error(tmp_path: Path) -> None:
    result = seed(tmp_path, "frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_not_a_git_repository_is_usage_error(tmp_path: Path) -> None:
    result = seed(tmp_path, "status")
    assert result.returncode == 2
    assert "not inside a git repository" in result.stderr


def test_gaps_json_round_trips_and_ranks_lint_before_roadmap(lint_repo: Path) -> None:
    result = seed(lint_repo, "gaps", "--json")
    assert result.returncode == 0, result.stderr
    report = GapReport.model_validate_json(result.stdout)
    assert [g.key for g in report.gaps][:1] == ["ruff:calc.py:F401"]
    assert report.gaps[-1].source == "roadmap"
    assert json.loads(report.model_dump_json()) == json.loads(result.stdout)
    text = seed(lint_repo, "gaps")
    assert "F401" in text.stdout and "add a sub function" in text.stdout


def test_plan_json_round_trips_and_changes_nothing(lint_repo: Path) -> None:
    result = seed(lint_repo, "plan", "--json")
    assert result.returncode == 0, result.stderr
    plan = IterationPlan.model_validate_json(result.stdout)
    assert plan.gap.key == "ruff:calc.py:F401"
    # the checks the iteration runs: lint_repo configures ruff, not pyright or ruff format
    checks = {c.check.value for c in plan.criteria}
    assert "ruff" in checks and not checks & {"pyright", "ruff_format"}, checks
    assert records(lint_repo) == []


def test_plan_shows_what_the_iteration_runs_the_kernels_kind_and_checks(tmp_path: Path) -> None:
    files = {
        **SAMPLE,
        "ROADMAP.md": "# Soon\n- [ ] document add() in the README\n",
        "README.md": "# calc\n",
        "pyproject.toml": '[tool.ruff.lint]\nselect = ["F"]\n',
    }
    repo = make_repo(tmp_path / "repo", files, '[agent]\nbackend = "none"\n')
    result = seed(repo, "plan")
    assert result.returncode == 0, result.stderr
    shown = result.stdout
    assert "roadmap" in shown and "kind:  docs" in shown, shown
    assert "(docs: no code may change but docstrings and comments)" in shown, shown
    assert "check: pyright" not in shown and "check: ruff_format" not in shown, shown
    plan = IterationPlan.model_validate_json(seed(repo, "plan", "--json").stdout)
    assert plan.task_kind.value == "docs"
    assert any(n.startswith("kind docs (fixed by the kernel") for n in plan.notes), plan.notes


def test_status_json_round_trips(lint_repo: Path) -> None:
    result = seed(lint_repo, "status", "--json")
    assert result.returncode == 0, result.stderr
    status = DaemonStatus.model_validate_json(result.stdout)
    assert status.running is False and status.halted is False and status.root == str(lint_repo)
    shown = seed(lint_repo, "status").stdout
    assert "not running" in shown
    # which tools take part, and why: lint_repo configures ruff, not pyright or ruff format
    assert status.tools[0] == "ruff: on (configured)"
    assert "pyright: off (no [tool.pyright] or pyrightconfig.json)" in status.tools
    assert "tools:       ruff: on (configured)" in shown
    # and how the kernel's pytest run differs from the project's own (pytestconfig.differences)
    assert any(t.startswith("pytest: no .pytest_cache") for t in status.tools)


def test_init_writes_config_gitignore_and_readmes_without_overwriting(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n", ".gitignore": "*.log\n"})
    (repo / "inbox").mkdir()
    (repo / "inbox" / "README.md").write_text("mine\n")
    result = seed(repo, "init")
    assert result.returncode == 0, result.stderr
    config = tomllib.loads((repo / "seed.toml").read_text())
    assert config["agent"]["backend"] == "auto"
    gitignore = (repo / ".gitignore").read_text().splitlines()
    assert gitignore[0] == "*.log" and all(line in gitignore for line in GITIGNORE_LINES)
    assert (repo / "inbox" / "README.md").read_text() == "mine\n"
    assert (repo / "history" / "README.md").exists()
    (repo / "seed.toml").write_text('[agent]\nbackend = "none"\n')
    again = seed(repo, "init")
    assert again.returncode == 0 and "kept the existing seed.toml" in again.stdout
    assert (repo / "seed.toml").read_text() == '[agent]\nbackend = "none"\n'
    assert (repo / ".gitignore").read_text().count("history/*") == 1


def test_add_writes_a_task_the_analysers_see(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE, '[agent]\nbackend = "none"\n')
    result = seed(repo, "add", "Add a sub function", "--priority", "high")
    assert result.returncode == 0, result.stderr
    path = Path(result.stdout.strip())
    assert path.parent == repo / "inbox" and path.suffix == ".md"
    assert 'priority = "high"' in path.read_text()
    import os
    import time

    past = time.time() - 5
    os.utime(path, (past, past))
    report = GapReport.model_validate_json(seed(repo, "gaps", "--json").stdout)
    assert [g.title for g in report.gaps if g.source == "inbox"] == ["Add a sub function"]


def test_resume_clears_a_halt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE)
    (repo / "history").mkdir()
    (repo / "history" / "halt.json").write_text(
        json.dumps({"halted": True, "reason": "SANDBOX_VIOLATION in x"})
    )
    assert DaemonStatus.model_validate_json(seed(repo, "status", "--json").stdout).halted
    assert seed(repo, "once").returncode == 3
    result = seed(repo, "resume")
    assert result.returncode == 0 and "SANDBOX_VIOLATION in x" in result.stdout
    assert not DaemonStatus.model_validate_json(seed(repo, "status", "--json").stdout).halted
    events = [
        json.loads(line)["kind"]
        for line in (repo / "history" / "events.jsonl").read_text().splitlines()
    ]
    assert "resume" in events


def test_once_with_nothing_to_do_exits_5(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE, '[agent]\nbackend = "ruff-fix"\n')
    result = seed(repo, "once")
    assert result.returncode == 5, result.stderr
    assert records(repo) == []


def test_history_lists_and_shows_iterations(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {**SAMPLE, "calc.py": "import os\n\n\n" + SAMPLE["calc.py"]},
        '[agent]\nbackend = "ruff-fix"\n',
    )
    assert seed(repo, "once").returncode == 0
    [record] = records(repo)
    listing = seed(repo, "history")
    assert record["iteration_id"] in listing.stdout and "SUCCESS" in listing.stdout
    assert seed(repo, "history", "--outcome", "rollback").stdout.strip() == "no iterations match"
    assert record["iteration_id"] in seed(repo, "history", "--source", "ruff").stdout
    shown = seed(repo, "history", record["iteration_id"])
    assert shown.returncode == 0 and "# " + record["iteration_id"] in shown.stdout
    assert seed(repo, "history", "iter-9999-20000101-000000").returncode == 2

"""The walking skeleton end to end: real git, real ruff/pyright/pytest, real subprocesses."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.support import (
    SAMPLE,
    UNSANDBOXED,
    agent_config,
    branches,
    git,
    make_repo,
    pid_alive,
    records,
    seed,
    snapshot,
    start_daemon,
    wait_for,
    worktrees,
)


def test_ruff_fix_lands_a_fix_on_the_users_branch(tmp_path: Path) -> None:
    files = dict(SAMPLE)
    files["calc.py"] = "import os\n\n\n" + SAMPLE["calc.py"]
    repo = make_repo(tmp_path / "repo", files, '[agent]\nbackend = "ruff-fix"\n')
    before = git(repo, "rev-parse", "HEAD").strip()

    result = seed(repo, "once")

    assert result.returncode == 0, result.stderr
    assert git(repo, "rev-parse", "HEAD^").strip() == before
    assert "import os" not in (repo / "calc.py").read_text()
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    lines = records(repo)
    assert [r["outcome"] for r in lines] == ["SUCCESS"]
    assert lines[0]["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert lines[0]["gap"]["key"] == "ruff:calc.py:F401"
    folder = repo / "history" / lines[0]["iteration_id"]
    assert {p.name for p in folder.iterdir()} >= {
        "plan.json",
        "record.json",
        "report.md",
        "agent.log",
    }
    assert "SUCCESS" in (folder / "report.md").read_text()
    assert branches(repo) == []
    assert worktrees(repo) == [str(repo)]
    # the ranking `status` shows was analysed before the landing: marked stale, never current
    status = json.loads(seed(repo, "status", "--json").stdout)
    assert lines[0]["iteration_id"] in status["gaps_stale"], status["gaps_stale"]
    shown = seed(repo, "status").stdout
    assert f"stale:       analysed before {lines[0]['iteration_id']} landed" in shown, shown


def test_agent_that_breaks_a_test_is_rolled_back_and_nothing_of_the_user_changes(
    tmp_path: Path,
) -> None:
    steps = [
        {"replace": "calc.py", "old": "return a + b", "new": "return a - b"},
        {"append": "calc.py", "text": "\n\ndef sub(a, b):\n    return a - b\n"},
    ]
    repo = make_repo(
        tmp_path / "repo",
        {**SAMPLE, "ROADMAP.md": "# Next\n- [ ] add a sub function\n"},
        agent_config(tmp_path, steps),
    )
    (repo / "calc.py").write_text(SAMPLE["calc.py"] + "# the user's uncommitted edit\n")
    (repo / "notes.txt").write_text("untracked notes\n")
    (repo / "debug.log").write_text("an ignored file\n")
    before = snapshot(repo)

    result = seed(repo, "once")

    assert result.returncode == 1, result.stderr
    assert snapshot(repo) == before
    [record] = records(repo)
    assert record["outcome"] in ("ROLLBACK", "FAILURE")
    assert record["failure_category"] == "TEST_REGRESSION"
    assert any("tests/test_calc.py::test_add" in e for e in record["evidence"])
    assert branches(repo) == [] and worktrees(repo) == [str(repo)]


def test_uncommitted_edit_in_the_same_file_blocks_the_merge_and_keeps_the_work(
    tmp_path: Path,
) -> None:
    steps = [
        {"append": "calc.py", "text": "\n\ndef sub(a, b):\n    return a - b\n"},
        {
            "append": "tests/test_calc.py",
            "text": "\n\ndef test_sub():\n    from calc import sub\n\n    assert sub(5, 3) == 2\n",
        },
    ]
    repo = make_repo(
        tmp_path / "repo",
        {**SAMPLE, "ROADMAP.md": "# Next\n- [ ] add a sub function\n"},
        agent_config(tmp_path, steps),
    )
    edited = SAMPLE["calc.py"].replace(
        "return a * b", "return b * a  # the user's work in progress"
    )
    (repo / "calc.py").write_text(edited)
    before = snapshot(repo)

    result = seed(repo, "once")

    assert result.returncode == 1, result.stderr
    assert snapshot(repo) == before
    [record] = records(repo)
    assert record["outcome"] == "MERGE_BLOCKED"
    kept = record["kept_branch"]
    assert kept == f"seed/kept/{record['iteration_id']}" and kept in record["reason"]
    assert branches(repo) == [kept]
    assert "def sub" in git(repo, "show", f"{kept}:calc.py")
    assert "- [x] add a sub function" in git(repo, "show", f"{kept}:ROADMAP.md")
    assert worktrees(repo) == [str(repo)]


def test_hanging_agent_and_its_children_are_killed_at_the_timeout(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    steps = [
        {"spawn": ["sleep", "1000"], "pidfile": str(pids)},
        {"spawn": ["sleep", "1001"], "pidfile": str(pids), "new_session": True},
        {"touch": str(tmp_path / "agent.pid")},
        {"hang": True},
    ]
    repo = make_repo(
        tmp_path / "repo",
        {**SAMPLE, "ROADMAP.md": "- [ ] something\n"},
        agent_config(tmp_path, steps, timeout_s=3, extra=UNSANDBOXED),
    )

    result = seed(repo, "once")

    assert result.returncode == 1, result.stderr
    [record] = records(repo)
    assert record["outcome"] == "FAILURE" and record["failure_category"] == "AGENT_TIMEOUT"
    agent_pid = int((tmp_path / "agent.pid").read_text())
    children = [int(p) for p in pids.read_text().split()]
    assert len(children) == 2
    for pid in (agent_pid, *children):
        assert not pid_alive(pid), f"process {pid} survived the timeout"


def test_typo_in_seed_toml_is_exit_2_naming_the_key(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE, '[agent]\nbakend = "none"\n')
    result = seed(repo, "once")
    assert result.returncode == 2
    assert "agent.bakend" in result.stderr and "seed.toml" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_ctrl_c_during_an_agent_run_aborts_cleanly(tmp_path: Path) -> None:
    barrier = tmp_path / "agent-started"
    steps = [
        {"spawn": ["sleep", "1000"], "pidfile": str(tmp_path / "pids")},
        {"touch": str(barrier)},
        {"hang": True},
    ]
    repo = make_repo(
        tmp_path / "repo",
        {**SAMPLE, "ROADMAP.md": "- [ ] something\n"},
        agent_config(tmp_path, steps, extra=UNSANDBOXED),
    )
    daemon = start_daemon(repo)
    try:
        wait_for(barrier.exists, 120, "the agent to start", daemon)
        daemon.send_signal(signal.SIGINT)
        _, stderr = daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert daemon.returncode == 0, stderr
    [record] = records(repo)
    assert record["outcome"] == "ABORTED"
    assert worktrees(repo) == [str(repo)]
    assert branches(repo) == []
    agent_pid = int(barrier.read_text())
    child = int((tmp_path / "pids").read_text().split()[0])
    assert not pid_alive(agent_pid) and not pid_alive(child)
    status = json.loads((repo / "history" / "status.json").read_text())
    assert status["phase"] == "stopped"


def test_a_crashing_agents_record_quotes_its_last_error_lines(tmp_path: Path) -> None:
    crash = "\x1b[31mTraceback (most recent call last):\x1b[0m\n  File 'agent.py'\n\nRuntimeError: the model is overloaded\n"
    steps = [{"print": crash}, {"exit": 1}]
    repo = make_repo(
        tmp_path / "repo",
        {**SAMPLE, "ROADMAP.md": "# Next\n- [ ] add a sub function\n"},
        agent_config(tmp_path, steps, extra='[quality]\ntools = ["ruff"]\n'),
    )
    result = seed(repo, "once")
    assert result.returncode == 1, result.stderr
    [record] = records(repo)
    assert (record["outcome"], record["failure_category"]) == ("FAILURE", "AGENT_ERROR")
    reason = record["reason"]
    assert reason.startswith("the agent reported failure (exit 1): "), reason
    assert reason.endswith("RuntimeError: the model is overloaded"), reason
    assert "Traceback" in reason and "\x1b" not in reason and "[31m" not in reason, reason
    report = (repo / "history" / record["iteration_id"] / "report.md").read_text()
    assert "RuntimeError: the model is overloaded" in report

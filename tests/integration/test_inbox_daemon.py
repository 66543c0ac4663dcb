"""The inbox as people use it, with a running daemon: slow writers, claims, done and failed."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.support import (
    SAMPLE,
    agent_config,
    agent_io,
    make_repo,
    records,
    seed,
    start_daemon,
    wait_for,
)

TOOLS = '\n[quality]\ntools = ["ruff", "pytest"]\n'

_SLOW_WRITER = """
import sys, time
from pathlib import Path
path, barrier = sys.argv[1], Path(sys.argv[2])
with open(path, "w", encoding="utf-8") as handle:
    handle.write('+++\\ntitle = "Add a sub function"\\npriority = ')
    handle.flush()
    while not barrier.exists():
        time.sleep(0.01)
    handle.write('"high"\\n+++\\nAdd sub(a, b) to calc.py, with a test.\\n')
"""


def test_a_task_written_slowly_is_claimed_once_closed_and_lands_in_done(tmp_path: Path) -> None:
    steps = [
        {"touch": str(agent_io(tmp_path) / "agent-ran")},
        {"append": "calc.py", "text": "\n\ndef sub(a, b):\n    return a - b\n"},
        {
            "write": "tests/test_sub.py",
            "text": "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n",
        },
    ]
    repo = make_repo(tmp_path / "repo", SAMPLE, agent_config(tmp_path, steps, extra=TOOLS))
    (repo / "inbox").mkdir()
    daemon = start_daemon(repo, stdout=subprocess.DEVNULL)
    barrier = tmp_path / "finish-writing"
    writer: subprocess.Popen[bytes] | None = None
    log = repo / "history" / "daemon.log"
    try:
        wait_for(lambda: log.exists() and "watching" in log.read_text(), 120, "the daemon to start")
        writer = subprocess.Popen(
            [sys.executable, "-c", _SLOW_WRITER, str(repo / "inbox" / "sub.md"), str(barrier)]
        )
        # the daemon woke on the new file and saw that it is still being written
        wait_for(lambda: "inbox/sub.md is still being written" in log.read_text(), 60, "a look")
        assert not (agent_io(tmp_path) / "agent-ran").exists()
        barrier.touch()
        assert writer.wait(timeout=30) == 0
        wait_for(lambda: (repo / "inbox" / "done" / "sub.md").exists(), 180, "the task to land")
        daemon.send_signal(signal.SIGINT)
        _, stderr = daemon.communicate(timeout=60)
    finally:
        for process in (daemon, writer):
            if process is not None and process.poll() is None:
                process.kill()
    assert daemon.returncode == 0, stderr
    [record] = records(repo)
    assert (record["outcome"], record["gap"]["key"]) == ("SUCCESS", "inbox:sub.md")
    assert "def sub" in (repo / "calc.py").read_text()
    done = repo / "inbox" / "done"
    assert "Add sub(a, b)" in (done / "sub.md").read_text()
    note = (done / "sub.md.result.md").read_text()
    assert f"(../../history/{record['iteration_id']}/report.md)" in note
    assert not (repo / "inbox" / "rejected").exists()
    assert not list((repo / "inbox" / ".active").iterdir())


def test_a_task_that_keeps_failing_ends_in_failed_with_its_history(tmp_path: Path) -> None:
    steps = [{"append": "calc.py", "text": "\n# tried\n"}, {"exit": 1}]
    repo = make_repo(tmp_path / "repo", SAMPLE, agent_config(tmp_path, steps, extra=TOOLS))
    task = repo / "inbox" / "hard.md"
    task.parent.mkdir()
    task.write_text('+++\npriority = "critical"\n+++\nDo the impossible.\n')
    for _ in range(3):
        result = seed(repo, "once")
        if not task.exists():
            break
        assert result.returncode == 1, result.stderr
    failed = repo / "inbox" / "failed"
    assert (
        failed / "hard.md"
    ).read_text() == '+++\npriority = "critical"\n+++\nDo the impossible.\n'
    attempts = [r for r in records(repo) if r["gap"]["key"] == "inbox:hard.md"]
    assert len(attempts) >= 2 and all(r["outcome"] == "FAILURE" for r in attempts)
    note = (failed / "hard.md.result.md").read_text()
    for record in attempts:
        assert f"](../../history/{record['iteration_id']}/report.md)" in note
    assert not task.exists() and not list((repo / "inbox" / ".active").iterdir())


def _lint_files(n: int) -> dict[str, str]:
    return {f"unused_{i}.py": f"import os\n\n\ndef f{i}():\n    return {i}\n" for i in range(n)}


def test_a_persons_task_runs_before_lint_that_memory_favours_and_status_names_it(
    tmp_path: Path,
) -> None:
    # memory: one landed lint fix, so fix-lint succeeds more often than a feature here
    repo = make_repo(
        tmp_path / "repo", {**SAMPLE, **_lint_files(3)}, '[agent]\nbackend = "ruff-fix"\n' + TOOLS
    )
    first = seed(repo, "once")
    assert first.returncode == 0, first.stderr
    assert [r["outcome"] for r in records(repo)] == ["SUCCESS"]
    steps = [
        {"append": "calc.py", "text": "\n\ndef percent(a, b):\n    return 100 * a / b\n"},
        {
            "write": "tests/test_percent.py",
            "text": "from calc import percent\n\n\ndef test_percent():\n    assert percent(1, 4) == 25\n",
        },
    ]
    (repo / "seed.toml").write_text(agent_config(tmp_path, steps, extra=TOOLS))
    subprocess.run(["git", "-C", str(repo), "commit", "-qam", "the scripted agent"], check=True)
    (repo / "inbox").mkdir(exist_ok=True)
    (repo / "inbox" / "percent.md").write_text("Add percent(a, b) to calc.py, with a test.\n")
    (repo / "inbox" / "square.md").write_text("Add square(a) to calc.py, with a test.\n")
    # dropped since the last analysis: status shows each where it will run, without analysing
    shown = seed(repo, "status")
    assert shown.returncode == 0, shown.stderr
    assert "inbox/percent.md: 1st: next" in shown.stdout, shown.stdout
    assert "inbox/square.md: 2nd, after" in shown.stdout, shown.stdout
    plan = seed(repo, "plan")
    assert plan.returncode == 0, plan.stderr
    assert "gap:   inbox:percent.md" in plan.stdout, plan.stdout
    ran = seed(repo, "once")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert [r["gap"]["key"] for r in records(repo)][1:] == ["inbox:percent.md"]
    after = seed(repo, "status")
    assert "inbox/square.md: 1st: next" in after.stdout, after.stdout
    assert "inbox/percent.md" not in after.stdout, after.stdout

"""100 inbox tasks through a running daemon: each ends in exactly one place, none lost, none twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.inbox_load import make_load_repo, run_load, summary
from tests.support import git


@pytest.mark.slow
def test_a_hundred_tasks_in_a_burst_and_while_the_daemon_works_each_end_once(
    tmp_path: Path,
) -> None:
    repo = make_load_repo(tmp_path / "repo")

    # one task in four is a real one, of each kind in the burst and while the daemon works
    # (three fail, each tried twice): 28 iterations; the other 75 are the eight kinds of bad file
    run = run_load(repo, 100, burst_share=0.7, every=4)

    assert run.daemon_exit == 0, run.daemon_stderr[-3000:]
    assert run.accounting.problems == [], run.accounting.problems[:20]
    kinds = summary(run)["kinds"]
    assert run.accounting.ended == {
        "done": kinds["good"],
        "failed": kinds["fail"],
        "rejected": kinds["bad"],
    }
    assert kinds == {"good": 22, "fail": 3, "bad": 75}
    # every landed task is one commit on the user's branch, with the test its agent wrote
    landed = git(repo, "log", "--format=%s", "main").splitlines()
    assert len(landed) == kinds["good"] + 1
    tests = sorted(p.name for p in (repo / "tests").glob("test_inbox_task_*.py"))
    assert len(tests) == kinds["good"]
    assert "unexpected error" not in (repo / "history" / "daemon.log").read_text()

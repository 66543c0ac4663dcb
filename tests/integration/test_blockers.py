"""One blocker, one payment: the person's checkout is read before an agent is paid, a gap it
blocks waits until it changes, and kept work lands with no agent run once it clears."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests.support import (
    SAMPLE,
    agent_config,
    agent_io,
    git,
    make_repo,
    records,
    seed,
    seed_argv,
)

SUB = [
    {"append": "calc.py", "text": "\n\ndef sub(a, b):\n    return a - b\n"},
    {
        "append": "tests/test_calc.py",
        "text": "\n\ndef test_sub():\n    from calc import sub\n\n    assert sub(5, 3) == 2\n",
    },
]
BROKEN = SAMPLE["calc.py"].replace("return a + b", "return a - b")
FIX = [{"replace": "calc.py", "old": "return a - b", "new": "return a + b"}]


def _counted(tmp_path: Path, steps: list[dict[str, str]]) -> tuple[str, Path]:
    """seed.toml for an agent that counts its runs in a file outside the repository."""
    runs = agent_io(tmp_path) / "runs.txt"
    return agent_config(tmp_path, [{"append": str(runs), "text": "ran\n"}, *steps]), runs


def _runs(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_a_dirty_checkout_costs_one_agent_run_and_the_kept_work_lands_when_it_clears(
    tmp_path: Path,
) -> None:
    config, trace = _counted(tmp_path, SUB)
    repo = make_repo(
        tmp_path / "repo",
        {**SAMPLE, "ROADMAP.md": "# Next\n- [ ] add a sub function\n"},
        config,
    )
    (repo / "calc.py").write_text(SAMPLE["calc.py"] + "# the person's work in progress\n")

    codes = [seed(repo, "once").returncode for _ in range(2)]

    assert _runs(trace) == 1, "the agent ran again for the same blocker"
    assert codes == [1, 5]
    [blocked] = records(repo)
    assert blocked["outcome"] == "MERGE_BLOCKED" and blocked["blocked_by"] == ["calc.py"]
    assert "no agent runs for this gap again" in blocked["reason"]
    log = (repo / "history" / "daemon.log").read_text()
    assert f"{blocked['iteration_id']}: MERGE_BLOCKED (" in log, log
    assert "MERGE_BLOCKED MERGE_BLOCKED" not in log
    assert git(repo, "branch", "--list", "seed/*").split() == [blocked["kept_branch"]]
    status = seed(repo, "status").stdout
    assert "blocked by uncommitted or untracked changes in your checkout to calc.py" in status

    (repo / "calc.py").write_text(SAMPLE["calc.py"])  # the person reverts their edit
    result = seed(repo, "once")

    assert result.returncode == 0, result.stderr
    assert _runs(trace) == 1, "the kept work needs no new agent run"
    landed = records(repo)[-1]
    assert landed["outcome"] == "SUCCESS" and blocked["iteration_id"] in landed["reason"]
    assert "def sub" in (repo / "calc.py").read_text()
    assert git(repo, "rev-parse", "HEAD").strip() == landed["commit"]
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    assert git(repo, "branch", "--list", "seed/*").strip() == ""  # landed: the copy is gone


def test_a_detached_head_then_a_dirty_file_the_plan_names_block_before_the_agent(
    tmp_path: Path,
) -> None:
    config, trace = _counted(tmp_path, FIX)
    repo = make_repo(tmp_path / "repo", {**SAMPLE, "calc.py": BROKEN}, config)
    git(repo, "checkout", "-q", "--detach")

    codes = [seed(repo, "once").returncode for _ in range(2)]

    assert codes == [5, 5] and _runs(trace) == 0
    git(repo, "checkout", "-q", "main")  # attached again, but the file the fix needs is dirty
    (repo / "calc.py").write_text(BROKEN + "# the person's notes\n")
    codes = [seed(repo, "once").returncode for _ in range(2)]

    assert codes == [5, 5] and _runs(trace) == 0
    (repo / "calc.py").write_text(BROKEN)  # the checkout changed: the gap is planned again
    result = seed(repo, "once")

    assert _runs(trace) == 1, "the gap stayed waiting after its blocker cleared"
    assert result.returncode == 0, result.stderr
    detached, dirty, landed = records(repo)  # one record per blocker, not one per poll
    assert detached["blocked_by"] == ["HEAD is detached"]
    assert "your checkout: HEAD is detached" in detached["reason"]
    assert dirty["outcome"] == "WAITING" and dirty["failure_category"] == "MERGE_BLOCKED"
    assert dirty["blocked_by"] == ["calc.py"]
    assert dirty["reason"].startswith("blocked before the agent ran by uncommitted")
    report = (repo / "history" / dirty["iteration_id"] / "report.md").read_text()
    assert "calc.py" in report and "blocked before the agent ran" in report
    assert landed["outcome"] == "SUCCESS"


def _until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def test_a_running_daemon_wakes_when_the_blocker_clears_not_at_the_next_poll(
    tmp_path: Path,
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            **SAMPLE,
            "calc.py": "import os\n\n" + SAMPLE["calc.py"],
            "pyproject.toml": "[tool.ruff]\n",
        },
        '[agent]\nbackend = "ruff-fix"\n\n[daemon]\npoll_interval_s = 600\n',
    )
    (repo / "calc.py").write_text((repo / "calc.py").read_text() + "# the person's work\n")
    daemon = subprocess.Popen(
        seed_argv(repo, "run"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        assert _until(lambda: any(r["blocked_by"] == ["calc.py"] for r in records(repo)), 120)
        time.sleep(1.0)  # asleep until the next poll, 10 minutes away
        git(repo, "checkout", "--", "calc.py")  # the person reverts their edit
        assert _until(lambda: records(repo)[-1]["outcome"] == "SUCCESS", 60), records(repo)
    finally:
        daemon.send_signal(signal.SIGINT)
        daemon.wait(timeout=60)
    assert "import os" not in git(repo, "show", "HEAD:calc.py")

"""`kill -9` at every fault point of an iteration, then a restart: nothing is lost, nothing is left.

Each test runs a real daemon that SIGKILLs itself at one named point (SEED_FAULT_AT), then
a second daemon on the same repository. The task is an inbox item an honest agent can do;
the crashed run's agent also leaves a grandchild in a session of its own.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from kernel.faults import POINTS
from tests.reliability.helpers import (
    DO_THE_TASK,
    FAST,
    FILES,
    assert_checkout_kept,
    assert_clean_log,
    assert_no_leftovers,
    make_project,
)
from tests.support import UNSANDBOXED, git, pid_alive, wait_for

LANDED_BEFORE_THE_CRASH = ("fast-forward", "record-write", "record-written", "cleanup")
NO_ITERATION_YET = ("prepare", "analysis")
CLAIMED = ("agent-run", "inspect", "verification", "commit")
"""Points where the inbox item was claimed and the iteration did not land."""
ELSEWHERE = ("notice-queued",)
"""Points another test kills at (a notification queued: tests/integration/test_notify.py)."""


def test_every_fault_point_is_covered() -> None:
    covered = set(LANDED_BEFORE_THE_CRASH) | set(NO_ITERATION_YET) | set(CLAIMED) | {"plan"}
    assert covered | set(ELSEWHERE) == set(POINTS)


@pytest.mark.parametrize("point", [p for p in POINTS if p not in ELSEWHERE])
def test_kill_9_then_restart(tmp_path: Path, point: str) -> None:
    project = make_project(tmp_path)
    project.task()
    pids, started = tmp_path / "pids", tmp_path / "agent-started"
    crash_steps = [
        {"spawn": ["sleep", "1000"], "pidfile": str(pids), "new_session": True},
        {"touch": str(started)},
        *([{"hang": True}] if point == "agent-run" else DO_THE_TASK),
    ]
    before, base = project.snapshot(), project.head()

    crashed = project.seed(
        project.config(crash_steps, extra=FAST + UNSANDBOXED), "once", env={"SEED_FAULT_AT": point}
    )

    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    if point == "agent-run":
        wait_for(started.exists, 60, "the orphaned agent to start")
        assert pid_alive(int(started.read_text())), "the agent should outlive the daemon"
    landed = point in LANDED_BEFORE_THE_CRASH
    # the user's branch has the complete commit or none of it, and nothing else changed
    assert_checkout_kept(project, before, project.head() if landed else "")
    assert (project.head() != base) is landed

    # the restarted daemon only plans (backend none): what it finds is what recovery left
    restarted = project.seed(project.plan_only(), "once")

    assert restarted.returncode == 5, restarted.stderr
    records = project.records()
    outcomes = [r["outcome"] for r in records]
    if landed:
        assert outcomes == ["SUCCESS"]
        assert records[0]["commit"] == project.head()
        assert_checkout_kept(project, before, project.head())
        assert (project.root / "inbox/done/sub.md").exists()
    else:
        first = [] if point in NO_ITERATION_YET else ["ABORTED"]
        assert outcomes == [*first, "WAITING"]
        assert_checkout_kept(project, before)
        assert (project.root / "inbox/sub.md").exists(), "the task is back in the queue"
    if outcomes[0] == "ABORTED":
        aborted = records[0]
        assert "killed during this iteration" in aborted["reason"] and aborted["commit"] is None
        assert aborted["failure_category"] is None and aborted["gap"]["key"] == "inbox:sub.md"
    if point in ("fast-forward", "record-write"):
        assert "the daemon was killed before it wrote this record" in records[0]["reason"]
        assert set(records[0]["touched_files"]) == {"calc.py", "tests/test_calc.py"}
    assert_no_leftovers(project)
    assert_clean_log(project)
    notes = [e["message"] for e in project.events("recovery")]
    if point in CLAIMED:
        assert "put inbox/sub.md back in the queue" in notes
    if point == "agent-run":  # killed before the agent's spend was known: it stays reserved
        assert any("the ledger counts its reservation of $2.00" in n for n in notes)
    if point == "record-write":
        assert any("cut a torn last line" in n for n in notes)
        assert list((project.root / "history").glob("records.jsonl.torn-*"))
    for pid in [int(p) for p in pids.read_text().split()] if pids.exists() else []:
        assert not pid_alive(pid), f"the grandchild {pid} survived"
    if started.exists():
        assert not pid_alive(int(started.read_text())), "the agent survived"
    assert not project.halt()["halted"]


def test_after_a_crash_in_the_agent_run_the_same_task_lands(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    project.task()
    started = tmp_path / "agent-started"
    hang = [{"touch": str(started)}, {"hang": True}]
    before, base = project.snapshot(), project.head()
    crashed = project.seed(
        project.config(hang, extra=UNSANDBOXED), "once", env={"SEED_FAULT_AT": "agent-run"}
    )
    assert crashed.returncode == -signal.SIGKILL
    wait_for(started.exists, 60, "the orphaned agent to start")

    restarted = project.seed(project.config(DO_THE_TASK), "once")

    assert restarted.returncode == 0, restarted.stderr
    assert [r["outcome"] for r in project.records()] == ["ABORTED", "SUCCESS"]
    landed = project.records()[-1]["commit"]
    assert project.head() == landed and git(project.root, "rev-parse", f"{landed}^").strip() == base
    assert_checkout_kept(project, before, landed)
    assert_no_leftovers(project)
    assert not pid_alive(int(started.read_text()))
    assert (project.root / "inbox/done/sub.md").exists()


def test_a_person_editing_a_protected_file_after_a_crash_is_never_undone(tmp_path: Path) -> None:
    project = make_project(tmp_path, {**FILES, "seed.toml": "# the person's settings\n"})
    project.task()
    root = project.root
    steps = [{"touch": "started.flag"}, {"hang": True}]
    crashed = project.seed(
        project.config(steps, extra=FAST), "once", env={"SEED_FAULT_AT": "agent-run"}
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    # the daemon is dead; the sandboxed agent had no writable place in the checkout
    edit = "# the person's settings, edited while no daemon ran\n"
    (root / "seed.toml").write_text(edit)
    before = project.snapshot()

    restarted = project.seed(project.plan_only(), "once")

    assert restarted.returncode == 5, restarted.stderr  # planned, not halted
    assert (root / "seed.toml").read_text() == edit
    assert not project.halt()["halted"], project.halt()
    [aborted, _waiting] = project.records()
    assert (aborted["outcome"], aborted["failure_category"]) == ("ABORTED", None), aborted
    assert aborted["evidence"] == [] and "during the agent run" not in aborted["reason"]
    [change] = [c for c in aborted["checkout_changes"] if "seed.toml" in c]
    assert "by a person" in change and "left as it is" in change, change
    assert_checkout_kept(project, before)
    assert_no_leftovers(project)


def test_after_a_crash_unsandboxed_nothing_is_put_back_and_the_daemon_halts_saying_why(
    tmp_path: Path,
) -> None:
    project = make_project(tmp_path, {**FILES, "seed.toml": "# the person's settings\n"})
    project.task()
    root = project.root
    kernel_bytes = (root / "kernel/core.py").read_bytes()
    done = tmp_path / "tampered"
    steps = [
        {"write": str(root / "kernel/core.py"), "text": "def invariant():\n    return False\n"},
        {"write": str(root / "notes.txt"), "text": "written by the orphan\n"},
        {"touch": str(done)},
        {"hang": True},
    ]
    crashed = project.seed(
        project.config(steps, extra=FAST + UNSANDBOXED), "once", env={"SEED_FAULT_AT": "agent-run"}
    )
    assert crashed.returncode == -signal.SIGKILL
    wait_for(done.exists, 60, "the orphaned agent to tamper with the checkout")
    (root / "seed.toml").write_text("# edited by the person after the crash\n")
    before = project.snapshot()

    restarted = project.seed(project.plan_only(), "once")

    # with the sandbox off the agent's change cannot be told from the person's: nothing is
    # put back, each changed protected file is listed and kept, and the daemon halts
    assert restarted.returncode == 3, restarted.stderr
    assert not pid_alive(int(done.read_text()))
    assert_checkout_kept(project, before)
    [record] = project.records()
    assert (record["outcome"], record["failure_category"]) == ("ABORTED", None), record
    folder = root / "history" / record["iteration_id"] / "integrity"
    assert "return False" in (folder / "kernel/core.py").read_text()
    assert (folder / "earlier/kernel/core.py").read_bytes() == kernel_bytes
    assert "after the crash" in (folder / "seed.toml").read_text()
    state = project.halt()
    assert state["halted"] and state["category"] != "SANDBOX_VIOLATION", state
    for said in ("kernel/core.py", "seed.toml", "sandbox", "cannot tell", "resume"):
        assert said in state["reason"], (said, state["reason"])
    assert record["checkout_changes"] == ["modified: notes.txt"]
    assert_no_leftovers(project)

    resumed = project.seed(project.plan_only(), "resume")
    assert resumed.returncode == 0, resumed.stderr
    again = project.seed(project.plan_only(), "once")
    assert again.returncode == 5, again.stderr
    assert_checkout_kept(project, before)


def test_a_restart_removes_what_dead_processes_left_in_the_kernels_state(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    state = project.root / ".git" / "seed"
    dead, live = (
        state / "exports" / "candidate-999999999-0",
        state / "exports" / f"base-{os.getpid()}-0",
    )
    for folder in (
        dead,
        live,
        state / "objects" / "wt-999999999-1",
        state / "homes" / "iter-0001-x",
    ):
        folder.mkdir(parents=True)
        (folder / "file").write_text("left over")
    project.seed(project.plan_only(), "once")
    assert not dead.exists() and live.exists()
    assert not (state / "objects" / "wt-999999999-1").exists()
    assert not (state / "homes" / "iter-0001-x").exists()
    assert any("candidate-999999999-0" in e["message"] for e in project.events("recovery"))

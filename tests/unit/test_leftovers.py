"""Recovery ends what a dead daemon left by its token, never the process group the new daemon
is in: a local Ray's processes stay in the dead daemon's group, which a restarted daemon
shares when both were started from one shell job or one supervisor."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

# each leftover says it is up only once it runs: until a process's exec has finished, its
# /proc environ reads empty, and Popen returns before that (the parent wakes when the old
# memory is released, not when the new program starts)
SCRIPT = r"""
import json, os, pathlib, subprocess, sys, time, types
from kernel.loop import recovery
state, token, late = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "late"
state.mkdir()
(state / "daemon.json").write_text(json.dumps({"pid": 1, "token": token}))
env = {**os.environ, "SEED_DAEMON_TOKEN": token}
ends, ended = os.pipe()  # the read end sees EOF when the leftover has ended
code = "import time; print('up', flush=True); time.sleep(60)"
# in this process's group, as Ray's are
quiet = {"stdin": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}  # not holding our pipes
left = subprocess.Popen(
    [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, pass_fds=(ended,), **quiet
)
if late:  # not the dead daemon's until its leftover ends; then it is, as a process mid-exec
    becomes = f"import os; os.read({ends}, 1); os.execve('/bin/sleep', ['sleep', '60'], {env!r})"
    subprocess.Popen([sys.executable, "-c", becomes], pass_fds=(ends,), stdout=subprocess.DEVNULL, **quiet)
os.close(ends), os.close(ended)
assert left.stdout is not None and left.stdout.readline() == b"up\n"
ctx = types.SimpleNamespace(paths=types.SimpleNamespace(state=state))
notes = recovery.end_leftovers(ctx, None)
left.wait(timeout=10)
time.sleep(0.5)  # whatever was starting as recovery ended has started by now
print(f"survived; the leftover ended by {left.returncode}; {notes}")
print(f"still there: {recovery.processes_with_token(token)}")
"""


def _recover(tmp_path: Path, late: bool) -> subprocess.CompletedProcess[str]:
    """Run recovery in a process group of its own, against a dead daemon's token unique to
    this run (the same test run at once elsewhere has a token of its own)."""
    token = f"dead-daemon-{uuid.uuid4().hex}"
    argv = [sys.executable, "-c", SCRIPT, str(tmp_path / "state"), token, "late" if late else ""]
    # a group of its own: at worst it ends itself, not the tests
    child = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        out, err = child.communicate(timeout=60)
    finally:
        # whatever recovery missed goes with the group, not on for a minute
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    return subprocess.CompletedProcess(argv, child.returncode, out, err)


def test_the_leftovers_are_ended_and_the_group_recovery_runs_in_is_spared(tmp_path: Path) -> None:
    done = _recover(tmp_path, late=False)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-2000:])
    assert "survived; the leftover ended by -9;" in done.stdout
    assert "ended 1 process(es) left by the previous daemon" in done.stdout
    assert "still there: []" in done.stdout


def test_a_process_that_becomes_the_dead_daemons_as_its_leftovers_end_is_ended_too(
    tmp_path: Path,
) -> None:
    done = _recover(tmp_path, late=True)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-2000:])
    assert "survived; the leftover ended by -9;" in done.stdout
    assert "still there: []" in done.stdout, done.stdout

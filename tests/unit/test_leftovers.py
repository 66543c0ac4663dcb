"""Recovery ends what a dead daemon left by its token, never the process group the new daemon
is in: a local Ray's processes stay in the dead daemon's group, which a restarted daemon
shares when both were started from one shell job or one supervisor."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import json, os, pathlib, subprocess, sys, types
from kernel.loop import recovery
state = pathlib.Path(sys.argv[1])
state.mkdir()
(state / "daemon.json").write_text(json.dumps({"pid": 1, "token": "dead-daemon"}))
env = {**os.environ, "SEED_DAEMON_TOKEN": "dead-daemon"}
left = subprocess.Popen(["sleep", "60"], env=env)  # in this process's group, as Ray's are
ctx = types.SimpleNamespace(paths=types.SimpleNamespace(state=state))
notes = recovery.end_leftovers(ctx, None)
left.wait(timeout=10)
print(f"survived; the leftover ended by {left.returncode}; {notes}")
"""


def test_the_leftovers_are_ended_and_the_group_recovery_runs_in_is_spared(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,  # a group of its own: at worst it ends itself, not the tests
        cwd=Path(__file__).parents[2],
        check=False,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "survived; the leftover ended by -9;" in done.stdout
    assert "ended 1 process(es) left by the previous daemon" in done.stdout

"""The one helper that starts every child: process groups, timeouts, stdin closed, output caps."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from kernel import procs
from kernel.errors import Interrupted
from tests.support import pid_alive


def test_exit_code_and_output(tmp_path: Path) -> None:
    result = procs.run(
        [
            sys.executable,
            "-c",
            "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)",
        ],
        cwd=tmp_path,
        timeout_s=30,
    )
    assert result.exit_code == 3 and result.text() == "out\n" and result.err_text() == "err\n"


def test_stdin_is_closed(tmp_path: Path) -> None:
    result = procs.run(
        [sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))"],
        cwd=tmp_path,
        timeout_s=30,
    )
    assert result.text().strip() == "''"


def test_timeout_ends_the_whole_group_and_escaped_descendants(tmp_path: Path) -> None:
    procs.become_subreaper()
    pids = tmp_path / "pids"
    script = (
        "import subprocess, time\n"
        f"a = subprocess.Popen(['sleep', '500'])\n"
        f"b = subprocess.Popen(['setsid', 'sleep', '501'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{a.pid}} {{b.pid}}')\n"
        "time.sleep(500)\n"
    )
    result = procs.run([sys.executable, "-c", script], cwd=tmp_path, timeout_s=2, sweep_rounds=20)
    assert result.timed_out and result.exit_code is None
    for pid in map(int, pids.read_text().split()):
        assert not pid_alive(pid)


def test_output_is_capped_but_counted(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    result = procs.run(
        [sys.executable, "-c", "import sys; sys.stdout.write('x' * 3_000_000 + 'END')"],
        cwd=tmp_path,
        timeout_s=60,
        merge_stderr=True,
        log_path=log,
        max_bytes=1000,
    )
    assert log.stat().st_size == 1000
    assert result.output_bytes == 3_000_003 and result.truncated and result.tail.endswith(b"END")


def test_stop_interrupts_a_run(tmp_path: Path) -> None:
    procs.STOP.clear()
    timer = threading.Timer(0.5, procs.STOP.set)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(Interrupted):
            procs.run(["sleep", "60"], cwd=tmp_path, timeout_s=60)
    finally:
        procs.STOP.clear()
    assert time.monotonic() - started < 30


def test_child_env_raises_seed_depth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEED_DEPTH", "2")
    assert procs.child_env()["SEED_DEPTH"] == "3"
    monkeypatch.delenv("SEED_DEPTH")
    assert procs.child_env()["SEED_DEPTH"] == "1"

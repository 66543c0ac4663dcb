"""The one helper that starts every child: process groups, timeouts, stdin closed, output caps."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from kernel.errors import Interrupted
from kernel.isolation import procs
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


def test_a_channel_is_read_alongside_the_output_and_never_blocks(tmp_path: Path) -> None:
    # 1 MiB through the channel (far more than a pipe holds), then a grandchild that keeps
    # the write end open and sleeps: the run still ends at once, with every byte
    script = (
        "import os, sys\n"
        "fd = int(sys.argv[1])\n"
        "data = b'x' * (1 << 20)\n"
        "while data:\n"
        "    data = data[os.write(fd, data):]\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    import time; time.sleep(8)\n"
    )
    read, write = os.pipe()
    try:
        started = time.monotonic()
        result = procs.run(
            [sys.executable, "-c", script, str(write)],
            cwd=tmp_path,
            timeout_s=20,
            channel=(read, write),
            sweep_rounds=3,
        )
    finally:
        os.close(read)
    assert result.exit_code == 0 and len(result.channel) == 1 << 20
    # (the kernel's own copy of the write end was closed as the child started: else no EOF)
    assert time.monotonic() - started < 6

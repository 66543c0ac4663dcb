"""Fault points: every named point is wired into the kernel, and unarmed they do nothing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernel import faults
from tests.support import SEED_HOME


def test_every_point_is_called_in_the_kernel_exactly_once() -> None:
    source = "\n".join(p.read_text() for p in (SEED_HOME / "kernel").rglob("*.py"))
    called = re.findall(r'faults\.fault\("([a-z-]+)"\)', source)
    torn = source.count("faults.torn_append(")
    assert sorted(called) == sorted(p for p in faults.POINTS if p != "record-write")
    assert torn == 1


def test_an_unknown_point_is_a_programming_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.ENV, "agent-run")
    with pytest.raises(ValueError, match="unknown fault point"):
        faults.fault("nowhere")


def test_unarmed_points_do_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(faults.ENV, raising=False)
    for point in faults.POINTS:
        faults.fault(point)
    faults.torn_append(tmp_path / "records.jsonl", "{}")
    assert not (tmp_path / "records.jsonl").exists()


def test_an_armed_point_kills_the_process_with_sigkill(tmp_path: Path) -> None:
    script = "from kernel import faults; faults.fault('commit'); print('survived')"
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=SEED_HOME,
        env={"SEED_FAULT_AT": "commit", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == -9 and "survived" not in result.stdout


def test_the_record_write_point_leaves_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text('{"a": 1}\n')
    script = f"from pathlib import Path; from kernel import faults; faults.torn_append(Path({str(path)!r}), '{{\"b\": 22222}}')"
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=SEED_HOME,
        env={"SEED_FAULT_AT": "record-write", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == -9
    data = path.read_bytes()
    assert data.startswith(b'{"a": 1}\n{"b"') and not data.endswith(b"\n")

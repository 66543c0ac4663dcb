"""`kill -9` of a daemon whose tournament runs on a local Ray instance it started ([scale]
engine = "ray", address = ""): the next start ends every process of that instance (its GCS,
raylet, agents and workers) and leaves no checkout, reservation or agent behind; a Ray
instance another person started on the same machine is neither joined nor ended."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.isolation.paths import discover
from tests.integration.test_candidates import _config, _left_behind
from tests.integration.test_ratchet import BUGGY, TOOLS
from tests.reliability.test_candidates_kill import _agents_alive
from tests.support import agent_io, make_repo, pid_alive, records, seed, start_daemon, wait_for

pytestmark = pytest.mark.usefixtures("bwrap")

RAY_BIN = Path(sys.executable).parent / "ray"


def _carrying(name: str, value: str) -> list[int]:
    """Live processes whose environment holds name=value."""
    needle = f"{name}={value}".encode()
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if needle in environ.split(b"\0") and pid_alive(int(entry)):
                found.append(int(entry))
    return found


def _argvs(pids: list[int]) -> dict[int, str]:
    """Each live pid's command line."""
    found: dict[int, str] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            if argv:
                found[pid] = argv.decode(errors="replace")
    return found


def _named(argvs: dict[int, str], name: str) -> list[int]:
    """The pids whose command line holds `name` (raylet/raylet, gcs_server, ...)."""
    return [pid for pid, argv in argvs.items() if name in argv]


def _pgrep(pattern: str) -> set[int]:
    done = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
    return {int(p) for p in done.stdout.split()}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def other_ray(tmp_path: Path) -> Iterator[list[int]]:
    """Another person's Ray on this machine, started with `ray start` (the latest cluster a bare
    `ray.init()` would join); its processes, found by a variable only they carry."""
    mark = secrets.token_hex(8)
    port = _free_port()
    argv = [str(RAY_BIN), "start", "--head", f"--port={port}", "--num-cpus=2", "--block"]
    argv += ["--include-dashboard=false", "--disable-usage-stats"]
    env = {**os.environ, "OTHER_PERSONS_RAY": mark, "RAY_USAGE_STATS_ENABLED": "0"}
    with (tmp_path / "other-ray.log").open("w") as log:
        started = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: bool(_named(_argvs(_carrying("OTHER_PERSONS_RAY", mark)), "raylet/raylet")),
            60,
            "the other person's raylet",
            None,
        )
        yield _carrying("OTHER_PERSONS_RAY", mark)
    finally:
        os.killpg(started.pid, signal.SIGKILL)  # what `ray start` runs, in its session
        started.wait(timeout=30)
        for pid in _carrying("OTHER_PERSONS_RAY", mark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_kill_9_of_a_daemon_with_a_local_ray_ends_its_ray_and_spares_another_persons(
    tmp_path: Path, other_ray: list[int]
) -> None:
    io = agent_io(tmp_path)
    hang = {str(k): [{"touch": str(io / f"c{k}")}, {"hang": True}] for k in (1, 2)}
    scale = '\n[scale]\nengine = "ray"\naddress = ""\n'
    money = "[budget]\nmax_cost_usd_per_iteration = 0.5\n"
    config = _config(tmp_path, hang, scale)
    repo = make_repo(tmp_path / "repo", BUGGY, config.replace(TOOLS, TOOLS + money))
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}

    daemon = start_daemon(repo, "once", env=env, python=sys.executable)
    try:
        wait_for(
            lambda: (io / "c1").exists() and (io / "c2").exists(),
            120,
            "both candidates hanging on their workers",
            daemon,
        )
        token = json.loads((discover(repo).state / "daemon.json").read_text())["token"]
        ours = _argvs(_carrying("SEED_DAEMON_TOKEN", token))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon.pid, signal.SIGKILL)
        daemon.communicate(timeout=60)
    # the daemon started a Ray of its own: its GCS, its raylet, the candidates' workers
    assert _named(ours, "raylet/raylet") and _named(ours, "gcs_server"), ours
    assert len(_named(ours, "ray::run_candidate")) == 2, ours
    assert not set(ours) & set(other_ray)

    plan_only = tmp_path / "none.toml"
    plan_only.write_text('[agent]\nbackend = "none"\n' + TOOLS, encoding="utf-8")
    restarted = seed(repo, "--config", str(plan_only), "once", env=env, python=sys.executable)

    assert restarted.returncode in (0, 5), restarted.stderr[-3000:]
    assert _carrying("SEED_DAEMON_TOKEN", token) == []
    found = _pgrep("raylet/raylet") | _pgrep("gcs_server") | _pgrep("ray::")
    assert {pid: ours[pid] for pid in found & set(ours) if pid_alive(pid)} == {}
    assert [pid for pid in other_ray if not pid_alive(pid)] == []  # another's Ray lives on
    assert _agents_alive(tmp_path / "candidates.json") == []
    assert _left_behind(repo) == []
    workers = tmp_path / "cache" / "seed" / "checkouts"
    assert [p.name for p in workers.glob("*/*")] == []  # the workers' checkouts too
    [aborted] = [r for r in records(repo) if r["outcome"] == "ABORTED"]
    assert aborted["iteration_id"]
    status = json.loads(seed(repo, "status", "--json", env=env, python=sys.executable).stdout)
    assert status["held_usd"] == 0.0

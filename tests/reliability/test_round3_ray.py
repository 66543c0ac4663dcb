"""Issue 39, item 7: the local Ray a daemon starts ([scale] engine = "ray", address = "") is
no open door to its agents.

A command agent with `network = "full"` shares the machine's network namespace, so every
port Ray listens on is one it can reach. It is handed the ports of the daemon's own Ray (an
attacker finds them in /proc/net/tcp) and tries what Ray answers without a token: the GCS
(its key-value store, its jobs, its actors: code on the workers, outside any sandbox) and
a job submitted over HTTP. Ray must refuse both, listen on loopback only, and keep its token
in no file of the person's HOME, whatever the person's own RAY_AUTH_MODE says."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel.isolation.paths import discover
from tests.integration.test_candidates import _config
from tests.integration.test_ratchet import BUGGY
from tests.reliability.test_ray_kill import _carrying
from tests.support import agent_io, make_repo, seed, start_daemon, wait_for

pytestmark = pytest.mark.usefixtures("bwrap")

PROBE = r"""
import json, sys, urllib.request
ports = json.loads(open(sys.argv[1]).read())
out = {}
try:
    from ray._raylet import GcsClient
    gcs = GcsClient(address=f"127.0.0.1:{ports['gcs']}")
    out["gcs"] = f"answered: {len(gcs.internal_kv_keys(b'', None, timeout=10))} keys"
except Exception as exc:
    out["gcs"] = f"refused: {type(exc).__name__}: {exc}"[:400]
job = json.dumps({"entrypoint": f"touch {sys.argv[3]}"}).encode()
for port in ports["all"]:
    try:
        asked = urllib.request.Request(f"http://127.0.0.1:{port}/api/jobs/", data=job)
        with urllib.request.urlopen(asked, timeout=5) as answer:
            out[str(port)] = f"job submitted: HTTP {answer.status}"
    except Exception as exc:
        out[str(port)] = f"refused: {type(exc).__name__}"
open(sys.argv[2], "w").write(json.dumps(out))
"""
LISTEN = re.compile(r"^LISTEN\s+\d+\s+\d+\s+(\S+):(\d+)\s+\S+\s+users:\((.*)\)\s*$")
LOOPBACK = ("127.0.0.1", "[::1]", "[::ffff:127.0.0.1]")


def _listening(pids: set[int]) -> dict[int, tuple[str, str]]:
    """Each TCP port a process of pids listens on: the address it is bound to, and who."""
    table = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found: dict[int, tuple[str, str]] = {}
    for line in table.splitlines():
        match = LISTEN.match(line.strip())
        if match and {int(p) for p in re.findall(r"pid=(\d+)", match[3])} & pids:
            found[int(match[2])] = (match[1], match[3])
    return found


def _gcs(pids: set[int]) -> int:
    """The port of the GCS among pids (0 while there is none)."""
    return next((p for p, (_, who) in _listening(pids).items() if '"gcs_server"' in who), 0)


@pytest.mark.parametrize("persons_mode", ["disabled", ""])
def test_a_full_network_agent_finds_the_daemons_own_ray_closed(
    tmp_path: Path, persons_mode: str
) -> None:
    io = agent_io(tmp_path)
    ports, marker = io / "ports.json", tmp_path / "job-ran"
    python = sys.executable
    probe: list[dict[str, Any]] = [{"wait_for": str(ports)}]
    for k in (1, 2):
        argv = [python, "-c", PROBE, str(ports), str(io / f"probe-{k}.json"), str(marker)]
        probe.append({"run": argv, "may_fail": True})
    scale = '\n[scale]\nengine = "ray"\naddress = ""\n'
    config = _config(tmp_path, {"1": probe[:2], "2": [probe[0], probe[2]]}, scale)
    config = config.replace("repair_rounds = 0\n", 'repair_rounds = 0\nnetwork = "full"\n')
    repo = make_repo(tmp_path / "repo", BUGGY, config)
    home = tmp_path / "home"
    home.mkdir()
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(home)}
    if persons_mode:  # the person's own setting, for their own Ray
        env["RAY_AUTH_MODE"] = persons_mode

    daemon = start_daemon(repo, "once", env=env, python=python)
    try:
        token_file = discover(repo).state / "daemon.json"
        wait_for(token_file.exists, 60, "the daemon's token", daemon)
        token = json.loads(token_file.read_text())["token"]

        def ours() -> set[int]:
            return set(_carrying("SEED_DAEMON_TOKEN", token))

        wait_for(lambda: _gcs(ours()) > 0, 180, "the daemon's own Ray", daemon)
        wait_for(lambda: len(_listening(ours())) >= 3, 60, "Ray's ports", daemon)
        bound = _listening(ours())
        ports.write_text(json.dumps({"gcs": _gcs(ours()), "all": sorted(bound)}))
        said = [io / f"probe-{k}.json" for k in (1, 2)]
        wait_for(lambda: all(p.exists() for p in said), 180, "both agents' probes", daemon)
        bound |= _listening(ours())
        _, stderr = daemon.communicate(timeout=300)
    finally:
        if daemon.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                daemon.send_signal(signal.SIGKILL)
            daemon.communicate(timeout=60)
    assert {port: at for port, (at, _) in bound.items() if at not in LOOPBACK} == {}, bound
    for path in said:
        found = json.loads(path.read_text())
        assert found["gcs"].startswith("refused:") and "InvalidAuthToken" in found["gcs"], found
        assert [v for v in found.values() if not v.startswith("refused")] == [], found
    assert not marker.exists()
    # the token is the daemon's own: in no file of the person's HOME (~/.ray/auth_token)
    assert not (home / ".ray").exists(), sorted(p.name for p in (home / ".ray").iterdir())
    # and seed says so, in its log and in `status`
    door = "Ray: a local instance of the daemon's own, with token authentication"
    assert door in stderr, stderr[-3000:]
    assert door in seed(repo, "status", env=env, python=python).stdout

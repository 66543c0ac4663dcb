"""Only the person ends the night: a seed.toml that cannot be used never stops a running
daemon, which keeps the config it has and says why in daemon.log and `status`; every command
reads seed.toml the same way, with strict types; a start that cannot go on says why in
daemon.log too."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.support import SAMPLE, make_repo, seed, start_daemon, wait_for

GOOD = '[agent]\nbackend = "none"\n\n[daemon]\npoll_interval_s = 3600\n'
BAD = [
    ('[agent]\nbackend = "comand"\n', "key 'agent.backend' = \"comand\": not one of auto, claude"),
    ('[agent]\nbakend = "none"\n', "unknown key 'agent.bakend'"),
    ('[agnet]\nbackend = "none"\n', "unknown key 'agnet'"),
    ('[daemon]\npoll_interval_s = "300"\n', "key 'daemon.poll_interval_s' = \"300\""),
    ("[daemon]\npoll_interval_s = true\n", "key 'daemon.poll_interval_s' = true"),
    ('[agent]\nbackend = "command"\n', "key 'agent.command' = []: must be set"),
    ("[agent\nbackend = 1\n", "not valid TOML"),
    ('[agent]\nbackend = "none"\n\n[agent]\nmodel = "x"\n', "not valid TOML"),
]


def _said(log: Path, what: str) -> int:
    return log.read_text(encoding="utf-8").count(what) if log.exists() else 0


def test_a_running_daemon_survives_every_kind_of_bad_seed_toml_and_says_why(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE, GOOD)
    log = repo / "history" / "daemon.log"
    daemon = start_daemon(repo, stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: _said(log, "watching") == 1, 120, "the daemon to start")
        wait_for(lambda: "idle" in seed(repo, "status").stdout, 120, "the daemon to idle")
        for text, reason in BAD:
            before = _said(log, "cannot be used")
            (repo / "seed.toml").write_text(text, encoding="utf-8")
            wait_for(lambda b=before: _said(log, "cannot be used") > b, 60, f"a look at {text!r}")
            assert daemon.poll() is None, (text, log.read_text())
            last = [line for line in log.read_text().splitlines() if "cannot be used" in line][-1]
            assert reason in last, (text, last)
            shown = seed(repo, "status")
            assert shown.returncode == 0, shown.stderr
            assert "daemon:      running" in shown.stdout, shown.stdout
            assert reason in shown.stdout, shown.stdout
            assert "the daemon keeps the config it read before" in shown.stdout, shown.stdout
        # the same file, for every command: refused with exit 2, naming the key and the value
        (repo / "seed.toml").write_text(BAD[0][0], encoding="utf-8")
        for command in ("gaps", "plan", "once"):
            refused = seed(repo, command)
            assert refused.returncode == 2, (command, refused.stdout, refused.stderr)
            assert BAD[0][1] in refused.stderr, (command, refused.stderr)
        (repo / "seed.toml").write_text(GOOD.replace("3600", "3000"), encoding="utf-8")
        wait_for(lambda: _said(log, "now in force") == 1, 60, "the good seed.toml")
        assert "cannot be used" not in seed(repo, "status").stdout
        # a second daemon is refused, says so in the log, and the running one goes on
        second = seed(repo, "run", timeout=120)
        assert second.returncode == 2, second.stderr
        assert "`run` (pid " in log.read_text() and "not started: " in log.read_text()
        assert daemon.poll() is None
        daemon.send_signal(signal.SIGINT)
        _, stderr = daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert daemon.returncode == 0, stderr


@pytest.mark.parametrize(("text", "reason"), [BAD[0], BAD[3], BAD[6]])
def test_a_start_with_a_seed_toml_that_cannot_be_used_is_refused_and_logged(
    tmp_path: Path, text: str, reason: str
) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE, text)
    started = seed(repo, "run", timeout=120)
    assert started.returncode == 2, started.stderr
    assert reason in started.stderr
    # the reason the daemon ended is in its log, not only on a terminal nobody watches
    log = (repo / "history" / "daemon.log").read_text(encoding="utf-8")
    assert reason in log and "not started" in log, log

"""A command agent through the model gateway: it lands its fix asking the scripted model, finds
no key and no other host, and a token cap passed mid-run ends it with the usage in the ledger."""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kernel.records import exchanges
from tests.agents_real.model import ScriptedModel, call, say, serving
from tests.support import BROKEN_ADD, git, make_repo, records, seed, start_daemon, wait_for

AGENT = Path(__file__).parents[1] / "agents_real" / "model_agent.py"
KEY = "sk-real-0123456789abcdefghij"
"""The real key: in the daemon's environment only."""
SCRIPT = [call("replace", path="calc.py", old="return a - b", new="return a + b"), say("fixed")]


class _Anywhere(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "8")
        self.end_headers()
        self.wfile.write(b"anywhere")


@pytest.fixture(scope="module")
def anywhere() -> Iterator[str]:
    """A second loopback server, standing for any host but the model."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Anywhere)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def _repo(tmp: Path, model: ScriptedModel, probe: str, extra: str = "") -> Path:
    argv = json.dumps([sys.executable, str(AGENT), KEY[::-1], probe])
    config = (
        f'[agent]\nbackend = "command"\ncommand = {argv}\nrepair_rounds = 0\n'
        f'api_base = "{model.origin}"\nkeys = ["SEED_TEST_KEY"]\n{extra}'
    )
    return make_repo(tmp / "repo", BROKEN_ADD, config)


def _once(repo: Path, codes: tuple[int, ...] = (0, 1)) -> dict[str, Any]:
    done = seed(repo, "once", env={"SEED_TEST_KEY": KEY})
    assert done.returncode in codes, done.stderr
    [record] = records(repo)
    return record


def test_a_command_agent_lands_through_the_gateway_and_finds_no_key_nor_other_host(
    tmp_path: Path, anywhere: str
) -> None:
    with serving(SCRIPT) as model:
        repo = _repo(tmp_path, model, anywhere)
        record = _once(repo)
        seen = [r.headers.get("authorization", "") for r in model.requests]

    assert record["outcome"] == "SUCCESS", record["reason"]
    assert "return a + b" in git(repo, "show", "HEAD:calc.py")
    assert record["network"] == "model-only"
    summary = record["agent_summary"]
    assert "key found in: nowhere" in summary
    assert "http unreachable" in summary and "tcp unreachable" in summary
    assert "dns unresolved" in summary
    assert seen == [f"Bearer {KEY}"] * 2  # the gateway added the real key upstream
    folder = repo / "history" / record["iteration_id"]
    lines = exchanges.read(folder, repo / ".git" / "seed")  # sealed: read refuses a broken seal
    assert [line.status for line in lines] == [200, 200]
    assert record["wire_tokens"] == sum(line.usage.tokens for line in lines) == 2 * 1050
    assert record["tokens_used"] == 1050  # what the agent itself reported: its first answer
    ledger = _ledger(repo)
    requests = sorted(line.get("request", 0) for line in ledger[:-1])  # in the order they ended
    assert (requests, ledger[-1].get("request", 0)) == ([1, 2], 0)  # each answer, then the run
    assert sum(line["tokens_used"] for line in ledger) == record["wire_tokens"]
    assert ledger[-1]["tokens_used"] == 0  # the run's line counts nothing twice
    report = (folder / "report.md").read_text()
    assert "| Turn | Status | Input | Output | Cached | Cost | Seconds |" in report
    for turn in (1, 2):
        assert f"| {turn} | answered | 1,000 | 50 | 200 | $0.0000 |" in report
    assert KEY not in (folder / "model.jsonl").read_text()
    status = json.loads(seed(repo, "status", "--json").stdout)
    assert status["network"] == "model-only"


def test_with_network_full_the_same_agent_reaches_the_other_host(
    tmp_path: Path, anywhere: str
) -> None:
    with serving(SCRIPT) as model:
        repo = _repo(tmp_path, model, anywhere, 'network = "full"\n')
        record = _once(repo)

    assert record["outcome"] == "SUCCESS", record["reason"]
    assert record["network"] == "full (opt-out)"
    assert "http anywhere; tcp connected" in record["agent_summary"]
    assert "key found in: ['env SEED_TEST_KEY', '/proc/self/environ'" in record["agent_summary"]
    folder = repo / "history" / record["iteration_id"]
    assert not (folder / "model.jsonl").exists()
    assert "| Network | **full (opt-out)**" in (folder / "report.md").read_text()


def test_a_token_cap_passed_mid_run_ends_it_budget_exceeded_with_the_usage_so_far(
    tmp_path: Path, anywhere: str
) -> None:
    """1,050 tokens an answer and a cap of 2,000: the second request's reservation (its bytes
    and its ceiling of 100 tokens) fits, but its answer says more and passes the cap: it is
    cut; the agent asks again and is refused in its vendor's shape."""
    with serving([*SCRIPT[:1], *SCRIPT]) as model:
        repo = _repo(tmp_path, model, anywhere, "[budget]\nmax_tokens_per_iteration = 2000\n")
        record = _once(repo, (3,))  # BUDGET_EXCEEDED halts the daemon

    assert record["failure_category"] == "BUDGET_EXCEEDED", record["reason"]
    assert "2,100 tokens" in record["reason"] and "2,000" in record["reason"]
    ledger = _ledger(repo)
    assert sorted((line.get("request", 0), line["tokens_used"]) for line in ledger) == [
        (0, 0),  # the run's line, last
        (1, 1050),
        (2, 1050),  # the cut answer: its usage up to the cut
    ]
    assert ledger[-1].get("request", 0) == 0
    folder = repo / "history" / record["iteration_id"]
    lines = exchanges.read(folder, repo / ".git" / "seed")
    assert [(line.status, bool(line.note)) for line in lines] == [
        (200, False),
        (200, True),
        (403, True),
    ]
    assert b"BUDGET_EXCEEDED" in exchanges.body(folder, lines[2].answer)
    cut = exchanges.body(folder, lines[1].answer).rstrip().rsplit(b"\n\n", 1)[-1]
    assert (
        cut.startswith(b'data: {"error"') and b"BUDGET_EXCEEDED" in cut
    )  # the stream's last event
    assert (record["wire_tokens"], record["tokens_used"]) == (2100, 1050)  # it under-reports
    report = (folder / "report.md").read_text()
    assert "| 2 | cut |" in report and "| 3 | refused |" in report


def _ledger(repo: Path) -> list[dict[str, Any]]:
    path = repo / "history" / "ledger.jsonl"
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines()]


def test_a_daemon_killed_after_two_answers_keeps_them_in_the_ledger_and_recovery_adds_nothing(
    tmp_path: Path, anywhere: str
) -> None:
    """The third request hangs; the daemon is killed (SIGKILL): its gateway dies with it, so
    nothing more reached the upstream, and the restart settles the run at what the wire counted
    with no reservation left."""
    prices = '[agent.prices."scripted"]\ninput = 100.0\noutput = 100.0\n'
    budget = "[budget]\nmax_cost_usd_per_day = 50.0\n"
    with serving([*SCRIPT[:1], *SCRIPT], hold_from=3) as model:
        repo = _repo(tmp_path, model, anywhere, prices + budget)
        daemon = start_daemon(repo, "once", env={"SEED_TEST_KEY": KEY})
        try:
            wait_for(lambda: len(model.requests) >= 3, 120, "the third request")
            wait_for(lambda: len(_ledger(repo)) >= 2, 30, "two answers in the ledger")
        finally:
            daemon.kill()  # SIGKILL
            daemon.communicate(timeout=30)  # and its pipes closed
    assert daemon.returncode == -signal.SIGKILL
    killed = _ledger(repo)
    assert sorted((line["request"], line["tokens_used"]) for line in killed) == [
        (1, 1050),
        (2, 1050),
    ]
    assert sum(line["cost_usd"] for line in killed) == pytest.approx(0.21)
    dead = json.loads(seed(repo, "status", "--json").stdout)
    assert dead["held_usd"] == pytest.approx(2.0 - 0.21)  # the reservation less what is counted

    restarted = seed(repo, "--config", str(_plan_only(tmp_path)), "once")

    assert "its spend is what the gateway counted" in restarted.stderr, restarted.stderr
    ledger = _ledger(repo)
    assert sum(line["tokens_used"] for line in ledger) == 2100  # no double count
    assert sum(line["cost_usd"] for line in ledger) == pytest.approx(0.21)  # no reservation
    assert ledger[-1]["cost_basis"] == "wire"
    status = json.loads(seed(repo, "status", "--json").stdout)
    assert status["held_usd"] == 0
    assert status["cost_today_usd"] == pytest.approx(0.21)


def _plan_only(tmp: Path) -> Path:
    path = tmp / "plan-only.toml"
    path.write_text('[agent]\nbackend = "none"\n')
    return path

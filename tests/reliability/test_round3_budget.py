"""Issue 39, items 1 and 2: the gateway reserves before it admits, and a run's use of the
daemon is bounded by the kernel.

Each test runs the real daemon (`seed.py once`) with a command agent in the real sandbox,
model-only, against the scripted model standing for the vendor (it streams chat answers without
usage unless asked, stops at the output ceiling a request names, bills nothing for a count and
serves requests at once). Each asserts what a person would check: the ledger against what the
upstream served, the cap against both, the outcome and its reason, the daemon's peak memory
and the bytes under history/<id>/.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kernel.records import exchanges
from tests.agents_real.model import ScriptedModel, say, serving
from tests.reliability.helpers import FAST
from tests.support import (
    BROKEN_ADD,
    FAKES,
    agent_io,
    git,
    make_repo,
    records,
    seed,
    start_daemon,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bwrap")]

AGENT = FAKES / "greedy_agent.py"
KEY = "sk-real-0123456789abcdefghij"
CAP = 100_000
"""The iteration's token cap in these tests."""
CEILING = 65_536
"""The output ceiling the gateway reserves for a request that names none (kernel/bounds.py)."""
MIB = 1024 * 1024


def _repo(tmp: Path, model: ScriptedModel, args: list[str], budget: str, agent: str = "") -> Path:
    argv = json.dumps([sys.executable, str(AGENT), *args])
    config = (
        f'[agent]\nbackend = "command"\ncommand = {argv}\nrepair_rounds = 0\ntimeout_s = 300\n'
        f'api_base = "{model.origin}"\nkeys = ["SEED_TEST_KEY"]\n{agent}'
        f"[budget]\n{budget}\n{FAST}"
    )
    return make_repo(tmp / "repo", BROKEN_ADD, config)


def _once(repo: Path) -> dict[str, Any]:
    done = seed(repo, "once", env={"SEED_TEST_KEY": KEY}, timeout=600)
    assert done.returncode in (0, 1, 3), done.stderr[-3000:]
    [record] = records(repo)
    return record


def _ledger(repo: Path) -> list[dict[str, Any]]:
    path = repo / "history" / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _tokens(repo: Path) -> int:
    return sum(int(line["tokens_used"]) for line in _ledger(repo))


def _one_reservation(model: ScriptedModel, ceiling: int = CEILING) -> int:
    """The largest reservation a request the upstream got could have: its prompt's bytes (as the
    agent sent them: json.dumps) and its output ceiling."""
    return max(len(json.dumps(r.body)) for r in model.requests) + ceiling


def _status(repo: Path) -> dict[str, Any]:
    return json.loads(seed(repo, "status", "--json").stdout)


def test_streams_that_ask_for_no_usage_are_counted_at_their_reservation_and_the_cap_holds(
    tmp_path: Path,
) -> None:
    """A reasoning model's streamed chat answers, usage never asked for: the text says next to
    nothing of what was spent (30,000 hidden tokens an answer)."""
    with serving([say("done", reasoning=30_000)]) as model:
        repo = _repo(tmp_path, model, ["stream", "100", "0"], f"max_tokens_per_iteration = {CAP}")
        record = _once(repo)

    assert model.billed > 0
    assert _tokens(repo) >= model.billed, "the ledger counts less than the upstream served"
    assert model.billed <= CAP + _one_reservation(model)
    assert record["failure_category"] == "BUDGET_EXCEEDED", record["reason"]
    assert git(repo, "rev-list", "--count", "HEAD") == "1\n"  # nothing landed


def test_requests_sent_at_once_are_reserved_in_flight_and_pass_the_cap_by_one_reservation_at_most(
    tmp_path: Path,
) -> None:
    """Sixteen streamed requests at once, each answer 60,000 hidden tokens: the upstream holds
    every answer's end until all sixteen came (or 5 s passed)."""
    with serving([say("done", reasoning=60_000)], gather=(16, 5.0)) as model:
        repo = _repo(tmp_path, model, ["at-once", "16", "0"], f"max_tokens_per_iteration = {CAP}")
        record = _once(repo)

    assert model.billed > 0
    assert _tokens(repo) >= model.billed
    assert model.billed <= CAP + _one_reservation(model), (model.billed, len(model.requests))
    assert _tokens(repo) <= CAP + _one_reservation(model)
    assert record["failure_category"] == "BUDGET_EXCEEDED", record["reason"]


def test_token_counts_are_counted_like_every_other_request(tmp_path: Path) -> None:
    """Anthropic's count_tokens and Gemini's countTokens, free at the vendor, 40 prompts of
    10,000 bytes each: each counts what its prompt does, and the cap ends them."""
    with serving([say("done")]) as model:
        repo = _repo(tmp_path, model, ["count", "40", "10000"], f"max_tokens_per_iteration = {CAP}")
        record = _once(repo)
        counted = [len(json.dumps(r.body)) // 4 for r in model.requests]

    assert counted and all(c > 2000 for c in counted)
    assert _tokens(repo) >= sum(counted), "the ledger counts less than the counts' prompts"
    assert _tokens(repo) <= CAP + _one_reservation(model, 0)
    assert record["failure_category"] == "BUDGET_EXCEEDED", record["reason"]
    assert len(model.requests) < 40  # the cap refused the rest before the upstream


def test_the_days_cap_holds_on_the_wire_when_an_iteration_has_no_cap_of_its_own(
    tmp_path: Path,
) -> None:
    """[budget] max_cost_usd_per_iteration = 0 (none), $0.05 a day, $10 per million tokens: a
    careful client asking twenty times for 1,050 tokens ($0.0105) each."""
    prices = '[agent.prices."scripted"]\ninput = 10.0\noutput = 10.0\n'
    budget = "max_cost_usd_per_iteration = 0\nmax_cost_usd_per_day = 0.05"
    with serving([say("done")]) as model:
        repo = _repo(tmp_path, model, ["ask", "20", "0"], budget, agent=prices)
        record = _once(repo)
        one = _one_reservation(model, 100) * 10 / 1_000_000

    spent = sum(float(line["cost_usd"]) for line in _ledger(repo))
    assert spent <= 0.05 + one, (spent, len(model.requests))
    assert record["failure_category"] == "BUDGET_EXCEEDED", record["reason"]
    assert _status(repo)["cost_today_usd"] <= 0.05 + one


def test_candidates_at_once_spend_within_the_days_budget_they_share(tmp_path: Path) -> None:
    """Two candidates at once, $0.10 a day and $0.05 an iteration (each candidate's share,
    both reserved before either starts): each asks twenty times for $0.0105 of tokens."""
    prices = '[agent.prices."scripted"]\ninput = 10.0\noutput = 10.0\n'
    budget = "max_cost_usd_per_iteration = 0.05\nmax_cost_usd_per_day = 0.10\n"
    budget += "[candidates]\nn = 2\nparallel = 2"
    with serving([say("done")]) as model:
        repo = _repo(tmp_path, model, ["ask", "20", "0"], budget, agent=prices)
        record = _once(repo)

    spent = sum(float(line["cost_usd"]) for line in _ledger(repo))
    assert spent <= 0.10, (spent, len(model.requests))
    assert _status(repo)["cost_today_usd"] <= 0.10
    assert [c["failure_category"] for c in record["candidates"]] == ["BUDGET_EXCEEDED"] * 2
    for number in (1, 2):
        mine = [e for e in _ledger(repo) if e["iteration_id"].endswith(f"-c{number}")]
        assert sum(float(e["cost_usd"]) for e in mine) <= 0.05


@pytest.mark.parametrize(
    "figures",
    ['{"cost_usd": Infinity}', '{"cost_usd": 1e300}', '{"tokens_used": 10000000000000}'],
)
def test_a_reported_figure_not_finite_or_over_a_trillion_is_an_agent_error(
    tmp_path: Path, figures: str
) -> None:
    """A command agent with the full network (no gateway: its own report is all there is)."""
    with serving([say("done")]) as model:
        repo = _repo(tmp_path, model, ["report", figures], "", agent='network = "full"\n')
        record = _once(repo)

    assert record["outcome"] == "FAILURE", record["reason"]
    assert record["failure_category"] == "AGENT_ERROR", record["reason"]
    assert "10^12" in record["reason"] and "finite" in record["reason"]
    assert git(repo, "rev-list", "--count", "HEAD") == "1\n"
    status = _status(repo)
    # the run's spend is not known: it is counted at its reservation, the most it could cost
    assert status["cost_today_usd"] == pytest.approx(2.0)
    assert all(isinstance(line["cost_usd"], float) for line in _ledger(repo))
    assert record["cost_usd"] == pytest.approx(2.0) and record["tokens_used"] == 0


def _peak_memory(pid: int) -> int:
    """VmHWM of a live process, in bytes (0 once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next((line for line in text.splitlines() if line.startswith("VmHWM:")), "")
    return int(line.split()[1]) * 1024 if line else 0  # a zombie has no memory


def _bytes_under(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_uploads_held_straight_at_the_gateways_socket_stay_within_its_memory_bound(
    tmp_path: Path,
) -> None:
    """Forty connections made straight to the gateway's socket (past the forwarder in the
    sandbox), each uploading 32 MiB but its last byte and holding: the daemon's peak memory
    grows by at most the gateway's 128 MiB of request bytes (and a margin), and the run ends
    RUN_LIMIT with the bound in its reason. The daemon goes on; the recording is whole."""
    barrier = agent_io(tmp_path) / "started"
    barrier.unlink(missing_ok=True)
    with serving([say("done")]) as model:
        repo = _repo(tmp_path, model, ["hold", "40", str(32 * MIB), str(barrier)], "")
        daemon = start_daemon(repo, "once", env={"SEED_TEST_KEY": KEY})
        peak = [0]

        def watch() -> None:
            while daemon.poll() is None:
                peak[0] = max(peak[0], _peak_memory(daemon.pid))
                time.sleep(0.05)

        try:
            wait_for(barrier.exists, 300, "the agent to start", alive=daemon)
            before = _peak_memory(daemon.pid)
            watcher = threading.Thread(target=watch)
            watcher.start()
            daemon.communicate(timeout=600)
            watcher.join()
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.communicate()

    grown = peak[0] - before
    print(f"the daemon's peak memory grew by {grown / MIB:.1f} MiB (VmHWM {peak[0] / MIB:.0f} MiB)")
    assert grown <= 128 * MIB + 48 * MIB, f"the daemon grew by {grown / MIB:.0f} MiB"
    [record] = records(repo)
    assert record["failure_category"] == "RUN_LIMIT", record["reason"]
    assert "128 MiB" in record["reason"]
    folder = repo / "history" / record["iteration_id"]
    exchanges.read(folder, repo / ".git" / "seed")  # sealed and whole
    assert _status(repo)["halted"] is False  # RUN_LIMIT halts only when it repeats


def test_bodies_the_upstream_refuses_are_recorded_within_the_runs_bound(tmp_path: Path) -> None:
    """Forty distinct prompts of 20 MiB, each refused by the upstream (past its context): what
    is written under history/<id>/ stays within 512 MiB, and the run ends RUN_LIMIT. Every
    exchange still has its line; a body past the bound is named by its hash and size."""
    budget = (
        "max_tokens_per_iteration = 0\nmax_cost_usd_per_iteration = 0\nmax_cost_usd_per_day = 0"
    )
    with serving([say("done")]) as model:
        repo = _repo(tmp_path, model, ["refused", "40", str(20 * MIB)], budget)
        record = _once(repo)
        sent = len(model.requests)

    folder = repo / "history" / record["iteration_id"]
    written = _bytes_under(folder)
    print(f"{written / MIB:.1f} MiB under {folder.name}/, {sent} requests reached the upstream")
    assert written <= 512 * MIB + 2 * MIB, f"{written / MIB:.0f} MiB under {folder}"
    assert record["failure_category"] == "RUN_LIMIT", record["reason"]
    assert "512 MiB" in record["reason"]
    lines = exchanges.read(folder, repo / ".git" / "seed")
    assert len(lines) >= sent  # every request the upstream got has its line
    assert {line.status for line in lines[:sent]} == {400}
    assert any(line.request.cut for line in lines)  # left out past the bound, and said
    assert _status(repo)["halted"] is False
    assert (folder / "report.md").is_file()

"""Several candidates per gap ([candidates] n): each judged as a single run, the kernel's choice
landed, the iteration recorded once with every candidate's facts."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from domain import GapCategory, GapRef, IterationOutcome, IterationRecord
from kernel.records.store import RecordStore
from tests.integration.test_ratchet import BUGGY, FIX, TOOLS
from tests.support import AGENT, agent_checkouts, agent_io, git, make_repo, records, seed

pytestmark = pytest.mark.usefixtures("bwrap")

WRONG = [{"replace": "calc.py", "old": "return a - b", "new": "return a * b"}]
"""Leaves test_add failing and breaks nothing else: refused (GAP_NOT_CLOSED)."""
RIGHT = [FIX]
RIGHT_UNCOVERED = [FIX, {"append": "calc.py", "text": "\n\ndef spare() -> int:\n    return 1\n"}]
"""Right, and a function no test runs: it would wait for a person ([landing] uncovered)."""


def _config(tmp: Path, scripts: dict[str, list[dict[str, Any]]], extra: str = "") -> str:
    script = tmp / "candidates.json"
    body = {"candidates": {k: {"steps": v} for k, v in scripts.items()}}
    script.write_text(json.dumps(body), encoding="utf-8")
    argv = json.dumps([sys.executable, str(AGENT), str(script)])
    return (
        f'[agent]\nbackend = "command"\ncommand = {argv}\ntimeout_s = 120\nrepair_rounds = 0\n'
        f"{TOOLS}\n[candidates]\nn = {len(scripts)}\n{extra}"
    )


def _left_behind(repo: Path) -> list[str]:
    """Checkouts and seed branches an iteration left (none may be)."""
    folder = agent_checkouts(repo)
    found = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    branches = git(repo, "branch", "--list", "seed/iter-*").split()
    return found + branches


def test_of_three_candidates_the_one_that_is_right_lands_and_the_others_are_recorded(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, {"1": WRONG, "2": RIGHT, "3": WRONG})
    repo = make_repo(tmp_path / "repo", BUGGY, config)
    head = git(repo, "rev-parse", "HEAD").strip()

    result = seed(repo, "once")

    assert result.returncode == 0, result.stderr[-3000:]
    [record] = records(repo)  # one iteration, one record
    assert record["outcome"] == "SUCCESS", record["reason"]
    table = {c["number"]: c for c in record["candidates"]}
    assert [table[k]["outcome"] for k in (1, 2, 3)] == ["ROLLBACK", "SUCCESS", "ROLLBACK"]
    assert [table[k]["won"] for k in (1, 2, 3)] == [False, True, False]
    assert table[1]["failure_category"] == table[3]["failure_category"] == "GAP_NOT_CLOSED"
    assert "only one of 3" in record["choice"]
    # the landed commit is exactly candidate 2's verified tree, on the base
    assert git(repo, "rev-parse", "HEAD~1").strip() == head
    assert "return a + b" in git(repo, "show", "HEAD:calc.py")
    assert record["checkout"].endswith("-c2")
    assert record["durations"]["candidates"] > 0  # the tournament timed as one phase
    folder = repo / "history"
    for k in (1, 2, 3):  # each candidate's own log, in its own folder
        assert (folder / f"{record['iteration_id']}-c{k}" / "agent.log").is_file()
    report = (folder / record["iteration_id"] / "report.md").read_text()
    assert "## Candidates" in report and "| 2 (landed) | command |" in report
    ledger = [json.loads(line) for line in (folder / "ledger.jsonl").read_text().splitlines()]
    assert sorted(e["iteration_id"][-3:] for e in ledger) == ["-c1", "-c2", "-c3"]
    assert _left_behind(repo) == []
    # the dashboard's landed rate by candidates per gap
    assert seed(repo, "report").returncode == 0
    page = (folder / "index.html").read_text()
    assert "Landed rate by candidates per gap" in page and "100% (1 of 1; 3 candidates)" in page
    assert "3 candidates, 1 passed" in page  # the iteration's own row


def test_of_two_right_candidates_the_one_that_lands_without_a_person_wins(tmp_path: Path) -> None:
    config = _config(tmp_path, {"1": RIGHT_UNCOVERED, "2": WRONG, "3": RIGHT})
    repo = make_repo(tmp_path / "repo", BUGGY, config)

    result = seed(repo, "once")

    assert result.returncode == 0, result.stderr[-3000:]
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS", record["reason"]
    table = {c["number"]: c for c in record["candidates"]}
    assert table[1]["eligible"] and table[3]["eligible"] and not table[2]["eligible"]
    assert table[1]["needs_person"] and table[1]["uncovered"] > 0
    assert not table[3]["needs_person"] and table[3]["won"]
    assert record["choice"].startswith("candidate 3 won over candidate 1")
    assert "lands without a person" in record["choice"]
    assert "spare" not in git(repo, "show", "HEAD:calc.py")


def test_when_no_candidate_is_right_the_iteration_fails_once(tmp_path: Path) -> None:
    config = _config(tmp_path, {"1": WRONG, "2": WRONG, "3": WRONG})
    repo = make_repo(tmp_path / "repo", BUGGY, config)
    head = git(repo, "rev-parse", "HEAD").strip()

    result = seed(repo, "once")

    assert result.returncode == 1, result.stderr[-3000:]
    [record] = records(repo)  # once in the halt table and the planner's history, not three times
    assert record["outcome"] == "ROLLBACK"
    assert record["failure_category"] == "GAP_NOT_CLOSED"
    assert record["reason"].startswith("none of the 3 candidates passed")
    # every candidate's evidence is there for the next plan
    assert [e.split(":")[0] for e in record["evidence"][:3]] == [
        "candidate 1 (command)",
        "candidate 2 (command)",
        "candidate 3 (command)",
    ]
    assert record["choice"] == ""
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert _left_behind(repo) == []


def test_the_days_budget_must_hold_every_candidate_before_any_runs(tmp_path: Path) -> None:
    trace = agent_io(tmp_path) / "ran"
    touch = [{"append": str(trace), "text": "x"}]
    money = "[budget]\nmax_cost_usd_per_day = 5\nmax_cost_usd_per_iteration = 2\n"
    config = _config(tmp_path, {"1": touch + RIGHT, "2": touch + RIGHT, "3": touch + RIGHT})
    repo = make_repo(tmp_path / "repo", BUGGY, config.replace(TOOLS, TOOLS + money))

    result = seed(repo, "once")

    [record] = records(repo)
    assert record["failure_category"] == "BUDGET_EXCEEDED", record["reason"]
    assert "3 candidates" in record["reason"] and "$2.00 reserved for each" in record["reason"]
    assert not trace.exists()  # no candidate started: three would overshoot the day's $5
    assert result.returncode == 3  # the budget's exit, as for a single run


def test_first_wins_lands_the_first_that_passes_and_never_starts_the_rest(tmp_path: Path) -> None:
    trace = agent_io(tmp_path) / "ran"
    touch = [{"append": str(trace), "text": "x"}]
    config = _config(
        tmp_path,
        {"1": touch + WRONG, "2": touch + RIGHT, "3": touch + RIGHT},
        extra="first_wins = true\nkeep = true\nparallel = 1\n",
    )
    repo = make_repo(tmp_path / "repo", BUGGY, config)

    result = seed(repo, "once")

    assert result.returncode == 0, result.stderr[-3000:]
    [record] = records(repo)
    table = {c["number"]: c for c in record["candidates"]}
    assert table[2]["won"] and record["outcome"] == "SUCCESS"
    assert table[3]["outcome"] == "ABORTED" and "passed first" in table[3]["reason"]
    assert trace.read_text() == "xx"  # candidate 3 never ran
    ledger = (repo / "history" / "ledger.jsonl").read_text()
    assert "-c3" not in ledger  # nothing held or spent for it
    # keep: every candidate that changed something is on a branch of its own
    kept = git(repo, "branch", "--list", "seed/candidates/*").split()
    assert kept == [f"seed/candidates/{record['iteration_id']}-c{k}" for k in (1, 2)]
    assert table[1]["branch"] == kept[0]
    assert "return a * b" in git(repo, "show", f"{kept[0]}:calc.py")


def test_first_wins_cancels_a_running_candidate_and_settles_its_spend(tmp_path: Path) -> None:
    started = agent_io(tmp_path) / "c2-started"
    hang = [{"touch": str(started)}, {"hang": True}]
    wait = [{"wait_for": str(started)}]  # candidate 1 passes while candidate 2 runs
    money = "[budget]\nmax_cost_usd_per_iteration = 0.5\n"
    config = _config(tmp_path, {"1": wait + RIGHT, "2": hang}, extra="first_wins = true\n")
    repo = make_repo(tmp_path / "repo", BUGGY, config.replace(TOOLS, TOOLS + money))

    result = seed(repo, "once", timeout=100)  # the agent's own timeout is 120 s

    assert result.returncode == 0, result.stderr[-3000:]
    [record] = records(repo)
    table = {c["number"]: c for c in record["candidates"]}
    assert table[1]["won"] and record["outcome"] == "SUCCESS"
    assert table[2]["outcome"] == "ABORTED" and "cancelled" in table[2]["reason"]
    # its reservation is settled in the ledger at once, not held, not lost
    ledger = [
        json.loads(line) for line in (repo / "history" / "ledger.jsonl").read_text().splitlines()
    ]
    mine = [e for e in ledger if e["iteration_id"].endswith("-c2")]
    assert [(e["cost_usd"], e["cost_basis"]) for e in mine] == [(0.5, "reserved")]
    assert _left_behind(repo) == []


def test_candidates_running_at_once_share_no_home_tmp_or_checkout(tmp_path: Path) -> None:
    io = agent_io(tmp_path)
    plant = (
        "import os, pathlib\n"
        "for d in (os.environ['HOME'], '/tmp'):\n"
        "    pathlib.Path(d, 'from-c1').write_text('x')\n"
        "other = pathlib.Path(os.getcwd().replace('-c1', '-c2'), 'planted.txt')\n"
        "try:\n"
        "    other.write_text('x')\n"
        "except OSError as exc:\n"
        f"    pathlib.Path({str(io)!r}, 'refused').write_text(type(exc).__name__)\n"
    )
    look = (
        "import json, os, pathlib\n"
        "seen = {'home': sorted(os.listdir(os.environ['HOME'])), 'tmp': sorted(os.listdir('/tmp')),"
        " 'planted': pathlib.Path('planted.txt').exists()}\n"
        f"pathlib.Path({str(io)!r}, 'seen.json').write_text(json.dumps(seen))\n"
    )
    first = [{"run": [sys.executable, "-c", plant]}, {"touch": str(io / "c1-done")}, *WRONG]
    second = [{"wait_for": str(io / "c1-done")}, {"run": [sys.executable, "-c", look]}, *RIGHT]
    config = _config(tmp_path, {"1": first, "2": second}, extra="parallel = 2\n")
    repo = make_repo(tmp_path / "repo", BUGGY, config)

    result = seed(repo, "once")

    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads((io / "seen.json").read_text())
    assert "from-c1" not in seen["home"] and "from-c1" not in seen["tmp"], seen
    assert seen["planted"] is False
    assert (io / "refused").read_text() in ("OSError", "PermissionError", "FileNotFoundError")
    [record] = records(repo)
    assert [c["won"] for c in record["candidates"]] == [False, True]
    assert "planted" not in git(repo, "show", "--stat", "HEAD")


def test_each_candidate_reads_its_own_plan_file(tmp_path: Path) -> None:
    io = agent_io(tmp_path)
    copy = (
        "import os, shutil\n"
        "k = os.environ['SEED_ITERATION_ID'].rpartition('-c')[2]\n"
        f"shutil.copy(os.environ['SEED_PLAN_FILE'], {str(io)!r} + f'/plan-{{k}}.json')\n"
    )
    read = {"run": [sys.executable, "-c", copy]}  # the command contract's SEED_PLAN_FILE
    config = _config(tmp_path, {"1": [read, *WRONG], "2": [read, *RIGHT]}, extra="parallel = 2\n")
    repo = make_repo(tmp_path / "repo", BUGGY, config)

    result = seed(repo, "once")

    assert result.returncode == 0, result.stderr[-3000:]
    [record] = records(repo)
    assert [c["outcome"] for c in record["candidates"]] == ["ROLLBACK", "SUCCESS"]
    for k in (1, 2):
        plan = json.loads((io / f"plan-{k}.json").read_text())
        assert plan["iteration_id"] == f"{record['iteration_id']}-c{k}"
        assert plan["gap"]["key"] == record["gap"]["key"]


def _sent(key: str, landed: bool, cost: float, k: int) -> IterationRecord:
    """An earlier single run of a portfolio agent on a failing test, as the kernel records it."""
    at = datetime.now(UTC) - timedelta(days=1, minutes=100 - k)
    return IterationRecord(
        iteration_id=f"iter-{k:04d}-{at:%Y%m%d-%H%M%S}",
        started_at=at,
        ended_at=at + timedelta(minutes=5),
        gap=GapRef(
            key=f"pytest:tests/test_old.py::test_{k}",
            category=GapCategory.QUALITY,
            source="pytest",
            title="an old failing test",
        ),
        outcome=IterationOutcome.SUCCESS if landed else IterationOutcome.ROLLBACK,
        backend="command",
        task_kind="fix_test",
        cost_usd=cost,
        durations={"execute": 300.0},
        agent_key=key,
    )


def test_with_one_run_the_planner_sends_the_agent_that_landed_more_per_dollar(
    tmp_path: Path,
) -> None:
    script = tmp_path / "right.json"
    script.write_text(json.dumps({"steps": RIGHT}), encoding="utf-8")
    argv = json.dumps([sys.executable, str(AGENT), str(script)])
    config = (
        f'[agent]\nbackend = "command"\ncommand = {argv}\ntimeout_s = 120\nrepair_rounds = 0\n'
        f"{TOOLS}\n[candidates]\n"
        'agent = [{ backend = "command", model = "dear" }, { backend = "command", model = "cheap" }]\n'
    )
    repo = make_repo(tmp_path / "repo", BUGGY, config)
    store = RecordStore(repo / "history")
    for k in range(1, 41):  # the dear one landed 2 of 20 at $0.40, the cheap one 20 of 20 at $0.02
        odd = k % 2 == 1
        store.append(
            _sent(
                "command:dear" if odd else "command:cheap",
                not odd or k < 5,
                0.4 if odd else 0.02,
                k,
            )
        )

    result = seed(repo, "once")

    assert result.returncode == 0, result.stderr[-3000:]
    record = records(repo)[-1]
    assert record["outcome"] == "SUCCESS", record["reason"]
    assert record["agent_key"] == "command:cheap"  # the kernel's fact: which entry it sent
    assert record["candidates"] == []  # one run, through the single-run path
    plan = record["plan"]
    assert plan["agents"] == ["command:cheap", "command:dear"]
    assert plan["random_seed"] > 0  # drawn by the kernel and kept: the order can be replayed
    why = plan["agents_why"]
    assert why.startswith(
        "fix_test: command:dear landed 2 of 20 at $0.40, command:cheap landed 20 of 20 at $0.02;"
    )
    report = (repo / "history" / record["iteration_id"] / "report.md").read_text()
    assert why in report

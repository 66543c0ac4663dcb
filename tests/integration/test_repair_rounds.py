"""Repair before throwing work away: the kernel's own fixers, then repair rounds for the agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_ratchet import BUGGY, TOOLS
from tests.support import agent_config, git, make_repo, records, seed

pytestmark = pytest.mark.usefixtures("bwrap")

WRONG_AND_UGLY = {"replace": "calc.py", "old": "return a - b", "new": "return  a  *  b"}
"""Round 1: a formatting nit ruff format repairs, and a fix that leaves the test failing."""
RIGHT = {"replace": "calc.py", "old": "return a * b", "new": "return a + b"}
"""Round 2 edits the repaired line: it only matches if the repair was written back."""


def test_a_formatting_nit_is_repaired_and_a_failing_test_is_fixed_in_round_two(
    tmp_path: Path,
) -> None:
    config = agent_config(tmp_path, [], extra=TOOLS, rounds=[[WRONG_AND_UGLY], [RIGHT]])
    repo = make_repo(tmp_path / "repo", BUGGY, config)
    head = git(repo, "rev-parse", "HEAD").strip()

    result = seed(repo, "once")

    assert result.returncode == 0, result.stderr[-3000:]
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS"
    first, second = record["rounds"]
    assert (first["number"], first["outcome"]) == (1, "ROLLBACK")
    assert first["failure_category"] == "GAP_NOT_CLOSED" and "test_add" in first["reason"]
    assert (second["number"], second["outcome"], second["resumed"]) == (2, "SUCCESS", False)
    landed = git(repo, "show", "HEAD:calc.py")
    assert "    return a + b\n" in landed
    assert git(repo, "rev-parse", "HEAD~1").strip() == head
    folder = repo / "history" / record["iteration_id"]
    follow_up = (folder / "prompt-round-2.md").read_text()
    assert "## Round 2: the kernel refused your change" in follow_up
    assert "tests/test_calc.py::test_add" in follow_up  # the evidence the agent acts on
    assert (folder / "agent-round-2.log").exists() and (folder / "agent.log").exists()
    report = (folder / "report.md").read_text()
    assert "Round 1" in report and "Round 2" in report
    # each round's tree as the agent left it, before the kernel's repairs: what a replay of
    # the round must reproduce
    assert record["agent_tree"] == second["tree"] == git(repo, "rev-parse", "HEAD^{tree}").strip()
    assert "return  a  *  b" in git(repo, "cat-file", "-p", f"{first['tree']}:calc.py")


def test_rounds_stop_at_the_limit_and_the_last_round_decides(tmp_path: Path) -> None:
    still_wrong = {"append": "calc.py", "text": "\n# still wrong\n"}
    config = agent_config(tmp_path, [], extra=TOOLS, rounds=[[WRONG_AND_UGLY], [still_wrong]])
    repo = make_repo(tmp_path / "repo", BUGGY, config)
    head = git(repo, "rev-parse", "HEAD").strip()

    result = seed(repo, "once")

    assert result.returncode == 1, result.stderr[-3000:]
    [record] = records(repo)
    assert record["outcome"] == "ROLLBACK"
    assert [r["outcome"] for r in record["rounds"]] == ["ROLLBACK", "ROLLBACK"]
    assert git(repo, "rev-parse", "HEAD").strip() == head
    trace = json.dumps(record["rounds"])
    assert "test_add" in trace


def test_an_allowlist_miss_gets_a_round_and_a_sandbox_violation_never(tmp_path: Path) -> None:
    task = '+++\nallowed = ["calc.py"]\n+++\nMake add() add.\n'
    # code outside the allowlist (a root *.md is a doc that comes with a fix: issue 40)
    stray = {"write": "scratch.py", "text": "OUTSIDE = 1\n"}
    back = {"delete": "scratch.py"}
    config = agent_config(
        tmp_path,
        [],
        extra=TOOLS,
        rounds=[
            [stray, {"replace": "calc.py", "old": "return a - b", "new": "return a + b"}],
            [back],
        ],
    )
    repo = make_repo(tmp_path / "repo", BUGGY, config)
    (repo / "inbox").mkdir()
    (repo / "inbox" / "task.md").write_text(task)
    result = seed(repo, "once")
    [record] = records(repo)
    assert [(r["outcome"], r["failure_category"]) for r in record["rounds"]] == [
        ("ROLLBACK", "ALLOWLIST_VIOLATION"),
        ("SUCCESS", None),
    ], result.stderr[-3000:]
    assert (
        "scratch.py"
        in (repo / "history" / record["iteration_id"] / "prompt-round-2.md").read_text()
    )

    protected = {"write": "seed.py", "text": "# the kernel's own entry point, rewritten\n"}
    config = agent_config(tmp_path, [], extra=TOOLS, rounds=[[protected], [back]])
    repo = make_repo(tmp_path / "other", BUGGY, config)
    result = seed(repo, "once")
    assert result.returncode == 3, result.stderr[-3000:]
    [record] = records(repo)
    assert record["failure_category"] == "SANDBOX_VIOLATION" and record["rounds"] == []


def test_no_round_once_the_iterations_budget_is_spent(tmp_path: Path) -> None:
    paid = {"result": {"summary": "tried", "cost_usd": 2.0}}
    budget = "\n[budget]\nmax_cost_usd_per_iteration = 2.0\nmax_cost_usd_per_day = 10.0\n"
    config = agent_config(
        tmp_path, [], extra=TOOLS + budget, rounds=[[WRONG_AND_UGLY, paid], [RIGHT]]
    )
    repo = make_repo(tmp_path / "repo", BUGGY, config)
    result = seed(repo, "once")
    assert result.returncode == 1, result.stderr[-3000:]
    [record] = records(repo)
    assert (record["outcome"], record["rounds"]) == ("ROLLBACK", [])
    assert record["cost_usd"] == 2.0

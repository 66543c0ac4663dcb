"""Bounds where input enters: seed.toml numbers refused at load, a huge ROADMAP.md read in
part and said, a runaway list of evidence capped with the count of what was left out."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kernel.bounds import EVIDENCE_MAX_LINES, ROADMAP_MAX_ITEMS
from tests.reliability.helpers import DO_THE_TASK, FAST, FILES, make_project
from tests.support import git, seed


@pytest.mark.parametrize(
    ("text", "key"),
    [
        # lines before any table header land in the scripted agent's [agent] table
        ("max_log_bytes = 9223372036854775807\n", "agent.max_log_bytes"),
        ("max_turns = 100000\n", "agent.max_turns"),
        ("[daemon]\npoll_interval_s = nan\n", "daemon.poll_interval_s"),
        ("[budget]\nmax_tokens_per_iteration = 1e300\n", "budget.max_tokens_per_iteration"),
        ('[agent.prices."m"]\ninput = 1e9\noutput = 1\n', "agent.prices.m.input"),
    ],
)
def test_an_out_of_range_number_is_refused_at_load_before_any_agent_runs(
    tmp_path: Path, text: str, key: str
) -> None:
    project = make_project(tmp_path)
    project.task()
    trace = tmp_path / "trace.jsonl"
    config = project.config(DO_THE_TASK, extra=text + FAST)

    result = project.seed(config, "once", env={"SEED_AGENT_TRACE": str(trace)})

    assert result.returncode == 2, result.stderr
    assert f"key '{key}'" in result.stderr and str(config) in result.stderr
    assert "Traceback" not in result.stderr and not trace.exists()
    assert not (project.root / "history" / "ledger.jsonl").exists()
    assert (project.root / "inbox" / "sub.md").exists()


def test_a_huge_roadmap_is_read_in_part_and_the_rest_is_counted(tmp_path: Path) -> None:
    project = make_project(tmp_path, FILES)
    lines = [f"- [ ] roadmap item number {i} to do something\n" for i in range(120_000)]
    (project.root / "ROADMAP.md").write_text("# Plan\n" + "".join(lines))
    git(project.root, "add", "ROADMAP.md")
    git(project.root, "commit", "-q", "-m", "a 5 MB roadmap")

    shown = project.seed(project.plan_only(), "gaps", "--json")

    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    titles = [g["title"] for g in report["gaps"] if g["category"] == "roadmap"]
    assert len(titles) == ROADMAP_MAX_ITEMS
    assert titles[0] == "roadmap item number 0 to do something"
    size = (project.root / "ROADMAP.md").stat().st_size
    [cut, items] = report["errors"]
    assert cut.startswith(f"ROADMAP.md is {size:,} bytes; only the first 1,04")
    assert "bytes left out" in cut
    assert f"only the first {ROADMAP_MAX_ITEMS:,} are taken" in items
    printed = project.seed(project.plan_only(), "gaps")
    assert "bytes left out" in printed.stdout


_TAGS = """
import subprocess, sys
lines = "".join(f"create refs/tags/t{i:05d} HEAD\\n" for i in range(int(sys.argv[2])))
subprocess.run(["git", "-C", sys.argv[1], "update-ref", "--stdin"], input=lines.encode(), check=True)
"""


def test_thousands_of_new_tags_halt_with_evidence_capped_and_counted(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    project.task()
    tags = 5000
    steps = [
        {"run": [sys.executable, "-c", _TAGS, str(project.root), str(tags)]},
        *DO_THE_TASK,
    ]
    config = project.config(steps, extra=FAST + '[guard]\nsandbox = "off"\n')

    result = project.seed(config, "once")

    assert result.returncode == 3, result.stderr[-2000:]  # halted: a change to the refs
    [record] = project.records()
    assert record["failure_category"] == "SANDBOX_VIOLATION"
    evidence = record["evidence"]
    assert len(evidence) == EVIDENCE_MAX_LINES
    assert evidence[-1] == f"... and {tags - EVIDENCE_MAX_LINES + 1:,} more"
    assert all("refs/tags/t" in line for line in evidence[:-1])
    log = (project.root / "history" / "records.jsonl").read_bytes()
    assert len(log) < 200_000
    halt = json.loads((project.root / "history" / "halt.json").read_text())
    assert halt["halted"] and len(halt["reason"]) < 2100
    report = (project.root / "history" / record["iteration_id"] / "report.md").read_text()
    assert max(len(line) for line in report.splitlines()) <= 2100
    assert len(report) < 100_000
    assert len(result.stderr) < 100_000
    assert len(git(project.root, "tag").split()) == tags  # reported, not undone
    assert (seed(project.root, "status").returncode) == 0

"""Malformed seed.toml, ROADMAP.md, records.jsonl, index and halt file: a clear word, nothing lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reliability.helpers import FILES, assert_checkout_kept, make_project
from tests.support import git, seed
from tests.unit.factories import gap, record


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("[agent\nbackend = 'none'\n", "not valid TOML"),
        ("[budget]\nmax_cost_usd_per_day = -1\n", "budget.max_cost_usd_per_day"),
        ('[guard.growth.low]\nnew_files = "many"\n', "guard.growth.low.new_files"),
        ("[guard]\nmax_file_bytes = 10\nprotect = []\n", "guard.protect"),
        (b"\xff\xfe not utf-8", "not valid UTF-8"),
    ],
)
def test_a_malformed_seed_toml_is_exit_2_and_touches_nothing(
    tmp_path: Path, text: str | bytes, names: str
) -> None:
    project = make_project(tmp_path)
    (project.root / "seed.toml").write_bytes(text if isinstance(text, bytes) else text.encode())
    project.task()
    before = project.snapshot()

    result = seed(project.root, "once")

    assert result.returncode == 2
    assert names in result.stderr and str(project.root / "seed.toml") in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (project.root / "history" / "records.jsonl").exists()
    assert_checkout_kept(project, before)
    assert (project.root / "inbox" / "sub.md").exists()


def test_a_malformed_roadmap_does_not_stop_the_daemon(tmp_path: Path) -> None:
    junk = (
        b"# Plan\n- [ ] add a sub function\n"
        + b"\xff\xfe\x00\x01 not utf-8 \x00\n"
        + b"- [ ] "
        + b"x" * 200_000
        + b"\n```\n- [ ] hidden in an unclosed fence\n"
    )
    project = make_project(tmp_path, FILES)
    (project.root / "ROADMAP.md").write_bytes(junk)
    git(project.root, "add", "ROADMAP.md")
    git(project.root, "commit", "-q", "-m", "a roadmap with junk in it")
    before = project.snapshot()

    result = project.seed(project.plan_only(), "once")

    assert result.returncode == 5, result.stderr  # plans written, nothing could run
    # once records one iteration (the first plan); the other item is a gap all the same
    [record] = project.records()
    assert record["gap"]["title"] == "add a sub function" and record["outcome"] == "WAITING"
    shown = project.seed(project.plan_only(), "gaps", "--json")
    titles = [g["title"] for g in json.loads(shown.stdout)["gaps"] if g["category"] == "roadmap"]
    assert titles[0] == "add a sub function" and len(titles) == 2
    assert len(titles[1]) <= 200 and "hidden" not in " ".join(titles)
    assert_checkout_kept(project, before)


def test_a_corrupt_record_log_and_index_are_repaired_and_said(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    history = project.root / "history"
    history.mkdir()
    old = record(gap("ruff:old.py:F401"), 1)
    bad = b'{"iteration_id": "iter-0002-20260101-120000", "outcome": "NOT AN OUTCOME"}\n'
    torn = record(gap("ruff:torn.py:F401"), 3).model_dump_json().encode()[:100]
    (history / "records.jsonl").write_bytes(old.model_dump_json().encode() + b"\n" + bad + torn)
    (history / ".index.sqlite").write_bytes(b"this is not a database" * 100)
    project.task()
    before = project.snapshot()

    result = project.seed(project.plan_only(), "once")

    assert result.returncode == 5, result.stderr
    assert "cut a torn last line of 100 bytes" in result.stderr
    assert "a malformed record line is kept but skipped" in result.stderr
    data = (history / "records.jsonl").read_bytes()
    assert data.startswith(
        old.model_dump_json().encode() + b"\n" + bad
    )  # nothing a person wrote is lost
    assert data.endswith(b"\n")
    [aside] = history.glob("records.jsonl.torn-*")
    assert aside.read_bytes() == torn
    listed = seed(project.root, "history")
    assert old.iteration_id in listed.stdout and "WAITING" in listed.stdout
    said = [e["message"] for e in project.events("recovery")]
    assert any("cut a torn last line" in m for m in said)
    assert any("malformed record line" in m for m in said)
    assert_checkout_kept(project, before)


def test_an_unreadable_halt_file_is_a_halt_until_resumed(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    project.task()
    (project.root / "history").mkdir()
    (project.root / "history" / "halt.json").write_text("{ half a halt")
    plan_only = project.plan_only()

    halted = project.seed(plan_only, "once")

    assert halted.returncode == 3 and "unreadable" in halted.stderr
    assert project.status()["halted"]
    assert seed(project.root, "resume").returncode == 0
    assert project.seed(plan_only, "once").returncode == 5

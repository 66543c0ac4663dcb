"""`seed.py fitness` replays cases of the corpus shipped in the kernel (real upstream fixes,
no network, no clone) on a repository with no history of its own: the planning modules get
each case's files, the analysers' input and its ranked gaps, in the module server's sandbox."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import SAMPLE, make_repo, seed

TWO = (CASE_A, CASE_B) = ("sqlparse-f66d12c", "idna-27fe03f")
"""Two shipped cases of two repositories (today's planner scores both in full)."""


def test_two_shipped_cases_are_replayed_and_scored_on_a_repository_without_history(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE)
    ran = seed(repo, "fitness", "--json", "--part", "shipped", "--case", CASE_A, "--case", CASE_B)
    assert ran.returncode == 0, ran.stderr[-2000:]
    found = json.loads(ran.stdout)
    shipped = found["parts"]["shipped"]
    assert list(found["parts"]) == ["shipped"]
    assert (shipped["cases"], shipped["landed"], shipped["valid"]) == (2, 2, 1.0)
    assert (shipped["chosen"], shipped["recall"]) == (1.0, 1.0)
    scores = {s["id"]: s for s in found["scores"]}
    assert sorted(scores) == sorted(TWO)
    for s in scores.values():
        assert s["part"] == "shipped" and s["error"] == ""
        assert s["rank"] is not None and s["allowed"] > 0 and s["prompt_chars"] > 500
    # a case id that names no case replays nothing, and says so
    listed = seed(repo, "fitness", "--part", "shipped", "--case", "no-such-case")
    assert listed.returncode != 0 and "0 case(s)" in listed.stdout

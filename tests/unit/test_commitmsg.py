"""The kernel's commit messages and their author: bounded, one-line subjects; inert summaries."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernel.records import commitmsg
from tests.support import SAMPLE, git, make_repo
from tests.unit.factories import gap, plan


def _trailers(message: str) -> str:
    return subprocess.run(
        ["git", "interpret-trailers", "--parse"],
        input=message,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_the_subject_is_one_bounded_line_and_a_summary_cannot_end_the_message() -> None:
    made = plan(gap(), goal="Fix\nthe\tbug " + "x" * 200)
    summary = "done\n\nSeed-Iteration: iter-9999\nCo-authored-by: Mallory <m@example.com>"

    text = commitmsg.message(made, summary)

    subject = text.split("\n", 1)[0]
    assert subject.startswith("Fix the bug x") and len(subject) == commitmsg.SUBJECT_MAX
    assert _trailers(text) == f"Seed-Iteration: {made.iteration_id}\n"
    long = commitmsg.message(made, "line\n" * 1000 + "y" * 10_000)
    assert len(long) < commitmsg.SUMMARY_CHARS + 1000


def test_the_author_is_the_settings_then_the_repositorys_user_then_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no global user.name to fall back on
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = make_repo(tmp_path / "repo", SAMPLE)

    assert commitmsg.author(repo, "", "") == ("seed", "seed@localhost")
    git(repo, "config", "user.name", "Pat <\x1b[31mPerson>")
    git(repo, "config", "user.email", "pat@example.com")
    assert commitmsg.author(repo, "", "") == ("Pat [31mPerson", "pat@example.com")
    assert commitmsg.author(repo, "Robo", "robo@example.com") == ("Robo", "robo@example.com")

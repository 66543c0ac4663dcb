"""Issue 39 ("read but not proven"): a binary file counts no lines in the candidates' choice.

git counts no lines in a binary file, so a candidate that adds a blob beside the fix looked
as small as the fix alone, and smaller than an honest candidate's one-line note: it won.
The kernel counts a binary file by its bytes, so it is never the smaller change for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_candidates import RIGHT, _config
from tests.integration.test_ratchet import BUGGY
from tests.support import git, make_repo, records, seed

FILES = {
    **BUGGY,
    "tests/test_calc.py": (
        "from calc import add\n\n\ndef test_add_zero() -> None:\n    assert add(2, 0) == 2\n"
    ),
}
"""add() subtracts, and the one test cannot tell: the person's task says so."""
TASK = (
    '+++\ntitle = "Make add() add"\nallowed = ["calc.py", "tests/**", "extra/**"]\n+++\n'
    "add(2, 3) must be 5; it is -1.\n"
)

pytestmark = pytest.mark.usefixtures("bwrap")

TEST = {
    "append": "tests/test_calc.py",
    "text": "\n\ndef test_add() -> None:\n    assert add(2, 3) == 5\n",
}
"""The test both candidates add with the fix."""
NOTE = {"write": "extra/NOTES.txt", "text": "add() adds.\n"}
"""One line in a file the plan did not name: the honest candidate's only extra."""
BLOB = {"write": "extra/blob.bin", "text": "\u0000\u0001" * 3000}
"""6,000 bytes git calls binary (a NUL in its first bytes): "0 lines"."""


def test_a_binary_file_never_makes_the_smaller_change(tmp_path: Path) -> None:
    config = _config(tmp_path, {"1": [*RIGHT, TEST, NOTE], "2": [*RIGHT, TEST, BLOB]})
    repo = make_repo(tmp_path / "repo", FILES, config)
    (repo / "inbox").mkdir()
    (repo / "inbox" / "add.md").write_text(TASK, encoding="utf-8")

    done = seed(repo, "once")

    assert done.returncode == 0, done.stderr[-3000:]
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS", record["reason"]
    table = {c["number"]: c for c in record["candidates"]}
    assert table[1]["eligible"] and table[2]["eligible"], table
    assert [table[k]["won"] for k in (1, 2)] == [True, False], record["choice"]
    assert table[2]["binary_bytes"] == 6000 and "binary_bytes" not in table[1]
    # the blob counts its 6,000 bytes where git counts it "0 lines"
    assert int(record["choice"].rsplit(" against ", 1)[1].rstrip(")")) >= 6000, record["choice"]
    landed = git(repo, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert "extra/NOTES.txt" in landed and "extra/blob.bin" not in landed

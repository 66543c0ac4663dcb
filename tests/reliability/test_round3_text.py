"""Issue 39, item 6: the agent's text, the tree's text and old records reach no terminal raw.

Every text an agent, a tool or the tree wrote carries an OSC 52 sequence (which writes the
person's clipboard), a window title, a screen clear, a C1 CSI and a bidirectional override.
Each command that prints is run on it, and what a person's terminal would get (its stdout
and stderr) must hold no escape, no C1 control and no bidirectional control, while the text
itself is still shown (inert). JSON stays JSON."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import BaseModel

from domain import Candidate, GapCategory, IterationOutcome, IterationRecord, RankedGap, Severity
from tests.histories import START, record, write_records
from tests.integration.test_ratchet import FIX
from tests.support import AGENT, make_repo, records, seed

pytestmark = pytest.mark.usefixtures("bwrap")

EVIL = (
    "\x1b]52;c;b3duZWQ=\x07"  # OSC 52: sets the clipboard
    "\x1b]0;owned\x07"  # the window title
    "\x1b[2J\x1b[H"  # clears the screen
    "\x9b31m"  # C1 CSI
    "\u202eevil\u202c"  # a bidirectional override
    "\u2066x\u2069\r"
)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What must never reach a person's terminal from another hand (newline and tab may)."""
SHOWN = "]52;c;b3duZWQ="
"""The inert rest of the sequence: the text is shown, not dropped."""


def _raw(text: str) -> list[str]:
    return sorted({f"U+{ord(c):04X}" for c in RAW.findall(text)})


def _said(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


def _json_literal(text: str) -> str:
    """EVIL as a TOML basic string holds it (escapes for every control)."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


FILES: dict[str, str] = {
    "calc.py": "def add(a: int, b: int) -> int:\n    return a - b\n",
    "tests/test_calc.py": (
        f"from calc import add\n\n\ndef test_add() -> None:\n    assert add(2, 3) == 5, {EVIL!r}\n"
    ),
    f"mod{EVIL.replace(chr(13), '')}.py": "import os\n",
    "pyproject.toml": (
        '[tool.ruff.lint]\nselect = ["F"]\n\n[tool.pytest.ini_options]\npythonpath = ["."]\n'
    ),
    ".gitignore": "history/*\ninbox/*\n__pycache__/\n",
    "inbox/task.md": f'+++\ntitle = "tidy {_json_literal(EVIL)}"\n+++\nbody {EVIL}\n',
}
"""A failing test whose message, a file whose name, and an inbox task whose title carry EVIL."""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository, and an agent that prints EVIL and fails with it in its summary (which
    the daemon's log line then quotes)."""
    tmp = tmp_path_factory.mktemp("evil")
    result = {"result": {"summary": f"fixed add {EVIL}"}}
    steps = [FIX, {"print": EVIL + "\n"}, result, {"exit": 1}]
    script = tmp / "script.json"
    script.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    argv = json.dumps([sys.executable, str(AGENT), str(script)])
    config = (
        f'[agent]\nbackend = "command"\ncommand = {argv}\ntimeout_s = 120\nrepair_rounds = 0\n'
        '[quality]\ntools = ["ruff", "pytest"]\n'
    )
    files = {k: v for k, v in FILES.items() if not k.startswith("inbox/")}
    repo = make_repo(tmp / "repo", files, config)
    (repo / "inbox").mkdir()
    (repo / "inbox" / "task.md").write_text(FILES["inbox/task.md"], encoding="utf-8")
    return repo


def test_the_trees_text_reaches_no_terminal_raw(tree: Path) -> None:
    for args in (("gaps",), ("gaps", "--json"), ("plan",), ("plan", "--json")):
        done = seed(tree, *args)
        assert done.returncode == 0, (args, done.stderr[-2000:])
        assert _raw(_said(done)) == [], (args, _said(done)[-3000:])
        if "--json" in args:
            json.loads(done.stdout)
    listed = seed(tree, "gaps").stdout
    # the test's message, the file's name and the task's title are shown, inert
    assert listed.count(SHOWN) >= 3 and "<U+202E>" in listed, listed


def test_an_agents_text_reaches_no_terminal_raw(tree: Path) -> None:
    done = seed(tree, "once")
    # the daemon's log lines (stderr) and its progress lines (stdout)
    assert _raw(_said(done)) == [], _said(done)[-3000:]
    [landed] = records(tree)
    assert landed["failure_category"] == "AGENT_ERROR" and "fixed add" in landed["reason"]
    number = landed["iteration_id"].split("-")[1]
    for args in (
        ("history",),
        ("history", "--json"),
        ("history", number),
        ("history", number, "--json"),
        ("status",),
        ("status", "--json"),
        ("report",),
        ("approve", number),
    ):
        shown = seed(tree, *args)
        assert _raw(_said(shown)) == [], (args, _said(shown)[-3000:])
    report = seed(tree, "history", number).stdout
    assert SHOWN in report and "fixed add" in report, report
    # the record and report.md hold the summary cleaned where it entered
    assert _raw(landed["agent_summary"]) == [] and SHOWN in landed["agent_summary"]
    on_disk = (tree / "history" / landed["iteration_id"] / "report.md").read_text()
    assert _raw(on_disk) == [] and SHOWN in on_disk


def _poisoned(value: Any) -> Any:
    """Every text of a model (field values, list items, dict keys) with EVIL after it, but
    the two a record is looked up by."""
    if isinstance(value, BaseModel):
        fields = {n: _poisoned(v) for n, v in value if n not in ("iteration_id", "checkout")}
        return value.model_copy(update=fields)
    if isinstance(value, Enum):
        return value
    if isinstance(value, str):
        return value + EVIL
    if isinstance(value, dict):
        return {_poisoned(k): _poisoned(v) for k, v in cast(dict[Any, Any], value).items()}
    if isinstance(value, tuple):
        return tuple(_poisoned(v) for v in cast(tuple[Any, ...], value))
    return value


def test_records_written_before_reach_no_terminal_raw(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", FILES_PLAIN, '[agent]\nbackend = "none"\n')
    kept = record(1, START, IterationOutcome.KEPT)
    kept = kept.model_copy(
        update={"candidates": (Candidate(number=1, backend="command", outcome=kept.outcome),)}
    )
    old = cast(IterationRecord, _poisoned(kept))
    IterationRecord.model_validate_json(old.model_dump_json())  # a record the store reads
    history = repo / "history"
    write_records(history, [old])
    # what an older seed wrote beside it: the report with the summary as written, a halt
    # whose reason quotes the agent, and the latest ranking
    folder = history / old.iteration_id
    folder.mkdir(parents=True)
    (folder / "report.md").write_text(f"# {old.gap.title}\n\n{old.agent_summary}\n")
    halt = {"halted": True, "reason": f"the agent said {EVIL}", "at": datetime.now(UTC).isoformat()}
    (history / "halt.json").write_text(json.dumps(halt))
    ranked = RankedGap(
        key=f"ruff:F401:a{EVIL}.py",
        category=GapCategory.QUALITY,
        source="ruff",
        title=f"F401 in a{EVIL}.py",
        rank=1,
        severity=Severity.NORMAL,
        rank_reason=EVIL,
    )
    live = {"phase": "stopped", "top_gaps": [ranked.model_dump(mode="json")]}
    (history / "status.json").write_text(json.dumps(live))
    for args in (
        ("history",),
        ("history", "--json"),
        ("history", "1"),
        ("history", "1", "--json"),
        ("status",),
        ("status", "--json"),
        ("report",),
        ("approve", "1"),
        ("resume",),
    ):
        shown = seed(repo, *args)
        assert _raw(_said(shown)) == [], (args, _said(shown)[-3000:])
        if "--json" in args:  # JSON stays JSON: one document, or one per line
            docs = shown.stdout.splitlines() if args == ("history", "--json") else [shown.stdout]
            assert all(json.loads(doc) for doc in docs), shown.stdout[-2000:]
    assert SHOWN in seed(repo, "history", "1").stdout
    said = json.loads(seed(repo, "history", "1", "--json").stdout)
    assert said["agent_summary"] == old.agent_summary  # JSON keeps the text, escaped


FILES_PLAIN = {"calc.py": "def add(a: int, b: int) -> int:\n    return a + b\n"}

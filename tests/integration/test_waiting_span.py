"""A WAITING report's "When" is its real span: from the analysis it was planned from to its record."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from tests.support import BROKEN_ADD, make_repo, records, seed

TOOLS = '\n[quality]\ntools = ["pytest"]\n'


def _seconds(text: str) -> float:
    minutes = re.fullmatch(r"(\d+)m(\d+)s", text)
    return int(minutes[1]) * 60 + int(minutes[2]) if minutes else float(text.rstrip("s"))


def test_a_waiting_report_shows_its_real_span(tmp_path: Path) -> None:
    # a slow test makes the analysis take seconds: the span must hold them
    files = {
        **BROKEN_ADD,
        "tests/test_slow.py": "import time\n\n\ndef test_slow():\n    time.sleep(1.5)\n",
    }
    repo = make_repo(tmp_path / "repo", files, '[agent]\nbackend = "none"\n' + TOOLS)

    result = seed(repo, "once")

    [record] = records(repo)
    assert record["outcome"] == "WAITING", result.stderr[-2000:]
    report = (repo / "history" / record["iteration_id"] / "report.md").read_text()
    when = re.search(r"\| When \| (\S+ \S+) to (\S+ \S+) \((\S+)\) \|", report)
    assert when is not None, report
    start, end = (datetime.strptime(t, "%Y-%m-%d %H:%M:%SZ") for t in when.group(1, 2))
    shown = _seconds(when[3])
    phases = sum(record["durations"].values())
    assert phases >= 1.5  # the analysis ran the slow test
    assert abs((end - start).total_seconds() - shown) <= 1.5, when[0]
    assert (end - start).total_seconds() >= phases - 1, when[0]

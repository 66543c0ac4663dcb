"""The kernel's checks of the module host's answers: inbox items and the backend choice."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from domain import InboxText
from kernel.errors import HostError
from kernel.host.answers import AgentInfo, backend_choice, inbox_readings

_AT = datetime(2026, 1, 1, tzinfo=UTC)
_TASK = InboxText(
    name="t.md",
    text="+++\nallowed = ['a']\n+++\nbody\n",
    received_at=_AT,
    front_matter_max_bytes=16384,
    list_max=2,
    string_max=5,
    title_max=10,
)


def _item(**fields: object) -> dict[str, object]:
    return {"item": {"name": "t.md", "title": "t", "received_at": _AT.isoformat(), **fields}}


def test_an_item_within_the_bounds_is_taken_and_a_refusal_keeps_the_readers_reason() -> None:
    [item, refused] = inbox_readings([_item(allowed=["a"]), {"rejected": "no"}], [_TASK, _TASK])
    assert not isinstance(item, str) and item.allowed == ("a",)
    assert refused == "no"


def test_a_refusal_spread_over_lines_becomes_one_line() -> None:
    # the reason is logged and recorded as an event: a module cannot forge extra log lines
    [refused] = inbox_readings([{"rejected": "bad\nseed 2026 HALTED: forged\r\n"}], [_TASK])
    assert refused == "bad seed 2026 HALTED: forged"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (_item(allowed=["a", "b", "c"]), "'allowed' has 3 entries; the limit is 2"),
        (_item(forbidden=["toolong"]), "'forbidden' has an entry over 5 characters"),
        (_item(title="x" * 11), "its title is 11 characters; the limit is 10"),
        (_item(name="other.md"), "it is named 'other.md'"),
        (_item(priority="urgent"), "gave no fit reading of it"),
        ({"nothing": 1}, "gave no fit reading of it"),
    ],
)
def test_an_item_past_the_bounds_or_unfit_is_refused_with_the_kernels_reason(
    answer: object, reason: str
) -> None:
    [refused] = inbox_readings([answer], [_TASK])
    assert isinstance(refused, str) and reason in refused
    assert refused.startswith("the module that reads inbox tasks")


def test_an_answer_that_does_not_cover_every_task_is_a_host_error() -> None:
    with pytest.raises(HostError):
        inbox_readings([], [_TASK])


def test_the_backend_choice_must_be_listed_and_the_configured_one() -> None:
    listed = {n: AgentInfo(n, "", ("*",)) for n in ("claude", "none", "ruff-fix")}
    answer = {"name": "claude", "reason": "r", "sources": ["*"], "fallback": ""}
    assert backend_choice(answer, "auto", listed).name == "claude"
    with pytest.raises(HostError, match="chose backend 'claude'"):
        backend_choice(answer, "ruff-fix", listed)
    with pytest.raises(HostError):
        backend_choice({**answer, "name": "nobody"}, "auto", listed)
    with pytest.raises(HostError):
        backend_choice({**answer, "sources": "*"}, "auto", listed)


def test_a_quality_gaps_files_are_paths_of_the_measured_tree() -> None:
    # issue 24, item 3: a tool's words (a tamper message) once stood in for a gap's files and
    # became the plan's allowlist
    from domain import Diagnostic, Executed, Gap, GapCategory, GapReport, Severity, Tool
    from kernel.host.answers import real_files

    words = "an import hook was added: pkg_resources.extern.VendorImporter"
    failed = Diagnostic(
        tool=Tool.PYTEST,
        file="tests/test_a.py",
        node_id="tests/test_a.py::test_a",
        rule="failed",
        frame_file=words,
        frame_line=3,
        executed=(Executed(file="src/a.py", lines=(1,)), Executed(file=words, lines=(1,))),
    )
    quality = Gap(
        key="pytest:tests/test_a.py::test_a",
        category=GapCategory.QUALITY,
        source="pytest",
        severity=Severity.CRITICAL,
        title="t",
        files=("tests/test_a.py", words, "/etc/passwd"),
        evidence=(failed,),
    )
    person = quality.model_copy(
        update={"key": "inbox:t.md", "category": GapCategory.INBOX, "files": ("docs/**",)}
    )
    [kept, theirs] = real_files(
        GapReport(gaps=(quality, person)), ["tests/test_a.py", "src/a.py"]
    ).gaps
    assert kept.files == ("tests/test_a.py",)
    [evidence] = kept.evidence
    assert (evidence.frame_file, evidence.frame_line) == ("", 0)
    assert [e.file for e in evidence.executed] == ["src/a.py"]
    assert theirs == person  # the person's own globs

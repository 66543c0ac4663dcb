"""Roadmap ticking in the landed commit, and what inbox events wake the daemon."""

from __future__ import annotations

from pathlib import Path

from kernel.daemon import Wake, inbox_event
from kernel.landing import _tick_roadmap  # pyright: ignore[reportPrivateUsage]

ROADMAP = "# Next\n- [ ] add sub tests\n- [ ] add sub\n* [ ]   add mul  \r\n- [x] add div\n"


def test_the_item_is_ticked_at_its_line_and_only_an_exact_match_counts(tmp_path: Path) -> None:
    path = tmp_path / "ROADMAP.md"
    path.write_bytes(ROADMAP.encode())
    assert _tick_roadmap(path, 3, "add sub")
    assert path.read_bytes().decode() == ROADMAP.replace("- [ ] add sub\n", "- [x] add sub\n")
    # moved by the agent's change: found by its exact text, never by a longer one containing it
    path.write_bytes(ROADMAP.encode())
    assert _tick_roadmap(path, 2, "add sub")
    assert "- [ ] add sub tests\n- [x] add sub\n" in path.read_text()
    assert _tick_roadmap(path, 4, "add mul")
    assert path.read_bytes().endswith(b"* [x]   add mul\r\n- [x] add div\n")
    before = path.read_bytes()
    assert not _tick_roadmap(path, 5, "add div")  # already ticked: nothing to do
    assert not _tick_roadmap(path, 2, "add everything")
    assert path.read_bytes() == before
    assert not _tick_roadmap(tmp_path / "missing.md", 1, "add sub")


def test_only_complete_files_dropped_into_the_inbox_itself_wake_the_daemon(tmp_path: Path) -> None:
    box = tmp_path / "inbox"
    wake = Wake()
    inbox_event(wake, box, "created", str(box / "task.md"))
    assert wake.event.is_set() and wake.snapshot() == frozenset()  # look, but not yet complete
    wake.event.clear()
    inbox_event(wake, box, "modified", str(box / "task.md"))
    assert not wake.event.is_set()
    inbox_event(wake, box, "closed", str(box / "task.md"))
    assert wake.event.is_set() and wake.snapshot() == {"task.md"}
    inbox_event(wake, box, "modified", str(box / "task.md"))  # written again: not complete
    assert wake.snapshot() == frozenset()
    wake.event.clear()
    # an atomic write: a hidden temporary renamed into place
    inbox_event(wake, box, "created", str(box / ".task2.md.x.tmp"))
    inbox_event(wake, box, "closed", str(box / ".task2.md.x.tmp"))
    assert not wake.event.is_set()
    inbox_event(wake, box, "moved", str(box / ".task2.md.x.tmp"), str(box / "task2.md"))
    assert wake.event.is_set() and wake.snapshot() == {"task2.md"}
    wake.event.clear()
    # the daemon's own moves (claim, set aside, done) and editor files are not news
    inbox_event(wake, box, "moved", str(box / "task2.md"), str(box / ".active" / "task2.md"))
    inbox_event(wake, box, "closed", str(box / "rejected" / "x.md.reason.txt"))
    inbox_event(wake, box, "closed", str(box / ".task.md.swp"))
    inbox_event(wake, box, "opened", str(box / "task.md"))
    inbox_event(wake, box, "closed_no_write", str(box / "task.md"))
    assert not wake.event.is_set() and wake.snapshot() == frozenset()
    inbox_event(wake, box, "created", str(box / "folder"), is_directory=True)
    assert wake.event.is_set()

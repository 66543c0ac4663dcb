"""Roadmap ticking in the landed commit, and what inbox events wake the daemon."""

from __future__ import annotations

from pathlib import Path

from kernel.daemon import Wake, inbox_event
from kernel.landing import tick

ROADMAP = "# Next\n- [ ] add sub tests\n- [ ] add sub\n* [ ]   add mul  \r\n- [x] add div\n"


def test_the_item_is_ticked_at_its_line_and_only_an_exact_match_counts() -> None:
    # the kernel ticks the bytes of the tree it commits (never the agent's file on disk)
    ticked = tick(ROADMAP.encode(), 3, "add sub")
    assert ticked is not None
    assert ticked.decode() == ROADMAP.replace("- [ ] add sub\n", "- [x] add sub\n")
    # moved by the agent's change: found by its exact text, never by a longer one containing it
    moved = tick(ROADMAP.encode(), 2, "add sub")
    assert moved is not None and "- [ ] add sub tests\n- [x] add sub\n" in moved.decode()
    both = tick(moved, 4, "add mul")
    assert both is not None and both.endswith(b"* [x]   add mul\r\n- [x] add div\n")
    assert tick(both, 5, "add div") is None  # already ticked: nothing to do
    assert tick(both, 2, "add everything") is None
    assert tick(b"", 1, "add sub") is None


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

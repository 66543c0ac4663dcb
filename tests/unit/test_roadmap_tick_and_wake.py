"""Roadmap ticking in the landed commit, what file events wake the daemon, and status.json
written only when it changes."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from domain import IterationOutcome
from kernel.errors import ConfigError
from kernel.host.context import open_context
from kernel.judging.landing import tick
from kernel.shell.daemon import (  # pyright: ignore[reportPrivateUsage]
    BLOCKER,
    CONFIG,
    HALT,
    HEAD,
    Wake,
    _watch,
    blocked_paths,
    file_event,
    inbox_event,
)
from kernel.shell.status import StatusWriter
from tests.support import SAMPLE, make_repo
from tests.unit.factories import gap, record

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


def test_only_changes_of_the_named_files_wake_the_daemon_never_its_own_reads(
    tmp_path: Path,
) -> None:
    history, git = tmp_path / "history", tmp_path / ".git"
    files = {
        history / "halt.json": HALT,
        tmp_path / "seed.toml": CONFIG,
        git / "HEAD": HEAD,
        git / "refs" / "heads" / "main": HEAD,
    }
    wake = Wake()
    # the daemon reading halt.json or HEAD, and writing its own files beside them
    for kind in ("opened", "closed_no_write", "closed", "attrib"):
        file_event(wake, files, kind, str(history / "halt.json"))
        file_event(wake, files, kind, str(git / "HEAD"))
    file_event(wake, files, "created", str(history / ".status.json.x.tmp"))
    file_event(
        wake, files, "moved", str(history / ".status.json.x.tmp"), str(history / "status.json")
    )
    file_event(wake, files, "modified", str(history / "daemon.log"))
    file_event(wake, files, "created", str(git / "refs" / "heads" / "seed"))
    assert not wake.event.is_set() and wake.take_news() == frozenset()
    # a resume (written atomically), an edited seed.toml, a commit
    file_event(wake, files, "moved", str(history / ".halt.json.x.tmp"), str(history / "halt.json"))
    assert wake.event.is_set() and wake.take_news() == {HALT}
    file_event(wake, files, "modified", str(tmp_path / "seed.toml"))
    file_event(
        wake, files, "moved", str(git / "refs/heads/main.lock"), str(git / "refs/heads/main")
    )
    assert wake.take_news() == {CONFIG, HEAD}
    file_event(wake, files, "deleted", str(history / "halt.json"))
    assert wake.take_news() == {HALT} and wake.take_news() == frozenset()


def test_status_json_is_written_only_when_its_content_changes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE)
    writer = StatusWriter(open_context(repo, quiet=True))
    writer.update(type_checker="")
    writer.phase("halted", "a reason")
    first = writer.path.stat()
    writer.phase("halted", "a reason")  # each halted pass says so again: nothing new
    writer.update(type_checker="")
    again = writer.path.stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    writer.phase("idle", "until an event")
    assert writer.path.stat().st_ino != first.st_ino


def test_a_changed_seed_toml_is_read_again_and_a_broken_one_leaves_the_old_in_force(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE, '[agent]\nbackend = "none"\n')
    ctx = open_context(repo, quiet=True)
    assert ctx.reload_config() is False  # unchanged: nothing to do
    (repo / "seed.toml").write_text(
        '[agent]\nbackend = "ruff-fix"\n[daemon]\npoll_interval_s = 7\n'
    )
    assert ctx.reload_config() is True
    assert (ctx.config.agent.backend, ctx.config.daemon.poll_interval_s) == ("ruff-fix", 7)
    (repo / "seed.toml").write_text("[daemon]\npoll_interval_s = -1\n")
    with pytest.raises(ConfigError, match="poll_interval_s"):
        ctx.reload_config()
    assert ctx.config.daemon.poll_interval_s == 7


def test_the_watch_stops_without_watchdogs_inactive_thread_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # watchdog logs "InotifyEmitter.queue_events() called when the thread is inactive" when
    # an event is pending as the watch stops: with history/ written hard, it often is
    repo = make_repo(tmp_path / "repo", SAMPLE)
    ctx = open_context(repo, quiet=True)
    caplog.set_level(logging.DEBUG, logger="watchdog")

    def storm(done: threading.Event) -> None:
        k = 0
        while not done.is_set():
            (ctx.paths.history / f"storm-{k % 4}.txt").write_text(str(k))
            k += 1

    for _ in range(40):
        done = threading.Event()
        with _watch(ctx, Wake()):
            writer = threading.Thread(target=storm, args=(done,))
            writer.start()
            done.wait(0.03)
        done.set()
        writer.join()
    assert not [r for r in caplog.records if "inactive" in r.getMessage()]


def test_a_change_to_a_file_that_blocks_a_gap_wakes_the_daemon_and_others_do_not(
    tmp_path: Path,
) -> None:
    """A person reverting the edit that blocks work wakes the daemon at once, not at the
    next poll (issue 25's "one blocker, one payment", whose work then lands)."""
    repo = make_repo(tmp_path / "repo", SAMPLE)
    (repo / "calc.py").write_text(SAMPLE["calc.py"] + "# the person's work in progress\n")
    ctx = open_context(repo, quiet=True)
    wake = Wake()
    with _watch(ctx, wake) as refresh:
        refresh(("calc.py",))
        wake.take_news()
        wake.event.clear()
        (repo / "notes.txt").write_text("a file that blocks nothing\n")
        assert not wake.event.wait(1.0)
        (repo / "calc.py").write_text(SAMPLE["calc.py"])  # reverted
        assert wake.event.wait(5.0)
        assert BLOCKER in wake.take_news()


def test_the_paths_that_block_are_the_latest_records_not_the_checkouts_state() -> None:
    g, h = gap("ruff:calc.py:F401"), gap("ruff:b.py:F401", files=("b.py",))
    blocked = record(g, 1, IterationOutcome.WAITING, None).model_copy(
        update={"blocked_by": ("calc.py", "tests/test_calc.py")}
    )
    cleared = record(h, 2, IterationOutcome.WAITING, None).model_copy(
        update={"blocked_by": ("b.py",)}
    )
    landed = record(h, 3, IterationOutcome.SUCCESS, None)
    detached = record(gap("ruff:c.py:F401"), 4, IterationOutcome.WAITING, None).model_copy(
        update={"blocked_by": ("HEAD is detached",)}
    )
    assert blocked_paths([blocked, cleared, landed, detached]) == ("calc.py", "tests/test_calc.py")

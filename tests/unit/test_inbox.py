"""Inbox intake: every bad input set aside with a reason, nothing deleted, nothing half-read."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from domain import Priority
from kernel.isolation.openfiles import _by_lease, _by_proc, open_for_writing
from kernel.records import inbox
from tests.support import make_repo, read_tasks, seed, wait_for

LATER = datetime.now(UTC) + timedelta(hours=1)

BAD: dict[str, tuple[bytes, str]] = {
    "empty.md": (b"", "the file is empty"),
    "blank.md": (b"  \n\n", "the file is empty"),
    "binary.md": (b"fix\x00this", "binary"),
    "latin1.txt": ("caf\u00e9".encode("latin-1"), "not valid UTF-8"),
    "huge.md": (b"x" * (256 * 1024 + 1), "the limit is 262144"),
    "unclosed.md": (b'+++\ntitle = "x"\nno end\n', "not closed by a +++ line"),
    "badtoml.md": (b"+++\ntitle = \n+++\nbody\n", "not valid TOML"),
    "unknown.md": (b'+++\nowner = "me"\n+++\nbody\n', "unknown front matter key(s): owner"),
    "priority.md": (b'+++\npriority = "urgent"\n+++\nbody\n', "priority must be one of"),
    "title.md": (b"+++\ntitle = 3\n+++\nbody\n", "'title' must be a string"),
    "allowed.md": (b"+++\nallowed = [1]\n+++\nbody\n", "'allowed' must be a string or a list"),
    "check.md": (b"+++\nacceptance = 3\n+++\nbody\n", "'acceptance' must be a string or a list"),
    "onlyfront.md": (b'+++\npriority = "high"\n+++\n', "the task says nothing"),
    "task.docx": (b"PK\x03\x04", "tasks are .md or .txt files"),
    "yunclosed.md": (b"---\ntitle: x\nno end\n", "not closed by a --- line"),
    "yanchor.md": (b"---\ntitle: &a x\n---\nbody\n", "more YAML than front matter takes"),
    "ymap.md": (b"---\nallowed:\n  src: 1\n---\nbody\n", "only `- item` lines may follow"),
    "yunknown.md": (b"---\nowner: me\n---\nbody\n", "unknown front matter key(s): owner"),
    "ytwice.md": (b"---\ntitle: a\ntitle: b\n---\nbody\n", "key 'title' is set twice"),
}


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def test_every_bad_input_is_set_aside_with_its_reason_and_its_bytes(tmp_path: Path) -> None:
    box = tmp_path / "inbox"
    box.mkdir()
    for name, (data, _) in BAD.items():
        _write(box, name, data)
    (tmp_path / "elsewhere.md").write_text("the real task\n")
    (box / "link.md").symlink_to(tmp_path / "elsewhere.md")
    (box / "folder.md").mkdir()
    (box / "folder.md" / "inner.md").write_text("kept\n")
    os.mkfifo(box / "pipe.md")  # reading it would block forever

    intake = inbox.scan(box, LATER, read=read_tasks)

    assert intake.items == [] and intake.pending == []
    rejected = box / "rejected"
    expected = {
        **{n: r for n, (_, r) in BAD.items()},
        "link.md": "symlink",
        "folder.md": "directory",
        "pipe.md": "not a regular file",
    }
    assert {r.name for r in intake.rejected} == set(expected)
    for name, reason in expected.items():
        assert reason in (rejected / f"{name}.reason.txt").read_text(), name
    for name, (data, _) in BAD.items():
        assert (rejected / name).read_bytes() == data  # nothing lost
    assert (rejected / "link.md").is_symlink()
    assert (tmp_path / "elsewhere.md").read_text() == "the real task\n"
    assert (rejected / "folder.md" / "inner.md").read_text() == "kept\n"
    assert sorted(p.name for p in box.iterdir()) == ["rejected"]


def test_editor_temporaries_dotfiles_and_the_readme_are_left_alone(tmp_path: Path) -> None:
    box = tmp_path / "inbox"
    box.mkdir()
    names = ["task.md~", ".task.md.swp", ".#task.md", ".hidden.md", "4913", "README.md", "x.tmp"]
    for name in names:
        _write(box, name, b"\x00 not a task")
    intake = inbox.scan(box, LATER, read=read_tasks)
    assert (intake.items, intake.rejected, intake.pending) == ([], [], [])
    assert sorted(p.name for p in box.iterdir()) == sorted(names)


def test_good_tasks_are_read_oldest_first_with_their_front_matter(tmp_path: Path) -> None:
    box = tmp_path / "inbox"
    box.mkdir()
    new = _write(
        box,
        "b-new.md",
        b'+++\ntitle = "Add --verbose"\npriority = "high"\n'
        b'acceptance = ["pytest tests/test_cli.py::test_verbose", "tests/test_cli.py::test_quiet"]\n'
        b'allowed = ["cli.py", "tests/**"]\nforbidden = "setup.py"\n+++\nThe CLI should talk.\n',
    )
    old = _write(box, "z-old.txt", "\ufeff# Fix the caf\u00e9 bug\n\nIt crashes.\n".encode())
    os.utime(old, (1_000_000, 1_000_000))
    os.utime(new, (2_000_000, 2_000_000))

    intake = inbox.scan(box, LATER, read=read_tasks)

    first, second = intake.items
    assert (first.name, first.title, first.priority) == (
        "z-old.txt",
        "Fix the caf\u00e9 bug",
        Priority.NORMAL,
    )
    assert first.received_at == datetime.fromtimestamp(1_000_000, UTC)
    assert second.title == "Add --verbose" and second.priority == Priority.HIGH
    assert second.acceptance == (
        "pytest tests/test_cli.py::test_verbose",
        "tests/test_cli.py::test_quiet",
    )
    assert (second.allowed, second.forbidden) == (("cli.py", "tests/**"), ("setup.py",))
    assert second.body == "The CLI should talk." and len(second.sha256) == 64
    assert intake.rejected == []


def test_yaml_front_matter_is_read_as_toml_front_matter_is(tmp_path: Path) -> None:
    box = tmp_path / "inbox"
    box.mkdir()
    _write(
        box,
        "yaml.md",
        b"---\ntitle: 'Add --verbose'\npriority: high  # soon\n"
        b"acceptance:\n  - pytest tests/test_cli.py::test_verbose\n"
        b'  - "tests/test_cli.py::test_quiet"\n'
        b"allowed: [cli.py, tests/**]\nforbidden: setup.py\n---\nThe CLI should talk.\n",
    )

    [item] = inbox.scan(box, LATER, read=read_tasks).items

    assert (item.title, item.priority) == ("Add --verbose", Priority.HIGH)
    assert item.acceptance == (
        "pytest tests/test_cli.py::test_verbose",
        "tests/test_cli.py::test_quiet",
    )
    assert (item.allowed, item.forbidden) == (("cli.py", "tests/**"), ("setup.py",))
    assert item.body == "The CLI should talk."


_SLOW_WRITER = """
import sys, time
from pathlib import Path
path, barrier, started = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
with open(path, "w", encoding="utf-8") as handle:
    handle.write("+++\\npriority = ")
    handle.flush()
    started.touch()
    while not barrier.exists():
        time.sleep(0.01)
    handle.write('"high"\\n+++\\nWritten slowly, in chunks.\\n')
"""


def test_a_file_written_slowly_in_chunks_is_read_only_once_it_is_closed(tmp_path: Path) -> None:
    box = tmp_path / "inbox"
    box.mkdir()
    target, barrier, started = box / "slow.md", tmp_path / "go", tmp_path / "started"
    writer = subprocess.Popen(
        [sys.executable, "-c", _SLOW_WRITER, str(target), str(barrier), str(started)]
    )
    try:
        wait_for(started.exists, 30, "the writer's first chunk")
        # half written, the front matter is unclosed: reading it now would reject it
        assert open_for_writing(target) is True
        assert _by_lease(target) is True and _by_proc(target) is True
        during = inbox.scan(box, LATER, read=read_tasks)
        assert (during.items, during.rejected, during.pending) == ([], [], ["slow.md"])
        barrier.touch()
        assert writer.wait(timeout=30) == 0
    finally:
        writer.kill()
    assert open_for_writing(target) is False and _by_proc(target) is False
    after = inbox.scan(box, LATER, read=read_tasks)
    [item] = after.items
    assert (item.priority, item.body) == (Priority.HIGH, "Written slowly, in chunks.")
    assert after.rejected == [] and not (box / "rejected").exists()


def test_a_file_the_watcher_saw_closed_is_read_without_asking_again(tmp_path: Path) -> None:
    box = tmp_path / "inbox"
    box.mkdir()
    path = _write(box, "done-writing.md", b"ready\n")
    with path.open("a"):  # someone holds it open for writing, but the watcher saw it closed
        assert [
            i.name
            for i in inbox.scan(
                box, LATER, ready=frozenset({"done-writing.md"}), read=read_tasks
            ).items
        ] == ["done-writing.md"]
        assert inbox.scan(box, LATER, read=read_tasks).pending == ["done-writing.md"]


def test_claimed_items_move_through_active_to_done_or_failed_and_nothing_is_deleted(
    tmp_path: Path,
) -> None:
    box = tmp_path / "inbox"
    box.mkdir()
    for name in ("a.md", "b.md", "c.md", "d.md"):
        _write(box, name, f"task {name}\n".encode())
    inbox.claim(box, "a.md")
    assert (box / ".active" / "a.md").read_text() == "task a.md\n"
    assert [i.name for i in inbox.scan(box, LATER, read=read_tasks).items] == [
        "b.md",
        "c.md",
        "d.md",
    ]
    note = inbox.result_note(
        "a.md", "SUCCESS", "landed", [("iter-0001-20250101-000000", "SUCCESS", "ok")]
    )
    inbox.release(box, "a.md", "done", note)
    assert (box / "done" / "a.md").read_text() == "task a.md\n"
    result = (box / "done" / "a.md.result.md").read_text()
    assert (
        "[iter-0001-20250101-000000](../../history/iter-0001-20250101-000000/report.md)" in result
    )
    inbox.claim(box, "b.md")
    inbox.release(box, "b.md", "failed", "# b.md: ROLLBACK\n")
    assert (box / "failed" / "b.md.result.md").exists() and (box / "failed" / "b.md").exists()
    inbox.claim(box, "c.md")
    inbox.release(box, "c.md", "")  # back in the queue for another attempt
    inbox.fail_queued(box, "d.md", "# d.md: FAILED\n")
    assert (box / "failed" / "d.md").read_text() == "task d.md\n"
    inbox.claim(box, "c.md")
    assert inbox.requeue_active(box) == ["c.md"]  # after a crash
    assert (box / "c.md").read_text() == "task c.md\n"


def test_write_task_is_atomic_and_round_trips(tmp_path: Path) -> None:
    box = tmp_path / "inbox"
    title = 'Say "hi" \u2013 \U0001f600'
    path = inbox.write_task(box, "Make it greet.\n", "critical", title)
    assert [p.name for p in box.iterdir()] == [path.name]  # no temporary left behind
    [item] = inbox.scan(box, LATER, read=read_tasks).items
    assert (item.title, item.priority, item.body) == (title, Priority.CRITICAL, "Make it greet.")
    with pytest.raises(inbox.InboxError):
        inbox.write_task(box, "  ")
    with pytest.raises(ValueError):
        inbox.write_task(box, "text", "urgent")


def test_seed_add_drops_a_task_that_intake_accepts(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "A = 1\n"})
    result = seed(repo, "add", "Rename A to ANSWER", "--priority", "high")
    assert result.returncode == 0, result.stderr
    path = Path(result.stdout.strip())
    assert path.parent == repo / "inbox" and path.suffix == ".md"
    [item] = inbox.scan(repo / "inbox", LATER, read=read_tasks).items
    assert (item.title, item.priority) == ("Rename A to ANSWER", Priority.HIGH)


HOSTILE_NAMES: dict[bytes, str] = {
    b"bad\xff\xfe.md": "its name is not valid UTF-8",
    b"x" * 240 + b".md": "its name is 243 bytes long; the limit is 200",
    "\u00e9".encode() * 120 + b".txt": "its name is 244 bytes long; the limit is 200",
    b"line\nbreak.md": "control character",
    b"esc\x1b[31mred.md": "control character",
}


def test_a_hostile_file_name_is_set_aside_under_a_safe_name_with_the_original_in_the_reason(
    tmp_path: Path,
) -> None:
    box = tmp_path / "inbox"
    box.mkdir()
    for raw in HOSTILE_NAMES:
        with open(os.fsencode(box) + b"/" + raw, "wb") as handle:
            handle.write(b"a task with a hostile name\n")
    _write(box, "fine.md", b"a fine task\n")
    # an earlier rejection's reason file is never overwritten
    (box / "rejected").mkdir()
    taken = inbox.safe_name(os.fsdecode(b"bad\xff\xfe.md"))
    (box / "rejected" / f"{taken}.reason.txt").write_text("an older reason\n")

    intake = inbox.scan(box, LATER, read=read_tasks)

    assert [i.name for i in intake.items] == ["fine.md"]
    assert len(intake.rejected) == len(HOSTILE_NAMES)
    rejected = box / "rejected"
    for rejection in intake.rejected:
        moved = rejection.moved_to
        assert moved.parent == rejected and len(moved.name.encode()) <= 120
        assert moved.name.isprintable() and moved.read_bytes() == b"a task with a hostile name\n"
        reason = moved.with_name(moved.name + ".reason.txt").read_text()
        assert reason.startswith(f"inbox/{rejection.name} was moved here as {moved.name}: ")
        assert rejection.name.isprintable() and "\n" not in reason.rstrip("\n")
    shown = {r.name: r.reason for r in intake.rejected}
    assert shown["bad\\xff\\xfe.md"] == "its name is not valid UTF-8"
    assert "line\\nbreak.md" in shown and "esc\\x1b[31mred.md" in shown
    for raw, why in HOSTILE_NAMES.items():
        assert any(why in r.reason for r in intake.rejected if r.moved_to.exists()), raw
    assert (rejected / f"{taken}.reason.txt").read_text() == "an older reason\n"
    assert sorted(p.name for p in box.iterdir()) == ["fine.md", "rejected"]


@pytest.mark.parametrize(
    ("front", "reason"),
    [
        ("title = '" + "t" * 20_000 + "'\n", "the front matter is 20011 bytes; the limit is 16384"),
        ("acceptance = " + repr(["pytest"] * 51) + "\n", "'acceptance' has 51 entries"),
        ("allowed = ['" + "a" * 1001 + "']\n", "'allowed' has an entry over 1000 characters"),
        ("title = " + "[" * 5000 + "]" * 5000 + "\n", "not valid TOML"),
        ("priority = " + repr(["x" * 300]) + "\n", "priority must be one of"),
    ],
)
def test_front_matter_past_its_bounds_is_set_aside_with_a_short_reason(
    tmp_path: Path, front: str, reason: str
) -> None:
    box = tmp_path / "inbox"
    box.mkdir()
    _write(box, "task.md", f"+++\n{front}+++\nbody\n".encode())

    intake = inbox.scan(box, LATER, read=read_tasks)

    [rejection] = intake.rejected
    assert reason in rejection.reason and len(rejection.reason) <= 2000
    assert reason in (box / "rejected" / "task.md.reason.txt").read_text()
    assert (box / "rejected" / "task.md").read_bytes() == f"+++\n{front}+++\nbody\n".encode()


def test_a_file_that_grows_past_the_limit_after_its_size_was_seen_is_not_read_whole(
    tmp_path: Path,
) -> None:
    box = tmp_path / "inbox"
    box.mkdir()
    path = _write(box, "grows.md", b"small at first\n")
    info = path.lstat()
    path.write_bytes(b"x" * (inbox.MAX_BYTES * 4))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))

    data = inbox._read_bounded(path)  # pyright: ignore[reportPrivateUsage]

    assert len(data) == inbox.MAX_BYTES + 1
    with pytest.raises(inbox.InboxError, match="the limit is 262144"):
        inbox.parse_item("grows.md", data, LATER, read=read_tasks)


def test_at_most_500_tasks_are_read_at_one_look_the_oldest_and_the_rest_wait(
    tmp_path: Path,
) -> None:
    box = tmp_path / "inbox"
    box.mkdir()
    for i in range(505):
        path = _write(box, f"t{i:03d}.md", f"task {i}\n".encode())
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    _write(box, "zz-task.docx", b"PK")  # a bad kind is set aside whatever the queue holds

    intake = inbox.scan(box, LATER, read=read_tasks)

    assert [i.name for i in intake.items] == [f"t{i:03d}.md" for i in range(500)]
    assert intake.waiting == 5 and [r.name for r in intake.rejected] == ["zz-task.docx"]
    assert len([p for p in box.iterdir() if p.name.startswith("t")]) == 505
    for name in [f"t{i:03d}.md" for i in range(100)]:
        inbox.claim(box, name)
    later = inbox.scan(box, LATER, read=read_tasks)
    assert len(later.items) == 405 and later.waiting == 0

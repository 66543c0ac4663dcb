"""The read-only file-system port: the worktree and nothing outside it."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from domain import GapReport, ProjectState
from modules.planner import PLANNER
from modules.planner.fsport import MAX_READ, MemoryFS, WorktreeFS, worktree_fs
from modules.planner.tests.factory import inbox_gap


def test_reads_files_inside_the_worktree(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n", encoding="utf-8")
    port = WorktreeFS(tmp_path)
    assert port.read_text("pkg/a.py") == "x = 1\n"
    assert port.read_text("./pkg//a.py") == "x = 1\n"
    assert port.is_file("pkg/a.py") and port.is_dir("pkg")
    assert port.read_text("pkg") is None
    assert port.read_text("missing.py") is None


def test_nothing_outside_the_worktree_can_be_read(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret", encoding="utf-8")
    root = tmp_path / "wt"
    root.mkdir()
    os.symlink(outside, root / "link.txt")
    port = WorktreeFS(root)
    for path in ("../secret.txt", str(outside), "link.txt", "a/../../secret.txt"):
        assert port.read_text(path) is None, path
        assert not port.is_file(path)


def test_big_files_are_read_only_up_to_the_cap(tmp_path: Path) -> None:
    (tmp_path / "big.md").write_bytes(b"a" * (MAX_READ * 3))
    text = WorktreeFS(tmp_path).read_text("big.md")
    assert text is not None and len(text) == MAX_READ


def test_undecodable_bytes_are_replaced(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_bytes(b"ok \xff\xfe")
    assert WorktreeFS(tmp_path).read_text("x.md") == "ok \ufffd\ufffd"


def test_no_worktree_reads_as_an_empty_tree(tmp_path: Path) -> None:
    assert isinstance(worktree_fs(""), MemoryFS)
    assert isinstance(worktree_fs(str(tmp_path / "gone")), MemoryFS)
    assert isinstance(worktree_fs(str(tmp_path)), WorktreeFS)


def test_the_planner_reads_module_docs_from_the_worktree_in_its_state(tmp_path: Path) -> None:
    module = tmp_path / "modules" / "reports"
    module.mkdir(parents=True)
    (module / "SPEC.md").write_text("# Reports\n\nRender records.\n", encoding="utf-8")
    (module / "markdown.py").write_text("", encoding="utf-8")
    (tmp_path / "VISION.md").write_text("# V\n\nKeep projects healthy.\n", encoding="utf-8")
    state = ProjectState(
        now=datetime(2025, 1, 1, tzinfo=UTC), next_sequence=1, worktree=str(tmp_path)
    )
    gap = inbox_gap(allowed=["modules/reports/markdown.py"])
    plan = PLANNER.plan(GapReport(gaps=(gap,)), [], state)
    assert plan is not None
    assert plan.why == "Keep projects healthy."
    assert [(d.path, d.text) for d in plan.documents] == [
        ("modules/reports/SPEC.md", "# Reports\n\nRender records.")
    ]
    assert plan.actions[0].action_type.value == "modify"

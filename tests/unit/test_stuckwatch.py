"""Turns that change nothing in the checkout (kernel/loop/stuckwatch.py): counted in a row,
a change between two looks never missed, side folders left out."""

from __future__ import annotations

from pathlib import Path

from kernel.loop.stuckwatch import Still


def test_turns_with_no_change_in_a_row_end_at_the_limit(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    still = Still(3, tmp_path, "tool calls")
    assert still.turn() == "" and still.turn() == ""
    assert still.turn() == "no change to the checkout in 3 turns in a row (tool calls)"


def test_a_change_between_looks_starts_the_count_again(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    still = Still(3, tmp_path, "tool calls")
    still.turn()
    still.turn()  # no look here (too soon after the first): the write below is seen at the limit
    (tmp_path / "a.py").write_text("x = 22\n")
    assert still.turn() == ""
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.pyc").write_bytes(b"cache")  # a side folder: no change
    assert [still.turn() for _ in range(3)][-1].startswith("no change to the checkout in 3")


def test_zero_never_ends_a_run(tmp_path: Path) -> None:
    still = Still(0, tmp_path, "tool calls")
    assert all(still.turn() == "" for _ in range(100))

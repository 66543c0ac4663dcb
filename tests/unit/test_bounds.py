"""The caps every evidence, reason and report line goes through, and the printable form of names."""

from __future__ import annotations

import os

from kernel.bounds import cap_line, cap_lines, printable, unsafe_char


def test_a_long_list_keeps_its_first_lines_and_counts_the_rest() -> None:
    lines = [f"ref refs/tags/t{i} changed" for i in range(100_000)]

    capped = cap_lines(lines, 50)

    assert len(capped) == 50 and capped[:49] == lines[:49]
    assert capped[-1] == "... and 99,951 more"
    assert cap_lines(lines[:50], 50) == lines[:50]  # at the bound nothing is left out
    assert cap_lines([], 50) == []


def test_a_long_line_is_cut_saying_how_much_was_left_out() -> None:
    line = "x" * 7_400_000

    capped = cap_line(line, 2000)

    assert len(capped) <= 2000 and capped.endswith("... (7,398,040 more characters)")
    assert cap_line("short", 2000) == "short"
    assert all(len(c) <= 2000 for c in cap_lines([line] * 3, 50))


def test_printable_shows_undecodable_bytes_and_controls_escaped_on_one_line() -> None:
    name = os.fsdecode(b"bad\xff\xfe\nname\x1b.md")

    shown = printable(name)

    assert shown == "bad\\xff\\xfe\\nname\\x1b.md"
    assert unsafe_char(name) and not unsafe_char(shown) and shown.isprintable()
    assert printable("caf\u00e9 \U0001f600.md") == "caf\u00e9 \U0001f600.md"

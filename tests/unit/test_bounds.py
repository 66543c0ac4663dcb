"""The caps every evidence, reason and report line goes through, the printable form of names,
and the one cleaning of text from another hand on its way to a terminal."""

from __future__ import annotations

import ast
import io
import json
import os
from pathlib import Path

from kernel.bounds import cap_line, cap_lines, clean, json_shown, printable, unsafe_char
from kernel.terminal import say


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


def test_clean_leaves_newline_and_tab_and_shows_the_rest_inert() -> None:
    said = "a\tb\r\n\x1b]52;c;b3du\x07\x1b[2J\x9b31m\u202eevil\u2066x\u2069\u2028caf\u00e9"
    bad = os.fsdecode(b"\xff")

    shown = clean(said + bad)

    assert shown == "a\tb\n]52;c;b3du[2J31m<U+202E>evil<U+2066>x<U+2069>\ncaf\u00e9\\xff"
    assert clean(shown) == shown  # once is enough: cleaning again changes nothing
    assert printable("\u202e.md") == "<U+202E>.md"  # a name's one-line form too


def test_json_stays_json_and_holds_nothing_a_terminal_obeys() -> None:
    text = json.dumps({"s": "\x1b[2J\x9b\u202e\u2028"}, ensure_ascii=False)

    shown = json_shown(text)

    assert json.loads(shown) == json.loads(text) and clean(shown) == shown


def test_say_is_the_sink_and_the_kernels_own_redraw_comes_after_the_cleaning() -> None:
    out = io.StringIO()

    say("phase \x1b]0;title\x07", out, end="", redraw=True)
    say('{"s": "\u202e"}', out, json=True)

    assert out.getvalue() == '\r\x1b[Kphase ]0;title{"s": "\\u202e"}\n'


_WRITERS = (
    "print",
    *(f"sys.{s}.{w}" for s in ("stdout", "stderr") for w in ("write", "buffer.write")),
)


def test_every_line_the_kernel_prints_goes_through_the_one_sink() -> None:
    """No print() and no write to stdout or stderr in the kernel but in terminal.py (the
    forwarder runs inside an agent's sandbox: its stderr is the agent's own log)."""
    kernel = Path(__file__).resolve().parents[2] / "kernel"
    found: list[str] = []
    for path in sorted(kernel.rglob("*.py")):
        if path.name in ("terminal.py", "forwarder.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            called = ast.unparse(node.func)
            if called in _WRITERS:
                found.append(f"{path.relative_to(kernel)}:{node.lineno}: {called}")
    assert found == []

"""The one way text reaches a person's terminal.

Every line seed prints (the command line's output, the daemon's log, the progress line, the
bootstrap's words) goes out through `say`, cleaned by `bounds.clean` on the way: what an
agent, a tool, the tree or an old record wrote is shown as inert text, whoever built the line
and whenever it was written. The kernel's own control (the progress line drawn again in
place) is added here, after the cleaning, and only when the caller asks for it.
"""

from __future__ import annotations

import sys
from typing import TextIO

from kernel.bounds import clean, json_shown

REDRAW = "\r\x1b[K"
"""Back to the start of the line and clear it: the progress line drawn again in place."""


def say(
    text: str,
    file: TextIO | None = None,
    *,
    end: str = "\n",
    redraw: bool = False,
    json: bool = False,
    flush: bool = False,
) -> None:
    """Write text, cleaned, to file (stdout by default). `json`: the text is JSON, kept JSON
    (what cleaning would change is escaped instead); `redraw`: over the line drawn last."""
    stream = sys.stdout if file is None else file
    shown = json_shown(text) if json else clean(text)
    stream.write((REDRAW if redraw else "") + shown + end)
    if flush:
        stream.flush()

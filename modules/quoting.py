"""Text as data in a prompt: quoted between markers whose tag is a hash of the text itself,
so nothing inside can close the quote early. The planner's prompt and the adapters' repair
rounds both quote with it (the prompt's rules tell the agent what the markers mean)."""

from __future__ import annotations

import hashlib
import re

_OPEN = "<<<"
_CLEAN_LABEL = re.compile(r"[^A-Za-z0-9_./:\[\]() -]")


def _tag(label: str, text: str) -> str:
    return hashlib.sha256(f"{label}\0{text}".encode()).hexdigest()[:12]


def quote(label: str, text: str) -> str:
    """Text as data: between markers tagged with a hash of the text (markers inside are defused)."""
    clean = _CLEAN_LABEL.sub("_", label)[:120]
    body = text.replace(_OPEN, "< < <").rstrip()
    tag = _tag(clean, body)
    return f"<<<DATA {tag} {clean}>>>\n{body}\n<<<END DATA {tag}>>>"

"""The roadmap and inbox analysers: one gap per unchecked item, per queued task."""

from __future__ import annotations

from datetime import UTC, datetime

from domain import AnalysisInput, GapCategory, InboxItem, Measurements, Priority, Severity
from modules.analyzers.inbox import ANALYZER as INBOX
from modules.analyzers.roadmap import ANALYZER as ROADMAP
from modules.analyzers.roadmap import parse_roadmap

NOW = datetime(2025, 1, 1, tzinfo=UTC)

ROADMAP_TEXT = """# Roadmap

## Parser
- [x] tokens
- [ ] error recovery
  * [ ] nested: report every error

## Output
### HTML
- [ ] escape attributes
```
- [ ] inside a code fence: not an item
```
- [ ] error recovery
- [] not a checkbox
"""


def test_unchecked_items_in_file_order_with_their_headings() -> None:
    items = parse_roadmap(ROADMAP_TEXT)
    assert [(i.line, i.text, i.headings) for i in items] == [
        (5, "error recovery", ("Roadmap", "Parser")),
        (6, "nested: report every error", ("Roadmap", "Parser")),
        (10, "escape attributes", ("Roadmap", "Output", "HTML")),
        (14, "error recovery", ("Roadmap", "Output", "HTML")),
    ]


def test_roadmap_keys_are_stable_when_items_move_and_unique_when_texts_repeat() -> None:
    gaps = list(
        ROADMAP.analyze(AnalysisInput(measurements=Measurements(), roadmap=ROADMAP_TEXT, now=NOW))
    )
    keys = [g.key for g in gaps]
    assert len(set(keys)) == 4 and keys[3] == keys[0] + "#2"
    moved = "- [ ] escape attributes\n\n\n" + ROADMAP_TEXT
    again = ROADMAP.analyze(AnalysisInput(measurements=Measurements(), roadmap=moved, now=NOW))
    assert again[0].key == keys[2]
    assert gaps[2].description == "Roadmap > Output > HTML > escape attributes"
    assert all(g.category == GapCategory.ROADMAP and g.roadmap is not None for g in gaps)


def test_each_inbox_item_is_a_gap_keyed_by_its_file_name() -> None:
    item = InboxItem(
        name="add-verbose.md",
        title="Add --verbose",
        body="The CLI should accept --verbose.",
        priority=Priority.HIGH,
        allowed=("cli.py",),
        received_at=NOW,
    )
    [gap] = INBOX.analyze(AnalysisInput(measurements=Measurements(), inbox=(item,), now=NOW))
    assert (gap.key, gap.source, gap.severity, gap.files) == (
        "inbox:add-verbose.md",
        "inbox",
        Severity.HIGH,
        ("cli.py",),
    )
    assert gap.inbox == item and gap.title == "Add --verbose"

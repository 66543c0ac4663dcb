"""Roadmap gaps: every unchecked `- [ ]` item of ROADMAP.md, with its headings."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence

from domain import AnalysisInput, Gap, GapCategory, RoadmapItem, Severity

_ITEM = re.compile(r"^\s*[-*]\s+\[ \]\s+(?P<text>\S.*)$")
_HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<title>.+?)\s*#*\s*$")


def parse_roadmap(text: str) -> list[RoadmapItem]:
    """Unchecked items in file order, each with the headings above it."""
    items: list[RoadmapItem] = []
    headings: list[tuple[int, str]] = []
    in_fence = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        heading = _HEADING.match(line)
        if heading:
            level = len(heading.group("hashes"))
            headings = [h for h in headings if h[0] < level] + [(level, heading.group("title"))]
            continue
        match = _ITEM.match(line)
        if match:
            items.append(
                RoadmapItem(
                    text=match.group("text").strip(),
                    line=number,
                    headings=tuple(h[1] for h in headings),
                )
            )
    return items


def roadmap_key(item: RoadmapItem, occurrence: int = 1) -> str:
    """A key that survives the item moving in the file (it changes when its text does).

    The second item with the same text gets "#2", and so on, so keys stay unique.
    """
    digest = hashlib.sha256(item.text.encode("utf-8")).hexdigest()[:12]
    return f"roadmap:{digest}" + (f"#{occurrence}" if occurrence > 1 else "")


class RoadmapAnalyzer:
    """One gap per unchecked roadmap item."""

    name = "roadmap"
    contract_version = 1

    def analyze(self, inputs: AnalysisInput) -> Sequence[Gap]:
        """Roadmap items as gaps, in file order."""
        seen: Counter[str] = Counter()
        gaps: list[Gap] = []
        for item in parse_roadmap(inputs.roadmap):
            seen[item.text] += 1
            gaps.append(
                Gap(
                    key=roadmap_key(item, seen[item.text]),
                    category=GapCategory.ROADMAP,
                    source="roadmap",
                    severity=Severity.LOW,
                    title=item.text[:200],
                    description=" > ".join((*item.headings, item.text)),
                    roadmap=item,
                )
            )
        return gaps


ANALYZER = RoadmapAnalyzer()

"""Roadmap gaps: every unchecked `- [ ]` item of ROADMAP.md, with its headings."""

from __future__ import annotations

import hashlib
import re
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


def roadmap_key(item: RoadmapItem) -> str:
    """A key that survives the item moving in the file (it changes when its text does)."""
    digest = hashlib.sha256(item.text.encode("utf-8")).hexdigest()[:12]
    return f"roadmap:{digest}"


class RoadmapAnalyzer:
    """One gap per unchecked roadmap item."""

    name = "roadmap"
    contract_version = 1

    def analyze(self, inputs: AnalysisInput) -> Sequence[Gap]:
        """Roadmap items as gaps, in file order."""
        return [
            Gap(
                key=roadmap_key(item),
                category=GapCategory.ROADMAP,
                source="roadmap",
                severity=Severity.LOW,
                title=item.text[:200],
                description=" > ".join((*item.headings, item.text)),
                roadmap=item,
            )
            for item in parse_roadmap(inputs.roadmap)
        ]


ANALYZER = RoadmapAnalyzer()

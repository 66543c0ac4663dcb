"""The README stays a five-minute read, and every link in it and in docs/ leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import SEED_HOME

README = SEED_HOME / "README.md"
DOCS = SEED_HOME / "docs"
README_LINES_MAX = 250
"""A newcomer reads the README in five minutes; the reference lives in docs/."""

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _unfenced(text: str) -> str:
    """The text outside fenced code blocks (a '#' comment there is no heading)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _prose(text: str) -> str:
    """The text outside fenced code blocks and inline code, where a link is a link."""
    return re.sub(r"`[^`\n]*`", "", _unfenced(text))


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings (lower case, punctuation dropped)."""
    headings = re.findall(r"^#+ (.+)$", _unfenced(page.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _broken_links(page: Path, root: Path = SEED_HOME) -> list[str]:
    """Each relative link of a page whose file (or heading) does not exist."""
    broken: list[str] = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto: and the like: not a file of this repository
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{page.relative_to(root)}: {target} (no such heading)")
    return broken


def _pages() -> list[Path]:
    """The README and every page under docs/."""
    return [README, *sorted(DOCS.glob("*.md"))]


def test_every_relative_link_points_at_an_existing_file() -> None:
    broken = [line for page in _pages() for line in _broken_links(page)]
    assert broken == []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading: here\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#a-heading-here) [web](https://example.com)\n"
        "`[code](gone.md)`\n[gone](gone.md) [no heading](there.md#elsewhere)\n",
        encoding="utf-8",
    )
    assert _broken_links(page, tmp_path) == [
        "page.md: gone.md (no such file)",
        "page.md: there.md#elsewhere (no such heading)",
    ]


def test_the_readme_is_a_five_minute_read() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_LINES_MAX, f"README.md has {lines} lines; the reference goes in docs/"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {
        (SEED_HOME / target.partition("#")[0]).resolve()
        for target in LINK.findall(_prose(README.read_text(encoding="utf-8")))
    }
    unlinked = [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert unlinked == [], f"docs/ pages the README does not link: {unlinked}"


def test_the_readme_keeps_the_commands_ci_runs() -> None:
    ci = (SEED_HOME / ".ci" / "run").read_text(encoding="utf-8")
    commands = re.findall(r"^python .+$", ci, re.M)
    assert "python seed.py test" in commands
    text = README.read_text(encoding="utf-8")
    assert [c for c in commands if f"    {c}\n" not in text] == []

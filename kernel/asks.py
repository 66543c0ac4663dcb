"""What a person's task asks, read by the kernel before the agent runs: its kind, and why.

The kind comes from the task itself (its front matter, the paths it names, what its words
ask for), never from the planner's answer or the agent's output: the planner may propose a
kind, but only this reading makes a task a documentation task, the one kind that needs no new
test. A task is documentation only when its front matter says so, or when what it asks can
be done without changing code: every path it names is documentation, and it asks for no
behaviour and no test. A task that asks for a behaviour or a test is a feature or a fix,
whatever words it also uses (issue 40).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from domain import CheckName, Gap, GapCategory, IterationPlan, TaskKind

DOC_SUFFIXES = (".md", ".rst", ".txt")
"""Files that are documentation by their name (requirements and constraints lists are not)."""
DOC_FOLDERS = ("docs", "doc")
_NOT_DOCS = re.compile(r"^(requirements|constraints)", re.IGNORECASE)
_DOC_WORDS = re.compile(
    r"\b(docstrings?|documentation|docs|comments|readme|typos?)\b", re.IGNORECASE
)
_TEST_WORDS = re.compile(r"\b(tests?|tested|testing|unit[- ]?tests?)\b", re.IGNORECASE)
"""A task that asks for a test is never documentation (a docs task needs none)."""
_BEHAVIOUR_WORDS = re.compile(
    r"\b(accepts?|accepting|support(s|ing)?|allow(s|ing)?|handles?|handling|raises?|raising"
    r"|implement\w*|crash\w*|bugs?|broken|(only|doesn't|does not|not) work\w*|instead of"
    r"|options?|parameters?|arguments?|behaviou?r)\b",
    re.IGNORECASE,
)
"""Words that ask for code to behave in a new way (a docs task changes no behaviour)."""
_NEW_CODE = re.compile(
    r"\b(feat|features?|adds?|added|adding|create|implement|introduce|new)\b(?!\s*\()"
    r"(?![^.\n]{0,40}\b(docstrings?|documentation|docs|comments?|readme|typos?|changelog"
    r"|examples?)\b)",
    re.IGNORECASE,
)
"""Asking for something new that is not documentation ("feat: add validators for base16"):
a name called as a function (`add()`) is a name, not a verb."""
_PATH_WORD = re.compile(r"(?<![\w/.-])[\w][\w./-]*\.(py|pyi|md|rst|txt|toml|cfg|ini|ya?ml|json)\b")
_GLOB_CHARS = frozenset("*?[")
_UNTESTED = re.compile(
    r"^\W*(refactor|rename|move|extract|split|simplify|clean\s*up|reorgani[sz]e|restructure|tidy"
    r"|all code (passes|is))\b",
    re.IGNORECASE,
)
"""A person's task that may land without a new test: a refactor (the tests that pass must
still pass) or a roadmap line asking that all code passes a tool (the tool judges it)."""
DOCS_CLOSED = (
    "the gap is closed: a documentation change (docstrings, comments, doc files) "
    "that changes no code; no new test is needed"
)
"""The gap-closed criterion's text for a docs task (the planner's text assumes its own kind)."""


def is_doc_file(path: str) -> bool:
    """Whether a file is documentation by its name alone (*.md, *.rst, *.txt)."""
    name = PurePosixPath(path).name
    return name.lower().endswith(DOC_SUFFIXES) and not _NOT_DOCS.match(name)


def _doc_path(pattern: str, docstrings: bool) -> bool:
    """A named path or glob that can only be documentation: a doc file, a docs folder, or
    (when the words ask for docstrings or comments) a literal .py file."""
    clean = pattern.rstrip("/").removesuffix("/**")
    if is_doc_file(clean) or clean in DOC_FOLDERS:
        return True
    return docstrings and clean.endswith(".py") and not _GLOB_CHARS & set(pattern)


def _words(gap: Gap) -> str:
    if gap.roadmap is not None:
        return gap.roadmap.text
    body = gap.inbox.body if gap.inbox is not None else ""
    return f"{gap.title}\n{body}"


def _named(gap: Gap, words: str) -> tuple[str, ...]:
    """The paths a task names: its `allowed` list, else the file names in its words."""
    if gap.inbox is not None and gap.inbox.allowed:
        return gap.inbox.allowed
    return tuple(m.group(0) for m in _PATH_WORD.finditer(words))


def docs_reason(gap: Gap) -> str:
    """Why a person's task is documentation only ('' when it is not)."""
    if gap.category == GapCategory.QUALITY:
        return ""
    item = gap.inbox
    if item is not None and item.kind:
        return 'its front matter says kind = "docs"' if item.kind == "docs" else ""
    words = _words(gap)
    if code_asked(gap):
        return ""
    named = _named(gap, words)
    if item is not None and item.allowed and all(is_doc_file(p) for p in item.allowed):
        return f"every path it allows is documentation ({', '.join(item.allowed)})"
    found = _DOC_WORDS.search(words)
    if found and all(_doc_path(p, docstrings=True) for p in named):
        return f"its title asks for {found.group(0).lower()}, and for no behaviour or test"
    if named and all(_doc_path(p, docstrings=False) for p in named):
        return f"every path it names is documentation ({', '.join(named)})"
    return ""


def code_asked(gap: Gap) -> str:
    """What in a task's words asks for code (a test or a behaviour), quoted; '' for nothing."""
    words = _PATH_WORD.sub(" ", _words(gap))  # tests/test_x.py names a place, asks nothing
    asks = ((_TEST_WORDS, "a test"), (_BEHAVIOUR_WORDS, "a behaviour"), (_NEW_CODE, "new code"))
    for pattern, what in asks:
        found = pattern.search(words)
        if found:
            return f"{what} ({found.group(0)!r})"
    return ""


def fix_kind(plan: IterationPlan) -> IterationPlan:
    """The plan with the kernel's kind and why: docs when the task says so, and never docs
    otherwise; a person's task is a feature (which needs a test) unless its words ask for a
    refactor or that all code passes a tool, whatever kind the planner proposed."""
    reason = docs_reason(plan.gap)
    proposed = plan.task_kind
    person = plan.gap.category != GapCategory.QUALITY
    if reason:
        kind = TaskKind.DOCS
    elif proposed == TaskKind.DOCS or (
        person and proposed != TaskKind.FEATURE and not _UNTESTED.match(_words(plan.gap))
    ):
        kind = TaskKind.FEATURE
    elif person and proposed == TaskKind.FEATURE:
        asked = code_asked(plan.gap) or "no refactor and no documentation only"
        note = f"kind feature (the kernel's reading: the task asks for {asked}; a feature needs a new or changed test)"
        return plan.model_copy(update={"notes": (note, *plan.notes)})
    else:
        return plan
    note = (
        f"kind docs (fixed by the kernel: {reason}): no new test is needed, and every Python "
        "syntax tree must stay the same once docstrings and comments are stripped"
        if kind == TaskKind.DOCS
        else f"kind feature (fixed by the kernel: the planner said {proposed.value}, "
        "which the task's words do not ask for; a feature needs a new or changed test)"
    )
    criteria = tuple(
        c.model_copy(update={"text": DOCS_CLOSED})
        if c.check == CheckName.GAP_CLOSED and kind == TaskKind.DOCS
        else c
        for c in plan.criteria
    )
    return plan.model_copy(
        update={"task_kind": kind, "criteria": criteria, "notes": (note, *plan.notes)}
    )

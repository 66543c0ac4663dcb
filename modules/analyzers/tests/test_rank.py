"""Ranking: the documented default order, configurable groups, stable results."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from domain import (
    AnalysisInput,
    Diagnostic,
    Gap,
    GapCategory,
    InboxItem,
    Measurement,
    Measurements,
    Priority,
    RoadmapItem,
    Severity,
    Tool,
)
from modules.analyzers.rank import RANKER, full_order

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _quality(source: str, key: str, rule: str = "X1") -> Gap:
    tool = Tool(source)
    evidence = (
        Diagnostic(tool=tool, file="a.py", rule=rule, node_id=key if source == "pytest" else ""),
    )
    return Gap(
        key=key,
        category=GapCategory.QUALITY,
        source=source,
        severity=Severity.NORMAL,
        title=key,
        evidence=evidence,
    )


def _inbox(name: str, priority: Priority, age_minutes: int) -> Gap:
    item = InboxItem(
        name=name,
        title=name,
        priority=priority,
        received_at=NOW - timedelta(minutes=age_minutes),
    )
    return Gap(
        key=f"inbox:{name}",
        category=GapCategory.INBOX,
        source="inbox",
        severity=Severity.NORMAL,
        title=name,
        inbox=item,
    )


def _roadmap(text: str, line: int) -> Gap:
    return Gap(
        key=f"roadmap:{text}",
        category=GapCategory.ROADMAP,
        source="roadmap",
        severity=Severity.LOW,
        title=text,
        roadmap=RoadmapItem(text=text, line=line),
    )


ALL = [
    _roadmap("second", 9),
    _inbox("low.md", Priority.LOW, 90),
    _quality("ruff-format", "ruff-format:b.py", "unformatted"),
    _inbox("normal-new.md", Priority.NORMAL, 1),
    _quality("ruff", "ruff:a.py:F401", "F401"),
    _inbox("critical.md", Priority.CRITICAL, 5),
    _quality("pyright", "pyright:a.py:reportReturnType", "reportReturnType"),
    _roadmap("first", 3),
    _quality("pytest", "pytest:tests/test_a.py::test_x[1]", "failed"),
    _inbox("normal-old.md", Priority.NORMAL, 60),
    _quality("pytest", "pytest:collect:tests/test_b.py", "collection-error"),
    _inbox("high.md", Priority.HIGH, 2),
    _quality("ruff", "ruff:c.py:invalid-syntax", "invalid-syntax"),
]


def _rank(order: tuple[str, ...] = (), quarantined: tuple[str, ...] = ()) -> list[str]:
    inputs = AnalysisInput(
        measurements=Measurements(), now=NOW, order=order, quarantined=quarantined
    )
    return [g.key for g in RANKER.rank(ALL, inputs).gaps]


def test_default_order_build_then_a_persons_tasks_then_types_lint_format_roadmap() -> None:
    assert _rank() == [
        "pytest:collect:tests/test_b.py",  # a collection error hides tests: first
        "ruff:c.py:invalid-syntax",  # code that does not parse breaks the build
        "pytest:tests/test_a.py::test_x[1]",
        "inbox:critical.md",
        "inbox:high.md",
        "inbox:normal-old.md",  # same priority: the older first
        "inbox:normal-new.md",  # a normal task comes before quality debt
        "inbox:low.md",
        "pyright:a.py:reportReturnType",
        "ruff:a.py:F401",
        "ruff-format:b.py",
        "roadmap:first",  # file order
        "roadmap:second",
    ]


def test_the_ranking_does_not_depend_on_the_order_gaps_arrive_in() -> None:
    inputs = AnalysisInput(measurements=Measurements(), now=NOW)
    forwards = [g.key for g in RANKER.rank(ALL, inputs).gaps]
    backwards = [g.key for g in RANKER.rank(list(reversed(ALL)), inputs).gaps]
    assert forwards == backwards


def test_a_configured_order_moves_whole_groups_and_the_rest_follow_by_default() -> None:
    ranked = _rank(order=("roadmap", "inbox"))
    assert ranked[:2] == ["roadmap:first", "roadmap:second"]
    # "inbox" named on its own keeps every priority, critical included, ordered by priority
    assert ranked[2:7] == [
        "inbox:critical.md",
        "inbox:high.md",
        "inbox:normal-old.md",
        "inbox:normal-new.md",
        "inbox:low.md",
    ]
    assert ranked[7] == "pytest:collect:tests/test_b.py"
    assert full_order(("lint",)) == (
        "lint",
        "build",
        "inbox:critical",
        "inbox",
        "types",
        "format",
        "roadmap",
    )
    # the old default, written out, still ranks quality debt before normal tasks
    old = _rank(order=("build", "inbox:critical", "types", "lint", "format", "inbox"))
    assert old.index("ruff-format:b.py") < old.index("inbox:normal-old.md")


def test_one_priority_can_get_a_group_of_its_own() -> None:
    ranked = _rank(order=("inbox:high", "build"))
    assert ranked[0] == "inbox:high.md"
    assert ranked.index("inbox:critical.md") > ranked.index("pytest:tests/test_a.py::test_x[1]")


def test_quarantined_gaps_are_skipped_and_listed_and_each_gap_says_why_it_ranks_there() -> None:
    inputs = AnalysisInput(measurements=Measurements(), now=NOW, quarantined=("ruff:a.py:F401",))
    report = RANKER.rank(ALL, inputs)
    assert "ruff:a.py:F401" not in [g.key for g in report.gaps]
    assert report.skipped == ("ruff:a.py:F401",)
    assert report.gaps[0].rank_reason.startswith("#1: group build in the order build > ")


def test_a_tool_that_could_not_run_is_reported_as_an_analysis_error() -> None:
    failed = Measurement(tool=Tool.PYRIGHT, ran=False, exit_code=3, error="bad pyrightconfig.json")
    inputs = AnalysisInput(measurements=Measurements(items=(failed,)), now=NOW)
    report = RANKER.rank([], inputs)
    assert report.errors == ("pyright could not run: bad pyrightconfig.json",)


def test_mypy_errors_rank_with_pyrights_in_the_types_group() -> None:
    gaps = [
        _quality("ruff", "ruff:a.py:F401", "F401"),
        _quality("mypy", "mypy:a.py:return-value", "return-value"),
        _quality("pyright", "pyright:a.py:reportReturnType", "reportReturnType"),
    ]
    inputs = AnalysisInput(measurements=Measurements(), now=NOW, order=("types", "lint"))
    ranked = [g.key for g in RANKER.rank(gaps, inputs).gaps]
    assert set(ranked[:2]) == {"mypy:a.py:return-value", "pyright:a.py:reportReturnType"}
    assert ranked[2] == "ruff:a.py:F401"

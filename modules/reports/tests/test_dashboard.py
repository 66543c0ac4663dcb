"""The dashboard page and the aggregations behind its charts (pure: no browser here)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from domain import GenerationNote, HistoryDigest, HistoryTotals, IterationOutcome, IterationRecord
from domain.fitness import FitnessFigures
from modules.reports.dashboard import STATIC_ROWS, render_dashboard
from modules.reports.svg import nice_scale
from modules.reports.trends import Binned, bucketing, success_by_source
from tests.histories import START, every_kind, history_rows, record, synthetic

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
CHARTS = (
    "chart-outcomes",
    "chart-success",
    "chart-candidates",
    "chart-cost",
    "chart-gaps",
    "chart-phases",
)


def _page(n: int) -> tuple[str, HistoryDigest]:
    rows = history_rows([*every_kind(), *synthetic(n)])
    digest = HistoryDigest(
        generated_at=NOW,
        root_name="demo",
        rows=rows,
        totals=HistoryTotals(iterations=len(rows), by_outcome={"SUCCESS": 1}),
    )
    return render_dashboard(digest), digest


def test_page_is_self_contained_with_every_chart_and_the_table() -> None:
    html, digest = _page(300)
    assert html.startswith("<!DOCTYPE html>")
    # nothing is fetched: no external url, no src/href to another host
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    assert "http://" not in html and "https://" not in html
    assert "default-src 'none'" in html
    for chart in CHARTS:
        svg = re.search(rf'<svg id="{chart}".*?</svg>', html, re.S)
        assert svg, chart
        assert "<rect" in svg.group(0) or "<polyline" in svg.group(0), chart
    body = html.split('<table id="iterations">', 1)[1].split("</table>", 1)[0]
    assert body.count("<tr>") == STATIC_ROWS + 1  # the header and the latest rows
    first = digest.rows[0].iteration_id
    assert f'<a href="{first}/report.md">{first}</a>' in body


def test_table_data_carries_every_row_and_cannot_break_out_of_its_script() -> None:
    rows = history_rows([record(1, START, IterationOutcome.SUCCESS, source="inbox")])
    title = "</script><script>alert(1)</script> & <b>"
    rows = (rows[0].model_copy(update={"gap_title": title}),)
    html = render_dashboard(HistoryDigest(generated_at=NOW, rows=rows))
    assert "</script><script>alert(1)" not in html
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;" in html
    data = html.split('<script type="application/json" id="data">', 1)[1].split("</script>", 1)[0]
    parsed = json.loads(data)
    assert parsed["rows"][0][5] == title
    assert parsed["outcomes"][parsed["rows"][0][2]] == "SUCCESS"

    html, digest = _page(1000)
    data = html.split('<script type="application/json" id="data">', 1)[1].split("</script>", 1)[0]
    assert [r[0] for r in json.loads(data)["rows"]] == [r.iteration_id for r in digest.rows]


def test_empty_history_renders_placeholders() -> None:
    html = render_dashboard(HistoryDigest(generated_at=NOW))
    assert html.count("no data yet") == len(CHARTS)
    assert "no iterations yet" in html


def test_buckets_are_days_then_weeks_then_months() -> None:
    def rows(days: int) -> list[IterationRecord]:
        later = START + timedelta(days=days)
        return [
            record(1, START, IterationOutcome.SUCCESS),
            record(2, later, IterationOutcome.SUCCESS),
        ]

    assert bucketing(history_rows(rows(10))).unit == "day"
    assert len(bucketing(history_rows(rows(10))).starts) == 11
    weeks = bucketing(history_rows(rows(200)))
    assert weeks.unit == "week" and all(d.weekday() == 0 for d in weeks.starts)
    months = bucketing(history_rows(rows(900)))
    assert months.unit == "month" and len(months.starts) <= 31
    assert months.labels[0] == "2026-03"


def test_open_gaps_carry_forward_and_success_rate_counts_only_agent_runs() -> None:
    first = record(1, START, IterationOutcome.SUCCESS, source="ruff")
    later = record(2, START + timedelta(days=2), IterationOutcome.WAITING, source="ruff")
    failed = record(3, START + timedelta(days=2), IterationOutcome.ROLLBACK, source="pytest")
    rows = history_rows([first, later, failed])
    binned = Binned(rows)
    gaps = {s.name: s.values for s in binned.open_quality_gaps()}
    assert "roadmap" not in gaps  # inbox and roadmap items are not quality gaps
    assert gaps["ruff"] == [
        first.open_gaps["ruff"],
        first.open_gaps["ruff"],
        failed.open_gaps["ruff"],
    ]
    assert success_by_source(rows) == [("pytest", 0.0, 0, 1), ("ruff", 1.0, 1, 1)]
    outcomes = {s.name: s.values for s in binned.outcomes()}
    assert outcomes["SUCCESS"] == [1, 0, 0] and outcomes["WAITING"] == [0, 0, 1]


def test_axes_step_in_round_numbers_and_whole_ones_for_counts() -> None:
    assert nice_scale(3, integer=True) == (3.0, 1.0)
    assert nice_scale(7, integer=True) == (8.0, 2.0)
    assert nice_scale(0.029) == (0.03, 0.01)
    assert nice_scale(0) == (1.0, 0.25)
    top, step = nice_scale(9_999, integer=True)
    assert top >= 9_999 and step == int(step) and top / step <= 5


def test_fitness_by_generation_shows_generation_zero_then_each_landed_one_by_part() -> None:
    was = FitnessFigures(cases=2, landed=2, ranked=2, valid=1.0, recall=0.0, top1=0.5)
    now = was.model_copy(update={"recall": 1.0, "top1": 1.0, "precision": 0.5})
    note = GenerationNote(
        number=1,
        iteration_id="iter-0001",
        commit="ab" * 20,
        before={"shipped": was, "held-back": was},
        after={"shipped": now, "held-back": now},
    )
    html = render_dashboard(HistoryDigest(generated_at=NOW, generations=(note,)))
    assert "Fitness by generation" in html
    rows = re.findall(
        r"<tr><td class=num>(\d)</td><td><code>(\w*)</code></td><td>([\w-]+)</td>", html
    )
    assert rows == [
        ("0", "", "held-back"),
        ("0", "", "shipped"),
        ("1", "abababababab", "held-back"),
        ("1", "abababababab", "shipped"),
    ]
    assert "Fitness by generation" not in render_dashboard(HistoryDigest(generated_at=NOW))

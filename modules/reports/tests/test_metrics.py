"""The metrics page: the text prometheus_client's own collector wrote, byte for byte."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from domain import MetricsSnapshot, PhaseTotal
from modules.reports.metrics import number, render_metrics

SNAP = MetricsSnapshot(
    by_outcome={"SUCCESS": 2, "WAITING": 1, "ROLLBACK": 0},
    cost_usd=1.25,
    tokens=12000,
    cost_today_usd=0.5,
    budget_left_today_usd=9.5,
    open_gaps={"pytest": 1, "ruff": 3},
    phases={
        "verify": PhaseTotal(seconds=3.25, count=2),
        "analyse": PhaseTotal(seconds=1.0, count=3),
    },
    halted=True,
    phase='agent "running"\\ now\n',
    candidates_by_outcome={"SUCCESS": 3, "ROLLBACK": 4, "ABORTED": 1},
    stuck=2,
    limited_until=1765080000.0,
)


def _as_prometheus_client_wrote_it(snap: MetricsSnapshot) -> str:
    """The collector the kernel used before the page was rendered by this module."""
    client = pytest.importorskip("prometheus_client")
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        SummaryMetricFamily,
    )

    class Collector:
        def describe(self) -> list[Any]:
            return []

        def collect(self) -> Iterator[Any]:
            runs = CounterMetricFamily(
                "seed_iterations", "Iterations recorded, by outcome.", labels=["outcome"]
            )
            for outcome, n in sorted(snap.by_outcome.items()):
                runs.add_metric([outcome], float(n))
            yield runs
            tried = CounterMetricFamily(
                "seed_candidates",
                "Candidates run ([candidates] n > 1), by outcome (SUCCESS: it passed everything).",
                labels=["outcome"],
            )
            for outcome, n in sorted(snap.candidates_by_outcome.items()):
                tried.add_metric([outcome], float(n))
            yield tried
            gaps = GaugeMetricFamily(
                "seed_open_gaps", "Open gaps at the latest analysis, by source.", labels=["source"]
            )
            for source, n in sorted(snap.open_gaps.items()):
                gaps.add_metric([source], float(n))
            yield gaps
            yield CounterMetricFamily(
                "seed_cost_usd",
                "Dollars spent on agents over every iteration.",
                value=snap.cost_usd,
            )
            yield CounterMetricFamily(
                "seed_tokens",
                "Tokens used by agents over every iteration.",
                value=float(snap.tokens),
            )
            yield GaugeMetricFamily(
                "seed_cost_today_usd", "Dollars spent today (UTC).", value=snap.cost_today_usd
            )
            yield GaugeMetricFamily(
                "seed_budget_left_today_usd",
                "Dollars left of today's budget.",
                value=snap.budget_left_today_usd,
            )
            phases = SummaryMetricFamily(
                "seed_phase_duration_seconds",
                "Seconds spent per iteration phase, over every iteration.",
                labels=["phase"],
            )
            for name, total in sorted(snap.phases.items()):
                phases.add_metric([name], count_value=total.count, sum_value=total.seconds)
            yield phases
            yield CounterMetricFamily(
                "seed_stuck_runs",
                "Iterations whose run was ended as STUCK (also in seed_iterations_total as FAILURE).",
                value=float(snap.stuck),
            )
            yield GaugeMetricFamily(
                "seed_limited_until_seconds",
                "When the usage limit in force resets, in epoch seconds (0: none holds).",
                value=snap.limited_until,
            )
            yield GaugeMetricFamily(
                "seed_halted", "1 when the daemon is halted.", value=1.0 if snap.halted else 0.0
            )
            current = GaugeMetricFamily(
                "seed_daemon_phase", "The phase the daemon is in (1).", labels=["phase"]
            )
            current.add_metric([snap.phase or "unknown"], 1.0)
            yield current

    registry = client.CollectorRegistry(auto_describe=True)
    registry.register(Collector())
    return client.generate_latest(registry).decode("utf-8")


@pytest.mark.parametrize("snap", [SNAP, MetricsSnapshot()])
def test_the_page_is_what_prometheus_client_wrote(snap: MetricsSnapshot) -> None:
    assert render_metrics(snap) == _as_prometheus_client_wrote_it(snap)


def test_numbers_are_written_as_go_writes_them() -> None:
    assert [number(v) for v in (2, 0.5, 1e21, float("inf"), float("-inf"))] == [
        "2.0",
        "0.5",
        "1e+21",
        "+Inf",
        "-Inf",
    ]
    assert number(float("nan")) == "NaN"

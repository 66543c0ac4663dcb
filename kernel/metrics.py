"""Optional Prometheus metrics for `run --metrics-port N`, served on 127.0.0.1 only.

prometheus_client is imported only when the flag is given, so the daemon runs without it.
The main thread refreshes a snapshot from the record index after each analysis and
iteration; the server thread only reads the latest snapshot (sqlite stays on one thread).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from domain import IterationOutcome
from kernel import budget, halt
from kernel.context import Context
from kernel.errors import UsageError

MISSING = (
    "--metrics-port needs the prometheus_client package, which is not installed "
    "(install the `metrics` extra: pip install 'prometheus-client>=0.20,<1')"
)


def require_client() -> None:
    """Fail with a clear usage error when prometheus_client cannot be imported."""
    try:
        import prometheus_client  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError as exc:
        raise UsageError(f"{MISSING}: {exc}") from exc


@dataclass(frozen=True)
class Snapshot:
    """Everything the metrics report, read in the main thread."""

    by_outcome: Mapping[str, int] = field(default_factory=dict[str, int])
    cost_usd: float = 0.0
    tokens: int = 0
    cost_today_usd: float = 0.0
    budget_left_today_usd: float = 0.0
    open_gaps: Mapping[str, int] = field(default_factory=dict[str, int])
    phases: Mapping[str, tuple[float, int]] = field(default_factory=dict[str, tuple[float, int]])
    halted: bool = False


def snapshot(ctx: Context, open_gaps: Mapping[str, int]) -> Snapshot:
    """Counts, sums and the latest open gaps from the record index and the halt state."""
    store = ctx.store
    totals = store.totals()
    spent = budget.spent_on(store)
    return Snapshot(
        by_outcome={o.value: totals.by_outcome.get(o.value, 0) for o in IterationOutcome},
        cost_usd=totals.cost,
        tokens=totals.tokens,
        cost_today_usd=spent.cost_usd,
        budget_left_today_usd=spent.cost_left(ctx.config.budget),
        open_gaps=dict(open_gaps),
        phases=store.phase_totals(),
        halted=halt.read_halt(ctx.paths.history).halted,
    )


class MetricsServer:
    """A Prometheus endpoint on 127.0.0.1:port (0 picks a free port) for one daemon."""

    def __init__(self, port: int, phase: Callable[[], str]) -> None:
        require_client()
        from prometheus_client import CollectorRegistry, start_http_server

        self._snapshot = Snapshot()
        self._lock = threading.Lock()
        self._phase = phase
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_Collector(self))
        try:
            self._server, self._thread = start_http_server(
                port, addr="127.0.0.1", registry=self.registry
            )
        except OSError as exc:
            raise UsageError(
                f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}: {exc}"
            ) from exc
        self.port = int(self._server.server_port)
        self.url = f"http://127.0.0.1:{self.port}/metrics"

    def update(self, value: Snapshot) -> None:
        """Replace the snapshot the endpoint serves."""
        with self._lock:
            self._snapshot = value

    def current(self) -> tuple[Snapshot, str]:
        """The snapshot and the daemon's phase now."""
        with self._lock:
            return self._snapshot, self._phase()

    def stop(self) -> None:
        """Stop serving and free the port."""
        with contextlib.suppress(OSError):
            self._server.shutdown()
            self._server.server_close()
        self._thread.join(timeout=5)


class _Collector:
    """Builds the metric families from the latest snapshot on every scrape."""

    def __init__(self, server: MetricsServer) -> None:
        self.server = server

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            SummaryMetricFamily,
        )

        snap, phase = self.server.current()
        runs = CounterMetricFamily(
            "seed_iterations", "Iterations recorded, by outcome.", labels=["outcome"]
        )
        for outcome, n in sorted(snap.by_outcome.items()):
            runs.add_metric([outcome], float(n))
        yield runs
        gaps = GaugeMetricFamily(
            "seed_open_gaps", "Open gaps at the latest analysis, by source.", labels=["source"]
        )
        for source, n in sorted(snap.open_gaps.items()):
            gaps.add_metric([source], float(n))
        yield gaps
        yield CounterMetricFamily(
            "seed_cost_usd", "Dollars spent on agents over every iteration.", value=snap.cost_usd
        )
        yield CounterMetricFamily(
            "seed_tokens", "Tokens used by agents over every iteration.", value=float(snap.tokens)
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
        for name, (total, n) in sorted(snap.phases.items()):
            phases.add_metric([name], count_value=n, sum_value=total)
        yield phases
        yield GaugeMetricFamily(
            "seed_halted", "1 when the daemon is halted.", value=1.0 if snap.halted else 0.0
        )
        current = GaugeMetricFamily(
            "seed_daemon_phase", "The phase the daemon is in (1).", labels=["phase"]
        )
        current.add_metric([phase or "unknown"], 1.0)
        yield current

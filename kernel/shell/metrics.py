"""Optional Prometheus metrics for `run --metrics-port N`, served on 127.0.0.1 only.

The main thread takes a snapshot of the record index, has the reporter render it (after each
analysis, iteration and phase change) and hands the text to the server; the server thread
only serves the latest text, so it never touches sqlite or the module host. prometheus_client
is imported only when the flag is given: its parser checks the reporter's text before it is
served, as every answer of the module host is checked before the kernel uses it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from domain import FailureCategory, IterationOutcome, MetricsSnapshot, PhaseTotal
from kernel.errors import SeedError, UsageError
from kernel.host.context import Context
from kernel.records import budget, halt, limits

MISSING = (
    "--metrics-port needs the prometheus_client package, which is not installed "
    "(install the `metrics` extra: pip install 'prometheus-client>=0.20,<1')"
)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def require_client() -> None:
    """Fail with a clear usage error when prometheus_client cannot be imported."""
    try:
        import prometheus_client  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError as exc:
        raise UsageError(f"{MISSING}: {exc}") from exc


def snapshot(ctx: Context, open_gaps: Mapping[str, int], phase: str) -> MetricsSnapshot:
    """Counts, sums and the latest open gaps from the record index, the spend and the halt state."""
    store = ctx.store
    totals = store.totals()
    spent = budget.spent_on(store)
    paused = limits.waiting(ctx.paths.history, datetime.now(UTC))
    return MetricsSnapshot(
        by_outcome={o.value: totals.by_outcome.get(o.value, 0) for o in IterationOutcome},
        cost_usd=totals.cost,
        tokens=totals.tokens,
        cost_today_usd=spent.cost_usd,
        budget_left_today_usd=spent.cost_left(ctx.config.budget),
        open_gaps=dict(open_gaps),
        phases={k: PhaseTotal(seconds=s, count=n) for k, (s, n) in store.phase_totals().items()},
        halted=halt.read_halt(ctx.paths.history).halted,
        phase=phase,
        candidates_by_outcome=store.candidate_totals(),
        stuck=store.count_category(FailureCategory.STUCK.value),
        limited_until=moment.timestamp() if paused and (moment := paused.moment()) else 0.0,
    )


def exposition(ctx: Context, snap: MetricsSnapshot) -> str:
    """The reporter's text of a snapshot, checked; a bare kernel-side text when the host fails."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = ctx.host.render_metrics(snap)
    except SeedError:  # a broken or busy host: the halt and the phase are still served
        return _bare(snap)
    try:
        list(text_string_to_metric_families(text))
    except Exception:  # whatever the parser raises, a page that does not parse is not served
        return _bare(snap)
    return text


def _bare(snap: MetricsSnapshot) -> str:
    phase = (snap.phase or "unknown").replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return (
        "# TYPE seed_halted gauge\n"
        f"seed_halted {1.0 if snap.halted else 0.0}\n"
        "# TYPE seed_daemon_phase gauge\n"
        f'seed_daemon_phase{{phase="{phase}"}} 1.0\n'
    )


class MetricsServer:
    """An HTTP endpoint on 127.0.0.1:port (0 picks a free port) serving the latest text."""

    def __init__(self, port: int) -> None:
        require_client()
        self._text = ""
        self._lock = threading.Lock()
        try:
            self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        except OSError as exc:
            raise UsageError(
                f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}: {exc}"
            ) from exc
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.port = int(self._server.server_port)
        self.url = f"http://127.0.0.1:{self.port}/metrics"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = server.current().encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # scrapes are not news

        return Handler

    def update(self, text: str) -> None:
        """Replace the text the endpoint serves."""
        with self._lock:
            self._text = text

    def current(self) -> str:
        """The text served now."""
        with self._lock:
            return self._text

    def stop(self) -> None:
        """Stop serving and free the port."""
        with contextlib.suppress(OSError):
            self._server.shutdown()
            self._server.server_close()
        self._thread.join(timeout=5)

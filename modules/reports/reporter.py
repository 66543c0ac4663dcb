"""The reporter the module host loads: report.md, the history index, the dashboard, the text
views of `status` and `history`, and the Prometheus metrics page."""

from __future__ import annotations

from datetime import datetime

from domain import DaemonStatus, HistoryDigest, HistoryListing, IterationRecord, MetricsSnapshot
from modules.reports.dashboard import render_dashboard
from modules.reports.index import render_index
from modules.reports.markdown import render_record
from modules.reports.metrics import render_metrics
from modules.reports.text import history_lines, status_lines


class HistoryReporter:
    """Markdown for reports and the index, one self-contained html page for the trends."""

    contract_version = 1

    def render_record(self, record: IterationRecord) -> str:
        """report.md for one iteration."""
        return render_record(record)

    def render_index(self, digest: HistoryDigest) -> str:
        """history/README.md."""
        return render_index(digest)

    def render_dashboard(self, digest: HistoryDigest) -> str:
        """history/index.html."""
        return render_dashboard(digest)

    def render_status(self, status: DaemonStatus, now: datetime) -> str:
        """The text of `seed.py status`."""
        return "\n".join(status_lines(status, now))

    def render_listing(self, listing: HistoryListing) -> str:
        """The text of `seed.py history`."""
        return "\n".join(history_lines(listing.rows, listing.total, listing.filtered))

    def render_metrics(self, snapshot: MetricsSnapshot) -> str:
        """The Prometheus text of `run --metrics-port`."""
        return render_metrics(snapshot)


REPORTER = HistoryReporter()

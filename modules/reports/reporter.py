"""The reporter the module host loads: report.md, the history index and the dashboard."""

from __future__ import annotations

from domain import HistoryDigest, IterationRecord
from modules.reports.dashboard import render_dashboard
from modules.reports.index import render_index
from modules.reports.markdown import render_record


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


REPORTER = HistoryReporter()

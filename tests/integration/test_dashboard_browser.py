"""`seed.py report` opened in a real headless Chromium: the charts and the table are there, with
and without script, and the page renders to a screenshot. No network is involved.

Chromium comes from Debian's `chromium` package (.ci/run installs it). Without it these tests
skip, unless SEED_REQUIRE_CHROMIUM=1 (set by CI), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from domain import FailureCategory, IterationOutcome
from kernel.records import halt
from kernel.records.store import RecordStore
from modules.reports.tests.test_dashboard import CHARTS
from tests.cdp import Browser
from tests.histories import START, record, synthetic, write_records
from tests.support import SAMPLE, make_repo, seed, start_daemon, wait_for

ITERATIONS = 600


def _browser() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("SEED_REQUIRE_CHROMIUM") == "1":
        pytest.fail("SEED_REQUIRE_CHROMIUM=1 but no chromium on PATH (apt-get install chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium)")


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    argv = [
        _browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        *args,
    ]
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


class _Dom(HTMLParser):
    """Counts what the tests look for in a dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.svg: dict[str, int] = {}
        self._in_svg = ""
        self._in_tbody = False
        self._in_table = False
        self.rows = 0
        self.links: list[str] = []
        self.controls_hidden: bool | None = None
        self.ready = False
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "svg" and found.get("id") in CHARTS:
            self._in_svg = str(found["id"])
            self.svg[self._in_svg] = 0
        elif self._in_svg and tag in ("rect", "polyline", "circle"):
            self.svg[self._in_svg] += 1
        elif tag == "table":
            self._in_table = found.get("id") == "iterations"
        elif tag == "tbody" and self._in_table:
            self._in_tbody = True
        elif tag == "tr" and self._in_tbody:
            self.rows += 1
        elif tag == "a" and self._in_tbody and found.get("href"):
            self.links.append(str(found["href"]))
        elif tag == "div" and found.get("id") == "controls":
            self.controls_hidden = "hidden" in found
        elif tag == "body":
            self.ready = found.get("data-ready") == "1"

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._in_svg = ""
        elif tag == "tbody":
            self._in_tbody = False

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _dom(text: str) -> _Dom:
    parser = _Dom()
    parser.feed(text)
    return parser


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _browser()
    repo = make_repo(tmp_path_factory.mktemp("dash") / "repo", SAMPLE)
    write_records(repo / "history", synthetic(ITERATIONS, per_day=50))
    result = seed(repo, "report")
    assert result.returncode == 0, result.stderr
    page = repo / "history" / "index.html"
    assert page.exists() and f"{ITERATIONS:,} iterations" in result.stdout
    return page


def test_charts_and_the_paged_table_in_the_dom(dashboard: Path, tmp_path: Path) -> None:
    dom = _dom(
        _chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", dashboard.as_uri()).stdout
    )
    assert dom.ready, "the page script did not run to the end"
    for chart in CHARTS:
        assert dom.svg.get(chart, 0) > 0, f"{chart} drew nothing"
    assert dom.svg["chart-outcomes"] >= 12  # twelve days of stacked bars
    assert dom.controls_hidden is False
    assert dom.rows == 100  # the first page of rows
    newest = list(synthetic(ITERATIONS, per_day=50))[-1].iteration_id
    assert dom.links[0] == f"{newest}/report.md"
    assert f"{ITERATIONS} of {ITERATIONS} iterations, newest first." in "".join(dom.text)


def test_without_script_the_latest_rows_and_the_charts_still_show(
    dashboard: Path, tmp_path: Path
) -> None:
    with Browser(_browser(), tmp_path / "profile") as browser:
        browser.call("Emulation.setScriptExecutionDisabled", value=True)
        browser.open(dashboard.as_uri())
        dom = _dom(browser.html())
    assert not dom.ready and dom.controls_hidden is True
    assert all(dom.svg.get(chart, 0) > 0 for chart in CHARTS)
    assert dom.rows == 100
    assert f"Showing the latest 100 of {ITERATIONS} iterations" in "".join(dom.text)


def test_filters_and_pages_in_the_browser(dashboard: Path, tmp_path: Path) -> None:
    rows = "[...document.querySelectorAll('#iterations tbody tr')]"
    with Browser(_browser(), tmp_path / "profile") as browser:
        browser.open(dashboard.as_uri())
        assert browser.evaluate("document.body.dataset.ready") == "1"
        shown = browser.evaluate(
            "const o = document.getElementById('f-outcome'); o.value = 'ROLLBACK';"
            "o.dispatchEvent(new Event('change'));"
            f"{rows}.map(r => r.cells[2].textContent)"
        )
        expected = sum(
            1 for r in synthetic(ITERATIONS, per_day=50) if r.outcome.value == "ROLLBACK"
        )
        assert 0 < len(shown) == min(expected, 100)
        assert all(text.startswith("ROLLBACK") for text in shown)
        note = browser.evaluate("document.getElementById('shown').textContent")
        assert note == f"{expected} of {ITERATIONS} iterations, newest first."
        pages = browser.evaluate(
            "o.value = ''; o.dispatchEvent(new Event('change'));"
            "document.getElementById('next').click();"
            f"[document.getElementById('pageinfo').textContent, {rows}.length]"
        )
        assert pages == [f" page 2 of {ITERATIONS // 100} ", 100]
        assert browser.screenshot()[:8] == b"\x89PNG\r\n\x1a\n"


def _png(path: Path) -> tuple[int, int, bytes]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, width, height, idat = 8, 0, 0, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def test_screenshot_shows_a_rendered_page(dashboard: Path, tmp_path: Path) -> None:
    shot = tmp_path / "dashboard.png"
    _chromium(
        tmp_path,
        "--window-size=1280,1600",
        "--hide-scrollbars",
        "--virtual-time-budget=10000",
        f"--screenshot={shot}",
        dashboard.as_uri(),
    )
    width, height, pixels = _png(shot)
    assert (width, height) == (1280, 1600)
    # a blank or single-colour page compresses to almost nothing and has few byte values
    assert len(set(pixels)) > 64
    assert shot.stat().st_size > 20_000


def _tiles_and_rows(browser: Browser, repo: Path) -> tuple[str, str, list[str]]:
    """The daemon tile, the open-gaps tile and the rows' outcome cells of a fresh `seed report`."""
    result = seed(repo, "report")
    assert result.returncode == 0, result.stderr
    browser.open((repo / "history" / "index.html").as_uri())
    assert browser.evaluate("document.body.dataset.ready") == "1"
    daemon, gaps, rows = browser.evaluate(
        "[document.querySelector('.tiles .tile:last-child').textContent,"
        " [...document.querySelectorAll('.tile')].map(t => t.textContent)"
        "   .find(t => t.includes('at the latest baseline')),"
        " [...document.querySelectorAll('#iterations tbody tr')].map(r => r.cells[2].textContent)]"
    )
    return daemon, gaps, rows


def test_the_daemon_tile_is_the_daemons_real_state(tmp_path: Path) -> None:
    """Stopped, running, halted while running, halted and stopped: what the lock says, not a
    default; one category per row; one open gap is "1 open gap"."""
    _browser()
    config = '[agent]\nbackend = "none"\n[daemon]\npoll_interval_s = 600\n'
    repo = make_repo(tmp_path / "repo", SAMPLE, config)
    blocked = record(1, START, IterationOutcome.MERGE_BLOCKED, FailureCategory.MERGE_BLOCKED)
    write_records(repo / "history", [blocked.model_copy(update={"open_gaps": {"pytest": 1}})])
    with Browser(_browser(), tmp_path / "profile") as browser:
        daemon, gaps, rows = _tiles_and_rows(browser, repo)
        assert daemon.startswith("stopped") and "no daemon is running" in daemon
        assert gaps == "1open gap at the latest baseline"
        assert rows == ["MERGE_BLOCKED"]

        process = start_daemon(repo)
        try:
            status = repo / "history" / "status.json"
            wait_for(
                lambda: '"idle"' in status.read_text() if status.exists() else False,
                120,
                "the daemon to idle",
                process,
            )
            daemon, _, _ = _tiles_and_rows(browser, repo)
            assert daemon == f"runningthe daemon is running (pid {process.pid}): idle"
            halt.halt(RecordStore(repo / "history"), "three failures in a row")
            daemon, _, _ = _tiles_and_rows(browser, repo)
            assert daemon.startswith("HALTEDthree failures in a row")
            # the command given whole: this repository is not the current directory
            assert f"the daemon is running (pid {process.pid}); run python " in daemon
            assert daemon.endswith(f"seed.py --root {repo} resume")
        finally:
            process.terminate()
            process.communicate(timeout=60)
        daemon, _, _ = _tiles_and_rows(browser, repo)
        assert daemon.startswith("HALTED") and "no daemon is running; run" in daemon

"""Benchmark: history/ readers on a history of N iterations (default 10,000).

    .venv/bin/python bench/dashboard.py [--iterations N] [--repeat R]

Builds a throwaway git repository whose history/records.jsonl holds N realistic records,
then times, each as the best of R runs:
  index      building the record index from records.jsonl (first read after a restart)
  readme     rewriting history/README.md (what every iteration pays: index rows, totals,
             the module host's rendering)
  digest     reading every row for the dashboard from the index
  render     the reporter turning that digest into html (in process)
  report     `python seed.py report` end to end (interpreter start, module host, render, write)
and prints the sizes of index.html and README.md. Results also go to bench/out/dashboard.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernel.host.context import open_context  # noqa: E402
from kernel.loop import reporting  # noqa: E402
from kernel.records.store import RecordStore  # noqa: E402
from modules.reports.dashboard import render_dashboard  # noqa: E402
from tests.histories import synthetic, write_records  # noqa: E402
from tests.support import SAMPLE, make_repo, seed_argv  # noqa: E402


def _best(action: Callable[[], object], repeat: int) -> float:
    times: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n, repeat = args.iterations, args.repeat
    with tempfile.TemporaryDirectory(prefix="seed-bench-dashboard-") as tmp:
        repo = make_repo(Path(tmp) / "repo", SAMPLE)
        history = repo / "history"
        write_records(history, synthetic(n))
        log_mb = (history / "records.jsonl").stat().st_size / 1e6

        def build_index() -> None:
            (history / ".index.sqlite").unlink(missing_ok=True)
            store = RecordStore(history)
            assert store.count() == n
            store.close()

        t_index = _best(build_index, repeat)
        ctx = open_context(repo, quiet=True)
        ctx.start_host()
        try:
            t_readme = _best(lambda: reporting.write_index(ctx), repeat)
            t_digest = _best(lambda: reporting.digest(ctx), repeat)
            digest = reporting.digest(ctx)
            payload_mb = len(digest.model_dump_json()) / 1e6
            t_render = _best(lambda: render_dashboard(digest), repeat)
        finally:
            ctx.host.stop()
            ctx.store.close()
        reports: list[float] = []
        for _ in range(repeat):
            started = time.perf_counter()
            subprocess.run(
                seed_argv(repo, "report"), check=True, capture_output=True, stdin=subprocess.DEVNULL
            )
            reports.append(time.perf_counter() - started)
        html = (history / "index.html").stat().st_size
        readme = (history / "README.md").stat().st_size
    results = {
        "iterations": n,
        "records_jsonl_mb": round(log_mb, 1),
        "index_build_s": round(t_index, 3),
        "readme_rewrite_s": round(t_readme, 3),
        "digest_s": round(t_digest, 3),
        "digest_json_mb": round(payload_mb, 2),
        "render_s": round(t_render, 3),
        "report_command_s": round(min(reports), 3),
        "report_command_median_s": round(statistics.median(reports), 3),
        "index_html_bytes": html,
        "readme_bytes": readme,
    }
    print(f"history of {n:,} iterations (records.jsonl {log_mb:.1f} MB), best of {repeat}:")
    print(f"  index built from records.jsonl   {t_index:7.3f} s")
    print(f"  history/README.md rewritten      {t_readme:7.3f} s   ({readme / 1024:,.1f} KiB)")
    print(f"  dashboard rows read from index   {t_digest:7.3f} s   ({payload_mb:.1f} MB as JSON)")
    print(f"  dashboard rendered (in process)  {t_render:7.3f} s")
    print(
        f"  `seed.py report` end to end      {min(reports):7.3f} s   (median {statistics.median(reports):.3f} s)"
    )
    print(f"  history/index.html               {html / 1e6:7.2f} MB")
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "dashboard.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

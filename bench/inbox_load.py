"""The inbox under load: 1,000 tasks through a real daemon, throughput and memory.

    .venv/bin/python bench/inbox_load.py [--tasks 1000] [--burst 0.7] [--sandbox on|off]

Makes the sample project, drops 70% of the tasks into inbox/ at once, starts `seed.py run`
with a fast command agent (tests/fakes/inbox_agent.py), drops the rest once the first
record is written, and waits until every task has ended in done/, failed/ or rejected/.
Half the tasks are bad files (set aside at intake), one in 20 fails (quarantined after two
attempts), the rest land. Prints the accounting (every task in exactly one place, by name and
by record), the intake throughput (tasks settled per second, and landed tasks per second),
the daemon's and its module host's peak RSS (sampled from /proc every 0.2 s) and the load
average over the run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.inbox_load import make_load_repo, run_load, summary


def main() -> int:
    """Run the load once and print its figures as JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--burst", type=float, default=0.7)
    parser.add_argument("--sandbox", choices=("on", "off"), default="on")
    parser.add_argument("--timeout", type=float, default=4 * 3600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="seed-inbox-load-") as tmp:
        repo = make_load_repo(Path(tmp) / "repo", args.sandbox)
        run = run_load(repo, args.tasks, args.burst, args.timeout)
        figures = summary(run)
        landed = run.accounting.ended.get("done", 0)
        figures["landed_per_s"] = round(landed / run.seconds, 3)
        figures["cores"] = os.cpu_count()
        figures["daemon_exit"] = run.daemon_exit
        print(json.dumps(figures, indent=2))
        for problem in run.accounting.problems[:20]:
            print(f"problem: {problem}", file=sys.stderr)
        return 0 if not run.accounting.problems and run.daemon_exit == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

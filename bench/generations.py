"""seed improving itself, the full run: the scenario of tests/integration/test_generations.py
(a copy of seed whose planner allows only tests for a failing test; an honest improver, then
a worse one, one editing the corpus, one naming the shipped corpus's files and one patching
the planner from an agent adapter's import, side by side)
with the clone's whole test selection (seed.toml's own) instead of the planner's prompt tests,
and the real shipped corpus (32 real fixes) instead of the test's four cases, unless asked.

    python -m bench.generations [--tests planner|all] [--corpus small|shipped] [--keep]

Prints each iteration's outcome, its generation, the figures that fell and the seconds it
took, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernel.loop import corpus
from tests.integration.test_generations import (
    ADAPTER,
    HELD,
    HONEST,
    NAMED,
    PLANNER,
    SHIPPED,
    WORSE,
    _cases,
    _clone,
    _improver,
    _last,
    _once,
    _task,
)
from tests.support import git


def _config(command: str, n: int, tests: str) -> str:
    selection = (
        'pytest_args = ["modules/planner/tests/test_prompt.py"]\n'
        if tests == "planner"
        else 'pytest_args = ["tests/unit", "modules", "-m", "not slow"]\n'
    )
    # the worse planner fails some of the planner's own tests, which outrank a person's task
    # by default: the person puts their task first here, so the scenario runs as the test's
    order = '[analysis]\norder = ["inbox", "build"]\n' if tests == "all" else ""
    return (
        f'[agent]\nbackend = "command"\ncommand = {command}\nrepair_rounds = 0\n'
        f'[quality]\ntools = ["ruff", "pytest"]\n{selection}{order}'
        '[landing]\nuncovered = "land"\n'
        f"[candidates]\nn = {n}\nkeep = true\n"
    )


def _show(label: str, record: dict[str, Any], seconds: float) -> None:
    generation = record.get("generation") or {}
    assert isinstance(generation, dict)
    print(
        f"{label}: {record['outcome']} {record.get('failure_category') or ''} "
        f"generation {generation.get('number', '-')} in {seconds:.0f} s, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    if record["outcome"] != "SUCCESS" and not record.get("candidates"):
        print(f"  {str(record.get('reason'))[:300]}")
    for c in record.get("candidates") or []:
        assert isinstance(c, dict)
        print(
            f"  candidate {c['number']}: {c['outcome']} {c.get('failure_category') or ''}: {str(c['reason'])[:160]}"
        )
    after = generation.get("after") or {}
    if isinstance(after, dict):
        for part, figures in sorted((after.get("parts") or {}).items()):
            print(f"  {part}: {json.dumps(figures, sort_keys=True)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="seed improving itself, the full run")
    parser.add_argument("--tests", choices=("planner", "all"), default="all")
    parser.add_argument("--corpus", choices=("small", "shipped"), default="shipped")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="seed-generations-", dir=Path.home()))
    try:
        cases = _cases(tmp)
        clone = _clone(tmp)
        if args.corpus == "small":
            corpus.write(
                clone / "kernel" / "loop" / "fitness-corpus.json.xz", [cases[m] for m in SHIPPED]
            )
        planner = clone / PLANNER
        planner.write_text(planner.read_text().replace(HONEST, WORSE))
        honest = [{"replace": PLANNER, "old": WORSE, "new": HONEST}]
        (clone / "seed.toml").write_text(_config(_improver(tmp, {"1": honest}), 1, args.tests))
        git(clone.parent, "init", "-q", str(clone))
        git(clone, "add", "-A")
        git(
            clone, "commit", "-qm", "seed, with a planner that allows only tests for a failing test"
        )
        held = clone / ".git" / "seed" / "fitness" / "held-back.json.xz"
        corpus.write(held, [cases[m] for m in HELD])
        _task(clone, "first")
        t0 = time.monotonic()
        ran = _once(clone, timeout=3600)
        _show("honest", _last(clone), time.monotonic() - t0)
        if ran.returncode != 0:
            print(ran.stderr[-3000:])
        worse = [{"replace": PLANNER, "old": HONEST, "new": WORSE}]
        edits = [{"append": "kernel/loop/fitness-corpus.json.xz", "text": "x"}]
        named = [{"replace": PLANNER, "old": HONEST, "new": NAMED}]
        adapter = [{"append": "modules/agents/none.py", "text": ADAPTER}]
        command = _improver(tmp, {"1": worse, "2": edits, "3": named, "4": adapter})
        (clone / "seed.toml").write_text(_config(command, 4, args.tests))
        git(clone, "commit", "-qam", "four proposals at once")
        _task(clone, "second", (PLANNER, "modules/agents/none.py"))
        t0 = time.monotonic()
        ran = _once(clone, timeout=3600)
        _show("four at once", _last(clone), time.monotonic() - t0)
        return 0 if ran.returncode in (0, 1) else ran.returncode
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())

"""Planning speed with a long history: store read + kernel judgement + module host round trip.

    .venv/bin/python bench/plan_speed.py [--records 10000] [--gaps 200] [--tried 30] [--runs 20]

Builds history/records.jsonl with realistic records (each carries the plan the real planner
made for its gap), indexes it once, then times the path Iteration.run takes from "analysed"
to "have a plan": planning_history() through the sqlite index, quarantine and waiting,
tallies and the sequence number, and ModuleHost.plan() (JSON out, the planner in the host
process, JSON back, validation). Beside it: the same history read by scanning and parsing
every line of records.jsonl, which is what the index saves.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from domain import (
    Diagnostic,
    FailureCategory,
    Gap,
    GapCategory,
    GapReport,
    InboxItem,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    ProjectState,
    RoadmapItem,
    Severity,
    Tool,
    gap_ref,
)
from kernel.host.host import ModuleHost
from kernel.isolation.paths import SEED_HOME
from kernel.loop.loop import for_planner, planning_history
from kernel.loop.quarantine import quarantined, waiting
from kernel.records.store import RecordStore
from modules.planner.fsport import WorktreeFS
from modules.planner.planner import make_plan

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
DETAIL = (
    "    def test_case():\n        value = compute(3)\n>       assert value == 9\n"
    "E       assert 8 == 9\n\npkg/mod_{i}.py:41: in compute\n" + "    frame line\n" * 60
)[:2000]


def _gap(i: int, rng: random.Random) -> Gap:
    kind = i % 10
    if kind == 0:
        node = f"tests/test_mod_{i}.py::test_case_{i}"
        d = Diagnostic(
            tool=Tool.PYTEST,
            file=node.split("::")[0],
            rule="failed",
            node_id=node,
            message="assert 8 == 9",
            exc_type="AssertionError",
            frame_file=f"pkg/mod_{i}.py",
            frame_line=41,
            detail=DETAIL.format(i=i),
        )
        return Gap(
            key=f"pytest:{node}",
            category=GapCategory.QUALITY,
            source="pytest",
            severity=Severity.CRITICAL,
            title=f"{node} failed: assert 8 == 9",
            description=d.detail,
            files=(d.file, d.frame_file),
            evidence=(d,),
        )
    if kind == 1:
        item = InboxItem(
            name=f"task-{i}.md",
            title=f"Add option {i} to the CLI",
            body="Please add it.\n" * 20,
            acceptance=(f"pytest tests/test_cli.py::test_option_{i}",),
            received_at=NOW - timedelta(days=1),
        )
        return Gap(
            key=f"inbox:{item.name}",
            category=GapCategory.INBOX,
            source="inbox",
            severity=Severity.NORMAL,
            title=item.title,
            description=item.body,
            inbox=item,
        )
    if kind == 2:
        text = f"Implement the reports module's page {i}"
        return Gap(
            key=f"roadmap:{i:012d}",
            category=GapCategory.ROADMAP,
            source="roadmap",
            severity=Severity.LOW,
            title=text,
            description=text,
            roadmap=RoadmapItem(text=text, line=i),
        )
    source, tool, sev = (
        ("pyright", Tool.PYRIGHT, Severity.HIGH)
        if kind < 6
        else ("ruff", Tool.RUFF, Severity.NORMAL)
    )
    file = f"pkg/mod_{i}.py"
    evidence = tuple(
        Diagnostic(
            tool=tool,
            file=file,
            line=10 + n,
            rule="reportUnknownMemberType" if source == "pyright" else "F401",
            message=f"Type of member 'attr_{n}' is partially unknown in call to helper_{n}",
            fixable=source == "ruff",
        )
        for n in range(rng.randint(1, 8))
    )
    return Gap(
        key=f"{source}:{file}:{evidence[0].rule}",
        category=GapCategory.QUALITY,
        source=source,
        severity=sev,
        title=f"{evidence[0].rule} in {file}",
        description="\n".join(f"{file}:{d.line}: {d.rule} {d.message}" for d in evidence),
        files=(file,),
        evidence=evidence,
    )


def _state(seq: int) -> ProjectState:
    return ProjectState(
        now=NOW, next_sequence=seq, worktree=str(SEED_HOME), fingerprint="bench", selfhost=True
    )


def build_history(
    history: Path, report: GapReport, records: int, tried: int, rng: random.Random
) -> None:
    """records.jsonl with `records` lines: `tried` of the report's gaps have 5+ attempts each,
    the rest are attempts at gaps that are gone (fixed long ago)."""
    fs = WorktreeFS(SEED_HOME)
    plans: dict[str, IterationPlan] = {}
    old = [_gap(10_000 + i, rng) for i in range(2_000)]
    targets = [*list(report.gaps[:tried]) * 6, *old]
    history.mkdir(parents=True, exist_ok=True)
    categories = list(FailureCategory)
    with (history / "records.jsonl").open("w", encoding="utf-8") as out:
        for seq in range(1, records + 1):
            gap = targets[seq - 1] if seq <= tried * 6 else rng.choice(old)
            plan = plans.get(gap.key)
            if plan is None:
                made = make_plan(GapReport(gaps=(gap,)), [], _state(1), fs)
                assert made is not None
                plan = plans[gap.key] = made
            started = NOW - timedelta(minutes=(records - seq) * 7)
            outcome = rng.choice(
                [IterationOutcome.SUCCESS, IterationOutcome.ROLLBACK, IterationOutcome.FAILURE]
            )
            failed = outcome != IterationOutcome.SUCCESS
            failures = tuple(
                gap.evidence[0].model_copy(update={"detail": DETAIL.format(i=seq)})
                for _ in range(rng.randint(0, 3) if failed and gap.evidence else 0)
            )
            iteration_id = f"iter-{seq:04d}-{started:%Y%m%d-%H%M%S}"
            record = IterationRecord(
                iteration_id=iteration_id,
                started_at=started,
                ended_at=started + timedelta(minutes=5),
                gap=gap_ref(gap),
                outcome=outcome,
                failure_category=rng.choice(categories[:8]) if failed else None,
                reason="criterion failed: the failing tests pass" if failed else "landed",
                evidence=("tests/test_x.py::test_y failed: assert 8 == 9",) * 3,
                failures=failures,
                touched_files=(f"pkg/mod_{seq % 50}.py", "tests/test_x.py"),
                backend="command",
                agent_summary="I changed the helper and the call sites. " * 10,
                tokens_used=12_000,
                cost_usd=0.04,
                durations={"analyse": 3.1, "plan": 0.05, "execute": 60.0, "verify": 9.0},
                task_kind=plan.task_kind.value,
                plan=plan.model_copy(update={"iteration_id": iteration_id}),
            )
            out.write(record.model_dump_json() + "\n")


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(fn: Callable[[], object], runs: int, host_pid: int) -> tuple[list[float], float]:
    """Wall milliseconds per run, and the mean CPU milliseconds per run of this process and
    the module host together (the CPU figure does not grow when other work shares the machine)."""
    out: list[float] = []
    cpu0 = time.process_time() + _cpu_s(host_pid)
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    cpu = time.process_time() + _cpu_s(host_pid) - cpu0
    return out, cpu * 1000 / runs


def line(name: str, ms: list[float], cpu_ms: float) -> str:
    """One row of the table."""
    p90 = sorted(ms)[max(int(len(ms) * 0.9) - 1, 0)]
    return f"{name:<48} {statistics.median(ms):9.1f} {p90:9.1f} {cpu_ms:9.1f}"


def main() -> int:
    """Build, index, time, print."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--gaps", type=int, default=200)
    parser.add_argument("--tried", type=int, default=30, help="report gaps with 5+ attempts")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    rng = random.Random(7)
    report = GapReport(gaps=tuple(_gap(i, rng) for i in range(args.gaps)))
    with tempfile.TemporaryDirectory() as tmp:
        history = Path(tmp) / "history"
        t0 = time.perf_counter()
        build_history(history, report, args.records, args.tried, rng)
        size_mb = (history / "records.jsonl").stat().st_size / 1e6
        store = RecordStore(history, fingerprint="bench")
        t1 = time.perf_counter()
        count = store.count()  # builds the index from records.jsonl
        index_s = time.perf_counter() - t1
        print(
            f"history: {count} records, {size_mb:.1f} MB (built in {t1 - t0:.1f} s); "
            f"index built once in {index_s:.2f} s; report: {len(report.gaps)} gaps, "
            f"{args.tried} of them tried 5+ times"
        )
        host = ModuleHost(SEED_HOME, Path(tmp) / "host.log")
        host.start()
        try:
            loaded: list[IterationRecord] = []
            given: list[IterationRecord] = []
            planned = [report]

            def read() -> None:
                loaded[:] = planning_history(store, report)

            def judge() -> None:
                # what Iteration.run does between reading history and asking the planner
                skip = set(quarantined(report, loaded)) | waiting(report, loaded, "command")
                planned[0] = report.model_copy(
                    update={"gaps": tuple(g for g in report.gaps if g.key not in skip)}
                )
                given[:] = for_planner(loaded, planned[0])
                store.tallies()
                store.next_sequence()

            state = _state(store.next_sequence()).model_copy(
                update={"tallies": tuple(store.tallies())}
            )

            def round_trip() -> None:
                assert host.plan(planned[0], given, state) is not None

            def in_process() -> None:
                assert make_plan(planned[0], given, state, WorktreeFS(SEED_HOME)) is not None

            def whole() -> None:
                read()
                judge()
                round_trip()

            def scan() -> None:
                with (history / "records.jsonl").open("rb") as handle:
                    for raw in handle:
                        IterationRecord.model_validate_json(raw)

            read()
            judge()
            round_trip()  # warm the host's imports
            pid = int(host.hello.get("pid", 0))
            rows = {
                "store read (planning_history)": timed(read, args.runs, pid),
                "kernel judgement (quarantine, tallies)": timed(judge, args.runs, pid),
                "host round trip (JSON + planner + validate)": timed(round_trip, args.runs, pid),
                "planner alone, in process": timed(in_process, args.runs, pid),
                "WHOLE PATH": timed(whole, args.runs, pid),
                "without the index: parse all of records.jsonl": timed(
                    scan, max(args.runs // 10, 1), pid
                ),
            }
            print(
                f"records read: {len(loaded)}; gaps held back (quarantined): "
                f"{len(report.gaps) - len(planned[0].gaps)}; records handed to the planner: "
                f"{len(given)}; load average {os.getloadavg()[0]:.1f}"
            )
            print(f"{'step':<48} {'median ms':>9} {'p90 ms':>9} {'cpu ms':>9}")
            for name, (ms, cpu_ms) in rows.items():
                print(line(name, ms, cpu_ms))
            whole_ms = statistics.median(rows["WHOLE PATH"][0])
            scan_ms = statistics.median(rows["without the index: parse all of records.jsonl"][0])
            print(f"index vs scan: {scan_ms / whole_ms:.0f}x less time for the whole path")
            if args.json:
                print(json.dumps({k: statistics.median(v[0]) for k, v in rows.items()}))
        finally:
            host.stop()
            store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

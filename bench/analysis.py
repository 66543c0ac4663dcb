"""Analysis speed, side by side for repositories of about 1k, 10k and 50k lines.

    .venv/bin/python -m bench.analysis [--sizes 1000,10000,50000] [--repeat 3]
                                       [--idle-seconds 60] [--drops 5] [--json FILE]

For each size it reports: seed's full analysis against the same tools run directly (one
after another, and with pyright and pytest side by side as seed runs them); re-analysis
after a one-file change against a full analysis of the same commit; the running daemon's
CPU use while idle; and the time from an inbox file's close to its claim. Timings are
medians of --repeat runs; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from bench.generate import MODULES_PER_PACKAGE, PLANTED, generate, one_file_change
from domain import Tool
from kernel.host.context import Context, open_context
from kernel.loop.analysis import analyse
from kernel.loop.loop import Loop
from kernel.measuring.baseline import Baseline
from kernel.measuring.measure import ruff_binary

SEED = Path(__file__).resolve().parent.parent / "seed.py"
STATIC = (Tool.RUFF, Tool.RUFF_FORMAT, Tool.PYRIGHT)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SEED_DEPTH", "PYTHONPATH")}
    env.update(PYRIGHT_PYTHON_IGNORE_WARNINGS="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def _timed(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=_env(), stdin=subprocess.DEVNULL, capture_output=True)
    return time.perf_counter() - started


def cpu_seconds() -> float:
    """CPU time used so far by this process, its live descendants and its reaped children.

    The machine may be shared: CPU time says what the work costs whatever else runs.
    """
    live = _cpu_ticks(os.getpid()) / os.sysconf("SC_CLK_TCK")
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return live + reaped.ru_utime + reaped.ru_stime


def _costs(run: Callable[[], float], repeat: int) -> tuple[float, float]:
    """Median (wall seconds, CPU seconds) of `run`."""
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(repeat):
        before = cpu_seconds()
        walls.append(run())
        cpus.append(cpu_seconds() - before)
    return statistics.median(walls), statistics.median(cpus)


def direct_commands() -> dict[str, list[str]]:
    """The tools as a person would run them, doing the same work seed asks of them."""
    return {
        "ruff": [ruff_binary(), "check", "--no-cache", "."],
        "ruff-format": [ruff_binary(), "format", "--check", "--no-cache", "."],
        "pyright": [sys.executable, "-m", "pyright", "--pythonpath", sys.executable],
        "pytest": [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--continue-on-collection-errors",
        ],
    }


def direct_sequential(root: Path) -> float:
    """Seconds for the four tools run one after another."""
    return sum(_timed(argv, root) for argv in direct_commands().values())


def direct_side_by_side(root: Path) -> float:
    """Seconds for the four tools with pyright and pytest side by side, as seed runs them."""
    commands = direct_commands()
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:
        slow = [pool.submit(_timed, commands[name], root) for name in ("pyright", "pytest")]
        _timed(commands["ruff"], root)
        _timed(commands["ruff-format"], root)
        for future in slow:
            future.result()
    return time.perf_counter() - started


def seed_analysis(ctx: Context, fresh: bool) -> tuple[float, Baseline]:
    """Seconds for one analysis of HEAD as an iteration does it (worktree included)."""
    if fresh:
        shutil.rmtree(ctx.paths.cache, ignore_errors=True)
    iteration = Loop(ctx)
    started = time.perf_counter()
    prepared = iteration.prepare()
    assert prepared is not None
    head, worktree = prepared
    try:
        baseline = analyse(ctx, worktree, head, datetime.now(UTC))
        return time.perf_counter() - started, baseline
    finally:
        iteration.discard(worktree)


def _static_seconds(baseline: Baseline) -> float:
    return sum(m.duration_s for m in baseline.measurements.items if m.tool in STATIC)


def _medians(costs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(c[0] for c in costs), statistics.median(c[1] for c in costs)


def _config(root: Path, text: str) -> None:
    (root / "seed.toml").write_text(text, encoding="utf-8")


def _start_daemon(root: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, str(SEED), "--no-bootstrap", "--root", str(root)]
    with (root.parent / f"{root.name}-daemon.err").open("ab") as err:
        return subprocess.Popen(
            argv, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
        )


def _idle(root: Path, timeout: float = 900.0) -> None:
    """Wait until the loop itself sleeps (not just between two iterations)."""
    status = root / "history" / "status.json"
    deadline = time.monotonic() + timeout
    calm_since = 0.0
    while time.monotonic() < deadline:
        try:
            data = json.loads(status.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if data.get("phase") == "idle" and str(data.get("detail", "")).startswith("until"):
            calm_since = calm_since or time.monotonic()
            if time.monotonic() - calm_since > 0.5:
                return
        else:
            calm_since = 0.0
        time.sleep(0.05)
    raise TimeoutError("the daemon did not become idle")


def _cpu_ticks(pid: int) -> int:
    """utime + stime of a process and of every live descendant."""
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
        ticks[int(entry)] = int(fields[11]) + int(fields[12])
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += ticks.get(current, 0)
        todo += children.get(current, [])
    return total


def _stop(daemon: subprocess.Popen[bytes]) -> None:
    daemon.terminate()
    try:
        daemon.wait(timeout=60)
    except subprocess.TimeoutExpired:
        daemon.kill()


def idle_cpu(root: Path, seconds: float) -> float:
    """Percent of one core the idle daemon (and its module host) use over `seconds`."""
    _config(root, '[agent]\nbackend = "none"\n')
    daemon = _start_daemon(root)
    try:
        _idle(root)
        before, started = _cpu_ticks(daemon.pid), time.monotonic()
        time.sleep(seconds)
        used = _cpu_ticks(daemon.pid) - before
        elapsed = time.monotonic() - started
    finally:
        _stop(daemon)
    return 100.0 * used / os.sysconf("SC_CLK_TCK") / elapsed


def claim_latency(root: Path, drops: int) -> list[float]:
    """Seconds from an inbox file's close to its move into inbox/.active/, per drop."""
    agent = Path(__file__).resolve().parent / "fake_agent.py"
    _config(
        root,
        f'[agent]\nbackend = "command"\ncommand = {json.dumps([sys.executable, str(agent)])}\n',
    )
    daemon = _start_daemon(root)
    box = root / "inbox"
    box.mkdir(exist_ok=True)
    latencies: list[float] = []
    try:
        _idle(root)
        for n in range(drops):
            name = f"task-{n}.md"
            with (box / name).open("w", encoding="utf-8") as handle:
                handle.write(f'+++\npriority = "high"\n+++\nAdd test number {n}.\n')
            closed = time.perf_counter()
            places = [box / ".active" / name, box / "done" / name, box / "failed" / name]
            while not any(p.exists() for p in places):
                if time.perf_counter() - closed > 120:
                    raise TimeoutError(f"{name} was not claimed")
                time.sleep(0.002)
            latencies.append(time.perf_counter() - closed)
            _idle(root)
    finally:
        _stop(daemon)
    return latencies


def bench_size(lines: int, work: Path, args: argparse.Namespace) -> dict[str, float | int | str]:
    """Every figure for one repository size."""
    root = work / f"repo-{lines}"
    real_lines = generate(root, lines)
    packages = max(1, round(lines / 113) // MODULES_PER_PACKAGE)
    ctx = open_context(root, quiet=True)
    ctx.start_host()
    try:
        runs: dict[str, list[tuple[float, float]]] = {"seed": [], "sequential": [], "parallel": []}
        jobs: dict[str, Callable[[], float]] = {
            "seed": lambda: seed_analysis(ctx, fresh=True)[0],
            "sequential": lambda: direct_sequential(root),
            "parallel": lambda: direct_side_by_side(root),
        }
        for n in range(args.repeat):
            # the order rotates, so a burst of load on a shared machine hits each in turn
            names = list(jobs)[n % 3 :] + list(jobs)[: n % 3]
            for name in names:
                runs[name].append(_costs(jobs[name], 1))
        seed_full, seed_cpu = _medians(runs["seed"])
        sequential, direct_cpu = _medians(runs["sequential"])
        parallel, _ = _medians(runs["parallel"])
        incremental: list[tuple[float, float]] = []
        full: list[tuple[float, float]] = []
        static_ratio: list[float] = []
        changed = ""
        for _ in range(args.repeat):
            seed_analysis(ctx, fresh=False)  # the commit before the change is measured
            changed = one_file_change(root, packages)
            before = cpu_seconds()
            inc_seconds, inc = seed_analysis(ctx, fresh=False)
            middle = cpu_seconds()
            full_seconds, whole = seed_analysis(ctx, fresh=True)
            incremental.append((inc_seconds, middle - before))
            full.append((full_seconds, cpu_seconds() - middle))
            static_ratio.append(_static_seconds(inc) / _static_seconds(whole))
        gaps = len(seed_analysis(ctx, fresh=False)[1].report.gaps)
    finally:
        ctx.host.stop()
        ctx.store.close()
    idle = idle_cpu(root, args.idle_seconds) if args.idle_seconds > 0 else float("nan")
    clean = work / f"clean-{lines}"
    generate(clean, lines, planted=False)
    latencies = claim_latency(clean, args.drops) if args.drops > 0 else [float("nan")]
    return {
        "lines": real_lines,
        "gaps": gaps,
        "seed_full_s": seed_full,
        "direct_sequential_s": sequential,
        "direct_parallel_s": parallel,
        "ratio_vs_sequential": seed_full / sequential,
        "ratio_vs_parallel": seed_full / parallel,
        "seed_full_cpu_s": seed_cpu,
        "direct_cpu_s": direct_cpu,
        "ratio_cpu": seed_cpu / direct_cpu,
        "changed_file": changed,
        "reanalysis_s": statistics.median(i[0] for i in incremental),
        "full_same_commit_s": statistics.median(f[0] for f in full),
        "reanalysis_ratio": statistics.median(
            i[0] / f[0] for i, f in zip(incremental, full, strict=True)
        ),
        "reanalysis_cpu_ratio": statistics.median(
            i[1] / f[1] for i, f in zip(incremental, full, strict=True)
        ),
        "static_reanalysis_ratio": statistics.median(static_ratio),
        "idle_cpu_percent": idle,
        "claim_median_s": statistics.median(latencies),
        "claim_max_s": max(latencies),
    }


ROWS = (
    ("lines of Python", "lines", "{:.0f}"),
    ("gaps found", "gaps", "{:.0f}"),
    ("seed full analysis (s)", "seed_full_s", "{:.2f}"),
    ("tools run directly, one after another (s)", "direct_sequential_s", "{:.2f}"),
    ("tools run directly, pyright and pytest side by side (s)", "direct_parallel_s", "{:.2f}"),
    ("**seed / direct, one after another** (target <= 1.10)", "ratio_vs_sequential", "{:.2f}"),
    ("seed / direct, side by side", "ratio_vs_parallel", "{:.2f}"),
    ("seed / direct, CPU seconds (load-independent)", "ratio_cpu", "{:.2f}"),
    ("re-analysis after a one-file change (s)", "reanalysis_s", "{:.2f}"),
    ("full analysis of that commit (s)", "full_same_commit_s", "{:.2f}"),
    ("**re-analysis / full** (target <= 0.25)", "reanalysis_ratio", "{:.2f}"),
    ("re-analysis / full, CPU seconds", "reanalysis_cpu_ratio", "{:.2f}"),
    ("ruff + ruff format + pyright only: re-check / full", "static_reanalysis_ratio", "{:.2f}"),
    ("**idle daemon CPU, % of one core** (target < 1)", "idle_cpu_percent", "{:.2f}"),
    ("**inbox close to claim, median (s)** (target < 1)", "claim_median_s", "{:.2f}"),
    ("inbox close to claim, worst (s)", "claim_max_s", "{:.2f}"),
)


def table(results: dict[int, dict[str, float | int | str]]) -> str:
    """The figures as a Markdown table, one column per size."""
    sizes = list(results)
    lines = ["| | " + " | ".join(f"~{s // 1000}k lines" for s in sizes) + " |"]
    lines.append("|---|" + "---:|" * len(sizes))
    for label, key, fmt in ROWS:
        cells = [fmt.format(float(results[s][key])) for s in sizes]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description="Analysis speed, side by side by repository size.")
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--drops", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the generated repositories")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="seed-bench-"))
    results: dict[int, dict[str, float | int | str]] = {}
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            print(f"bench: ~{size} lines ...", file=sys.stderr, flush=True)
            results[size] = bench_size(size, work, args)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"planted: {PLANTED}; {os.cpu_count()} cores; Python {sys.version.split()[0]}\n")
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Verification at the speed of one changed file, side by side with full runs.

    .venv/bin/python -m bench.speed [--sizes 1000,10000,50000] [--real DIR --real-python PY]
                                    [--repeat 3] [--json FILE]

For each generated repository (bench/generate.py), and for a real one when given:

1. **re-analysis / full**: after a one-file change committed on an analysed commit, seed's
   analysis of the new HEAD (ruff and pyright re-check what changed, pytest re-runs the tests
   the test map selects) against a full analysis of the same commit (empty cache);
2. **refusal / full suite**: `once` with an agent that breaks one passing test: the verify
   phase of the refused iteration against the target's whole test suite run directly;
3. **kernel overhead per iteration**: `once` with an agent that adds a passing test and
   lands: the iteration's wall time less the time some tool or agent process was running
   (worktree, host round trips, guard, git, records, reports);
4. **cache hit**: analysis of an unchanged, measured HEAD, in the running daemon and as a
   whole `seed.py gaps` process.

Medians of --repeat runs, with the load average; nothing here is asserted.
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
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.analysis import SEED, _env, seed_analysis
from bench.generate import MODULES_PER_PACKAGE, env_git, generate, one_file_change
from kernel.host.context import open_context
from kernel.isolation import procs
from kernel.shell.daemon import Daemon

FAKE = Path(__file__).resolve().parent / "fake_agent.py"
_TOOLS = ("pytest", "pyright", "ruff", "fake_agent.py", "breaker.py")
"""Words in an argv that make the process a tool or the agent (not the kernel's own work)."""


class _Intervals:
    """Records when tool and agent processes ran (procs.run wrapped, then restored)."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        self._real = procs.run

    def __enter__(self) -> _Intervals:
        def run(argv: Sequence[str], **kw: Any) -> procs.Completed:
            started = time.monotonic()
            try:
                return self._real(argv, **kw)
            finally:
                if any(word in " ".join(argv) for word in _TOOLS):
                    with self._lock:
                        self.spans.append((started, time.monotonic()))

        procs.run = run  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        procs.run = self._real

    def covered(self) -> float:
        """Seconds during which at least one tool or agent process ran."""
        total, end = 0.0, float("-inf")
        for start, stop in sorted(self.spans):
            if stop <= end:
                continue
            total += stop - max(start, end)
            end = stop
        return total


def _agent_config(argv: list[str]) -> str:
    return f'[agent]\nbackend = "command"\ncommand = {json.dumps(argv)}\nrepair_rounds = 0\n'


class _Loop:
    """A daemon started in this process (lock, recovery, module host), iterated on demand:
    what `python seed.py` does between two iterations is not counted."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.daemon = Daemon(open_context(root, quiet=True))

    def __enter__(self) -> _Loop:
        self.daemon._start()  # pyright: ignore[reportPrivateUsage]
        return self

    def __exit__(self, *exc: object) -> None:
        self.daemon._stop()  # pyright: ignore[reportPrivateUsage]

    def once(self) -> tuple[float, float, dict[str, Any]]:
        """One iteration: wall seconds, seconds tools or the agent ran, the record (with the
        daemon process's own CPU seconds under "kernel_cpu_s")."""
        with _Intervals() as spans:
            cpu = resource.getrusage(resource.RUSAGE_SELF)
            started = time.monotonic()
            self.daemon.iterate(single=True)
            wall = time.monotonic() - started
            after = resource.getrusage(resource.RUSAGE_SELF)
        records = self.root / "history" / "records.jsonl"
        record = json.loads(records.read_text().splitlines()[-1])
        record["kernel_cpu_s"] = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
        return wall, spans.covered(), record


def _inbox(root: Path, name: str, where: str = "") -> None:
    folder = root / "inbox"
    folder.mkdir(exist_ok=True)
    # the file in the plan's allowlist: the refusal is then the tests'
    front = f'+++\npriority = "critical"\nallowed = ["{where}"]\n+++\n' if where else ""
    (folder / name).write_text(f"{front}# Tidy the code\n\nKeep every test passing.\n")


BREAKER = '''"""Breaks one function: passing tests fail."""
from pathlib import Path
path = Path({path!r})
path.write_text(path.read_text().replace({old!r}, {new!r}, 1))
'''


def _refused(loop: _Loop, n: int, where: str) -> dict[str, Any]:
    _inbox(loop.root, f"break-{n}.md", where)
    _, _, record = loop.once()
    assert record["outcome"] != "SUCCESS", record["reason"]
    return record


def refusal(
    root: Path, python: str, breaks: tuple[str, str, str], repeat: int, config: str = ""
) -> dict[str, float | str]:
    """The verify phase of a candidate that breaks a test, against the whole suite."""
    path, old, new = breaks
    script = root.parent / f"{root.name}-breaker.py"
    script.write_text(BREAKER.format(path=path, old=old, new=new))
    (root / "seed.toml").write_text(_agent_config([sys.executable, str(script)]) + config)
    env_git(root, "add", "seed.toml")
    env_git(root, "commit", "-qm", "bench: the breaking agent")
    verify: list[float] = []
    suite: list[float] = []
    loop = _Loop(root)
    with loop:
        records = [_refused(loop, n, path) for n in range(repeat)]
    for record in records:
        verify.append(float(record["durations"].get("verify", float("nan"))))
        started = time.monotonic()
        subprocess.run(
            [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
            cwd=root,
            env=_env(),
            capture_output=True,
            check=False,
        )
        suite.append(time.monotonic() - started)
    v, s = statistics.median(verify), statistics.median(suite)
    return {
        "refuse_verify_s": v,
        "full_suite_s": s,
        "refuse_ratio": v / s,
        "refused_as": str(records[-1]["failure_category"]),
        "refused_because": str(records[-1]["reason"])[:300],
        "refused_durations": json.dumps(records[-1]["durations"]),
    }


def overhead(root: Path, repeat: int) -> dict[str, float]:
    """Wall time of a landing iteration less the time tools and the agent ran."""
    (root / "seed.toml").write_text(_agent_config([sys.executable, str(FAKE)]))
    env_git(root, "add", "seed.toml")
    env_git(root, "commit", "-qm", "bench: the landing agent")
    walls: list[float] = []
    kernel: list[float] = []
    cpu: list[float] = []
    with _Loop(root) as loop:
        for n in range(repeat + 1):
            _inbox(root, f"add-{n}.md")
            wall, busy, record = loop.once()
            assert record["outcome"] == "SUCCESS", record["reason"]
            if n:  # the first iteration also measures the repository for the first time
                walls.append(wall)
                kernel.append(wall - busy)
                cpu.append(record["kernel_cpu_s"])
    return {
        "iteration_s": statistics.median(walls),
        "overhead_s": statistics.median(kernel),
        "kernel_cpu_s": statistics.median(cpu),
    }


def reanalysis(root: Path, change: Callable[[], str], repeat: int) -> dict[str, float | str]:
    """Re-analysis after a one-file change against a full analysis of the same commit."""
    ctx = open_context(root, quiet=True)
    ctx.start_host()
    try:
        pairs: list[tuple[float, float]] = []
        hits: list[float] = []
        changed = ""
        for _ in range(repeat):
            seed_analysis(ctx, fresh=False)
            hits.append(seed_analysis(ctx, fresh=False)[0])
            changed = change()
            inc, _ = seed_analysis(ctx, fresh=False)
            full, _ = seed_analysis(ctx, fresh=True)
            pairs.append((inc, full))
    finally:
        ctx.host.stop()
        ctx.store.close()
    whole: list[float] = []
    for _ in range(repeat):
        started = time.monotonic()
        subprocess.run(
            [sys.executable, str(SEED), "--no-bootstrap", "--root", str(root), "gaps"],
            env=_env(),
            capture_output=True,
            check=False,
        )
        whole.append(time.monotonic() - started)
    return {
        "changed_file": changed,
        "reanalysis_s": statistics.median(p[0] for p in pairs),
        "full_s": statistics.median(p[1] for p in pairs),
        "reanalysis_ratio": statistics.median(p[0] / p[1] for p in pairs),
        "cache_hit_s": statistics.median(hits),
        "cache_hit_process_s": statistics.median(whole),
    }


def _real_change(root: Path, package: str) -> Callable[[], str]:
    """A one-line edit to the real repository's most imported module, committed."""

    def change() -> str:
        path = root / package
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"\n_SEED_BENCH_{time.monotonic_ns()} = 1\n")
        env_git(root, "commit", "-qam", "bench: one-line change")
        return package

    return change


def bench_generated(lines: int, work: Path, repeat: int) -> dict[str, Any]:
    """Every figure for one generated repository."""
    packages = max(1, round(lines / 113) // MODULES_PER_PACKAGE)
    planted = work / f"planted-{lines}"
    real_lines = generate(planted, lines)
    figures: dict[str, Any] = {"lines": real_lines}
    figures |= reanalysis(planted, lambda: one_file_change(planted, packages), repeat)
    clean = work / f"clean-{lines}"
    generate(clean, lines, planted=False)
    figures |= overhead(clean, repeat)
    breaking = work / f"breaking-{lines}"
    generate(breaking, lines, planted=False)
    module = f"pkg{packages // 2}/mod{MODULES_PER_PACKAGE - 1}.py"
    breaks = (module, "self.count += by", "self.count += by + 1")
    figures |= refusal(breaking, sys.executable, breaks, repeat)
    return figures


def bench_real(
    source: Path, python: str, module: str, breaks: str, work: Path, repeat: int
) -> dict[str, Any]:
    """Re-analysis after a one-line change, and a refusal, on copies of a real repository."""
    quality = f"\n[quality]\npython = {json.dumps(python)}\n"
    root = work / f"real-{source.name}"
    subprocess.run(["git", "clone", "-q", str(source), str(root)], check=True)
    (root / "seed.toml").write_text(quality)
    env_git(root, "add", "seed.toml")
    env_git(root, "commit", "-qm", "bench: target interpreter")
    figures: dict[str, Any] = {"repository": source.name}
    figures |= reanalysis(root, _real_change(root, module), repeat)
    if breaks:
        path, old, new = breaks.split("::", 2)
        breaking = work / f"real-{source.name}-breaking"
        subprocess.run(["git", "clone", "-q", str(source), str(breaking)], check=True)
        figures |= refusal(breaking, python, (path, old, new), repeat, quality)
    return figures


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description="Verification at the speed of one changed file.")
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--real", type=Path, default=None, help="a real repository's clone")
    parser.add_argument("--real-python", default="", help="its interpreter (with pytest)")
    parser.add_argument("--real-module", default="", help="the file the one-line change edits")
    parser.add_argument(
        "--real-break", default="", help="FILE::OLD::NEW: the breaking agent's edit (refusal)"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="seed-speed-"))
    results: dict[str, Any] = {"load_before": os.getloadavg()}
    try:
        for size in (int(s) for s in args.sizes.split(",") if s):
            print(f"bench.speed: ~{size} lines ...", file=sys.stderr, flush=True)
            results[f"generated-{size}"] = bench_generated(size, work, args.repeat)
        if args.real is not None:
            print(f"bench.speed: {args.real.name} ...", file=sys.stderr, flush=True)
            results[f"real-{args.real.name}"] = bench_real(
                args.real, args.real_python, args.real_module, args.real_break, work, args.repeat
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["load_after"] = os.getloadavg()
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Candidates per gap: landed per hour and per dollar, n in parallel against n one at a time.

    /work/venv/bin/python -m bench.candidates                          # ~15 minutes on 2 cores
    /work/venv/bin/python -m bench.candidates --seconds 10 --n 1,4 --iterations 1   # a quick look
    /work/venv/bin/python -m bench.candidates --iterations 10 --iterations-long 5   # more gaps

For each agent time t (`--seconds`, default 10 and 60) and each n (`--n`, default 1, 2, 4), in
parallel (`[candidates] parallel = n`) and, for n in `--serial` (default 4), one at a time
(`parallel = 1`): a fresh generated repository (bench/generate.py, ~10k lines, its suite the
verification load) and, per iteration, one planted gap committed as a person would (`gap<i>` in
pkg<P>/mod4.py returns one less than its test `tests/test_gap<i>.py` expects; `--plant new`
puts it in a module of its own), then a real `seed.py --root REPO once` (sandbox on, the
kernel's own verification). The agent (bench/candidate_agent.py, a command agent) sleeps t,
then writes the fix with probability p (`--p`, 0.3) or a wrong change, drawn per (gap,
candidate) from a seeded RNG (`--rng-seed`), so every configuration meets the same right and
wrong candidates; each run reports `{"cost_usd": COST}` (`--cost`, 0.10). A gap no candidate
fixed is fixed by the person after the iteration (one gap at a time), and a halt is resumed; neither is timed.

Prints JSON per configuration: iterations, landed, wall seconds per iteration (mean and each),
landed per hour of wall time, landed per dollar, the ratio of the wall time to n = 1's at the
same t, the phases the records timed, and the 1-minute load average before and after. The
machine's other work moves every wall-clock figure: compare rows of one run.

`--engine ray` (or `local,ray` for both, side by side): the same population with `[scale] engine
= "ray"`, the candidates' agents as Ray tasks on ONE 2-node local cluster the bench starts for
the whole run (`ray.cluster_utils.Cluster`, 2 CPUs and an 80 MB object store per node, the
workers' clones in the bench's temporary folder) and shuts down at the end, on an error or
Ctrl-C too. A tournament runs its candidates there; n = 1 has no tournament and runs locally
under either engine. With both engines: the overhead of Ray per candidate (the same gap and
candidate number, so the same right or wrong change, Ray's seconds minus local's) and the node
each candidate ran on (`candidates[].host`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.candidate_agent import bug, decides, fix
from bench.generate import env_git, generate

SEED = Path(__file__).resolve().parent.parent / "seed.py"
AGENT = Path(__file__).resolve().parent / "candidate_agent.py"
STORE_BYTES = 80 * 1024 * 1024
"""Each Ray node's object store (Ray's floor is ~75 MB; a bundle of the repository is ~1 MB)."""


@dataclass(frozen=True)
class Setup:
    """One configuration: n candidates, at once or one at a time, agents that take t seconds."""

    n: int
    parallel: bool
    seconds: float
    engine: str = "local"

    @property
    def name(self) -> str:
        """How the tables name it."""
        mode = "parallel" if self.parallel or self.n == 1 else "serial"
        return f"t={self.seconds:g}s n={self.n} {mode} {self.engine}"


@dataclass(frozen=True)
class Ray:
    """The bench's Ray cluster: its address, where its workers keep their clones, its nodes."""

    address: str
    cache: Path
    nodes: dict[str, str]
    """The first 12 characters of each node's id (as a record's host names it) -> head / node 2."""


@contextlib.contextmanager
def ray_cluster(tmp: Path) -> Iterator[Ray]:
    """Two Ray nodes on this machine for the whole bench, shut down however the bench ends."""
    try:
        from ray.cluster_utils import Cluster
    except ImportError:
        raise SystemExit("--engine ray needs Ray: pip install -r requirements-ray.lock") from None
    nodes = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "object_store_memory": STORE_BYTES},
    )
    try:
        nodes.add_node(num_cpus=2, object_store_memory=STORE_BYTES)
        nodes.wait_for_nodes()
        names = {
            str(node.node_id)[:12]: "head" if number == 0 else f"node {number + 1}"
            for number, node in enumerate(nodes.list_all_nodes())
        }
        yield Ray(str(nodes.address), tmp / "workers", names)
    finally:
        nodes.shutdown()


def _function(gap: int) -> str:
    return f'\n\ndef gap{gap}(x: int) -> int:\n    """f1 of x, plus one."""\n    {bug(gap)}\n'


def _test(module: str, gap: int) -> str:
    return (
        f'"""The candidates bench\'s planted gap {gap}."""\n\n'
        f"from {module} import f1, gap{gap}\n\n\n"
        f"def test_gap{gap}() -> None:\n"
        f"    assert gap{gap}(4) == f1(4) + 1\n"
    )


def plant(root: Path, gap: int, packages: int, new_module: bool = False) -> Path:
    """Commit one failing test and the bug it finds, as a person would; the bug's module: by
    default pkg<P>/mod4.py, code the suite runs (mod5 imports it); with `new_module` a
    pkg<P>/gap<i>.py of its own that only the new test imports."""
    package = gap % packages
    if new_module:
        name = f"pkg{package}.gap{gap}"
        module = root / f"pkg{package}" / f"gap{gap}.py"
        head = '"""A planted bug."""\n\nfrom __future__ import annotations\n\n'
        module.write_text(head + f"from pkg{package}.mod3 import f1\n" + _function(gap), "utf-8")
    else:
        name = f"pkg{package}.mod4"
        module = root / f"pkg{package}" / "mod4.py"
        module.write_text(module.read_text(encoding="utf-8") + _function(gap), encoding="utf-8")
    (root / "tests" / f"test_gap{gap}.py").write_text(_test(name, gap), encoding="utf-8")
    env_git(root, "add", "-A")
    env_git(root, "commit", "-q", "-m", f"gap {gap}")
    return module


def fix_by_hand(root: Path, module: Path, gap: int) -> None:
    """The person fixes a gap no candidate fixed, so the next iteration has one gap again."""
    text = module.read_text(encoding="utf-8")
    if bug(gap) in text:
        module.write_text(text.replace(bug(gap), fix(gap)), encoding="utf-8")
        env_git(root, "commit", "-q", "-am", "fixed by hand")


def configure(root: Path, setup: Setup, args: argparse.Namespace, ray: Ray | None = None) -> None:
    """seed.toml: the bench's agent as a command agent, n candidates, no budget in the way;
    with `ray`, the candidates' runs on its cluster."""
    argv = [sys.executable, str(AGENT), str(args.p), str(setup.seconds), str(args.rng_seed)]
    argv.append(str(args.cost))
    parallel = setup.n if setup.parallel else 1
    (root / "seed.toml").write_text(
        f'[agent]\nbackend = "command"\ncommand = {json.dumps(argv)}\n'
        f"timeout_s = {int(setup.seconds) + 600}\nrepair_rounds = 0\n"
        '[guard]\nsandbox = "on"\n'
        "[budget]\nmax_iterations_per_day = 0\nmax_cost_usd_per_day = 0\n"
        "max_cost_usd_per_iteration = 0\n"
        f"[candidates]\nn = {setup.n}\nparallel = {parallel}\n"
        + (
            f'[scale]\nengine = "ray"\naddress = "{ray.address}"\n'
            f"worker_cache = {json.dumps(str(ray.cache))}\n"
            if ray is not None and setup.engine == "ray"
            else ""
        ),
        encoding="utf-8",
    )
    env_git(root, "add", "seed.toml")
    env_git(root, "commit", "-q", "-m", "seed.toml")


def _seed(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SEED_DEPTH"}
    return subprocess.run(
        [sys.executable, str(SEED), "--no-bootstrap", "--root", str(root), *argv],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def _records(root: Path) -> list[dict[str, Any]]:
    path = root / "history" / "records.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _halted(root: Path) -> bool:
    with contextlib.suppress(OSError, ValueError, KeyError):
        return bool(json.loads((root / "history" / "halt.json").read_text())["halted"])
    return False


def _host(host: str, ray: Ray | None) -> str:
    """A candidate's host as the tables show it: this machine, or which of the bench's nodes."""
    if ray is not None and "(node " in host:
        node = host.rpartition("(node ")[2].rstrip(")")
        return f"ray {ray.nodes.get(node, node)}"
    return "local" if host else ""


def play(
    setup: Setup, iterations: int, args: argparse.Namespace, tmp: Path, ray: Ray | None = None
) -> dict[str, Any]:
    """One configuration's iterations; its figures."""
    root = tmp / setup.name.replace(" ", "_").replace("=", "")
    lines = generate(root, args.lines, planted=False)
    packages = len(list(root.glob("pkg*")))
    configure(root, setup, args, ray)
    warm = _seed(root, "gaps")  # the first measurement, not timed (each iteration re-measures)
    if warm.returncode not in (0, 1):
        raise SystemExit(f"seed gaps failed on the generated repository: {warm.stderr[-2000:]}")
    load_before = os.getloadavg()[0]
    loads: list[float] = []
    rows: list[dict[str, Any]] = []
    for gap in range(iterations):
        module = plant(root, gap, packages, args.plant == "new")
        seen = len(_records(root))
        t0 = time.monotonic()
        done = _seed(root, "once")
        wall = time.monotonic() - t0
        fresh = _records(root)[seen:]
        if not fresh:
            raise SystemExit(
                f"{setup.name} gap {gap}: no record (exit {done.returncode})\n{done.stderr[-3000:]}"
            )
        record = fresh[-1]
        candidates = record.get("candidates") or []
        ran = [c for c in candidates if c.get("rounds", 0) > 0] if candidates else [record]
        rows.append(
            {
                "gap": gap,
                "exit": done.returncode,
                "outcome": record["outcome"],
                "landed": record["outcome"] == "SUCCESS",
                "right candidates": sum(
                    decides(args.rng_seed, gap, k, args.p) for k in range(1, setup.n + 1)
                ),
                "runs": len(ran),
                "cost_usd": round(sum(float(c.get("cost_usd", 0.0)) for c in ran), 4),
                "wall_s": round(wall, 2),
                "durations": record.get("durations", {}),
                "outside analyse, plan, land s": round(
                    wall - sum(float(v) for v in record.get("durations", {}).values()), 2
                )
                if candidates
                else None,
                "candidate_s": [c.get("seconds") for c in candidates],
                "candidate_hosts": [_host(str(c.get("host", "")), ray) for c in candidates],
                "load_1m after": round(os.getloadavg()[0], 2),
            }
        )
        loads.append(os.getloadavg()[0])
        if record["outcome"] != "SUCCESS":
            fix_by_hand(root, module, gap)
        if _halted(root):
            _seed(root, "resume")
    walls = [r["wall_s"] for r in rows]
    landed = sum(r["landed"] for r in rows)
    cost = sum(r["cost_usd"] for r in rows)
    phases: dict[str, float] = {}
    for r in rows:
        for phase, seconds in r["durations"].items():
            phases[phase] = phases.get(phase, 0.0) + float(seconds) / len(rows)
    return {
        "configuration": setup.name,
        "engine": setup.engine,
        "n": setup.n,
        "parallel": setup.parallel or setup.n == 1,
        "agent_s": setup.seconds,
        "lines": lines,
        "iterations": len(rows),
        "landed": landed,
        "expected landed share, 1-(1-p)^n": round(1 - (1 - args.p) ** setup.n, 3),
        "gaps with a right candidate": sum(r["right candidates"] > 0 for r in rows),
        "wall s per iteration, mean": round(statistics.mean(walls), 2),
        "wall s per iteration": walls,
        "landed per hour": round(landed * 3600 / sum(walls), 1),
        "cost usd": round(cost, 2),
        "landed per dollar": round(landed / cost, 2) if cost else None,
        "phases s, mean": {k: round(v, 2) for k, v in phases.items()},
        "load_1m before, after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "load_1m mean (before and after each iteration)": round(
            statistics.mean([load_before, *loads]), 2
        ),
        "rows": rows,
    }


def setups(args: argparse.Namespace) -> list[tuple[Setup, int]]:
    """Every configuration with its number of iterations: by t, then n, the engines side by side."""
    out: list[tuple[Setup, int]] = []
    for seconds in args.seconds:
        count = args.iterations if seconds < 30 else args.iterations_long
        for n in args.n:
            for engine in args.engine:  # side by side: the machine's load moves less between
                out.append((Setup(n, True, seconds, engine), count))
                if n > 1 and n in args.serial:
                    out.append((Setup(n, False, seconds, engine), count))
    return out


def table(results: list[dict[str, Any]]) -> str:
    """The figures as README's table (ratios to n = 1 at the same t)."""
    base = {
        (r["engine"], r["agent_s"]): r["wall s per iteration, mean"] for r in results if r["n"] == 1
    }
    lines = [
        "| engine | t | n | candidates | iterations | landed | expected 1-(1-p)^n | wall s / iteration"
        " | / n=1 | landed / hour | landed / $ | load 1m (before-after, mean) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        one = base.get((r["engine"], r["agent_s"]))
        ratio = f"{r['wall s per iteration, mean'] / one:.2f}" if one else ""
        mode = "at once" if r["parallel"] else "one at a time"
        load = "-".join(f"{x:.1f}" for x in r["load_1m before, after"])
        mean = r["load_1m mean (before and after each iteration)"]
        expected = r["expected landed share, 1-(1-p)^n"]
        lines.append(
            f"| {r['engine']} | {r['agent_s']:g} s | {r['n']} | {mode} | {r['iterations']} "
            f"| {r['landed']} | {expected * r['iterations']:.2f} "
            f"| {r['wall s per iteration, mean']:.1f} | {ratio} | {r['landed per hour']} "
            f"| {r['landed per dollar']} | {load}, {mean:.1f} |"
        )
    return "\n".join(lines)


def overhead(results: list[dict[str, Any]]) -> str:
    """Ray against local per candidate: the same (t, n, mode, gap, candidate) under both
    engines, so the same right or wrong change; and where each Ray candidate ran."""
    local = {(r["agent_s"], r["n"], r["parallel"]): r for r in results if r["engine"] == "local"}
    lines = [
        "| t | n | candidates paired | local s / candidate | Ray s / candidate | Ray - local s"
        " | wall s / iteration, Ray - local | Ray candidates per node |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        mine = local.get((r["agent_s"], r["n"], r["parallel"]))
        if r["engine"] != "ray" or mine is None or r["n"] == 1:
            continue
        pairs = [
            (float(a), float(b))
            for here, there in zip(mine["rows"], r["rows"], strict=False)
            for a, b in zip(here["candidate_s"], there["candidate_s"], strict=False)
            if a is not None and b is not None
        ]
        if not pairs:
            continue
        nodes: dict[str, int] = {}
        for row in r["rows"]:
            for host in row["candidate_hosts"]:
                nodes[host] = nodes.get(host, 0) + 1
        there = statistics.mean(b for _, b in pairs)
        here = statistics.mean(a for a, _ in pairs)
        wall = r["wall s per iteration, mean"] - mine["wall s per iteration, mean"]
        spread = ", ".join(f"{k}: {v}" for k, v in sorted(nodes.items()))
        lines.append(
            f"| {r['agent_s']:g} s | {r['n']} | {len(pairs)} | {here:.1f} | {there:.1f} "
            f"| {there - here:+.1f} | {wall:+.1f} | {spread} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


def _stop(signum: int, _frame: object) -> None:
    """A TERM ends the bench as Ctrl-C does: through the finally blocks (the cluster's too)."""
    raise KeyboardInterrupt(f"signal {signum}")


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _engines(text: str) -> list[str]:
    engines = [x.strip() for x in text.split(",") if x.strip()]
    if not engines or set(engines) - {"local", "ray"}:
        raise argparse.ArgumentTypeError("local, ray or local,ray")
    return engines


def main() -> int:
    """Run every configuration; print the figures as JSON and as a table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=_floats, default=[10.0, 60.0], help="agent times t")
    parser.add_argument("--n", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4])
    parser.add_argument("--iterations", type=int, default=3, help="gaps per configuration, t < 30")
    parser.add_argument("--iterations-long", type=int, default=1, help="gaps per one, t >= 30")
    parser.add_argument(
        "--serial",
        type=lambda s: [int(x) for x in s.split(",") if x.strip()],
        default=[4],
        help="the n also run one at a time (parallel = 1); '' for none",
    )
    parser.add_argument("--p", type=float, default=0.3, help="chance a candidate is right")
    parser.add_argument("--cost", type=float, default=0.10, help="dollars each run reports")
    parser.add_argument("--rng-seed", type=int, default=28)
    parser.add_argument("--lines", type=int, default=10000)
    parser.add_argument(
        "--plant",
        choices=("code", "new"),
        default="code",
        help="the bug in a module the suite runs (code) or in a new one only its test imports",
    )
    parser.add_argument(
        "--engine",
        type=_engines,
        default=["local"],
        help="local, ray, or local,ray (both, with Ray's overhead per candidate)",
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--keep", action="store_true", help="leave the repositories in /tmp")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop)
    tmp = Path(tempfile.mkdtemp(prefix="seed-candidates-"))
    results: list[dict[str, Any]] = []
    try:
        with contextlib.ExitStack() as stack:
            ray = stack.enter_context(ray_cluster(tmp)) if "ray" in args.engine else None
            if ray is not None:
                print(f"Ray cluster at {ray.address}: {ray.nodes}", file=sys.stderr, flush=True)
            for setup, count in setups(args):
                print(f"{setup.name}: {count} iteration(s) ...", file=sys.stderr, flush=True)
                results.append(play(setup, count, args, tmp, ray))
                print(json.dumps(results[-1], indent=1), file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            subprocess.run(["rm", "-rf", str(tmp)], check=False)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(json.dumps([{k: v for k, v in r.items() if k != "rows"} for r in results], indent=1))
    print(table(results))
    if extra := overhead(results):
        print(extra)
    print(f"cores {os.cpu_count()}, p {args.p}, ${args.cost} a run, rng seed {args.rng_seed}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

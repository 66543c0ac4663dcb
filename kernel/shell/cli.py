"""The command line: `python seed.py [--root DIR] [--config FILE] COMMAND`."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import select
import signal
import sys
import tempfile
import time
import tomllib
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from domain import GapReport, IterationOutcome, IterationPlan
from kernel.config import Config, GuardConfig
from kernel.errors import HostError, LockHeld, SeedError, UsageError
from kernel.fsutil import atomic_write_text, remove_any
from kernel.host.context import Context, open_context
from kernel.host.host import own_code
from kernel.host.selfcheck import run_selfcheck
from kernel.isolation import gitops, jails, procs
from kernel.isolation.daemonlock import DaemonLock
from kernel.isolation.paths import SEED_HOME, discover
from kernel.judging import landing
from kernel.loop import fitness, generations, replaying, reporting
from kernel.records import halt
from kernel.records.inbox import write_task
from kernel.shell.daemon import (
    EXIT_FAILED,
    EXIT_NOTHING,
    EXIT_OK,
    EXIT_USAGE,
    Daemon,
    analyse_head,
    log_ending,
    plan_only,
)
from kernel.shell.progress import TICK_S, Progress
from kernel.shell.status import read_status, status_text
from kernel.terminal import say

# history/README.md is the index the daemon rewrites after every iteration, so it is ignored
# with the rest of history/ (tracking it would leave `git status` dirty after every iteration)
GITIGNORE_LINES = ("history/*", "inbox/*", "!inbox/README.md")
INBOX_README = """# inbox

Drop a task here as a Markdown (.md) or text (.txt) file and the daemon picks it up
within a second. Optional TOML front matter between `+++` lines:

    +++
    title = "Add a --verbose flag"
    priority = "high"            # critical, high, normal, low
    acceptance = ["pytest tests/test_cli.py::test_verbose"]
    allowed = ["src/cli.py", "tests/test_cli.py"]
    +++
    The CLI should accept --verbose and print each step.

Claimed tasks move to `.active/`, then to `done/` or `failed/` with a `.result.md`
beside them; files that cannot be read move to `rejected/` with a `.reason.txt`.
Or run `python seed.py add "TEXT" --priority high`.
"""
HISTORY_README = """# history

What the daemon planned, did and proved: one folder per iteration (plan.json,
record.json, report.md, agent.log), `records.jsonl` (one line per iteration),
`events.jsonl` (halts, resumes, recoveries). Nothing here is committed.
"""


def _global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """--root, --config, --no-bootstrap, --quiet: before the command (top) or after it; after
    it they default to nothing, so a value given before the command stands."""

    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    parser.add_argument(
        "--root",
        type=Path,
        default=default(None),
        help="the git repository to work on (default: the one the current directory is in)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=default(None),
        help="seed.toml to read (default: ROOT/seed.toml)",
    )
    parser.add_argument(
        "--no-bootstrap",
        action="store_true",
        default=default(False),
        help="do not create a virtualenv; fail if dependencies are missing",
    )
    parser.add_argument(
        "--quiet", action="store_true", default=default(False), help="log nothing to stderr"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seed.py",
        description="A self-improving project daemon: finds the most critical gap, has an agent fix it "
        "in a git worktree, verifies the result itself, and lands it or throws it away.",
    )
    _global_options(parser, top=True)
    parser.add_argument("--version", action=_Version, help="print seed's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        command = sub.add_parser(name, **kwargs)
        if name != "test":  # everything after `test` is pytest's
            _global_options(command, top=False)
        return command

    _daemon_commands(add)
    _analysis_commands(add)
    _history_commands(add)
    _setup_commands(add)
    return parser


class _Version(argparse.Action):
    """--version: worked out only when asked (it runs git)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        say(f"seed {version()}")
        parser.exit()


def version() -> str:
    """seed's version: `git describe` of seed's own checkout, else pyproject.toml's version."""
    top = gitops.git(SEED_HOME, "rev-parse", "--show-toplevel", check=False)
    if top.ok and Path(top.text().strip()).resolve() == SEED_HOME.resolve():
        described = gitops.git(SEED_HOME, "describe", "--always", "--dirty", "--tags", check=False)
        if described.ok and described.text().strip():
            return f"{described.text().strip()} (git describe of {SEED_HOME})"
    try:
        project = tomllib.loads((SEED_HOME / "pyproject.toml").read_text(encoding="utf-8"))
        return f"{project['project']['version']} (pyproject.toml; {SEED_HOME} is no git checkout)"
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


_AddParser = Callable[..., argparse.ArgumentParser]
"""subparsers.add_parser: each group of commands adds its own."""


def _daemon_commands(add: _AddParser) -> None:
    """run, once, status, resume: the daemon and its state."""
    p = add(
        "run",
        help="run forever: iterate while an agent can take a gap, then wait for events (default)",
    )
    p.add_argument(
        "--max-iterations", type=int, default=0, help="stop after this many iterations (0: never)"
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="N",
        help="serve Prometheus metrics on http://127.0.0.1:N/metrics (0: any free port; "
        "needs the prometheus_client package)",
    )
    add(
        "once",
        help="one iteration; exit 0 landed, 1 failed, 2 bad usage, 3 halted, 5 nothing to do",
    )
    p = add("status", help="what the daemon is doing, halt state, budget and backend")
    p.add_argument("--json", action="store_true", help="print DaemonStatus as JSON")
    p.add_argument(
        "--follow",
        action="store_true",
        help="then show the daemon's progress (phase, time, the agent's latest line) until Ctrl-C",
    )
    add("resume", help="clear a halt so agents run again")
    p = add(
        "approve",
        help="land the work a KEPT or MERGE_BLOCKED iteration kept on its branch "
        "(rebased and verified again if the branch moved)",
    )
    p.add_argument("id", help="the iteration id (`python seed.py history --outcome KEPT`)")


def _analysis_commands(add: _AddParser) -> None:
    """gaps, plan: what the next iteration would see and do."""
    p = add("gaps", help="analyse HEAD and print the ranked gaps")
    p.add_argument("--json", action="store_true", help="print the GapReport as JSON")
    p = add(
        "fitness",
        help="replay the planning modules over this project's history and print how well they plan",
    )
    p.add_argument(
        "--modules",
        default="",
        metavar="TREE",
        help="a folder holding a copy of seed, or a commit of seed's own repository, whose "
        "modules are replayed (default: those seed runs)",
    )
    p.add_argument(
        "--part",
        action="append",
        default=[],
        choices=("history", "shipped", "held-back"),
        help="replay only this part of the corpus (repeatable; default: all three)",
    )
    p.add_argument(
        "--case", action="append", default=[], metavar="ID", help="replay only this case"
    )
    p.add_argument("--json", action="store_true", help="print the Fitness as JSON")
    p = add("plan", help="analyse HEAD and print the plan the next iteration would carry out")
    p.add_argument(
        "--json", action="store_true", help="print the IterationPlan as JSON (null when none)"
    )


def _history_commands(add: _AddParser) -> None:
    """history, report: what happened."""
    p = add("history", help="list iterations, or print one report")
    p.add_argument(
        "id",
        nargs="?",
        help="an iteration: its id, its number (2) or the start of its id (iter-0002); print its report",
    )
    p.add_argument(
        "--outcome",
        default="",
        help="only iterations with this outcome ("
        + ", ".join(o.value for o in IterationOutcome)
        + ")",
    )
    p.add_argument(
        "--source",
        default="",
        help="only iterations on gaps from this source (ruff, pytest, inbox, ...)",
    )
    p.add_argument("--limit", type=int, default=50, help="at most this many (0: all)")
    p.add_argument("--json", action="store_true", help="print records as JSON lines")
    p = add(
        "replay",
        help="run an iteration's agent again, offline, answered from its recorded model.jsonl",
    )
    p.add_argument("id", help="the iteration: its id, its number or the start of its id")
    p.add_argument("--round", type=int, default=1, help="the agent's round to replay (from 1)")
    p = add("report", help="write history/index.html: charts of the trends and every iteration")
    p.add_argument("--output", type=Path, default=None, help="write the page here instead")


def _setup_commands(add: _AddParser) -> None:
    """add, init, selfcheck, test: tasks, setting up, and checking seed itself."""
    p = add("add", help="drop a task into inbox/")
    p.add_argument("text", help="what to do")
    p.add_argument("--priority", default="normal", choices=("critical", "high", "normal", "low"))
    p.add_argument("--title", default="", help="a short title (default: the first line)")
    p = add("init", help="write seed.toml, inbox/ and history/ READMEs, and .gitignore entries")
    p.add_argument("--backend", default="auto", help="agent backend to write into seed.toml")
    add("selfcheck", help="boot every module through the module host and check its contract")
    p = add("test", help="run seed's own test suite (pytest arguments may follow)")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="arguments for pytest")


def _context(args: argparse.Namespace, quiet: bool = False, keep_going: bool = False) -> Context:
    # where the person stands: the git repository of the current directory (discover finds its top)
    try:
        root = (args.root or Path.cwd()).resolve()
    except OSError as exc:  # the current directory was removed under the shell
        raise UsageError(f"cannot tell where you are ({exc.strerror}); give --root DIR") from exc
    config = args.config.resolve() if args.config else None
    return open_context(root, config, quiet=quiet or args.quiet, keep_going=keep_going)


def _print_gaps(report: GapReport) -> None:
    if not report.gaps:
        say("no gaps")
    for i, gap in enumerate(report.gaps, start=1):
        say(f"{i:3}. [{gap.severity.value:8}] {gap.source:11} {gap.title}")
    for key in report.skipped:
        say(f"  skipped: {key}")
    for error in report.errors:
        say(f"  analysis problem: {error}")


def _print_plan(plan: IterationPlan) -> None:
    say(f"{plan.iteration_id}: {plan.goal}")
    say(f"  gap:   {plan.gap.key} ({plan.gap.source}, {plan.gap.severity.value})")
    say(f"  kind:  {plan.task_kind.value}   risk: {plan.estimated_risk.value}")
    for action in plan.actions:
        say(
            f"  {action.action_type.value:6} {', '.join(action.target_files) or '(any file)'}: {action.description}"
        )
    docs = " (docs: no code may change but docstrings and comments)" * (plan.task_kind == "docs")
    say(f"  allowed: {', '.join(plan.allowed_paths) or 'any non-protected file'}{docs}")
    if plan.agents:
        say(f"  agents: {', '.join(plan.agents)} ({plan.agents_why})")
    for criterion in plan.criteria:
        say(
            f"  check: {criterion.check.value} {' '.join(criterion.args)} - {criterion.text}".rstrip()
        )
    for note in plan.history:
        say(
            f"  tried: {note.iteration_id} {note.outcome.value} {note.failure_category.value if note.failure_category else ''} {note.reason}"
        )
    for remark in plan.notes:
        say(f"  note:  {remark}")


def cmd_gaps(args: argparse.Namespace) -> int:
    ctx = _context(args, quiet=True)
    try:
        baseline = analyse_head(ctx)
        if baseline is None:
            say("the repository has no commits yet", sys.stderr)
            return EXIT_NOTHING
        if args.json:
            say(baseline.report.model_dump_json(indent=2), json=True)
        else:
            _print_gaps(baseline.report)
        return EXIT_OK
    finally:
        ctx.host.stop()


def cmd_fitness(args: argparse.Namespace) -> int:
    ctx = _context(args, quiet=True)

    def tell(line: str) -> None:
        if not (args.json or args.quiet):
            say(line, sys.stderr)

    try:
        found = fitness.measure(ctx, args.modules, tell, args.part, args.case)
    except HostError as exc:
        say(f"seed.py fitness: {exc}", sys.stderr)
        return EXIT_USAGE
    if args.json:
        say(found.model_dump_json(indent=2), json=True)
    else:
        say(fitness.table(found))
    return EXIT_OK if found.figures.cases else EXIT_NOTHING


def cmd_plan(args: argparse.Namespace) -> int:
    ctx = _context(args, quiet=True)
    try:
        baseline, plan = plan_only(ctx)
        if args.json:
            say(plan.model_dump_json(indent=2) if plan else "null", json=True)
        elif plan is None:
            say("nothing to plan" if baseline is not None else "the repository has no commits yet")
        else:
            _print_plan(plan)
        return EXIT_OK if plan else EXIT_NOTHING
    finally:
        ctx.host.stop()


def cmd_status(args: argparse.Namespace) -> int:
    ctx = _context(args, quiet=True, keep_going=True)  # a bad seed.toml is shown, not fatal
    try:
        status = read_status(ctx)
        # the host may be started to tell which backend auto would pick, and renders the text
        text = status.model_dump_json(indent=2) if args.json else status_text(ctx, status)
        say(text, json=args.json)
    finally:
        ctx.host.stop()
    if args.follow:
        _follow(ctx.paths.history)
    return EXIT_OK


def _follow(history: Path) -> None:
    """Show a running daemon's progress until Ctrl-C (which ends it quietly)."""
    shown = Progress(history, sys.stdout)
    try:
        while True:
            shown.tick()
            time.sleep(TICK_S)
    except KeyboardInterrupt:
        pass
    finally:
        shown.stop()


def cmd_history(args: argparse.Namespace) -> int:
    ctx = _context(args, quiet=True)
    if args.id:
        found = _iteration_id(ctx, args.id)
        record = ctx.store.get(found) if found else None
        if record is None:
            return EXIT_USAGE
        report = ctx.paths.history / record.iteration_id / "report.md"
        if args.json:
            say(record.model_dump_json(indent=2), json=True)
        elif report.exists():
            say(report.read_text(encoding="utf-8"), end="")
        else:
            say(record.model_dump_json(indent=2), json=True)
        return EXIT_OK
    outcomes = [o.value for o in IterationOutcome]
    if args.outcome and args.outcome.upper() not in outcomes:
        say(
            f"seed: unknown outcome {args.outcome!r}; valid: {', '.join(outcomes)}",
            sys.stderr,
        )
        return EXIT_USAGE
    matching = ctx.store.summaries(outcome=args.outcome, source=args.source)
    rows = matching[: args.limit] if args.limit > 0 else matching
    for problem in ctx.store.problems:
        say(f"warning: {problem}", sys.stderr)
    if args.json:
        for row in rows:
            record = ctx.store.get(row.iteration_id)
            if record is not None:
                say(record.model_dump_json(), json=True)
        return EXIT_OK
    try:
        say(reporting.history_text(ctx, rows, len(matching), bool(args.outcome or args.source)))
    finally:
        ctx.host.stop()
    return EXIT_OK


def _iteration_id(ctx: Context, given: str) -> str:
    """The iteration `history ID` names: the whole id, its number (2), or a unique prefix
    (iter-0002); says on stderr when none or several match."""
    if ctx.store.get(given) is not None:
        return given
    prefix = f"iter-{int(given):04d}-" if given.isdigit() else given
    found = sorted(
        s.iteration_id for s in ctx.store.summaries() if s.iteration_id.startswith(prefix)
    )
    if len(found) == 1:
        return found[0]
    if found:
        shown = ", ".join(found[:10]) + (", ..." if len(found) > 10 else "")
        say(f"seed: {given} matches {len(found)} iterations: {shown}", sys.stderr)
    else:
        say(f"seed: no iteration {given} (`python seed.py history` lists them)", sys.stderr)
    return ""


def _stop(signum: int, frame: object) -> None:
    procs.STOP.set()


def cmd_replay(args: argparse.Namespace) -> int:
    ctx = _context(args, quiet=True)
    # the replay uses the loop's run folder and integrity snapshot: never beside a daemon
    lock = DaemonLock(ctx.paths.lock)
    try:
        found = _iteration_id(ctx, args.id)
        record = ctx.store.get(found) if found else None
        if record is None:
            return EXIT_USAGE
        number: int = args.round
        # Ctrl-C or SIGTERM ends the agent's process group (procs.STOP): the run stops there
        # (Interrupted) and its checkout, home and gateway are removed on the way out
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, _stop)
        try:
            lock.acquire()
        except LockHeld as held:
            say(f"seed: {held}: replay when it has stopped", sys.stderr)
            return EXIT_USAGE
        try:
            rounds = replaying.load(ctx, record, number)
            say(
                f"{record.iteration_id} round {number}: {rounds[-1].turns} model turns recorded, "
                f"base {record.base[:12] or '(none)'}, backend {record.backend or '(none)'}, "
                f"the agent's tree {replaying.recorded_tree(record, number)[:12] or '(not recorded)'}",
                flush=True,
            )
            done = replaying.run(ctx, record, rounds)
        except replaying.Refused as refused:
            say(f"seed: {refused}", sys.stderr)
            return EXIT_USAGE
        say(
            f"replayed offline in {done.seconds:.1f}s (the agent {done.agent_s:.1f}s); "
            f"its files: {done.folder}"
        )
        alike = "same tree" if done.same else "the trees differ"
        say(
            f"recorded tree {done.recorded[:12] or '(none)'}, "
            f"replayed tree {done.tree[:12] or '(none)'}: {alike}"
        )
        if done.divergence is not None:
            say(f"diverged at {done.divergence}")
        else:
            say(f"the agent asked {done.answered} of {done.turns} recorded turns")
        category = f" ({done.category})" if done.category else ""
        say(f"verdict: {done.outcome}{category}: {done.reason}")
        return EXIT_OK if done.reproduced else EXIT_FAILED
    finally:
        lock.release()
        ctx.host.stop()


def cmd_report(args: argparse.Namespace) -> int:
    ctx = _context(args, quiet=True)
    try:
        path, size, count = reporting.write_dashboard(
            ctx, args.output.resolve() if args.output else None
        )
    finally:
        ctx.host.stop()
    say(f"wrote {path} ({size / 1024:,.0f} KiB, {count:,} iteration{'' if count == 1 else 's'})")
    return EXIT_OK


def cmd_add(args: argparse.Namespace) -> int:
    ctx = _context(args, quiet=True)
    path = write_task(ctx.paths.inbox, args.text, args.priority, args.title)
    say(str(path))
    return EXIT_OK


def cmd_resume(args: argparse.Namespace) -> int:
    ctx = _context(args, quiet=True)
    before = halt.resume(ctx.store)
    if before.halted:
        # history/README.md shows the halt until it is rewritten
        with contextlib.suppress(SeedError, OSError):
            reporting.write_index(ctx)
        ctx.host.stop()
    say(f"resumed (was halted: {before.reason})" if before.halted else "the daemon was not halted")
    return EXIT_OK


def cmd_approve(args: argparse.Namespace) -> int:
    ctx = _context(args, quiet=True)
    found = _iteration_id(ctx, args.id)  # the ids `history` takes: 4, iter-0004, the whole id
    if not found:
        return EXIT_USAGE
    try:
        before = gitops.head(ctx.paths.root)
        say(landing.approve(ctx, found))
        record, after = ctx.store.get(found), gitops.head(ctx.paths.root)
        if record is not None and after and after != before and ctx.paths.selfhost:
            generations.approved(ctx, record, after)
        with contextlib.suppress(SeedError, OSError):
            reporting.write_index(ctx)
    finally:
        ctx.host.stop()
    return EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    ctx = _context(args, quiet=True)
    root = ctx.paths.root
    done: list[str] = []
    config_path = ctx.config_path
    if config_path.exists():
        done.append(f"kept the existing {config_path.name}")
    else:
        text = starter_config(args.backend)
        Config.model_validate(tomllib.loads(text))  # the daemon reads what init writes
        atomic_write_text(config_path, text)
        done.append(f"wrote {config_path.name} (the settings a person usually changes, commented)")
    gitignore = root / ".gitignore"
    existing = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    present = {line.strip() for line in existing.splitlines()}
    additions = [line for line in GITIGNORE_LINES if line not in present]
    if additions:
        text = (
            existing
            + ("" if not existing or existing.endswith("\n") else "\n")
            + "# seed\n"
            + "\n".join(additions)
            + "\n"
        )
        atomic_write_text(gitignore, text)
        done.append(f"added {', '.join(additions)} to .gitignore")
    for folder, text in ((ctx.paths.inbox, INBOX_README), (ctx.paths.history, HISTORY_README)):
        readme = folder / "README.md"
        if not readme.exists():
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_text(readme, text)
            done.append(f"wrote {readme.relative_to(root)}")
    for line in done:
        say(line)
    here = _seed_command(root)
    say(
        "next:\n"
        f"  {here} status   # what seed sees here: backend, sandbox, tools and why\n"
        f"  {here} once     # one iteration: fix the most critical gap, verify, land or discard\n"
        f"  {here} run      # keep going (Ctrl-C or SIGTERM stops it; it logs 'stopped')"
    )
    return EXIT_OK


def _seed_command(root: Path) -> str:
    """How the person runs seed on root from where they stand (--root only when needed)."""
    command = f"python {SEED_HOME / 'seed.py'}"
    try:
        here = gitops.toplevel(Path.cwd()).resolve()
    except (gitops.GitError, OSError):
        here = None
    return command if here == root.resolve() else f"{command} --root {root}"


def starter_config(backend: str) -> str:
    """A short, commented seed.toml: the keys a person is likely to set, at their defaults."""
    defaults = Config()
    spend = defaults.budget
    return f"""\
# seed.toml: what seed may do in this repository. Every key is optional; the others and
# their defaults are described in kernel/config.py of seed's checkout.

[agent]
# the coding agent that fixes gaps: auto (the first one installed), claude, codex, aider,
# mini, gemini, opencode, command (your own argv), ruff-fix (lint fixes only, no model)
# or none (analyse and plan only)
backend = {json.dumps(backend)}
# the model handed to agents that take one ("" leaves the agent's own default)
# model = ""

[budget]
# what agents may spend, in USD priced from the tokens they report, and how many runs a day
max_cost_usd_per_day = {spend.max_cost_usd_per_day}
max_cost_usd_per_iteration = {spend.max_cost_usd_per_iteration}
max_iterations_per_day = {spend.max_iterations_per_day}

[guard]
# "on": agents and test runs work in a bubblewrap sandbox; "off" only where it cannot start
sandbox = "{defaults.guard.sandbox}"

[quality]
# the interpreter that runs your tests (default: .venv/bin/python here, else seed's own)
# python = ".venv/bin/python"

# word when seed needs you (work landed or kept for you, a halt, a spent budget): a [notify]
# table naming a command, a webhook or the desktop; docs/notifications.md of seed's checkout
"""


def cmd_selfcheck(args: argparse.Namespace) -> int:
    log = Path(tempfile.gettempdir()) / f"seed-selfcheck-{os.getpid()}.log"
    try:
        paths = discover(SEED_HOME)
    except UsageError:  # no git checkout, so no state folder to hold a copy: as it is
        checks = run_selfcheck(SEED_HOME, log)
    else:  # as the daemon boots: a copy of the modules, sandboxed where the sandbox runs
        code = own_code(paths)
        try:
            checks = run_selfcheck(code, log, jails.module_jail(paths, GuardConfig()))
        finally:
            remove_any(code)
    for check in checks:
        say(str(check))
    failed = [c for c in checks if not c.ok]
    say(
        f"self-check {'FAILED' if failed else 'passed'}: {len(checks) - len(failed)} of {len(checks)} checks passed"
    )
    if failed:
        say(f"module host log: {log}")
    return EXIT_FAILED if failed else EXIT_OK


_PARALLEL = ["-n", "3", "--dist", "loadfile", "--no-loadscope-reorder"]
"""Three pytest-xdist workers on 2 cores (each waits on its subprocesses about half the time); a file's tests run on one, in order, files as collected."""
_OWN_SCHEDULE = ("-n", "--numprocesses", "--dist", "--pdb", "--trace", "no:xdist", "-pno:xdist")
"""Arguments by which the person chooses how tests are spread (or that need one process)."""


def _test_args(given: list[str]) -> list[str]:
    """pytest's arguments: the person's, spread over three processes unless they chose otherwise."""
    chosen = any(arg.startswith(_OWN_SCHEDULE) for arg in given)
    if chosen or importlib.util.find_spec("xdist") is None:
        return given
    return [*_PARALLEL, *given]


def cmd_test(args: argparse.Namespace) -> int:
    os.chdir(SEED_HOME)
    argv = [sys.executable, "-m", "pytest", *_test_args(args.pytest_args)]
    os.execv(sys.executable, argv)


def _command_index(argv: list[str]) -> int | None:
    """Position of the command word (global options and their values come before it)."""
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg in ("--root", "--config"):
            skip = True
        elif not arg.startswith("-"):
            return i
    return None


def _shown_traceback(kind: type[BaseException], value: BaseException, tb: Any) -> None:
    """An error no command caught, through the one sink (its text may quote the tree)."""
    say("".join(traceback.format_exception(kind, value, tb)), sys.stderr, end="")


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the command; returns the exit code."""
    sys.excepthook = _shown_traceback
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    where = _command_index(argv)
    if (
        where is not None
        and argv[where] == "test"
        and argv[where + 1 : where + 2] not in (["-h"], ["--help"])
    ):
        # everything after `test` belongs to pytest, options included
        argv, passthrough = argv[: where + 1], argv[where + 1 :]
    try:
        args = parser.parse_args(argv)
        if args.command == "test":
            args.pytest_args = passthrough
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    code = EXIT_OK
    try:
        code = _dispatch(args)
        sys.stdout.flush()  # a reader gone early shows here, not in Python's exit
        return code
    except BrokenPipeError:
        if not _stdout_gone():
            raise
        return code  # `once | head -1` still says how the iteration went
    except UsageError as exc:
        say(f"seed: {exc}", sys.stderr)
        return EXIT_USAGE
    except SeedError as exc:
        say(f"seed: {exc}", sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_OK


def _daemon(ctx: Context, args: argparse.Namespace, command: str) -> int:
    """`run` or `once`, with the live progress line."""
    daemon = Daemon(ctx, metrics_port=getattr(args, "metrics_port", None))
    shown = None if args.quiet else Progress(ctx.paths.history, sys.stdout, pid=os.getpid())
    try:
        if shown is not None:
            shown.start()
        if command == "once":
            return daemon.once()
        return daemon.run(getattr(args, "max_iterations", 0) or ctx.config.daemon.max_iterations)
    finally:
        if shown is not None:
            shown.stop()


def _dispatch(args: argparse.Namespace) -> int:
    """Run the command the arguments name."""
    command = args.command or "run"
    if command in ("run", "once"):
        started = False
        try:
            ctx = _context(args)
            started = True
            return _daemon(ctx, args, command)
        except Exception as exc:
            log_ending(args.root, command, started and not isinstance(exc, LockHeld), exc)
            raise
    handler = {
        "gaps": cmd_gaps,
        "plan": cmd_plan,
        "fitness": cmd_fitness,
        "status": cmd_status,
        "history": cmd_history,
        "replay": cmd_replay,
        "report": cmd_report,
        "add": cmd_add,
        "resume": cmd_resume,
        "approve": cmd_approve,
        "init": cmd_init,
        "selfcheck": cmd_selfcheck,
        "test": cmd_test,
    }[command]
    return handler(args)


def _stdout_gone() -> bool:
    """Whether stdout's reader has left (`status | head -3`); if so, whatever is still
    buffered goes nowhere, so that Python's exit has nothing to complain about."""
    poller = select.poll()
    poller.register(sys.stdout.fileno(), select.POLLOUT)
    gone = any(events & select.POLLERR for _, events in poller.poll(0))
    if gone:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return gone

"""Recovery at start: whatever a daemon killed with `kill -9` left behind is put right.

In order: the dead daemon's processes are ended (the agent's process group from
running.json, and every process that still carries the dead daemon's token in its
environment, whatever session it moved to: a local Ray instance's GCS, raylet and workers
too; never the group this process is in); a torn last line of records.jsonl is cut
(and said so); the user's checkout is checked against the snapshot taken before the
agent ran, by the live check's rule (with the sandbox on, what no writable place of the run
reached is the person's), except that nothing is put back: since the daemon died the person
may have edited what the run changed. With the sandbox off a changed protected file cannot
be told from the person's: it is kept, its bytes saved, and the daemon halts saying so. The
unfinished iteration gets the record of what really happened (SUCCESS if its commit is on
the user's branch, ABORTED otherwise); stale worktrees and branches go, and what killed Ray
workers left in this machine's worker cache; claimed inbox items go back to the queue.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from domain import (
    DiffStat,
    FailureCategory,
    GapCategory,
    GapRef,
    IterationOutcome,
    IterationPlan,
)
from kernel.bounds import cap_line, cap_lines
from kernel.contracts import protected_patterns
from kernel.fsutil import atomic_write_text
from kernel.host.context import Context
from kernel.isolation import agentgit, gitops, procs, readback, worker
from kernel.isolation.integrity import Checkout, Report
from kernel.judging.iteration import Ending
from kernel.loop.recording import Recorder, Recovered
from kernel.records import budget, halt, inbox, notify
from kernel.records.journal import entries_of, read_journal, stage_at_least

TOKEN_ENV = "SEED_DAEMON_TOKEN"
"""Every process a daemon starts inherits this; survivors of a dead daemon are found by it."""
DAEMON_FILE = "daemon.json"

_ENDING_S = 10.0
"""Seconds recovery spends ending a dead daemon's processes and waiting for them to be gone."""
_SETTLE_S = 0.2
"""Seconds after a round of endings before the next scan: what was starting shows by then."""

MAX_PLAN_BYTES = 4 * 1024 * 1024
"""The most of a journalled plan.json read back."""


def _daemon_file(ctx: Context) -> Path:
    return ctx.paths.state / DAEMON_FILE


def mark_daemon(ctx: Context) -> str:
    """Give this daemon a token its children inherit, and persist it for the next start."""
    start = procs.process_start_time(os.getpid())
    token = f"{os.getpid()}-{start}-{secrets.token_hex(4)}"
    os.environ[TOKEN_ENV] = token
    atomic_write_text(
        _daemon_file(ctx),
        json.dumps(
            {"pid": os.getpid(), "token": token, "started_at": datetime.now(UTC).isoformat()}
        )
        + "\n",
    )
    return token


def _ancestors() -> set[int]:
    found: set[int] = set()
    pid = os.getpid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat[stat.rfind(")") + 2 :].split()[1])
    return found


def processes_with_token(token: str) -> list[int]:
    """Live processes whose environment carries this daemon token (never this one or its parents)."""
    if not token:
        return []
    needle = f"{TOKEN_ENV}={token}".encode()
    spared = _ancestors()
    found: list[int] = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in spared:
                continue
            with contextlib.suppress(OSError):
                environ = Path(f"/proc/{entry}/environ").read_bytes()
                if needle in environ.split(b"\0"):
                    found.append(int(entry))
    return found


def _group(pid: int) -> int:
    """The process group of pid (0 when it is gone)."""
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return 0


def _end(pids: list[int], spared: set[int], deadline: float) -> None:
    """SIGKILL each process (and its group, unless spared) and wait for them to be gone."""
    for pid in pids:
        group = _group(pid)
        if group and group not in spared:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    while any(procs.alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)  # gone before their files are tidied
    time.sleep(_SETTLE_S)


def end_leftovers(ctx: Context, journal: dict[str, Any] | None) -> list[str]:
    """End the agent's process group and every process of the dead daemon."""
    notes: list[str] = []
    for run in entries_of(journal) if journal else ():
        pgid = int(run.get("pgid") or 0)
        if pgid and procs.process_start_time(pgid) == run.get("start_time"):
            procs.end_group(pgid)
            notes.append(f"ended the agent process group {pgid} left running by a previous daemon")
    previous: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        previous = cast(dict[str, Any], json.loads(_daemon_file(ctx).read_text(encoding="utf-8")))
    token = str(previous.get("token", ""))
    # a group this process or a parent is in is never ended whole: a local Ray's processes
    # stay in the dead daemon's group, which may be ours (one shell job, a supervisor's)
    spared = {_group(pid) for pid in _ancestors()}
    leftovers: list[int] = []
    deadline = time.monotonic() + _ENDING_S
    # scanned again until nothing new shows: a process mid-exec reads as no one's, and one a
    # leftover started after the scan is not in it
    while time.monotonic() < deadline:
        found = [pid for pid in processes_with_token(token) if pid not in leftovers]
        if not found:
            break
        leftovers += found
        _end(found, spared, deadline)
    if leftovers:
        notes.append(
            f"ended {len(leftovers)} process(es) left by the previous daemon (pid {previous.get('pid')}): "
            + ", ".join(str(p) for p in sorted(leftovers)[:20])
        )
    return notes


def _landed(ctx: Context, journal: dict[str, Any]) -> str:
    """The journalled commit, if it is on the branch it was fast-forwarded onto."""
    commit = str(journal.get("commit", ""))
    target = str(journal.get("target", ""))
    if not (commit and target and stage_at_least(journal, "landing")):
        return ""
    tip = gitops.git(
        ctx.paths.root,
        "rev-parse",
        "--verify",
        "--quiet",
        f"refs/heads/{target}^{{commit}}",
        check=False,
    )
    if tip.ok and gitops.is_ancestor(ctx.paths.root, commit, tip.text().strip()):
        return commit
    return ""


def _diff(ctx: Context, base: str, commit: str) -> tuple[list[str], DiffStat]:
    root = ctx.paths.root
    names = gitops.git(
        root, "diff", "--name-status", "-z", "--no-renames", base, commit, check=False
    )
    parts = [p for p in names.stdout.decode("utf-8", errors="surrogateescape").split("\0") if p]
    statuses, paths = parts[0::2], parts[1::2]
    inserted = deleted = 0
    for line in (
        gitops.git(root, "diff", "--numstat", base, commit, check=False).text().splitlines()
    ):
        cols = line.split("\t")
        if len(cols) >= 2 and cols[0].isdigit() and cols[1].isdigit():
            inserted, deleted = inserted + int(cols[0]), deleted + int(cols[1])
    stat = DiffStat(
        files=len(paths),
        insertions=inserted,
        deletions=deleted,
        new_files=sum(1 for s in statuses if s.startswith("A")),
    )
    return paths, stat


def _integrity(ctx: Context, iteration_id: str, journal: dict[str, Any]) -> Report:
    """Check the checkout against the snapshot of a run the dead daemon did not check."""
    checkout = Checkout(
        ctx.paths.root, ctx.paths.state, protected_patterns(ctx.config.guard.protected)
    )
    violations: list[str] = []
    changes: list[str] = []
    undecided: list[str] = []
    folder = ctx.paths.history / iteration_id if iteration_id else None
    if folder is not None and (folder / "integrity.json").exists():
        with contextlib.suppress(OSError, ValueError):
            earlier = json.loads((folder / "integrity.json").read_text(encoding="utf-8"))
            violations += [str(v) for v in earlier.get("violations", [])]
            changes += [str(c) for c in earlier.get("changes", [])]
    snapshot = checkout.saved()
    if snapshot is not None:
        evidence = ctx.store.folder(snapshot.iteration_id)
        found = checkout.check(snapshot, evidence, after_crash=True)
        violations += [*found.violations, *found.problems]
        changes += found.changes
        undecided += found.undecided
        checkout.done()
    elif journal.get("stage") == "agent" and not journal.get("sandboxed"):
        # an unsandboxed agent could delete the snapshot (then kill the daemon) to hide
        # what it did: a run with no snapshot of the kernel's own counts as a violation
        violations.append(
            "the integrity snapshot of an unsandboxed agent run is missing or not the kernel's"
        )
    return Report(violations, changes, undecided)


def _halt_undecided(ctx: Context, iteration_id: str, undecided: list[str]) -> None:
    """Halt, saying why: the sandbox was off, and what changed may be the person's."""
    if not undecided:
        return
    folder = f"history/{iteration_id}/integrity/" if iteration_id else "history/"
    shown = "; ".join(cap_line(line, 400) for line in undecided[:5])
    more = f" (+{len(undecided) - 5} more)" if len(undecided) > 5 else ""
    state = halt.halt(
        ctx.store,
        f"the daemon died during an agent run with the sandbox off ({iteration_id or 'unrecorded'}); "
        f"since then {len(undecided)} protected file(s) or git setting(s) changed in your "
        "checkout, and seed cannot tell the agent's change from yours, so it put nothing back: "
        f"{shown}{more}. Their bytes and the earlier ones are in {folder}; look at them, then "
        f"run `{ctx.paths.command('resume')}`",
        "CHECKOUT_CHANGED",
        iteration_id,
    )
    notify.tell_halt(ctx.notify, state, ctx.paths.command)


def finish_iteration(ctx: Context, journal: dict[str, Any]) -> list[str]:
    """Write the record of the iteration a dead daemon left unfinished, and finish with it."""
    iteration_id = str(journal.get("iteration_id", ""))
    checked = _integrity(ctx, iteration_id, journal)
    violations, undecided = checked.violations, checked.undecided
    if not iteration_id:
        _halt_undecided(ctx, iteration_id, undecided)
        if violations:
            state = halt.halt(
                ctx.store,
                cap_line(f"SANDBOX_VIOLATION during an unrecorded agent run: {violations[0]}"),
                "SANDBOX_VIOLATION",
            )
            notify.tell_halt(ctx.notify, state, ctx.paths.command)
        return [
            "running.json was unreadable; there was no iteration to record",
            *cap_lines(violations + undecided),
        ]
    notes: list[str] = []
    record = ctx.store.get(iteration_id)
    plan: IterationPlan | None = None
    # plan.json sits in the run's folder, which the agent could write: read as a run's file
    # (a FIFO there must not hang every start), and only as a plan
    plan_file = Path(str(journal.get("plan_file")))
    found = readback.read(Path(plan_file.name), MAX_PLAN_BYTES, within=plan_file.parent)
    with contextlib.suppress(ValueError):
        plan = IterationPlan.model_validate_json(found.data) if found.ok else None
    recorder = Recorder(ctx)
    # settled first: the record carries what the ledger counts (one spend in every view)
    for run in entries_of(journal):  # each candidate's run is settled on its own
        notes += settle(ctx, run)
    if record is None:
        known = _unrecorded(ctx, journal, iteration_id, plan, checked)
        cost, basis = budget.iteration_cost(ctx.paths.history, iteration_id)
        known = replace(
            known, cost_usd=cost, cost_basis=basis, backend=str(journal.get("backend", ""))
        )
        record = recorder.recovered(known)
        notes.append(f"recorded {iteration_id} as {record.outcome.value} ({record.reason})")
    elif violations:
        state = halt.halt(
            ctx.store,
            cap_line(f"SANDBOX_VIOLATION in {iteration_id}: {violations[0]}"),
            "SANDBOX_VIOLATION",
            iteration_id,
        )
        notify.tell_halt(ctx.notify, state, ctx.paths.command)
    _halt_undecided(ctx, iteration_id, undecided)
    with contextlib.suppress(Exception):
        ctx.start_host()  # for report.md; without it the report is a plain one
    claimed = str(journal.get("inbox", ""))
    recorder.after_record(record, claimed)
    if claimed and (ctx.paths.inbox / claimed).exists():
        notes.append(f"put inbox/{claimed} back in the queue")
    return notes


def _unrecorded(
    ctx: Context,
    journal: dict[str, Any],
    iteration_id: str,
    plan: IterationPlan | None,
    checked: Report,
) -> Recovered:
    """What is known of the iteration: landed (SUCCESS) or not (ABORTED), from the journal."""
    violations, undecided = checked.violations, checked.undecided
    base = str(journal.get("base", ""))
    landed = _landed(ctx, journal)
    stage = str(journal.get("stage", ""))
    category = FailureCategory.SANDBOX_VIOLATION if violations else None
    touched: list[str] = []
    stat = DiffStat()
    if landed:
        touched, stat = _diff(ctx, base, landed)
        ending = Ending(
            IterationOutcome.SUCCESS,
            category,
            f"landed as {landed[:12]} after verification; the daemon was killed before it "
            "wrote this record (recovered at the next start)",
            evidence=violations,
            commit=landed,
        )
    else:
        ending = Ending(
            IterationOutcome.ABORTED,
            category,
            f"the daemon was killed during this iteration (stage: {stage or 'unknown'}); "
            "its work was discarded"
            + (f"; during the agent run: {violations[0]}" if violations else "")
            + (
                "; with the sandbox off, seed cannot tell the agent's changes from yours since "
                f"the crash, so it put nothing back: {undecided[0]}"
                if undecided
                else ""
            ),
            evidence=[*violations, *undecided],
        )
    return Recovered(
        iteration_id=iteration_id,
        started=_time(journal.get("started_at")) or datetime.now(UTC),
        gap=GapRef(
            key=str(journal.get("gap", "unknown")), category=GapCategory.QUALITY, source="unknown"
        ),
        plan=plan,
        ending=ending,
        base=base,
        touched=touched,
        diff=stat,
        changes=checked.changes,
    )


def settle(ctx: Context, journal: dict[str, Any]) -> list[str]:
    """A run the dead daemon never accounted for: free backends cost 0; others count in the
    ledger at their reservation, the most they may have spent."""
    held = budget.unsettled(ctx.paths.history, journal)
    if held is None:
        return []
    if held.wire:  # each answer is in the ledger already; the gateway died with the daemon
        budget.append(
            ctx.paths.history,
            budget.LedgerEntry(
                at=datetime.now(UTC),
                iteration_id=held.iteration_id,
                backend=held.backend,
                cost_basis=budget.WIRE,
            ),
        )
        return [f"{held.iteration_id}: its spend is what the gateway counted, answer by answer"]
    budget.append(
        ctx.paths.history,
        budget.LedgerEntry(
            at=datetime.now(UTC),
            iteration_id=held.iteration_id,
            backend=held.backend,
            cost_usd=held.usd,
            cost_basis="reserved" if held.usd else "none",
        ),
    )
    if not held.usd:
        return []
    return [
        f"{held.iteration_id}: its spend was never reported; the ledger counts its reservation of ${held.usd:.2f}"
    ]


def _time(value: Any) -> datetime | None:
    with contextlib.suppress(TypeError, ValueError):
        return datetime.fromisoformat(str(value))
    return None


def _remove_stale_folders(ctx: Context) -> list[str]:
    """Exports, private object stores and agent homes left by a process that is gone."""
    notes: list[str] = []
    for folder in (ctx.paths.exports, ctx.paths.objects, ctx.paths.homes):
        if not folder.is_dir():
            continue
        for stale in sorted(folder.iterdir()):
            if stale.name == "tests":
                continue  # the empty HOME of test runs, shared by every run
            owner = next((int(p) for p in stale.name.split("-") if p.isdigit()), 0)
            if folder != ctx.paths.homes and owner and Path(f"/proc/{owner}").exists():
                continue  # a live `seed gaps` may be measuring there
            shutil.rmtree(stale, ignore_errors=True)
            notes.append(f"removed a stale {folder.name} folder {stale.name}")
    return notes


def recover(ctx: Context) -> list[str]:
    """Clean up after a daemon that died; every step is said in daemon.log and events.jsonl."""
    notes: list[str] = []
    journal = read_journal(ctx.paths.running)
    notes += end_leftovers(ctx, journal)
    repaired = ctx.store.repair()
    if repaired:
        notes.append(f"repaired at start: {repaired}")
    for fixed in (ctx.store.repair_events(), budget.repair(ctx.paths.history)):
        if fixed:
            notes.append(f"repaired at start: {fixed}")
    ctx.store.count()  # index the log, so malformed lines are found now
    for problem in ctx.store.problems[:20]:
        notes.append(f"a malformed record line is kept but skipped: {problem}")
    if journal is not None:
        notes += finish_iteration(ctx, journal)
        ctx.paths.running.unlink(missing_ok=True)
    elif Checkout(ctx.paths.root, ctx.paths.state, ()).saved() is not None:
        notes += finish_iteration(ctx, {})
    for stale in agentgit.stale(ctx.paths):
        agentgit.remove(stale)
        notes.append(f"removed a stale checkout {stale.name}")
    if ctx.paths.worktrees.is_dir():  # left by a daemon from before checkouts had their own git
        for stale in sorted(ctx.paths.worktrees.iterdir()):
            gitops.worktree_remove(ctx.paths.root, stale)
            if stale.exists():
                shutil.rmtree(stale, ignore_errors=True)
            notes.append(f"removed a stale worktree {stale.name}")
        gitops.git(ctx.paths.root, "worktree", "prune", check=False)
    notes += _remove_stale_folders(ctx)
    # a local Ray instance's workers ran here: what those the kill ended left (a worker on
    # another machine tidies its own at its next job)
    scale = ctx.config.scale
    cache = Path(scale.worker_cache) if scale.worker_cache else worker.default_cache()
    notes += [f"removed what a Ray worker left: {name}" for name in worker.tidy(cache)]
    for branch in gitops.list_branches(ctx.paths.root, "seed/iter-"):
        gitops.delete_branch(ctx.paths.root, branch)
        notes.append(f"removed the branch {branch} of an unfinished iteration")
    for name in inbox.requeue_active(ctx.paths.inbox):
        notes.append(f"put inbox/{name} back in the queue")
    for note in notes:
        ctx.store.event("recovery", note)
        ctx.log(note)
    return notes

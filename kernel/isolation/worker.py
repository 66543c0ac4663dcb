"""The worker's side of a remote agent run (`remote.Job` in, `remote.Outcome` out).

On a Ray worker (or any machine the kernel hands a job to): a cached clone of the repository
per key, the base fetched into it from the kernel's bundle, a fresh agent checkout at the
base, the agent in its own bubblewrap sandbox (the checkout, the run folder and a private
HOME writable; nothing else), then the files it left as a binary patch against the base.
The checkout, run folder and HOME are removed after. A worker that cannot start bubblewrap
refuses the job and says why; it never runs the agent unsandboxed.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from kernel.fsutil import atomic_write_text, remove_any
from kernel.isolation import (
    agentgit,
    gitops,
    jails,
    procs,
    readback,
    relay,
    remote,
    sandbox,
    trees,
)
from kernel.isolation.paths import Paths

RESULT_CAP = 1_000_000
"""Bytes of the run's result file read (as agentrun reads a local one)."""


def default_cache() -> Path:
    """~/.cache/seed/workers of the user the worker runs as."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "seed" / "workers"


def work(job: remote.Job, bundle: bytes) -> remote.Outcome:
    """Run the job's agent sandboxed on this machine; the outcome, or why it was refused."""
    host = socket.gethostname()
    said = _refusal(job)
    if said:
        return remote.Outcome(job.candidate, host, refused=f"refused: {said}")
    cache = Path(job.cache) if job.cache else default_cache()
    with _locked(cache / "repos" / f"{job.repository}.lock"):
        paths = _clone(cache / "repos" / job.repository, bundle, job.base)
    for left in agentgit.stale(paths):
        remove_any(left)  # a worker killed mid-run left these (the name holds its pid)
    name = f"wt-{os.getpid()}-{job.candidate}"
    checkout = agentgit.create(paths, name, job.base)
    started = _started(job, checkout)
    if started:
        agentgit.remove(checkout)
        return remote.Outcome(job.candidate, host, refused=started)
    run_dir, home = cache / "runs" / name, cache / "homes" / name
    log = cache / "logs" / f"{name}.log"
    # model-only from another host: the gateway is the relay's socket, the door's at the kernel
    relayed = relay.Relay(relay.parse(job.relay), job.token) if job.relay else None
    gateway = relayed.socket if relayed is not None else Path(job.gateway)
    try:
        return _run(job, paths, checkout, (run_dir, home, log, gateway), host)
    finally:
        if relayed is not None:
            relayed.stop()
        for place in (checkout, run_dir, home, log, paths.objects / name):
            remove_any(place)


def _started(job: remote.Job, checkout: Path) -> str:
    """A repair round's starting files put into the fresh checkout; why not, if they do not go."""
    if not job.start:
        return ""
    done = gitops.git(checkout, "apply", "--whitespace=nowarn", "-", stdin=job.start, check=False)
    if done.ok:
        return ""
    said = (done.err_text() or done.text()).strip()[:500]
    return f"the repair round's starting files did not apply: {said}"


def _refusal(job: remote.Job) -> str:
    """Why this worker cannot take the job ('' when it can)."""
    if not remote.plain_name(job.repository) or not remote.plain_name(job.candidate):
        return "the job's repository or candidate is not a plain name"
    found = sandbox.available()
    if not found.ok:
        return f"no sandbox on this worker: {found.reason}"
    if job.network == "model-only" and job.relay:
        try:
            relay.parse(job.relay)
        except ValueError as exc:
            return f"model-only through the relay: {exc}"
    elif job.network == "model-only" and not Path(job.gateway).is_socket():
        return (
            f"model-only needs the kernel's gateway socket {job.gateway or '(none)'}, which is "
            "not on this worker, or the kernel's relay door (a job without one)"
        )
    return ""


def tidy(cache: Path) -> list[str]:
    """What workers killed mid-run left in this cache (each name holds its worker's pid, and
    that process is gone): checkouts and object folders of every clone, run folders, HOMEs and
    logs. Removed; their names returned. A live worker's are kept."""
    left: list[Path] = []
    for clone in sorted((cache / "repos").glob("*/.git")):
        paths = Paths(root=clone.parent, common=clone)
        for checkout in agentgit.stale(paths):
            left += [checkout, paths.objects / checkout.name]
    for kind in ("runs", "homes", "logs"):
        folder = cache / kind
        for entry in sorted(folder.iterdir()) if folder.is_dir() else ():
            owner = next((int(p) for p in entry.name.split("-") if p.isdigit()), 0)
            if owner and not procs.alive(owner):
                left.append(entry)
    removed = [place for place in left if place.exists() or place.is_symlink()]
    for place in removed:
        remove_any(place)
    return [place.name for place in removed]


@contextmanager
def _locked(path: Path) -> Generator[None]:
    """One job at a time fetches into a clone (two candidates may share a worker)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _clone(root: Path, bundle: bytes, base: str) -> Paths:
    """The cached clone holding `base` (fetched from the bundle when it lacks it)."""
    if not (root / ".git").is_dir():
        remove_any(root)
        root.mkdir(parents=True)
        gitops.git(root, "init", "--quiet", "--template=", str(root))
    paths = Paths(root=root, common=root / ".git")
    if gitops.git(root, "cat-file", "-e", f"{base}^{{commit}}", check=False).ok:
        return paths
    incoming = root / ".git" / "incoming.bundle"
    incoming.write_bytes(bundle)
    try:
        gitops.git(root, "bundle", "unbundle", str(incoming))
    finally:
        incoming.unlink(missing_ok=True)
    # a ref keeps the base from a later gc
    gitops.git(root, "update-ref", f"refs/seed/bases/{base}", base)
    return paths


def _run(
    job: remote.Job,
    paths: Paths,
    checkout: Path,
    places: tuple[Path, Path, Path, Path],
    host: str,
) -> remote.Outcome:
    """The agent in its sandbox, then its files as a patch."""
    run_dir, home, log, gateway = places
    for folder in (run_dir, home):
        remove_any(folder)
        folder.mkdir(parents=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    prompt, plan, result = run_dir / "prompt.md", run_dir / "plan.json", run_dir / "result.json"
    atomic_write_text(prompt, job.prompt)
    atomic_write_text(plan, job.plan)
    argv, env = _command(job, paths, checkout, run_dir)
    jailed = jails.agent_sandbox(
        argv,
        paths=paths,
        guard=job.guard,
        writable=(checkout, run_dir, *jails.extra_writable(paths)),
        readonly=(prompt, plan),
        home=home,
        home_binds=job.home,
        cwd=checkout,
        network="model-only" if job.network == "model-only" else "full",
        gateway=gateway if job.network == "model-only" else None,
    )
    completed = procs.run(
        jailed.argv,
        cwd=checkout,
        timeout_s=job.timeout_s,
        env=procs.child_env({**env, **jailed.env}),
        merge_stderr=True,
        log_path=log,
        max_bytes=job.log_cap,
        # no sweep: its PID namespace ends every process of the run, and the sweep would end
        # the Ray worker's own children (and their process group, which is the worker's)
        sweep_rounds=0,
    )
    found = readback.read(Path(result.name), RESULT_CAP, within=run_dir)
    said = readback.read(log, job.log_cap).text()
    ran = remote.Outcome(
        job.candidate,
        host,
        log=said,
        result=found.text() if found.ok else "",
        exit_code=completed.exit_code,
        timed_out=completed.timed_out,
        duration_s=completed.duration_s,
    )
    return _patched(job, paths, checkout, ran)


def _command(
    job: remote.Job, paths: Paths, checkout: Path, run_dir: Path
) -> tuple[list[str], dict[str, str]]:
    """The agent's argv with its placeholders filled, and its environment (the contract's)."""
    prompt, plan, result = run_dir / "prompt.md", run_dir / "plan.json", run_dir / "result.json"
    values = {
        "{prompt_file}": str(prompt),
        "{plan_file}": str(plan),
        "{worktree}": str(checkout),
        "{iteration_id}": job.iteration_id,
        "{run_dir}": str(run_dir),
        "{result_file}": str(result),
    }
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}
    env.update(job.env)
    env.update(
        {
            "SEED_PROMPT_FILE": str(prompt),
            "SEED_PLAN_FILE": str(plan),
            "SEED_WORKTREE": str(checkout),
            "SEED_ITERATION_ID": job.iteration_id,
            "SEED_RESULT_FILE": str(result),
            "SEED_RUN_DIR": str(run_dir),
            "SEED_ROUND": str(job.round),
            **agentgit.env(paths),
        }
    )
    return [_fill(a, values) for a in job.argv], env


def _patched(job: remote.Job, paths: Paths, checkout: Path, ran: remote.Outcome) -> remote.Outcome:
    """The outcome with the files the agent left as a binary patch against the base."""
    store = trees.ObjectStore(paths.objects / checkout.name, paths.common / "objects")
    diffed = remote.diff(paths.root, checkout, job.base, store, job.patch_max)
    if diffed.oversized:
        return replace(ran, oversized=diffed.oversized)
    if diffed.over:
        return replace(ran, refused=f"the patch is {diffed.over:,} bytes, over {job.patch_max:,}")
    return replace(ran, patch=diffed.patch)


def _fill(arg: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        arg = arg.replace(key, value)
    return arg

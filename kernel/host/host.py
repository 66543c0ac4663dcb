"""The module host's life: start `python -m modules` (the module server), talk JSON lines,
validate every answer, boot with the self-check, reload after a landed module change, and
fall back to the last commit whose modules passed the self-check.

Improvable code never runs in the kernel's process, nor outside the sandbox: the module server
and the self-check run in the test-run profile (kernel/isolation/jails.py module_jail), with nothing
writable, no network or sockets, an empty HOME and an allow-listed environment; the kernel
sends it facts (which agent CLIs are installed) instead. Every answer is validated
(kernel/host/answers.py) before the kernel uses it; a host that dies or answers nonsense is a
HostError.
Module code always runs from a copy the kernel made (`frozen_code`): HEAD's packages (or, with
edits not committed, the folder's), a generation's under test, the last good commit's; each
in a fresh folder under <git-common-dir>/seed/code/, bound read-only at seed's own folder in
the sandbox (`jails.ModuleJail`), so a run that is measured cannot be told from one that is used.
The last good commit is the ref refs/seed/last-good in seed's own repository: HEAD, once its
modules pass the self-check, when the module server's code there is a person's (the commit
that last changed it is one the kernel did not make) or a generation that passed the fitness
gate (`vouched`). The kernel itself never falls back: it is protected and only people change it.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from domain import (
    AgentContext,
    AgentReport,
    AnalysisInput,
    DaemonStatus,
    GapReport,
    HistoryDigest,
    HistoryListing,
    InboxItem,
    InboxText,
    IterationPlan,
    IterationRecord,
    MetricsSnapshot,
    PlanningOrder,
    ProjectState,
    RunResult,
    RunSpec,
)
from kernel.contracts import CONTRACT_VERSIONS, HOST_PROTOCOL
from kernel.errors import HostError, Interrupted
from kernel.fsutil import atomic_write_text, remove_any
from kernel.host.answers import (
    AgentInfo,
    Backend,
    agent_list,
    agent_order,
    backend_choice,
    inbox_readings,
    kernel_gap,
    planning_order,
    shown,
    valid,
)
from kernel.isolation import gitops, procs, trees
from kernel.isolation.jails import ModuleJail
from kernel.isolation.paths import Paths
from kernel.records.commitmsg import TRAILER
from kernel.records.store import RecordStore

_DATA = frozenset({"analyze", "plan", "agent_spec", "order"})
"""Answers kept as they are: the gaps, the plan and the planning order name the tree's paths and the kernel's own
gap keys, the run spec the machine's argv. What of them is shown goes through a rendering
(cleaned as every other answer) or the terminal's sink (`kernel/terminal.py`)."""
LAST_GOOD_REF = "refs/seed/last-good"
GENERATION_REF = "refs/seed/generation/"
"""A landed generation's commit: refs/seed/generation/N (a write of the kernel's own)."""
RELOAD_PATHS = ("modules/", "domain/")
"""A landed change under these paths reloads the module host (when seed works on itself;
kernel/, the server's third package, is protected there)."""
SERVER_PACKAGES = ("modules", "domain", "kernel")
"""The only names the module server imports from its code folder."""
# `python -I` (no PYTHONPATH, no script or working folder on sys.path, no user site): the
# server's own packages come from the code folder and nothing else does, so a file at the
# tree's root (a `json.py`, a `pydantic/`) can never stand in for what the server imports
_LAUNCH = f"""\
import importlib.machinery, runpy, sys
_code, _own = sys.argv.pop(1), {SERVER_PACKAGES!r}
class _Own:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if path is not None or name not in _own:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, [_code])
        if spec is None:
            raise ModuleNotFoundError(f"{{name}} is not in {{_code}}", name=name)
        return spec
sys.meta_path.insert(0, _Own)
runpy.run_module("modules", run_name="__main__", alter_sys=True)
"""


@dataclass(frozen=True)
class BootNeeds:
    """What the host's boot needs from the command that runs it (the host never imports Context)."""

    paths: Paths
    store: RecordStore
    log: Callable[[str], None]
    selfcheck: Callable[[Path, Path, ModuleJail | None], tuple[bool, str]]
    """kernel.host.selfcheck.selfcheck, passed in: the self-check starts hosts of its own."""
    jail: ModuleJail | None = None
    """The module server's sandbox (None: the sandbox is off or missing here)."""


def installed_clis(listed: dict[str, AgentInfo]) -> dict[str, str]:
    """Each listed agent's program found on the daemon's PATH, by name, with where it is."""
    found: dict[str, str] = {}
    for info in listed.values():
        name = info.executable
        where = shutil.which(name) if name else None
        if where:
            found[name] = where
    return found


def _seed_repo(home: Path) -> Path | None:
    result = gitops.git(home, "rev-parse", "--show-toplevel", check=False)
    return Path(result.text().strip()).resolve() if result.ok else None


def _code_is_committed(repo: Path) -> bool:
    """Whether modules/ and domain/ in seed's checkout are exactly HEAD's (so HEAD is what was checked)."""
    status = gitops.git(repo, "status", "--porcelain", "--", "modules", "domain", check=False)
    return status.ok and not status.text().strip()


def _fallback_dir(repo: Path) -> Path:
    return gitops.common_dir(repo) / "seed" / "last-good"


def frozen_code(
    paths: Paths,
    tree: str = "",
    store: trees.ObjectStore | None = None,
    folder: Path | None = None,
) -> Path:
    """A fresh folder of the kernel's holding the module server's packages: those of `tree`
    (a commit or tree of seed's repository, from its objects or `store`'s), else those of
    `folder` (seed's own by default) as they are on disk. Named by no fact of what it holds."""
    where = paths.state / "code"
    _sweep_code(where)
    dest = where / f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    dest.mkdir(parents=True)
    if tree:
        trees.export_tree(paths.seed_home, tree, dest, store, only=SERVER_PACKAGES)
        return dest
    for name in SERVER_PACKAGES:
        if (source := (folder or paths.seed_home) / name).is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _sweep_code(where: Path) -> None:
    """Remove copies of module code left by processes that are gone."""
    with contextlib.suppress(OSError):
        for old in where.iterdir():
            owner = old.name.split("-", 1)[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                remove_any(old)


def own_code(paths: Paths) -> Path:
    """The copy of seed's own module code a command runs: HEAD's packages when they are
    what the folder holds, else the folder's (a person's edits not committed)."""
    repo = _seed_repo(paths.seed_home)
    if repo is not None and repo == paths.seed_home.resolve() and _code_is_committed(repo):
        head = gitops.head(repo)
        if head:
            return frozen_code(paths, head)
    return frozen_code(paths)


def vouched(repo: Path, commit: str) -> bool:
    """Whether the module server's code at commit may become the last good one: the commit
    that last changed it is a person's (without the kernel's trailer), or a generation that
    passed the fitness gate; never a change of the kernel's that was not measured."""
    last = gitops.git(repo, "log", "-1", "--format=%H", commit, "--", *SERVER_PACKAGES, check=False)
    changer = last.text().strip()
    if not last.ok or not changer:
        return False
    said = gitops.git(
        repo, "log", "-1", f"--format=%(trailers:key={TRAILER},valueonly)", changer, check=False
    )
    if said.ok and not said.text().strip():
        return True
    kept = gitops.git(
        repo,
        "for-each-ref",
        "--points-at",
        changer,
        "--format=%(refname)",
        GENERATION_REF,
        check=False,
    )
    return kept.ok and bool(kept.text().strip())


def _start(host: ModuleHost, needs: BootNeeds, code_dir: Path, check: bool) -> tuple[bool, str]:
    """Start a host from code_dir, a copy of the kernel's that the host then owns (after its
    self-check when check is set); (ok, why not)."""
    evidence = "started"
    fresh = ModuleHost(code_dir, needs.paths.state / "host.log", jail=needs.jail, frozen=True)
    if check:
        ok, evidence = needs.selfcheck(code_dir, needs.paths.state / "selfcheck.log", needs.jail)
        if not ok:
            fresh.stop()
            return False, f"self-check failed: {evidence}"
    try:
        fresh.start()
    except HostError as exc:
        fresh.stop()
        return False, str(exc)
    host.adopt(fresh)
    return True, evidence


def boot(host: ModuleHost, needs: BootNeeds, *, record: bool = True) -> str:
    """Start the module host from seed's own code, or from the last good commit if that fails.

    Returns what happened, for the log. record=False (read-only commands) skips the
    self-check and leaves no event, inbox item or ref behind.
    """
    home = needs.paths.seed_home
    ok, why = _start(host, needs, own_code(needs.paths), check=record)
    repo = _seed_repo(home)
    if ok:
        if record and repo is not None and _code_is_committed(repo):
            head = gitops.head(repo)
            if head and vouched(repo, head):
                gitops.git(repo, "update-ref", LAST_GOOD_REF, head)
        _drop_fallback_worktree(repo)
        return f"modules loaded from {home} ({why})"
    if repo is None:
        raise HostError(
            f"the modules in {home} do not load and there is no git history to fall back to: {why}"
        )
    return _fall_back(host, needs, repo, why, record)


def _fall_back(host: ModuleHost, needs: BootNeeds, repo: Path, why: str, record: bool) -> str:
    """Start the modules of refs/seed/last-good (recording the fallback when record is set)."""
    home = needs.paths.seed_home
    good = gitops.git(
        repo, "rev-parse", "--verify", "--quiet", f"{LAST_GOOD_REF}^{{commit}}", check=False
    )
    if not good.ok:
        raise HostError(
            f"the modules in {home} do not load and no commit has passed the self-check yet: {why}"
        )
    commit = good.text().strip()
    _drop_fallback_worktree(repo)  # where an older daemon exported it
    started, fallback_why = _start(host, needs, frozen_code(needs.paths, commit), check=False)
    if not started:
        raise HostError(
            f"the modules in {home} do not load ({why}), nor do those of {commit[:12]}: {fallback_why}"
        )
    head = gitops.head(repo) or "HEAD"
    message = (
        f"the modules at {head[:12]} do not load ({why}); running the modules of {commit[:12]}"
    )
    if record:
        needs.store.event("module_fallback", message, reason=why, last_good=commit)
        _report_breakage(needs, repo, why, commit)
    return message


def _drop_fallback_worktree(repo: Path | None) -> None:
    if repo is None:
        return
    where = _fallback_dir(repo)
    if where.exists() or where.is_symlink():
        remove_any(where)
        # a worktree an older daemon made there
        gitops.git(repo, "worktree", "prune", check=False)


def _report_breakage(needs: BootNeeds, repo: Path, why: str, last_good: str) -> None:
    """Drop an inbox item that describes the breakage, so the loop repairs it (once per HEAD)."""
    head = gitops.head(repo) or "unknown"
    name = f"module-fallback-{head[:12]}.md"
    inbox = needs.paths.inbox
    if any((inbox / folder / name).exists() for folder in ("", ".active", "done", "failed")):
        return
    text = (
        "+++\n"
        f'title = "Repair the modules: they fail to load at {head[:12]}"\n'
        'priority = "critical"\n'
        "+++\n"
        f"The module host could not start from the modules at commit {head} "
        f"(self-check or import failure), so the daemon runs the modules of the last good commit {last_good} "
        f"instead.\n\nWhat failed:\n\n    {why}\n\n"
        "Find the change since the last good commit that breaks loading and fix it; "
        "`python seed.py selfcheck` must pass.\n"
    )
    inbox.mkdir(parents=True, exist_ok=True)
    atomic_write_text(inbox / name, text)
    needs.log(f"dropped inbox/{name} describing the module breakage ({datetime.now(UTC):%H:%M:%S})")


def needs_reload(paths: Paths, touched: Sequence[str]) -> bool:
    """A landed change that touched modules/ or domain/ of seed itself."""
    return paths.selfhost and any(path.startswith(RELOAD_PATHS) for path in touched)


def reload_after_landing(host: ModuleHost, needs: BootNeeds, touched: Sequence[str]) -> str:
    """Restart the host so the landed modules run (falling back if they do not load)."""
    if not needs_reload(needs.paths, touched):
        return ""
    message = boot(host, needs)
    needs.log(f"reloaded the module host after a landed module change: {message}")
    return message


def _planning(report: GapReport, records: Sequence[IterationRecord], state: ProjectState) -> str:
    """The planner's request, encoded by pydantic directly: a long history makes this the
    biggest request there is, and without default values, which the host fills in again."""
    records_json = ",".join(r.model_dump_json(exclude_defaults=True) for r in records)
    return (
        f'{{"report": {report.model_dump_json(exclude_defaults=True)}, '
        f'"records": [{records_json}], '
        f'"state": {state.model_dump_json(exclude_defaults=True)}}}'
    )


def _earlier(answered: Any, ident: int) -> bool:
    """The answer is to a request sent before this one."""
    return isinstance(answered, int) and not isinstance(answered, bool) and 0 < answered < ident


class ModuleHost:
    """A running `python -m modules` child and the requests the kernel sends it."""

    def __init__(
        self,
        code_dir: Path,
        log_path: Path,
        timeout_s: float = 300.0,
        jail: ModuleJail | None = None,
        frozen: bool = False,
    ) -> None:
        self.code_dir = code_dir
        self.jail = jail
        """The sandbox every run of module code goes through (None: the sandbox is off)."""
        self.frozen = frozen
        """code_dir is a copy of the kernel's (`frozen_code`), removed when the process ends."""
        self.log_path = log_path
        self.timeout_s = timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._next_id = 1
        self._lock = threading.Lock()
        """One request at a time: the pipe is one conversation (kernel/loop/liveuse.py asks from a
        thread of its own while the agent runs)."""
        self.hello: dict[str, Any] = {}

    @property
    def place(self) -> Path:
        """Where the module server sees its own folder (seed's, in the sandbox)."""
        return self.jail.place if self.jail is not None else self.code_dir

    @property
    def running(self) -> bool:
        """The host process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> dict[str, Any]:
        """Start the host and check its greeting: protocol and contract versions must match."""
        self._end()
        # the allow-list (no credential of the daemon's), HOME an empty tmpfs in the sandbox
        env = procs.run_env()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        try:
            argv = [sys.executable, "-I", "-B", "-u", "-c", _LAUNCH, str(self.place)]
            self._proc = subprocess.Popen(
                self.jail(argv, self.code_dir) if self.jail is not None else argv,
                cwd=self.code_dir,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        finally:
            log.close()
        procs.register_known(self._proc.pid)
        self._buffer = b""
        greeting = self._read(self.timeout_s)
        if not greeting.get("ok"):
            error = cast(dict[str, Any], greeting.get("error") or {})
            self.stop()
            raise HostError(
                f"module host refused to start: {error.get('type')}: {error.get('message')}"
            )
        hello = cast(dict[str, Any], greeting.get("result") or {})
        if hello.get("protocol") != HOST_PROTOCOL:
            self.stop()
            raise HostError(
                f"module host speaks protocol {hello.get('protocol')!r}, kernel {HOST_PROTOCOL}"
            )
        if hello.get("contracts") != CONTRACT_VERSIONS:
            self.stop()
            raise HostError(
                f"module host contracts {hello.get('contracts')} differ from the kernel's {CONTRACT_VERSIONS}"
            )
        self.hello = hello
        return hello

    def stop(self) -> None:
        """Ask the host to exit, then end its process group (and remove the kernel's copy of
        its code: a frozen host is not started again)."""
        self._end()
        if self.frozen:
            remove_any(self.code_dir)

    def _end(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        with contextlib.suppress(OSError, ValueError):
            if proc.poll() is None and proc.stdin is not None:
                proc.stdin.write(b'{"id": -1, "method": "shutdown"}\n')
                proc.stdin.flush()
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            procs.end_group(proc.pid, grace_s=1.0)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=3)
        procs.end_group(proc.pid, grace_s=0.2)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        procs.forget_known(proc.pid)

    def adopt(self, other: ModuleHost) -> None:
        """Take over other's running process (a host started from other code), ending this one's."""
        self.stop()
        self.code_dir, self.jail, self.log_path = other.code_dir, other.jail, other.log_path
        self.timeout_s, self.hello, self.frozen = other.timeout_s, other.hello, other.frozen
        self._proc, self._buffer, self._next_id = other._proc, other._buffer, other._next_id
        other._proc, other.frozen = None, False

    def _read(self, timeout_s: float) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdout is None:
            raise HostError("module host is not running")
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                if procs.STOP.is_set():
                    raise Interrupted("interrupted while waiting for the module host")
                if time.monotonic() > deadline:
                    self.stop()
                    raise HostError(f"module host gave no answer within {timeout_s:.0f}s")
                if selector.select(timeout=0.1):
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        code = proc.poll()
                        raise HostError(f"module host exited (code {code}); see {self.log_path}")
                    self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            return cast(dict[str, Any], json.loads(line))
        except json.JSONDecodeError as exc:
            raise HostError(
                f"module host wrote something that is not JSON: {line[:200]!r}"
            ) from exc

    def call(
        self, method: str, params: dict[str, Any] | str, timeout_s: float | None = None
    ) -> Any:
        """Send one request and return its result (raises HostError on an error answer).

        params may be given already encoded, as the text of a JSON object."""
        encoded = params if isinstance(params, str) else json.dumps(params)
        with self._lock:
            return self._call(method, encoded, timeout_s)

    def _call(self, method: str, encoded: str, timeout_s: float | None) -> Any:
        if not self.running:
            raise HostError("module host is not running")
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        ident = self._next_id
        self._next_id += 1
        payload = f'{{"id": {ident}, "method": {json.dumps(method)}, "params": {encoded}}}\n'
        try:
            proc.stdin.write(payload.encode("utf-8"))
            proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise HostError(f"module host is gone: {exc}") from exc
        answer = self._read(timeout_s or self.timeout_s)
        while _earlier(answer.get("id"), ident):
            # the answer to a request whose caller stopped waiting (interrupted): not this one's
            answer = self._read(timeout_s or self.timeout_s)
        if answer.get("id") != ident:
            raise HostError(f"module host answered request {answer.get('id')!r}, expected {ident}")
        if not answer.get("ok"):
            error = cast(dict[str, Any], answer.get("error") or {})
            raise HostError(
                f"module host: {method} failed: {error.get('type')}: {error.get('message')}"
            )
        result = answer.get("result")
        return result if method in _DATA else shown(result)

    def analyze(self, inputs: AnalysisInput) -> GapReport:
        """Gaps, ranked."""
        return valid(
            GapReport, self.call("analyze", {"input": inputs.model_dump(mode="json")}), "GapReport"
        )

    def read_inbox(self, tasks: list[InboxText]) -> list[InboxItem | str]:
        """Each inbox task read by the modules: an item within the bounds, or why it is set aside."""
        if not tasks:
            return []
        params = {"tasks": [t.model_dump(mode="json") for t in tasks]}
        return inbox_readings(self.call("read_inbox", params), tasks)

    def plan(
        self, report: GapReport, records: Sequence[IterationRecord], state: ProjectState
    ) -> IterationPlan | None:
        """The planner's plan, or None."""
        value = self.call("plan", _planning(report, records, state))
        if value is None:
            return None
        return agent_order(kernel_gap(valid(IterationPlan, value, "IterationPlan"), report), state)

    def order(
        self, report: GapReport, records: Sequence[IterationRecord], state: ProjectState
    ) -> PlanningOrder | None:
        """The planner's order of the report's gaps (None: its modules have none)."""
        try:
            value = self.call("order", _planning(report, records, state))
        except HostError as exc:
            if "order failed: UnknownMethod" in str(exc):
                return None  # an older module server (a fallback to the last good modules)
            raise
        return None if value is None else planning_order(value, report)

    def agents(self) -> tuple[dict[str, AgentInfo], tuple[str, ...]]:
        """Every backend the host knows, and the auto-detection order."""
        return agent_list(self.call("agents", {}))

    def choose_backend(
        self, wanted: str, config_name: str, listed: dict[str, AgentInfo]
    ) -> Backend:
        """The backend to use for the configured name, checked against listed. The module
        server sees no PATH or HOME of the person's: the kernel looks up each listed agent's
        program itself and sends what it found (program -> path, absent when not installed)."""
        params = {
            "wanted": wanted,
            "config_name": config_name,
            "installed": installed_clis(listed),
            "path": "",  # the field older modules read; they find nothing on it
        }
        return backend_choice(self.call("choose_backend", params), wanted, listed)

    def agent_spec(
        self, backend: str, plan: IterationPlan, context: AgentContext
    ) -> RunSpec | None:
        """The adapter's run spec (None: the backend only writes plans)."""
        value = self.call(
            "agent_spec",
            {
                "backend": backend,
                "plan": plan.model_dump(mode="json"),
                "context": context.model_dump(mode="json"),
            },
        )
        return None if value is None else valid(RunSpec, value, "RunSpec")

    def agent_parse(self, backend: str, plan: IterationPlan, result: RunResult) -> AgentReport:
        """The adapter's reading of the run."""
        value = self.call(
            "agent_parse",
            {
                "backend": backend,
                "plan": plan.model_dump(mode="json"),
                "result": result.model_dump(mode="json"),
            },
        )
        return valid(AgentReport, value, "AgentReport")

    def render_record(self, record: IterationRecord) -> str:
        """report.md for one record."""
        value = cast(
            dict[str, Any], self.call("render_record", {"record": record.model_dump(mode="json")})
        )
        markdown = value.get("markdown")
        if not isinstance(markdown, str):
            raise HostError("module host returned a report that is not text")
        return markdown

    def render_index(self, digest: HistoryDigest) -> str:
        """history/README.md for a digest of the latest iterations."""
        return self._text("render_index", digest, "index")

    def render_dashboard(self, digest: HistoryDigest) -> str:
        """history/index.html for a digest of every iteration."""
        return self._text("render_dashboard", digest, "dashboard")

    def _text(self, method: str, digest: HistoryDigest, what: str) -> str:
        value = cast(dict[str, Any], self.call(method, {"digest": digest.model_dump(mode="json")}))
        text = value.get("text")
        if not isinstance(text, str):
            raise HostError(f"module host returned a {what} that is not text")
        return text

    def render_status(self, status: DaemonStatus, now: datetime) -> str:
        """The text of `status`."""
        params = {"status": status.model_dump(mode="json"), "now": now.isoformat()}
        return self._rendered("render_status", params, "status view")

    def render_listing(self, listing: HistoryListing) -> str:
        """The text of `history`."""
        params = {"listing": listing.model_dump(mode="json")}
        return self._rendered("render_listing", params, "history view")

    def render_metrics(self, snapshot: MetricsSnapshot) -> str:
        """The Prometheus text of the metrics endpoint."""
        params = {"snapshot": snapshot.model_dump(mode="json")}
        return self._rendered("render_metrics", params, "metrics page")

    def _rendered(self, method: str, params: dict[str, Any], what: str) -> str:
        value = self.call(method, params)
        text = cast(dict[str, Any], value).get("text") if isinstance(value, dict) else None
        if not isinstance(text, str):
            raise HostError(f"module host returned a {what} that is not text")
        return text

"""The kernel's side of the module host: start `python -m modules`, talk JSON lines, validate.

Improvable code never runs in the kernel's process. Every answer is validated against the
domain models before the kernel uses it; a host that dies or answers nonsense is a HostError.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from domain import (
    AgentContext,
    AgentReport,
    AnalysisInput,
    DaemonStatus,
    GapReport,
    HistoryDigest,
    HistoryListing,
    IterationPlan,
    IterationRecord,
    MetricsSnapshot,
    ProjectState,
    RunResult,
    RunSpec,
)
from kernel import procs
from kernel.contracts import CONTRACT_VERSIONS, HOST_PROTOCOL
from kernel.errors import HostError, Interrupted
from kernel.toolenv import Jail

M = TypeVar("M", bound=BaseModel)

_ENV_KEEP = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    "SEED_DEPTH",
    "SEED_DAEMON_TOKEN",  # so a restarted daemon can find a host its dead predecessor left
)


@dataclass(frozen=True)
class AgentInfo:
    """What the host says about one agent backend."""

    name: str
    executable: str
    sources: tuple[str, ...]


class ModuleHost:
    """A running `python -m modules` child and the requests the kernel sends it."""

    def __init__(
        self, code_dir: Path, log_path: Path, timeout_s: float = 300.0, jail: Jail | None = None
    ) -> None:
        self.code_dir = code_dir
        self.jail = jail
        """The sandbox for module code that has not landed yet (the self-check of a candidate)."""
        self.log_path = log_path
        self.timeout_s = timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._next_id = 1
        self.hello: dict[str, Any] = {}

    @property
    def running(self) -> bool:
        """The host process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> dict[str, Any]:
        """Start the host and check its greeting: protocol and contract versions must match."""
        self.stop()
        env = {k: v for k, v in procs.child_env().items() if k in _ENV_KEEP}
        env.update(PYTHONPATH=str(self.code_dir), PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        try:
            argv = [sys.executable, "-m", "modules"]
            self._proc = subprocess.Popen(
                self.jail(argv, (self.code_dir,)) if self.jail is not None else argv,
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
        """Ask the host to exit, then end its process group."""
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
        if not self.running:
            raise HostError("module host is not running")
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        ident = self._next_id
        self._next_id += 1
        encoded = params if isinstance(params, str) else json.dumps(params)
        payload = f'{{"id": {ident}, "method": {json.dumps(method)}, "params": {encoded}}}\n'
        try:
            proc.stdin.write(payload.encode("utf-8"))
            proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise HostError(f"module host is gone: {exc}") from exc
        answer = self._read(timeout_s or self.timeout_s)
        if answer.get("id") != ident:
            raise HostError(f"module host answered request {answer.get('id')!r}, expected {ident}")
        if not answer.get("ok"):
            error = cast(dict[str, Any], answer.get("error") or {})
            raise HostError(
                f"module host: {method} failed: {error.get('type')}: {error.get('message')}"
            )
        return answer.get("result")

    @staticmethod
    def _valid(model: type[M], value: Any, what: str) -> M:
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise HostError(
                f"module host returned an invalid {what}: {where}: {first['msg']}"
            ) from exc

    def analyze(self, inputs: AnalysisInput) -> GapReport:
        """Gaps, ranked."""
        return self._valid(
            GapReport, self.call("analyze", {"input": inputs.model_dump(mode="json")}), "GapReport"
        )

    def plan(
        self, report: GapReport, records: Sequence[IterationRecord], state: ProjectState
    ) -> IterationPlan | None:
        """The planner's plan, or None."""
        # encoded by pydantic directly: a long history makes this the biggest request there is
        # and without default values, which the host's validation fills in again
        records_json = ",".join(r.model_dump_json(exclude_defaults=True) for r in records)
        params = (
            f'{{"report": {report.model_dump_json(exclude_defaults=True)}, '
            f'"records": [{records_json}], '
            f'"state": {state.model_dump_json(exclude_defaults=True)}}}'
        )
        value = self.call("plan", params)
        return None if value is None else self._valid(IterationPlan, value, "IterationPlan")

    def agents(self) -> tuple[dict[str, AgentInfo], tuple[str, ...]]:
        """Every backend the host knows, and the auto-detection order."""
        value = cast(dict[str, Any], self.call("agents", {}))
        info: dict[str, AgentInfo] = {}
        for name, raw in cast(dict[str, dict[str, Any]], value.get("agents", {})).items():
            info[str(name)] = AgentInfo(
                name=str(name),
                executable=str(raw.get("executable", "")),
                sources=tuple(str(s) for s in cast(list[Any], raw.get("sources", []))),
            )
        order = tuple(str(n) for n in cast(list[Any], value.get("auto_order", [])))
        return info, order

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
        return None if value is None else self._valid(RunSpec, value, "RunSpec")

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
        return self._valid(AgentReport, value, "AgentReport")

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

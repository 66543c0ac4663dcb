"""The module server: loads modules, checks them against the kernel's contracts, serves requests.

It is the process the kernel's module host (kernel/host/host.py) starts with `python -m modules`.

One JSON object per line on stdin: {"id": n, "method": "...", "params": {...}}; one per
line on stdout: {"id": n, "ok": true, "result": ...} or {"id": n, "ok": false, "error":
{"type": "...", "message": "..."}}. Anything else a module prints goes to stderr.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import traceback
from collections.abc import Callable
from datetime import datetime
from typing import Any, TextIO, cast

from pydantic import BaseModel

from domain import (
    AgentContext,
    AnalysisInput,
    DaemonStatus,
    Gap,
    GapReport,
    HistoryDigest,
    HistoryListing,
    InboxText,
    IterationPlan,
    IterationRecord,
    MetricsSnapshot,
    ProjectState,
    RunResult,
)
from kernel.contracts import (
    CONTRACT_VERSIONS,
    HOST_PROTOCOL,
    Agent,
    Analyzer,
    InboxReader,
    Planner,
    Ranker,
    Reporter,
)
from modules import registry
from modules.agents.choose import choose_backend

_PROTOCOLS: dict[str, type] = {
    "analyzer": Analyzer,
    "inbox_reader": InboxReader,
    "ranker": Ranker,
    "planner": Planner,
    "agent": Agent,
    "reporter": Reporter,
}


class ContractError(TypeError):
    """A module does not satisfy its kernel contract."""


def check_contract(kind: str, target: str, obj: object) -> None:
    """Refuse a module that lacks a member of its Protocol or declares another version."""
    protocol = _PROTOCOLS[kind]
    members = [
        name
        for name in dir(protocol)
        if not name.startswith("_") and name not in {"contract_version"}
    ] + list(getattr(protocol, "__annotations__", {}))
    missing = sorted({m for m in members if not hasattr(obj, m)})
    if missing:
        raise ContractError(
            f"{target} does not satisfy the {kind} contract: missing {', '.join(missing)}"
        )
    version = getattr(obj, "contract_version", None)
    if version != CONTRACT_VERSIONS[kind]:
        raise ContractError(
            f"{target} declares {kind} contract version {version!r}; "
            f"the kernel speaks {CONTRACT_VERSIONS[kind]}"
        )
    for name in dir(protocol):
        expected = getattr(protocol, name, None)
        if name.startswith("_") or not inspect.isfunction(expected):
            continue
        actual = getattr(obj, name)
        if not callable(actual):
            raise ContractError(f"{target}.{name} must be callable")
        want = len(inspect.signature(expected).parameters) - 1  # without self
        try:
            have = inspect.signature(actual).parameters
        except (TypeError, ValueError):
            continue
        required = [
            p
            for p in have.values()
            if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if len(required) > want or len(have) < want:
            raise ContractError(
                f"{target}.{name} takes {len(have)} arguments; the contract passes {want}"
            )


def load(kind: str, target: str) -> Any:
    """Import a module through the registry and check it against its contract."""
    obj = registry.resolve(target)
    check_contract(kind, target, obj)
    return obj


class Server:
    """The loaded modules and the request handlers."""

    def __init__(self) -> None:
        self.analyzers: list[Analyzer] = [load("analyzer", t) for t in registry.ANALYZERS.values()]
        self.ranker: Ranker = load("ranker", registry.RANKER)
        self.inbox_reader: InboxReader = load("inbox_reader", registry.INBOX_READER)
        self.planner: Planner = load("planner", registry.PLANNER)
        self.reporter: Reporter = load("reporter", registry.REPORTER)
        self.agents: dict[str, Agent] = {}

    def agent(self, name: str) -> Agent:
        """An agent backend, loaded and checked on first use."""
        if name not in self.agents:
            self.agents[name] = load("agent", registry.agent_target(name))
        return self.agents[name]

    def hello(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "protocol": HOST_PROTOCOL,
            "contracts": CONTRACT_VERSIONS,
            "pid": os.getpid(),
            "analyzers": [a.name for a in self.analyzers],
        }

    def agents_info(self, params: dict[str, Any]) -> dict[str, Any]:
        info: dict[str, Any] = {}
        for name in registry.AGENTS:
            agent = self.agent(name)
            info[name] = {"executable": agent.executable, "sources": list(agent.sources)}
        return {
            "agents": info,
            "auto_order": [n for n in registry.AUTO_ORDER if n in registry.AGENTS],
        }

    def choose_backend(self, params: dict[str, Any]) -> dict[str, Any]:
        wanted = str(params["wanted"])
        names = [wanted] if wanted != "auto" else list(registry.AGENTS)
        agents = {name: self.agent(name) for name in names if name in registry.AGENTS}
        order = [n for n in registry.AUTO_ORDER if n in registry.AGENTS]
        installed = cast(dict[str, Any], params.get("installed") or {})
        found = {str(k): str(v) for k, v in installed.items()}
        return choose_backend(wanted, str(params["config_name"]), found, agents, order)

    def analyze(self, params: dict[str, Any]) -> BaseModel:
        inputs = AnalysisInput.model_validate(params["input"])
        gaps: list[Gap] = []
        errors: list[str] = []
        for analyzer in self.analyzers:
            try:
                gaps.extend(analyzer.analyze(inputs))
            except Exception as exc:  # one broken analyser must not hide the others' gaps
                errors.append(f"analyser {analyzer.name} failed: {type(exc).__name__}: {exc}")
                traceback.print_exc(file=sys.stderr)
        report = self.ranker.rank(gaps, inputs)
        if errors:
            report = report.model_copy(update={"errors": (*report.errors, *errors)})
        return report

    def read_inbox(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Each task read: {"item": ...} or {"rejected": the reader's reason}."""
        answers: list[dict[str, Any]] = []
        for raw in params["tasks"]:
            task = InboxText.model_validate(raw)
            try:
                answers.append({"item": self.inbox_reader.read(task).model_dump(mode="json")})
            except ValueError as exc:  # the reader's reason, for the person who wrote the task
                answers.append({"rejected": str(exc)})
        return answers

    def plan(self, params: dict[str, Any]) -> BaseModel | None:
        report = GapReport.model_validate(params["report"])
        records = [IterationRecord.model_validate(r) for r in params.get("records", [])]
        state = ProjectState.model_validate(params["state"])
        return self.planner.plan(report, records, state)

    def order(self, params: dict[str, Any]) -> BaseModel | None:
        """The planner's order of the gaps (None from a planner that has none: the kernel then
        shows the ranking's order)."""
        order = getattr(self.planner, "order", None)
        if order is None:
            return None
        report = GapReport.model_validate(params["report"])
        records = [IterationRecord.model_validate(r) for r in params.get("records", [])]
        return order(report, records, ProjectState.model_validate(params["state"]))

    def agent_spec(self, params: dict[str, Any]) -> BaseModel | None:
        plan = IterationPlan.model_validate(params["plan"])
        # the prompt is the planner's, rendered from the plan the kernel clamped
        plan = plan.model_copy(update={"prompt": self.planner.prompt(plan)})
        context = AgentContext.model_validate(params["context"])
        return self.agent(str(params["backend"])).run_spec(plan, context)

    def agent_parse(self, params: dict[str, Any]) -> BaseModel:
        plan = IterationPlan.model_validate(params["plan"])
        result = RunResult.model_validate(params["result"])
        return self.agent(str(params["backend"])).parse(plan, result)

    def render_record(self, params: dict[str, Any]) -> dict[str, str]:
        record = IterationRecord.model_validate(params["record"])
        return {"markdown": self.reporter.render_record(record)}

    def render_index(self, params: dict[str, Any]) -> dict[str, str]:
        digest = HistoryDigest.model_validate(params["digest"])
        return {"text": self.reporter.render_index(digest)}

    def render_dashboard(self, params: dict[str, Any]) -> dict[str, str]:
        digest = HistoryDigest.model_validate(params["digest"])
        return {"text": self.reporter.render_dashboard(digest)}

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        """Method name -> handler."""
        return {
            "hello": self.hello,
            "agents": self.agents_info,
            "choose_backend": self.choose_backend,
            "analyze": self.analyze,
            "read_inbox": self.read_inbox,
            "plan": self.plan,
            "order": self.order,
            "agent_spec": self.agent_spec,
            "agent_parse": self.agent_parse,
            "render_record": self.render_record,
            "render_index": self.render_index,
            "render_dashboard": self.render_dashboard,
            "render_status": self.render_status,
            "render_listing": self.render_listing,
            "render_metrics": self.render_metrics,
        }

    def render_status(self, params: dict[str, Any]) -> dict[str, str]:
        status = DaemonStatus.model_validate(params["status"])
        now = datetime.fromisoformat(str(params["now"]))
        return {"text": self.reporter.render_status(status, now)}

    def render_listing(self, params: dict[str, Any]) -> dict[str, str]:
        listing = HistoryListing.model_validate(params["listing"])
        return {"text": self.reporter.render_listing(listing)}

    def render_metrics(self, params: dict[str, Any]) -> dict[str, str]:
        snapshot = MetricsSnapshot.model_validate(params["snapshot"])
        return {"text": self.reporter.render_metrics(snapshot)}


def _encode(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def _reply(out: TextIO, payload: dict[str, Any]) -> None:
    out.write(json.dumps(payload) + "\n")
    out.flush()


def serve(stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Serve requests until stdin closes or a shutdown request arrives."""
    source = stdin or sys.stdin
    out = stdout or sys.stdout
    # modules must never write to the protocol stream by accident
    sys.stdout = sys.stderr
    try:
        server = Server()
    except Exception as exc:
        _reply(
            out, {"id": 0, "ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}}
        )
        traceback.print_exc(file=sys.stderr)
        return 1
    handlers = server.handlers()
    _reply(out, {"id": 0, "ok": True, "result": server.hello({})})
    for line in source:
        if not line.strip():
            continue
        try:
            request = cast(dict[str, Any], json.loads(line))
        except json.JSONDecodeError as exc:
            _reply(
                out, {"id": None, "ok": False, "error": {"type": "BadRequest", "message": str(exc)}}
            )
            continue
        ident = request.get("id")
        method = str(request.get("method", ""))
        if method == "shutdown":
            _reply(out, {"id": ident, "ok": True, "result": None})
            return 0
        handler = handlers.get(method)
        if handler is None:
            _reply(
                out,
                {"id": ident, "ok": False, "error": {"type": "UnknownMethod", "message": method}},
            )
            continue
        try:
            result = _encode(handler(cast(dict[str, Any], request.get("params") or {})))
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            _reply(
                out,
                {
                    "id": ident,
                    "ok": False,
                    "error": {"type": type(exc).__name__, "message": str(exc)},
                },
            )
            continue
        _reply(out, {"id": ident, "ok": True, "result": result})
    return 0

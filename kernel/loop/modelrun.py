"""One agent run's model gateway (network = "model-only"): its life, the keys it adds upstream,
every exchange recorded to history/<id>/model.jsonl, and the iteration's caps held per request.

A request is admitted only when its reservation (`wire.ask_of`: its prompt and output ceiling)
fits in what is left of each cap once the answers counted and the requests under way are
taken off; it holds its reservation until its answer ends and counts what `wire.charged` says.
So a cap is passed only by what answers serve past their own reservations (none, where the
vendor holds the ceiling a request names). A run that passes one of its bounds (the gateway's, or RUN_RECORDED_MAX of its
recording) ends RUN_LIMIT; every line written is kept."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from domain import ModelTurn
from kernel.bounds import MODEL_BODY_MAX, MODEL_TURNS_KEPT, RUN_RECORDED_MAX
from kernel.config import API_OF, AgentConfig, ModelPrice
from kernel.host.context import Context
from kernel.isolation import gateway, jails
from kernel.judging.iteration import Iteration
from kernel.loop import stuckwatch
from kernel.records import budget, exchanges, limits, repeats, wire

LIMIT_GRACE_S = 60.0
"""A limit that resets sooner is left to the agent's own retries; a later one (or one with no
reset) ends the run at once: nothing more is asked of the upstream until it resets."""

PLACEHOLDER = "seed-placeholder-key"
"""What the agent finds in each variable [agent] keys names: the real key stays with the gateway."""


VENDOR_BASE = {
    "claude": "https://api.anthropic.com",
    "codex": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com",
}
"""The upstream when [agent] api_base is empty, for the tools that speak to one vendor (each
keeps its own path: claude adds /v1/messages, gemini /v1beta/..., codex /responses)."""

KEY_VARIABLES = {
    "claude": ("ANTHROPIC_API_KEY",),
    "codex": ("OPENAI_API_KEY", "CODEX_API_KEY"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "opencode": ("OPENAI_API_KEY",),
    "aider": ("OPENAI_API_KEY",),
    "mini": ("OPENAI_API_KEY",),
}
"""The key variables each backend's tool reads for the endpoint seed points it at: named in
[agent] env, in model-only the gateway holds them as if named in [agent] keys."""

LOGINS = {"claude": ".claude", "codex": ".codex", "gemini": ".gemini"}
"""The folder of HOME where each tool keeps a login of its own (bound into its sandbox)."""

_LOGIN_ELSEWHERE = {
    "codex": "a ChatGPT login in ~/.codex goes to chatgpt.com",
    "gemini": "a Google login in ~/.gemini goes to cloudcode-pa.googleapis.com",
}
"""Why a tool on its login (no key held) cannot go through the gateway, which serves the
vendor's API endpoint only. Claude Code's subscription login goes to the API's own host: the
gateway forwards its credential there."""


def held_keys(agent: AgentConfig, backend: str) -> list[str]:
    """The key variables the gateway holds: [agent] keys, and those of the backend's tool that
    [agent] env names (moved to the gateway: the agent never gets them in model-only)."""
    known = KEY_VARIABLES.get(backend, ())
    return [*agent.keys, *(n for n in agent.env if n in known and n not in agent.keys)]


def misplaced_keys(agent: AgentConfig, backend: str) -> list[str]:
    """Key variables [agent] env names that the gateway holds in model-only (to move to keys)."""
    known = KEY_VARIABLES.get(backend, ())
    return [n for n in agent.env if n in known and n not in agent.keys]


def upstream(agent: AgentConfig, backend: str) -> str:
    """Where the gateway sends the run's requests: api_base, else the tool's vendor."""
    return agent.api_base or VENDOR_BASE.get(backend, "")


def _unserved(agent: AgentConfig, backend: str) -> str:
    """Why the gateway cannot serve this backend ('' when it can)."""
    if backend == "command" or backend not in API_OF:
        return "" if agent.api_base else "no api_base for the gateway"
    if agent.api_base:
        return ""
    if backend not in VENDOR_BASE:
        return f"{backend} picks its vendor by the model's name: set api_base for the gateway"
    if backend in _LOGIN_ELSEWHERE and not held_keys(agent, backend):
        elsewhere = _LOGIN_ELSEWHERE[backend]
        return f"no key in [agent] keys: {elsewhere}, which the gateway does not serve"
    return ""


def network(agent: AgentConfig, backend: str, sandboxed: bool) -> jails.Network:
    """The network this run gets: model-only where the gateway serves it (every backend with
    an endpoint, its vendor's when api_base is empty; `command` only with an api_base), else full."""
    wired = backend in ("command", *API_OF) and not _unserved(agent, backend)
    return "model-only" if agent.network == "model-only" and wired and sandboxed else "full"


def said(agent: AgentConfig, backend: str, sandboxed: bool) -> str:
    """The network as status and the report say it ('' for a backend that asks no model)."""
    if backend in ("ruff-fix", "none"):
        return ""
    if network(agent, backend, sandboxed) == "model-only":
        return "model-only"
    if agent.network == "full":
        return "full (opt-out)"
    if not sandboxed:
        return "full (the sandbox is off)"
    if backend in ("command", *API_OF):
        return f"full ({_unserved(agent, backend)})"
    return f"full (the gateway does not serve {backend or 'this backend'} yet)"


def warnings(agent: AgentConfig, backend: str, sandboxed: bool, home: Path) -> list[str]:
    """What status and the log say once about the agent's keys and logins."""
    notes: list[str] = []
    if network(agent, backend, sandboxed) == "model-only":
        notes += [
            f"{name} is named in [agent] env; in model-only the gateway holds it: move it to "
            "[agent] keys"
            for name in misplaced_keys(agent, backend)
        ]
    login = LOGINS.get(backend)
    if login and sandboxed and (home / login).exists():
        notes.append(f"~/{login} is bound into the agent's sandbox: a login there is visible to it")
    return notes


def upstream_keys(names: Sequence[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The header each named key goes upstream in, by its vendor's name."""
    keys: dict[str, str] = {}
    for name in names:
        value = environ.get(name, "")
        if not value:
            continue
        upper = name.upper()
        if "ANTHROPIC" in upper:
            keys["x-api-key"] = value
        elif "GEMINI" in upper or "GOOGLE" in upper:
            keys["x-goog-api-key"] = value
        else:
            keys["authorization"] = f"Bearer {value}"
    return keys


def agent_env(
    agent: AgentConfig, net: jails.Network, environ: Mapping[str, str], backend: str = ""
) -> dict[str, str]:
    """What the agent gets for its model: each key the gateway holds (a placeholder in
    model-only; [agent] keys passed through with full), and a command agent's
    SEED_MODEL_BASE_URL with the network kept (model-only: the sandbox's own, the gateway)."""
    names = held_keys(agent, backend) if net == "model-only" else agent.keys
    env = {
        name: PLACEHOLDER if net == "model-only" else environ[name]
        for name in names
        if name in environ
    }
    if agent.backend == "command" and agent.api_base:
        env[jails.MODEL_URL_ENV] = agent.api_base
    return env


def for_run(
    ctx: Context,
    it: Iteration,
    answer_from: gateway.AnswerFrom | None = None,
    folder: Path | None = None,
) -> ModelRun:
    """The model gateway for this run: upstream api_base, the keys from the daemon's
    environment, the exchanges to history/<id>/, the iteration's caps on the wire's usage.
    A replay's (`answer_from`): no upstream and no key, its exchanges to its own `folder`."""
    agent, limits = ctx.config.agent, it.plan.budget
    # the dollars: the run's reservation, the day's cap when the iteration has none of its own
    usd = budget.reservation(ctx.config.budget, limits.max_cost_usd)
    return ModelRun(
        upstream="" if answer_from else gateway_base(agent, it.backend.name),
        keys={} if answer_from else upstream_keys(held_keys(agent, it.backend.name), os.environ),
        folder=folder or ctx.store.folder(it.plan.iteration_id),
        state=ctx.paths.state,
        caps=wire.Caps() if answer_from else wire.Caps(limits.max_tokens, usd),
        before=(it.wire_tokens, it.wire_cost_usd),
        prices=agent.prices,
        model=agent.model,
        answer_from=answer_from,
        ledger=None
        if answer_from
        else Ledger(ctx.paths.history, it.plan.iteration_id, it.backend.name),
        turns=(len(it.rounds) + 1, MODEL_TURNS_KEPT - len(it.model_turns)),
        stuck_repeats=0 if answer_from else agent.stuck_repeats,
        still=None
        if answer_from or not agent.stuck_turns
        else stuckwatch.Still(agent.stuck_turns, it.worktree, "model requests"),
    )


def on_the_wire(entry: budget.LedgerEntry, used: Used | None) -> budget.LedgerEntry:
    """The run's ledger line: where the gateway read every exchange, the upstream's answers are
    each in a line of their own already (written as they ended), so this one adds nothing."""
    if used is None:
        return entry
    return entry.model_copy(
        update={
            "model": used.model or entry.model,
            "tokens_used": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": 0.0,
            "cost_basis": used.basis or budget.NONE,
        }
    )


@dataclass(frozen=True)
class Ledger:
    """Where each answer's usage is counted as it ends: a line of history/ledger.jsonl each, so
    a daemon killed mid-run has counted every answer up to the kill."""

    history: Path
    iteration_id: str
    backend: str


@dataclass
class _Flow:
    """One answer under way."""

    reader: wire.UsageReader
    started: float
    answer: bytearray = field(default_factory=bytearray)
    note: str = ""
    head: tuple[tuple[str, str], ...] = ()
    ask: wire.Ask = field(default_factory=wire.Ask)
    held: tuple[int, float] = (0, 0.0)
    """The reservation it holds until it ends (tokens, dollars)."""
    status: int = 0
    """The upstream's status, once its head came."""


@dataclass(frozen=True)
class Used:
    """What one run's exchanges used, from the wire."""

    tokens: int = 0
    input: int = 0
    output: int = 0
    cached: int = 0
    cost_usd: float = 0.0
    requests: int = 0
    model: str = ""
    basis: str = ""
    ended: str = ""
    """Why the gateway refused or cut a request (the caps): the run ends BUDGET_EXCEEDED."""
    limit: str = ""
    """The bound the run passed (the gateway's, or its recording's): it ends RUN_LIMIT."""
    turns: tuple[ModelTurn, ...] = ()
    """Each request, in the order they ended (refused ones too), up to the bound given."""
    limited: str = ""
    """The upstream's latest answer was a usage or rate limit (none served since): LIMITED."""
    until: datetime | None = None
    """When that limit resets, as its answer said (None: it did not)."""
    stuck: str = ""
    """Why the run was ended as stuck (its requests repeated with no change): STUCK."""


class ModelRun:
    """The gateway for one agent run, started on a Unix socket in a folder of the kernel's."""

    def __init__(
        self,
        *,
        upstream: str,
        keys: Mapping[str, str],
        folder: Path,
        state: Path,
        caps: wire.Caps,
        before: tuple[int, float],
        prices: Mapping[str, ModelPrice],
        model: str,
        answer_from: gateway.AnswerFrom | None = None,
        ledger: Ledger | None = None,
        turns: tuple[int, int] = (1, MODEL_TURNS_KEPT),
        stuck_repeats: int = 0,
        still: stuckwatch.Still | None = None,
    ) -> None:
        """`turns`: the agent's round, and how many of its requests to keep as turns;
        `stuck_repeats`: requests alike in a row that end the run as stuck (0: never);
        `still`: the run's turns that changed nothing in its checkout (None: not counted)."""
        self._still = still
        self._recording = exchanges.Recording(folder, state, RUN_RECORDED_MAX)
        self._ledger, (self._round, self._turns_left) = ledger, turns
        self._caps, self._before = caps, before
        self._prices, self._model = prices, model
        self._lock = threading.Lock()
        self._flows: dict[int, _Flow] = {}
        self._used = Used()
        self._held = (0, 0.0)
        """What the requests under way hold, all of them (tokens, dollars)."""
        self._unread = 0
        """Requests refused unread once the run passed a bound."""
        self._repeats = repeats.Repeats(stuck_repeats)
        self._upstream = answer_from is None
        """Answers come from the upstream (a replay's are the kernel's: never a limit)."""
        self.ended = threading.Event()
        """Set when the run is to end now (stuck, or limited until later): its group is ended."""
        self._gateway = gateway.Gateway(
            upstream,
            keys,
            self._on_request,
            self._on_chunk,
            self._on_done,
            answer_from=answer_from,
            on_head=self._on_head,
            on_limit=self._on_limit,
        )
        self._home = Path(tempfile.mkdtemp(prefix="seed-gateway-"))
        self.socket = Path(self._gateway.start(self._home))

    def close(self, it: Iteration) -> Used:
        """Stop serving (a stream under way ends); what the run used, added to the iteration's."""
        used = self.stop()
        it.wire_tokens += used.tokens
        it.wire_cost_usd += used.cost_usd
        it.wire_requests += used.requests
        it.model_cut = used.ended
        it.model_limit = used.limit
        it.model_turns += used.turns
        return used

    def stop(self) -> Used:
        """Stop serving (a stream under way ends) and remove the socket's folder; what was used."""
        self._gateway.stop()
        shutil.rmtree(self._home, ignore_errors=True)
        with self._lock:
            if self._unread and self._used.limit:
                later = f"; {self._unread} later requests were refused unread"
                self._used = replace(self._used, limit=self._used.limit + later)
            return self._used

    def _spent(self, but: _Flow | None = None) -> tuple[int, float]:
        """What the iteration used, and what the requests under way hold (but `but`'s)."""
        tokens, usd = self._held
        if but is not None:
            tokens, usd = tokens - but.held[0], usd - but.held[1]
        used = self._used
        return self._before[0] + used.tokens + tokens, self._before[1] + used.cost_usd + usd

    def _on_limit(self, api: gateway.Api, reason: str) -> gateway.Refusal:
        """A bound is passed: the first time, the run ends RUN_LIMIT; each time, the refusal."""
        with self._lock:
            if self._used.limit:
                self._unread += 1
            else:
                self._used = replace(self._used, limit=reason)
        return wire.refusal(api, reason, "RUN_LIMIT")

    def _on_request(self, exchange: gateway.Exchange) -> gateway.Refusal | None:
        api, body = exchange.api, exchange.body
        if self.ended.is_set():  # stuck, or limited until later: nothing more goes upstream
            why = self._used.stuck or self._used.limited
            return self._refuse(
                exchange, wire.refusal(api, why, "STUCK" if self._used.stuck else "LIMITED"), why
            )
        ask = wire.ask_of(api, exchange.method, exchange.path, body)
        if isinstance(ask, str):  # nothing is forwarded that the gateway cannot reserve for
            return self._refuse(exchange, gateway.Refusal.of(api, 400, ask), ask)
        if not self._recording.fits(len(body)):  # its record would not be whole: not sent
            full = self._recording.full(len(body))
            return self._refuse(exchange, self._gateway.limit(api, full), full)
        ask_usd, _ = wire.cost_of(ask.usage, self._prices, self._model)
        with self._lock:
            reason = wire.refused(self._caps, *self._spent(), ask.usage.tokens, ask_usd)
            if not reason:
                held = (ask.usage.tokens, ask_usd)
                self._held = (self._held[0] + held[0], self._held[1] + held[1])
                reader = wire.UsageReader(api, path=exchange.path, model=ask.model)
                self._flows[exchange.seq] = _Flow(reader, time.time(), ask=ask, held=held)
                return None
            self._used = replace(self._used, ended=self._used.ended or reason)
        return self._refuse(exchange, wire.refusal(api, reason), reason)

    def _refuse(
        self, exchange: gateway.Exchange, refusal: gateway.Refusal, note: str
    ) -> gateway.Refusal:
        """A request answered by the kernel, nothing forwarded: its turn and its line."""
        with self._lock:
            self._turn(exchange.seq, "refused", wire.Usage(), 0.0, 0.0)
        flow = _Flow(wire.UsageReader(exchange.api), time.time(), note=note)
        self._record(exchange, flow, refusal.status, 0.0, wire.Usage(), 0.0, refusal.body)
        return refusal

    def _on_head(
        self, exchange: gateway.Exchange, status: int, headers: tuple[tuple[str, str], ...]
    ) -> None:
        flow = self._flows[exchange.seq]
        flow.head, flow.status = headers, status  # the headers kept by allow-list when recorded

    def _on_chunk(self, exchange: gateway.Exchange, piece: bytes) -> bool | bytes:
        flow = self._flows[exchange.seq]
        flow.reader.feed(piece)
        if len(flow.answer) <= MODEL_BODY_MAX:
            flow.answer += piece
        running = flow.reader.estimate
        running_usd, _ = wire.cost_of(running, self._prices, self._model)
        with self._lock:
            # held by this answer is its own reservation: cut only what passes it and the cap
            reason = wire.cut(self._caps, *self._spent(flow), running, running_usd)
            if reason:
                flow.note = reason
                self._used = replace(self._used, ended=reason)
        if not reason:
            return True
        # a stream ends with its API's own error event, so the CLI reads an error (a JSON answer
        # just breaks off: no client reads a piece after its object as anything but junk)
        last = wire.stream_error(exchange.api, reason) if flow.reader.streaming else b""
        if last and len(flow.answer) <= MODEL_BODY_MAX:
            flow.answer += last  # the recording holds what the agent got
        return last or False

    def _on_done(self, exchange: gateway.Exchange, status: int, seconds: float) -> None:
        flow = self._flows.pop(exchange.seq)
        flow.reader.finish()
        usage = wire.charged(flow.ask, flow.reader, flow.status)
        usd, basis = wire.cost_of(usage, self._prices, self._model)
        with self._lock:
            self._held = (self._held[0] - flow.held[0], self._held[1] - flow.held[1])
            used = self._used
            self._used = replace(
                used,
                tokens=used.tokens + usage.tokens,
                input=used.input + usage.input,
                output=used.output + usage.output,
                cached=used.cached + usage.cached,
                cost_usd=used.cost_usd + usd,
                requests=used.requests + 1,
                model=usage.model or used.model,
                basis=basis if basis == budget.PRICES else used.basis or basis,
            )
            self._watch(exchange, flow, status)
            ended = "cut" if flow.note else "failed" if status >= 400 else "answered"
            self._turn(exchange.seq, ended, usage, usd, seconds)
            if self._ledger is not None:  # counted now: a daemon killed later keeps this answer
                budget.append(
                    self._ledger.history,
                    budget.LedgerEntry(
                        at=datetime.now(UTC),
                        iteration_id=self._ledger.iteration_id,
                        backend=self._ledger.backend,
                        model=usage.model or self._model,
                        tokens_used=usage.tokens,
                        input_tokens=usage.input,
                        output_tokens=usage.output,
                        cost_usd=usd,
                        cost_basis=basis,
                        request=exchange.seq,
                    ),
                )
        self._look(exchange, status)
        self._record(exchange, flow, status, seconds, usage, usd, bytes(flow.answer))

    def _look(self, exchange: gateway.Exchange, status: int) -> None:
        """One turn of the conversation answered: the run ends stuck once too many in a row
        changed nothing in its checkout (looked at outside the lock: answers go on meanwhile)."""
        if self._still is None or not 200 <= status < 400 or self.ended.is_set():
            return
        if repeats.step_of(exchange.body) is None:  # a side call (a title), not a turn
            return
        why = self._still.turn()
        if not why:
            return
        with self._lock:
            if not self._used.stuck:
                self._used = replace(
                    self._used, stuck=f"{why} ({self._used.tokens:,} tokens spent)"
                )
        self.ended.set()

    def _watch(self, exchange: gateway.Exchange, flow: _Flow, status: int) -> None:
        """The answer as a limit or a repeat (under the lock): where the run must end, `ended`."""
        if not self._upstream:
            return
        now = datetime.now(UTC)
        limit = limits.of_answer(status, flow.head, bytes(flow.answer), now)
        if limit is not None:
            self._used = replace(self._used, limited=limit.why, until=limit.until)
            if limit.until is None or (limit.until - now).total_seconds() > LIMIT_GRACE_S:
                self.ended.set()
            return
        if 200 <= status < 400:  # an answer served: a limit met before has passed
            self._used = replace(self._used, limited="", until=None)
        stuck = self._repeats.seen(exchange.body, status, bytes(flow.answer))
        if stuck and not self._used.stuck:
            tokens = self._used.tokens
            self._used = replace(self._used, stuck=f"{stuck} ({tokens:,} tokens spent)")
            self.ended.set()

    def _turn(self, seq: int, status: str, usage: wire.Usage, usd: float, seconds: float) -> None:
        """One request's line of the report's table (under the lock), while the bound allows."""
        if len(self._used.turns) >= self._turns_left:
            return
        turn = ModelTurn(
            round=self._round,
            seq=seq,
            status=status,
            input=usage.input,
            output=usage.output,
            cached=usage.cached,
            cost_usd=round(usd, 6),
            seconds=round(seconds, 3),
        )
        self._used = replace(self._used, turns=(*self._used.turns, turn))

    def _record(
        self,
        exchange: gateway.Exchange,
        flow: _Flow,
        status: int,
        seconds: float,
        usage: wire.Usage,
        usd: float,
        answer: bytes,
    ) -> None:
        self._recording.append(
            exchanges.Exchanged(
                seq=exchange.seq,
                api=exchange.api,
                method=exchange.method,
                path=exchange.path,
                headers=exchange.headers,
                request=exchange.body,
                answer=answer,
                status=status,
                started=flow.started,
                seconds=seconds,
                usage=usage,
                answer_headers=flow.head,
                cost_usd=usd,
                note=flow.note,
            )
        )
        if self._recording.over and not self._gateway.limited:  # a body left out: the bound
            self._gateway.limit(exchange.api, self._recording.over)


_VERSION = re.compile(r"/v1(?:beta|alpha)?$")
"""An API version ending a base URL: the tool adds its paths after it."""


def _version_of(base: str) -> str:
    match = _VERSION.search(urlsplit(base).path.rstrip("/"))
    return match.group(0) if match else ""


def agent_base(agent: AgentConfig, backend: str, sandboxed: bool) -> str:
    """The api_base the adapter points its tool at: the forwarder's (with the upstream's API
    version kept, as the tool expects it) in model-only; else api_base (empty: the vendor's)."""
    if network(agent, backend, sandboxed) != "model-only":
        return agent.api_base
    return jails.MODEL_URL + _version_of(upstream(agent, backend))


def gateway_base(agent: AgentConfig, backend: str) -> str:
    """The gateway's upstream: the tool sends its paths with the API version in them (the
    forwarder's URL keeps it), so a version ending the upstream is taken off it, not doubled."""
    base = upstream(agent, backend).rstrip("/")
    if backend == "command":
        return base  # SEED_MODEL_BASE_URL stands for api_base whole
    return base.removesuffix(_version_of(base)) if _version_of(base) else base

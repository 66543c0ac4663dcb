"""Notifications: word to a person when the daemon needs them, from a durable outbox.

Each event is queued as one fsynced line of history/notifications.jsonl, then sent by a
thread of the kernel's, never the loop's, on each channel [notify] names: a command (run
outside every sandbox, its time bounded, an allow-listed environment), a webhook (a JSON
POST to exactly the URL configured: no redirect, no proxy) and the desktop (notify-send).
Every send is written before it starts and once it ends (sending, then sent or failed),
so a daemon killed after queueing sends at its next start what was queued, and a send the
kill cut short is never made again (it may have arrived): no event is sent twice. A failed
send is logged and tried again `retries` times. The URL is never written anywhere: the
lines name the channel only. The messages are the kernel's words; what they quote from the
agent or the tree (a summary, a gap, a file name) is cleaned, put on one line and capped,
and reaches the command as one whole argv item that never starts with "-".
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from domain import IterationOutcome, IterationRecord
from kernel import faults
from kernel.bounds import NOTICE_LINE_MAX, NOTICE_MESSAGE_MAX, NOTICE_SCAN_LINES, printable
from kernel.config import NotifyConfig
from kernel.fsutil import append_line
from kernel.isolation import procs
from kernel.records import jsonl
from kernel.records.halt import HaltState

OUTBOX = "notifications.jsonl"
WAIT_S = 10.0
"""How long `once` and a stopping daemon wait for the notifications of what they did."""
PAUSE_S = 5.0
"""The pause before the first retry of a failed send; each next one is three times longer."""
_QUOTED = 300
"""Characters of one quoted piece (a reason, a summary, a gap) within a message."""
DESKTOP_ENV = ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR")
"""What the command and notify-send get from the daemon's environment besides procs.RUN_ENV:
where the person's desktop session is. Allow-listed: no credential of the daemon's."""
FINAL = "not sent: "
"""How a failure that no retry can mend begins (the command names the repository)."""
LIMITED: str = "LIMITED"
"""The outcome of a run a usage limit ended (issue 42 item 5): told as `limited`."""
STUCK: str = "STUCK"
"""The failure category of a run ended as stuck (issue 42 item 6): told as `stuck`."""
State = Literal["queued", "sending", "sent", "failed", "unsure", "dropped"]


class Line(BaseModel):
    """One line of the outbox: a notification queued, or one send of it on one channel."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    at: str
    key: str
    """The notification's identity: one key is queued once (a record finished twice is told once)."""
    state: State
    event: str = ""
    iteration: str = ""
    title: str = ""
    message: str = ""
    channels: list[str] = Field(default_factory=list[str])
    """The channels it goes to (queued lines)."""
    channel: str = ""
    attempt: int = 0
    error: str = ""


class Notify(Protocol):
    """What the loop calls to send word: an event, the iteration's full id ('' for none), a
    message in the kernel's words; `key` when one event may be told more than once per
    iteration (default: the event and the iteration)."""

    def __call__(self, event: str, iteration: str, message: str, key: str = "") -> None: ...


def nowhere(event: str, iteration: str, message: str, key: str = "") -> None:
    """The Notify of commands that send nothing (every one but `run` and `once`)."""


def of_record(record: IterationRecord, command: Callable[..., str]) -> tuple[str, str] | None:
    """The event a record is told by and its message (None: this ending is not told)."""
    rid, outcome = record.iteration_id, record.outcome
    gap, reason = printable(record.gap.key, _QUOTED), _quote(record.reason)
    history = f"Details: `{command('history', rid)}`."
    approve = f"`{command('approve', rid)}`"
    branch = printable(record.kept_branch or "its branch", _QUOTED)
    if outcome == IterationOutcome.SUCCESS:
        summary = _quote(record.agent_summary)
        said = f" The agent says: {summary}." if summary else ""
        return (
            "landed",
            f"Landed {rid} for {gap} (commit {(record.commit or '')[:12]}): {reason}.{said} {history}",
        )
    if outcome == IterationOutcome.KEPT:
        return (
            "kept",
            f"Kept {rid} for {gap} on {branch} for your approval: {reason}. To land it: {approve}.",
        )
    if outcome == IterationOutcome.MERGE_BLOCKED:
        return "blocked", (
            f"Blocked {rid} for {gap}: {reason}. Kept on {branch}: it lands by itself once that "
            f"clears, or now with {approve}."
        )
    if outcome == IterationOutcome.WAITING and record.blocked_by:
        return (
            "blocked",
            f"Waiting on {gap}: {reason}. It runs once that changes; see `{command('status')}`.",
        )
    if outcome.value == LIMITED:
        return (
            "limited",
            f"Limited {rid} for {gap}: {reason}. The daemon resumes by itself; see `{command('status')}`.",
        )
    category = record.failure_category
    if category is not None and category.value == STUCK:
        return "stuck", f"Stuck {rid} for {gap}: {reason}. {history}"
    return None


def of_halt(state: HaltState, command: Callable[..., str]) -> tuple[str, str, str]:
    """The event, message and key a halt is told by (a halt already in place keeps its key)."""
    spent = state.category == "BUDGET_EXCEEDED"
    what = "The budget is spent, so the daemon halted" if spent else "The daemon halted"
    message = (
        f"{what}: {_quote(state.reason, 2 * _QUOTED)}. Nothing runs until `{command('resume')}`."
    )
    return ("budget" if spent else "halted"), message, f"halt:{state.at}"


def tell_halt(notify: Notify, state: HaltState, command: Callable[..., str]) -> None:
    """Send word of a halt (once per halt: the same halt is not told again)."""
    event, message, key = of_halt(state, command)
    notify(event, state.iteration_id, message, key)


def payload(line: Line, repository: str) -> bytes:
    """The webhook's JSON body: Slack reads `text` (its <, > and & escaped, so no mention or
    link is made of quoted text), ntfy's templates `title` and `message`."""
    text = f"{line.title}: {line.message}"
    slack = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    body = {
        "text": slack,
        "title": line.title,
        "message": line.message,
        "event": line.event,
        "iteration": line.iteration,
        "repository": repository,
    }
    return json.dumps(body).encode("utf-8")


def _env(line: Line) -> dict[str, str]:
    """The environment of the command and notify-send: allow-listed, with the SEED_ values."""
    names = (*procs.RUN_ENV, *DESKTOP_ENV)
    kept = {k: v for k, v in os.environ.items() if k in names or k.startswith("LC_")}
    return procs.child_env(
        kept, SEED_EVENT=line.event, SEED_ITERATION=line.iteration, SEED_MESSAGE=line.message
    )


def command_argv(template: list[str], line: Line) -> list[str]:
    """The command's argv: an item that is exactly a placeholder is replaced, no other."""
    values = {"{event}": line.event, "{iteration}": line.iteration, "{message}": line.message}
    return [values.get(item, item) for item in template]


def in_repository(argv: list[str], root: Path) -> str:
    """An item of the configured argv (before its placeholders are filled: the messages
    quote the repository's path) naming a place in the repository, which agents change; ''
    when none does."""
    found = shutil.which(argv[0], path=os.environ.get("PATH")) if argv else None
    places = {str(root), str(root.resolve())}
    for item in [*argv, *([found] if found else [])]:
        real = os.path.realpath(item) if item.startswith("/") else ""
        if any(place in item or place == real or real.startswith(place + "/") for place in places):
            return printable(item, _QUOTED)
    return ""


def run_command(argv: list[str], line: Line, timeout_s: float) -> str:
    """Run a command for a notification outside every sandbox, in /: '' when it exited 0,
    else why not."""
    try:
        done = procs.run(
            argv,
            cwd="/",
            timeout_s=timeout_s,
            env=_env(line),
            interruptible=False,
            sweep_rounds=0,
            max_bytes=64 * 1024,
        )
    except OSError as exc:
        return f"{printable(argv[0], _QUOTED)} cannot start: {exc.strerror or type(exc).__name__}"
    if done.timed_out:
        return f"{printable(argv[0], _QUOTED)} ran past {timeout_s:g}s and was ended"
    if not done.ok:
        tail = printable(done.err_text().strip()[-_QUOTED:], _QUOTED)
        return f"{printable(argv[0], _QUOTED)} exited {done.exit_code}" + (
            f": {tail}" if tail else ""
        )
    return ""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is a failed send: the POST goes to the URL configured and nowhere else."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def post(url: str, body: bytes, timeout_s: float) -> str:
    """POST the body to exactly this URL: '' on a 2xx answer, else why not (never the URL)."""
    if not url.lower().startswith(("http://", "https://")):
        return "the URL is not an http:// or https:// URL"
    opener = urllib.request.build_opener(_NoRedirect(), urllib.request.ProxyHandler({}))
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "seed"},
    )
    try:
        with opener.open(request, timeout=timeout_s) as answer:
            status = int(answer.status)
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except urllib.error.URLError as exc:
        reason = exc.reason
        said = reason.strerror if isinstance(reason, OSError) else None
        return f"no answer ({said or type(reason).__name__})"
    except TimeoutError:
        return f"no answer within {timeout_s:g}s"
    except (OSError, ValueError) as exc:  # the message might quote the URL: only its kind
        return f"failed ({type(exc).__name__})"
    return "" if 200 <= status < 300 else f"HTTP {status}"


@dataclass
class _Send:
    """One channel of one queued notification still to send."""

    line: Line
    channel: str
    attempts: int
    """Sends made so far (across restarts: counted from the outbox)."""
    due: float
    """When it may be sent (time.monotonic())."""


class Outbox:
    """history/notifications.jsonl and the thread that sends what it queues."""

    def __init__(
        self,
        history: Path,
        root: Path,
        settings: Callable[[], NotifyConfig],
        log: Callable[[str], None],
    ) -> None:
        self.path = history / OUTBOX
        self.root = root
        self.settings = settings
        self.log = log
        self._cond = threading.Condition()
        self._queue: list[_Send] = []
        self._busy = 0
        self._closing = False
        self._seen: set[str] = set()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Read what earlier daemons left unsent, and start sending."""
        config = self.settings()
        if config.webhook:
            self.log(
                "notify: [notify] webhook is in seed.toml, which agents can read; a URL "
                "holding a token belongs in the variable webhook_env names"
            )
        elif config.webhook_env and not os.environ.get(config.webhook_env):
            self.log(
                f"notify: webhook_env names {config.webhook_env}, which is not set: no webhook is sent"
            )
        if config.desktop and shutil.which("notify-send") is None:
            self.log("notify: desktop = true, but notify-send is not installed here")
        try:
            self._backlog(config)
        except OSError as exc:
            self.log(f"notify: cannot read {self.path}: {exc.strerror or exc}")
        self._closing = False  # a daemon object started again sends again
        self._thread = threading.Thread(target=self._work, name="seed-notify", daemon=True)
        self._thread.start()

    def __call__(self, event: str, iteration: str, message: str, key: str = "") -> None:
        """Queue word of an event; never raises, never waits on a send."""
        try:
            self._queue_one(event, iteration, message, key)
        except Exception as exc:  # word to a person must never break the loop
            self.log(f"notify: could not queue {event} {iteration}: {type(exc).__name__}: {exc}")

    def _queue_one(self, event: str, iteration: str, message: str, key: str) -> None:
        config = self.settings()
        if event not in config.events:
            return
        key = key or (f"{event}:{iteration}" if iteration else f"{event}:{time.time_ns()}")
        channels = self._channels(config)
        with self._cond:
            if key in self._seen or not channels:
                return
            text = printable(message, NOTICE_MESSAGE_MAX)
            line = Line(
                at=_now(),
                key=key,
                state="queued",
                event=event,
                iteration=iteration,
                title=f"seed {event}: {printable(self.root.name, 100)}",
                message=text if not text.startswith("-") else f"seed: {text}",
                channels=channels,
            )
            self._write(line)
            self._seen.add(key)
            faults.fault("notice-queued")
            now = time.monotonic()
            self._queue += [_Send(line, channel, 0, now) for channel in channels]
            self._cond.notify_all()

    def _channels(self, config: NotifyConfig) -> list[str]:
        wanted = {
            "command": bool(config.command),
            "webhook": bool(self._url(config)),
            "desktop": config.desktop and shutil.which("notify-send") is not None,
        }
        return [channel for channel, on in wanted.items() if on]

    def _url(self, config: NotifyConfig) -> str:
        return config.webhook or (
            os.environ.get(config.webhook_env, "") if config.webhook_env else ""
        )

    def drain(self, seconds: float = WAIT_S) -> None:
        """Wait up to `seconds` for what is queued, then send nothing more (what is left is
        sent by the next daemon: a send under way when this returns is counted as made)."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while (self._queue or self._busy) and time.monotonic() < deadline:
                self._cond.wait(timeout=max(deadline - time.monotonic(), 0.0))
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=max(deadline - time.monotonic(), 0.0))

    def _work(self) -> None:
        while True:
            with self._cond:
                job = self._take()
                while job is None:
                    if self._closing:
                        return
                    soonest = min((s.due for s in self._queue), default=None)
                    wait = None if soonest is None else max(soonest - time.monotonic(), 0.01)
                    self._cond.wait(timeout=wait)
                    job = self._take()
                # written under the lock: once draining ends, no send starts unwritten
                self._write(job.line.model_copy(update=_send_line(job, "sending")))
                self._busy += 1
            error = self._send(job)
            with self._cond:
                self._busy -= 1
                try:
                    self._settle(job, error)
                except Exception as exc:  # the thread goes on sending what comes next
                    self.log(f"notify: {type(exc).__name__}: {exc}")
                self._cond.notify_all()

    def _take(self) -> _Send | None:
        """The next send that is due, taken off the queue (None while draining has ended)."""
        if self._closing:
            return None
        now = time.monotonic()
        for send in self._queue:
            if send.due <= now:
                self._queue.remove(send)
                send.attempts += 1
                return send
        return None

    def _send(self, job: _Send) -> str:
        """One send on one channel: '' when it went, else why not."""
        try:
            config = self.settings()
            if job.channel == "command" and config.command:
                inside = in_repository(config.command, self.root)
                if inside:
                    return f"{FINAL}it names {inside}, inside the repository, which agents change"
                argv = command_argv(config.command, job.line)
                return run_command(argv, job.line, config.timeout_s)
            if job.channel == "webhook" and self._url(config):
                return post(self._url(config), payload(job.line, self.root.name), config.timeout_s)
            if job.channel == "desktop" and config.desktop:
                argv = [
                    "notify-send",
                    "--app-name=seed",
                    "--",
                    job.line.title,
                    _markup(job.line.message),
                ]
                return run_command(argv, job.line, config.timeout_s)
            return f"{FINAL}{job.channel} is no longer configured"
        except Exception as exc:  # a send's failure is logged, never the loop's
            return f"{type(exc).__name__}: {exc}"

    def _settle(self, job: _Send, error: str) -> None:
        line = job.line
        what = f"{line.event} {line.iteration}".strip()
        if not error:
            self._write(line.model_copy(update=_send_line(job, "sent")))
            return
        self._write(line.model_copy(update={**_send_line(job, "failed"), "error": error}))
        left = self.settings().retries + 1 - job.attempts
        if error.startswith(FINAL) or left <= 0:
            self.log(
                f"notify: {job.channel} failed for {what}: {error}; given up after {job.attempts} send(s)"
            )
            return
        pause = PAUSE_S * 3 ** (job.attempts - 1)
        self.log(f"notify: {job.channel} failed for {what}: {error}; again in {pause:g}s")
        job.due = time.monotonic() + pause
        self._queue.append(job)

    def _write(self, line: Line) -> None:
        """One line of the outbox; one that cannot be written is logged, and the send goes on
        (word of a full disk matters more than its bookkeeping)."""
        try:
            append_line(self.path, line.model_dump_json())
        except OSError as exc:
            self.log(f"notify: cannot write {self.path}: {exc.strerror or exc} ({line.state})")

    def _backlog(self, config: NotifyConfig) -> None:
        """What the latest lines of the outbox left unsent: queued, or failed with retries
        left. A send that started and never ended is not made again (it may have arrived)."""
        if not self.path.is_file():
            return
        found: list[Line] = []
        for raw in jsonl.lines_backwards(self.path, NOTICE_LINE_MAX):
            if raw.data is not None and (data := jsonl.whole_object(raw.data)) is not None:
                with contextlib.suppress(ValidationError):
                    found.append(Line.model_validate(data))
            if len(found) >= NOTICE_SCAN_LINES:
                break
        queued: dict[str, Line] = {}
        last: dict[tuple[str, str], Line] = {}
        for line in reversed(found):
            if line.state == "queued":
                queued[line.key] = line
                last.update({(line.key, channel): line for channel in line.channels})
            elif line.key in queued:
                last[(line.key, line.channel)] = line
        self._seen |= set(queued)
        for (key, channel), line in last.items():
            self._resume(queued[key], channel, line, config)

    def _resume(self, queued: Line, channel: str, latest: Line, config: NotifyConfig) -> None:
        """Put one channel of an earlier daemon's notification back in the queue, if it is owed."""
        what = f"{queued.event} {queued.iteration}".strip()
        send = _Send(queued, channel, latest.attempt, time.monotonic())
        if latest.state == "queued" or (
            latest.state == "failed" and latest.attempt <= config.retries
        ):
            self._queue.append(send)
        elif latest.state == "sending":
            self._write(queued.model_copy(update=_send_line(send, "unsure")))
            self.log(
                f"notify: the daemon before this one ended while sending {what} by {channel}: "
                "not sent again (it may have arrived)"
            )


def _send_line(send: _Send, state: State) -> dict[str, object]:
    """The fields of a send's line (the queued line's key, event and iteration kept)."""
    return {
        "at": _now(),
        "state": state,
        "channel": send.channel,
        "attempt": send.attempts,
        "title": "",
        "message": "",
        "channels": [],
    }


def _quote(text: str, width: int = _QUOTED) -> str:
    """Another hand's text within a message: cleaned, on one line, capped, its end unpunctuated."""
    return printable(text, width).rstrip(" .")


def _markup(text: str) -> str:
    """notify-send's body reads a little markup: what is quoted stays text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _now() -> str:
    return datetime.now(UTC).isoformat()

"""Notifications (records/notify.py): what each event says, the command and the webhook really
reached, the outbox's promises (queued once, sent once, a cut send never made again, retries
bounded) and what nothing in them can do (a flag, a shell word, a mention, another host)."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from domain import FailureCategory, IterationOutcome
from kernel.config import Config, NotifyConfig, load_config
from kernel.errors import ConfigError
from kernel.records import notify
from kernel.records.halt import HaltState
from tests.fakes import notify_fakes
from tests.fakes.notify_fakes import Receiver, calls
from tests.unit.factories import gap, record

FAKE = str(Path(notify_fakes.__file__))
HOSTILE = "\x1b[2J--output=/etc/passwd $(rm -rf ~) `id` <!channel> <http://evil|click>\nline two"


def command(out: Path, *extra: str) -> list[str]:
    """The recording command: argv items that are placeholders, and ones that only hold one."""
    return [sys.executable, FAKE, str(out), "{event}", "{iteration}", "{message}", *extra]


class Box:
    """An outbox on a temporary history/, its config changeable, its log kept."""

    def __init__(self, tmp: Path, **config: Any) -> None:
        self.root = tmp / "repo"
        self.history = self.root / "history"
        self.history.mkdir(parents=True, exist_ok=True)
        self.config = NotifyConfig(**config)
        self.logged: list[str] = []
        self.box = self.fresh()

    def fresh(self) -> notify.Outbox:
        """A new outbox on the same files: a restarted daemon's."""
        self.box = notify.Outbox(self.history, self.root, lambda: self.config, self.logged.append)
        return self.box

    def lines(self) -> list[dict[str, Any]]:
        """The outbox's lines."""
        path = self.history / notify.OUTBOX
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line]

    def states(self) -> list[tuple[str, str]]:
        """(state, channel) of each line."""
        return [(line["state"], line["channel"]) for line in self.lines()]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver().start()
    try:
        yield found
    finally:
        found.stop()


def test_a_landed_record_is_told_once_to_a_real_command_with_whole_argv_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a-credential-of-the-daemons")
    out = tmp_path / "calls.jsonl"
    box = Box(tmp_path, command=command(out, "sh -c 'echo {message}'", "--{event}"))
    landed = record(gap(), 7, IterationOutcome.SUCCESS, None).model_copy(
        update={"agent_summary": HOSTILE, "commit": "a" * 40, "reason": "verified."}
    )
    told = notify.of_record(landed, lambda *a: "python seed.py " + " ".join(a))
    assert told is not None
    event, message = told
    box.box.start()
    box.box(event, landed.iteration_id, message)
    box.box(event, landed.iteration_id, message)  # a record finished twice is told once
    box.box.drain()

    (call,) = calls(out)
    argv = call["argv"]
    assert argv[:2] == ["landed", "iter-0007-20260101-120000"]
    assert argv[3:] == ["sh -c 'echo {message}'", "--{event}"], "only whole items are replaced"
    said = argv[2]
    assert said.startswith("Landed iter-0007-20260101-120000 for ruff:calc.py:F401 (commit aaaa")
    assert "\x1b" not in said and "\n" not in said and "\\n" in said
    assert "$(rm -rf ~)" in said, "kept as text, in one argv item: no shell reads it"
    assert "Details: `python seed.py history iter-0007-20260101-120000`." in said
    assert call["seed"]["SEED_EVENT"] == "landed"
    assert call["seed"]["SEED_ITERATION"] == landed.iteration_id
    assert call["seed"]["SEED_MESSAGE"] == said
    assert "AWS_SECRET_ACCESS_KEY" not in call["names"] and call["cwd"] == "/"
    assert box.states() == [("queued", ""), ("sending", "command"), ("sent", "command")]


def test_the_webhook_gets_one_json_post_whose_quoted_text_makes_no_mention_or_link(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = "?tpl=1&t={{.title}}&m={{.message}}"  # ntfy's templates (docs/notifications.md)
    url = f"{receiver.url}/hook/T0KEN-SECRET-123{template}"
    monkeypatch.setenv("SEED_TEST_HOOK", url)
    box = Box(tmp_path, webhook_env="SEED_TEST_HOOK")
    box.box.start()
    box.box("stuck", "iter-0001-20260101-120000", f"Stuck: {HOSTILE}")
    box.box.drain()

    (got,) = receiver.got
    assert got.path == f"/hook/T0KEN-SECRET-123{template}"
    assert got.headers["Content-Type"] == "application/json"
    body = got.json()
    assert body["event"] == "stuck" and body["iteration"] == "iter-0001-20260101-120000"
    assert body["title"] == "seed stuck: repo"
    assert "<!channel>" in body["message"] and "<" not in body["text"]
    assert "&lt;!channel&gt;" in body["text"] and "&lt;http://evil|click&gt;" in body["text"]
    assert "\x1b" not in body["message"] and "\n" not in body["message"]
    outbox = (box.history / notify.OUTBOX).read_text()
    assert "T0KEN" not in outbox and not any("T0KEN" in line for line in box.logged)


def test_a_redirect_is_a_failed_send_never_followed_to_another_place(
    tmp_path: Path, receiver: Receiver
) -> None:
    elsewhere = Receiver().start()
    try:
        # urllib would follow a 302 as a GET to the place it names
        receiver.status, receiver.location = 302, f"{elsewhere.url}/other"
        box = Box(tmp_path, webhook=f"{receiver.url}/hook", retries=0)
        box.box.start()
        box.box("halted", "", "The daemon halted: test.", "halt:1")
        box.box.drain()
    finally:
        elsewhere.stop()
    assert len(receiver.got) == 1 and elsewhere.got == []
    assert box.states()[-1] == ("failed", "webhook")
    assert box.lines()[-1]["error"] == "HTTP 302"
    assert any("given up after 1 send(s)" in line for line in box.logged)


def test_a_failed_send_is_logged_and_tried_again_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notify, "PAUSE_S", 0.05)
    out = tmp_path / "calls.jsonl"
    Path(f"{out}.fail").touch()
    box = Box(tmp_path, command=command(out), retries=2)
    box.box.start()
    box.box("blocked", "iter-0002-20260101-120000", "Blocked: test.")
    box.box.drain()
    assert len(calls(out)) == 3
    failed = [line for line in box.lines() if line["state"] == "failed"]
    assert [line["attempt"] for line in failed] == [1, 2, 3]
    assert "exited 1" in failed[0]["error"]
    assert sum("again in" in line for line in box.logged) == 2
    assert "given up after 3 send(s)" in box.logged[-1]


def test_queued_before_a_kill_is_sent_at_the_next_start_and_never_twice(tmp_path: Path) -> None:
    out = tmp_path / "calls.jsonl"
    box = Box(tmp_path, command=command(out))
    killed = box.box  # never started: what a daemon killed right after queueing leaves
    killed("kept", "iter-0003-20260101-120000", "Kept: test.")
    assert box.states() == [("queued", "")] and calls(out) == []

    restarted = box.fresh()
    restarted.start()
    restarted("kept", "iter-0003-20260101-120000", "Kept: test.")  # recovery finishing it again
    restarted.drain()
    assert [c["argv"][:2] for c in calls(out)] == [["kept", "iter-0003-20260101-120000"]]

    again = box.fresh()
    again.start()
    again.drain()
    assert len(calls(out)) == 1, "sent once across restarts"


def test_a_send_a_kill_cut_short_is_not_made_again(tmp_path: Path) -> None:
    out = tmp_path / "calls.jsonl"
    box = Box(tmp_path, command=command(out))
    box.box("halted", "", "The daemon halted: test.", "halt:2")
    queued = notify.Line.model_validate(box.lines()[0])
    sending = queued.model_copy(update={"state": "sending", "channel": "command", "attempt": 1})
    with (box.history / notify.OUTBOX).open("a") as outbox:
        outbox.write(sending.model_dump_json() + "\n")

    restarted = box.fresh()
    restarted.start()
    restarted.drain()
    assert calls(out) == []
    assert box.states()[-1] == ("unsure", "command")
    assert any("not sent again (it may have arrived)" in line for line in box.logged)


def test_sending_never_waits_in_the_loop(tmp_path: Path) -> None:
    barrier = tmp_path / "go"
    waits = (
        f"import pathlib, time\nwhile not pathlib.Path({str(barrier)!r}).exists(): time.sleep(0.01)"
    )
    box = Box(tmp_path, command=[sys.executable, "-c", waits], timeout_s=30)
    box.box.start()
    box.box("landed", "iter-0004-20260101-120000", "Landed: test.")  # returns with the send held
    assert box.states()[0] == ("queued", "")
    barrier.touch()
    box.box.drain()
    assert box.states()[-1] == ("sent", "command")


def test_a_command_in_the_repository_is_never_run(tmp_path: Path) -> None:
    out = tmp_path / "calls.jsonl"
    box = Box(tmp_path, command=[])
    script = box.root / "notify.py"
    script.write_text(Path(FAKE).read_text())
    box.config = NotifyConfig(command=[sys.executable, str(script), str(out), "{event}"])
    box.box.start()
    box.box("landed", "iter-0005-20260101-120000", "Landed: test.")
    box.box.drain()
    assert calls(out) == []
    assert "inside the repository, which agents change" in box.lines()[-1]["error"]
    assert sum("failed" in line for line in box.logged) == 1, "not tried again"


def test_only_the_events_listed_are_sent(tmp_path: Path) -> None:
    out = tmp_path / "calls.jsonl"
    box = Box(tmp_path, command=command(out), events=["halted"])
    box.box.start()
    box.box("landed", "iter-0006-20260101-120000", "Landed: test.")
    box.box("halted", "", "The daemon halted: test.", "halt:3")
    box.box.drain()
    assert [c["argv"][0] for c in calls(out)] == ["halted"]


def test_each_event_says_what_happened_why_and_the_command_that_acts_on_it() -> None:
    cmd: Callable[..., str] = lambda *a: "python seed.py " + " ".join(a)  # noqa: E731
    g = gap()
    kept = record(g, 1, IterationOutcome.KEPT, None).model_copy(
        update={"kept_branch": "seed/kept/iter-0001", "reason": "no test ran calc.py:9"}
    )
    blocked = record(g, 2, IterationOutcome.MERGE_BLOCKED, FailureCategory.MERGE_BLOCKED)
    failed = record(g, 3)
    assert notify.of_record(kept, cmd) == (
        "kept",
        "Kept iter-0001-20260101-120000 for ruff:calc.py:F401 on seed/kept/iter-0001 for your "
        "approval: no test ran calc.py:9. To land it: "
        "`python seed.py approve iter-0001-20260101-120000`.",
    )
    event, message = notify.of_record(blocked, cmd) or ("", "")
    assert event == "blocked" and "`python seed.py approve iter-0002-20260101-120000`" in message
    assert notify.of_record(failed, cmd) is None, "a plain failure is the log's, not a person's"
    spent = HaltState(True, "spent $10.00 of $10.00", "BUDGET_EXCEEDED", "2026-01-01T12:00:00")
    assert notify.of_halt(spent, cmd) == (
        "budget",
        "The budget is spent, so the daemon halted: spent $10.00 of $10.00. Nothing runs until "
        "`python seed.py resume`.",
        "halt:2026-01-01T12:00:00",
    )
    assert notify.of_halt(HaltState(True, "3 failures", "", "t"), cmd)[0] == "halted"


@pytest.mark.parametrize(
    "table",
    [
        'webhook = "ftp://T0KEN-SECRET"',
        'webhook = "https://T0KEN-SECRET"\nwebhook_env = "HOOK"',
        'webhook = "https://T0KEN-SECRET"\nevents = ["landed", "landed"]',
    ],
)
def test_the_webhook_url_is_never_quoted_by_a_config_error(tmp_path: Path, table: str) -> None:
    path = tmp_path / "seed.toml"
    path.write_text(f"[notify]\n{table}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "notify" in str(caught.value) and "T0KEN" not in str(caught.value)


def test_the_webhook_variable_is_never_one_the_agent_is_given() -> None:
    for agent in ({"env": ["HOOK"]}, {"keys": ["HOOK"]}):
        with pytest.raises(ValueError, match="webhook_env names HOOK"):
            Config.model_validate({"agent": agent, "notify": {"webhook_env": "HOOK"}})
    with pytest.raises(ValueError, match="not both"):
        NotifyConfig(webhook="http://127.0.0.1/", webhook_env="HOOK")
    with pytest.raises(ValueError):
        NotifyConfig.model_validate({"events": ["landed", "nonsense"]})


def test_a_queue_from_many_threads_writes_whole_lines(tmp_path: Path) -> None:
    box = Box(tmp_path, command=[sys.executable, "-c", "pass"])
    box.box.start()
    threads = [
        threading.Thread(target=box.box, args=("landed", f"iter-{n:04d}-x", "Landed: test."))
        for n in range(20)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    box.box.drain()
    states = box.states()
    assert states.count(("queued", "")) == 20 and states.count(("sent", "command")) == 20


def test_the_desktop_is_told_by_notify_send_with_no_markup_or_flag_from_quoted_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, out = tmp_path / "bin", tmp_path / "desktop.jsonl"
    folder.mkdir()
    fake = folder / "notify-send"
    fake.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(out)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    box = Box(tmp_path, desktop=True)
    box.box.start()
    box.box("halted", "", "--help <b>x</b> & <a href='http://evil'>y</a>", "halt:9")
    box.box.drain()
    [argv] = [json.loads(line) for line in out.read_text().splitlines()]
    assert argv == [
        "--app-name=seed",
        "--",
        "seed halted: repo",
        "seed: --help &lt;b&gt;x&lt;/b&gt; &amp; &lt;a href='http://evil'&gt;y&lt;/a&gt;",
    ]


def test_an_outbox_that_cannot_be_written_still_sends_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "calls.jsonl"
    box = Box(tmp_path, command=command(out))
    (box.history / notify.OUTBOX).mkdir()  # a folder where the file goes: every append fails
    box.box.start()
    box.box("halted", "", "The daemon halted: the disk is full.", "halt:10")
    box.box.drain()
    assert [c["argv"][0] for c in calls(out)] == ["halted"]
    assert any("notify: cannot write" in line for line in box.logged)

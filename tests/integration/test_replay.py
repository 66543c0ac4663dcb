"""Replay: a session recorded through the gateway against the scripted model server (all four
APIs, streamed and not) is answered again, offline, with the recorded bytes in order; a request
that differs is named with its turn and nothing is answered past it; an edited recording is
refused naming its line, and one changed on purpose and sealed again diverges where it should."""

from __future__ import annotations

import http.client
import json
import queue
import re
import shutil
import socket
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from kernel.isolation.daemonlock import DaemonLock
from kernel.isolation.gateway import Api, Exchange, Gateway
from kernel.records import exchanges
from kernel.records.exchanges import Exchanged, Recording, RecordingRefused
from kernel.records.replay import Replay, checkouts
from kernel.records.store import RecordStore
from kernel.shell import cli
from tests.agents_real.model import call, say, serving
from tests.support import BROKEN_ADD, git, make_repo, records, seed, worktrees
from tests.unit import factories

SCRIPT = [call("shell", cmd="true"), say("Done.")]
GEMINI = "/v1beta/models/gemini-x"
CALLS: list[tuple[Api, str, bool]] = [
    ("anthropic", "/v1/messages?beta=true", True),
    ("openai-responses", "/v1/responses", True),
    ("openai-chat", "/v1/chat/completions", True),
    ("openai-chat", "/v1/chat/completions", False),
    ("gemini", f"{GEMINI}:streamGenerateContent?alt=sse&key=sk-placeholder", True),
    ("gemini", f"{GEMINI}:generateContent", False),
]
"""The scripted client's six turns: each API, streamed and not."""
RUN = "session 9f1c2d3e-0a1b-4c5d-8e9f-001122334455 in /ck/wt-11-20260101120000000001"
"""What the recorded run's requests hold that no two runs share: a session id, its checkout."""
CHECKOUT = checkouts(Path("/ck"))
"""The kernel's folder of agent checkouts, as the CLI passes it."""
HOP = frozenset({"transfer-encoding", "connection", "content-length", "date", "server"})


@dataclass(frozen=True)
class Got:
    status: int
    headers: dict[str, str]
    body: bytes


def _request(
    api: Api, path: str, stream: bool, before: bytes, model: str = "m-x", run: str = RUN
) -> bytes:
    """The turn's request body; it carries the previous answer's hash, as an agent's next
    request carries what the model said, and what differs on every run (`run`)."""
    said = f"go {exchanges.sha256(before)[:12]} {run}"
    doc: dict[str, Any]
    if api == "gemini":
        doc = {"contents": [{"role": "user", "parts": [{"text": said}]}]}
    elif api == "openai-responses":
        doc = {"model": model, "stream": stream, "input": [{"role": "user", "content": said}]}
    else:
        doc = {"model": model, "stream": stream, "messages": [{"role": "user", "content": said}]}
        doc["tools"] = [{}]
    return json.dumps(doc).encode()


def _send(where: str, path: str, body: bytes) -> Got:
    host, port = where.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        headers = {"content-type": "application/json", "x-api-key": "sk-placeholder"}
        connection.request("POST", path, body=body, headers=headers)
        answer = connection.getresponse()
        return Got(answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read())
    finally:
        connection.close()


def _client(
    where: str, changes: dict[int, dict[str, Any]] | None = None, run: str = RUN
) -> Iterator[Got]:
    """The scripted agent: the six turns in order, each after the last answer; `changes` alters
    a turn's request (its path, model or text) as a different agent would."""
    before = b""
    for turn, (api, path, stream) in enumerate(CALLS, 1):
        change = (changes or {}).get(turn, {})
        text = before + change.get("text", b"")
        body = _request(api, path, stream, text, change.get("model", "m-x"), run)
        got = _send(where, change.get("path", path), body)
        before = got.body
        yield got


def _record(history: Path, state: Path) -> list[Got]:
    """The session recorded as the kernel records it: the gateway in front of the scripted
    model server, each exchange appended to model.jsonl when it ends."""
    folder = history / "iter-0001-20260101-120000"
    folder.mkdir(parents=True)
    recording = Recording(folder, state)
    pieces: dict[int, list[bytes]] = {}
    ended: queue.Queue[tuple[Exchange, int, float]] = queue.Queue()
    seen: list[Got] = []
    with serving(SCRIPT) as model:
        gate = Gateway(
            model.origin,
            {"x-api-key": "sk-real"},
            on_chunk=lambda e, piece: pieces.setdefault(e.seq, []).append(piece) and None,
            on_done=lambda e, status, seconds: ended.put((e, status, seconds)),
        )
        where = gate.start()
        try:
            for got in _client(where):
                exchange, status, seconds = ended.get(timeout=10)
                shown = {k: v for k, v in got.headers.items() if k not in HOP}
                if "content-length" in got.headers:
                    shown["content-length"] = got.headers["content-length"]
                recording.append(
                    Exchanged(
                        seq=exchange.seq,
                        api=exchange.api,
                        method=exchange.method,
                        path=exchange.path,
                        headers=exchange.headers,
                        request=exchange.body,
                        answer=b"".join(pieces.get(exchange.seq, [])),
                        status=status,
                        started=time.time(),
                        seconds=seconds,
                        answer_headers=shown,
                    )
                )
                seen.append(got)
        finally:
            gate.stop()
    return seen


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[Got]]:
    tmp = tmp_path_factory.mktemp("recorded")
    history, state = tmp / "history", tmp / "state"
    state.mkdir()
    seen = _record(history, state)
    return history / "iter-0001-20260101-120000", state, seen


def _replaying(replay: Replay, pieces: dict[int, int] | None = None) -> Gateway:
    """The gateway answering from the replay: no upstream; `pieces` counts what it sent."""

    def sent(exchange: Exchange, piece: bytes) -> None:
        if pieces is not None:
            pieces[exchange.seq] = pieces.get(exchange.seq, 0) + 1

    return Gateway("", {}, on_chunk=sent, answer_from=replay.answer)


def test_the_replay_answers_a_scripted_client_with_the_recorded_bytes_in_order(
    recorded: tuple[Path, Path, list[Got]],
) -> None:
    folder, state, seen = recorded
    replay = Replay.load(folder, state)
    assert replay.turns == 6
    pieces: dict[int, int] = {}
    gate = _replaying(replay, pieces)
    where = gate.start()
    try:
        again = list(_client(where))
    finally:
        gate.stop()
    assert [g.status for g in again] == [s.status for s in seen] == [200] * 6
    for turn, (old, new) in enumerate(zip(seen, again, strict=True), 1):
        assert new.body == old.body, turn
        assert new.headers["content-type"] == old.headers["content-type"], turn
        # framed as recorded: a JSON answer by its length, a stream event by event
        assert ("content-length" in new.headers) == ("content-length" in old.headers), turn
        # and sent as it streamed: one piece per event
        assert pieces[turn] == max(len(re.findall(rb"\r?\n\r?\n", old.body)), 1), turn
    assert [pieces[turn] > 1 for turn in range(1, 7)] == [True, True, True, False, False, False]
    assert (replay.answered, replay.divergence, replay.finished) == (6, None, True)


@pytest.mark.parametrize(
    ("turn", "change", "what"),
    [
        (2, {"path": "/v1/chat/completions"}, "path"),
        (3, {"model": "m-other"}, "model"),
        (4, {"text": b"another tool output"}, "body"),
    ],
)
def test_a_request_that_differs_is_named_with_its_turn_and_nothing_past_it_is_answered(
    recorded: tuple[Path, Path, list[Got]], turn: int, change: dict[str, Any], what: str
) -> None:
    folder, state, seen = recorded
    replay = Replay.load(folder, state)
    gate = _replaying(replay)
    where = gate.start()
    try:
        again = list(_client(where, {turn: change}))
    finally:
        gate.stop()
    assert [g.body for g in again[: turn - 1]] == [s.body for s in seen[: turn - 1]]
    # the differing turn and every one after it: the vendor's error, not to be retried
    assert {g.status for g in again[turn - 1 :]} == {403}
    assert all(g.headers.get("x-should-retry") == "false" for g in again[turn - 1 :])
    assert f"turn {turn}: the {what} differs" in again[turn - 1].body.decode()
    assert replay.divergence is not None
    assert (replay.divergence.turn, replay.divergence.what) == (turn, what)
    assert (replay.answered, replay.finished) == (turn - 1, False)


def test_a_request_past_the_recording_is_a_divergence(
    recorded: tuple[Path, Path, list[Got]],
) -> None:
    folder, state, _ = recorded
    replay = Replay.load(folder, state)
    gate = _replaying(replay)
    where = gate.start()
    try:
        list(_client(where))
        extra = _send(where, CALLS[0][1], _request("anthropic", CALLS[0][1], True, b""))
    finally:
        gate.stop()
    assert extra.status == 403
    assert replay.divergence is not None and replay.divergence.turn == 7
    assert "turn 7: the turns differs (recorded 6 requests" in extra.body.decode()


def _copy(recorded: tuple[Path, Path, list[Got]], tmp: Path) -> Path:
    folder = tmp / "history" / recorded[0].name
    folder.mkdir(parents=True)
    for path in recorded[0].iterdir():
        if path.is_file():
            (folder / path.name).write_bytes(path.read_bytes())
    return folder


def test_an_edited_recording_is_refused_naming_its_line(
    recorded: tuple[Path, Path, list[Got]], tmp_path: Path
) -> None:
    folder = _copy(recorded, tmp_path)
    lines = (folder / exchanges.MODEL_FILE).read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace('"status":200', '"status":201', 1)  # turn 3 said otherwise
    (folder / exchanges.MODEL_FILE).write_text("".join(lines))
    with pytest.raises(RecordingRefused) as refused:
        Replay.load(folder, recorded[1])
    assert refused.value.line == 3
    # a large answer is kept by its hash: edited, it is refused when the replay is loaded
    big = tmp_path / "big" / folder.name
    big.mkdir(parents=True)
    resealed = Recording(big, recorded[1])
    for line in exchanges.read(recorded[0], recorded[1]):
        answer = exchanges.body(recorded[0], line.answer)
        resealed.append(_exchanged(recorded[0], line, answer + b" " * 20_000))
    [stored, *_] = sorted((big / exchanges.BODIES).iterdir())
    stored.write_bytes(stored.read_bytes().replace(b"shell", b"shelx", 1))
    with pytest.raises(RecordingRefused, match=f"body {stored.name[:12]} .*its hash differs"):
        Replay.load(big, recorded[1])


def _exchanged(folder: Path, line: exchanges.ExchangeLine, answer: bytes) -> Exchanged:
    """A recorded line as the gateway would hand it over again (to seal it anew)."""
    return Exchanged(
        seq=line.seq,
        api=line.api,
        method=line.method,
        path=line.path,
        headers=line.headers,
        request=exchanges.body(folder, line.request),
        answer=answer,
        status=line.status,
        started=line.started.timestamp(),
        seconds=line.seconds,
        answer_headers=line.answer_headers,
    )


def test_a_recording_changed_on_purpose_and_sealed_again_diverges_at_the_next_turn(
    recorded: tuple[Path, Path, list[Got]], tmp_path: Path
) -> None:
    folder, state, seen = recorded
    lines = exchanges.read(folder, state)
    changed = tmp_path / "history" / folder.name
    changed.mkdir(parents=True)
    again = Recording(changed, state)
    for line in lines:
        answer = exchanges.body(folder, line.answer)
        if line.seq == 2:  # the model says something else at turn 2
            answer = answer.replace(b"shell", b"shelx")
        again.append(_exchanged(folder, line, answer))
    replay = Replay.load(changed, state)
    gate = _replaying(replay)
    where = gate.start()
    try:
        got = list(_client(where))
    finally:
        gate.stop()
    assert got[1].body != seen[1].body and b"shelx" in got[1].body
    assert replay.divergence is not None
    assert (replay.divergence.turn, replay.divergence.what) == (3, "body")


def test_seed_replay_refuses_an_edited_recording_and_names_the_line(
    recorded: tuple[Path, Path, list[Got]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = '[agent]\nbackend = "command"\ncommand = ["true"]\n'
    root = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"}, config)
    argv = ["--no-bootstrap", "--root", str(root), "replay"]
    assert cli.main([*argv, "1"]) == cli.EXIT_USAGE
    assert "no iteration 1" in capsys.readouterr().err
    base = git(root, "rev-parse", "HEAD").strip()
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    it = factories.record(factories.gap(), 1, base=base).model_copy(
        update={"backend": "command", "agent_tree": tree}
    )
    RecordStore(root / "history").append(it)
    assert it.iteration_id == recorded[0].name
    # the session, as this repository's kernel recorded it (sealed with its key)
    folder = root / "history" / it.iteration_id
    resealed = Recording(folder, root / ".git" / "seed")
    for line in exchanges.read(recorded[0], recorded[1]):
        resealed.append(_exchanged(recorded[0], line, exchanges.body(recorded[0], line.answer)))
    # with no api_base the agent would not run model-only: refused before anything runs (exit 2)
    assert cli.main([*argv, "1", "--round", "1"]) == cli.EXIT_USAGE
    out, err = capsys.readouterr()
    assert (
        f"{it.iteration_id} round 1: 6 model turns recorded, base {base[:12]}, backend command, "
        f"the agent's tree {tree[:12]}"
    ) in out, err
    assert "a replay runs with network model-only only; here it would be full (no api_base" in err
    assert not (folder / "replay-1").exists()
    assert cli.main([*argv, "1", "--round", "2"]) == cli.EXIT_USAGE
    assert "no round 2 recorded (rounds: 1)" in capsys.readouterr().err
    # edited by hand: refused, the line named
    text = (folder / exchanges.MODEL_FILE).read_text().splitlines(keepends=True)
    text[1] = text[1].replace('"status":200', '"status":500', 1)
    (folder / exchanges.MODEL_FILE).write_text("".join(text))
    assert cli.main([*argv, it.iteration_id]) == cli.EXIT_USAGE
    assert "model.jsonl line 2: differs from its seal" in capsys.readouterr().err


def test_what_differs_on_every_run_is_no_divergence_and_what_else_differs_is(
    recorded: tuple[Path, Path, list[Got]],
) -> None:
    folder, state, seen = recorded
    other = "session 0d0e0f10-1112-4314-9516-171819202122 in /ck/wt-12-20260202120000000002"
    for volatile, finished in (((CHECKOUT,), True), ((), False)):
        replay = Replay.load(folder, state, volatile=volatile)
        gate = _replaying(replay)
        where = gate.start()
        try:
            again = list(_client(where, run=other))
        finally:
            gate.stop()
        assert replay.finished is finished
        if finished:  # a fresh session id and checkout: the same answers
            assert [g.body for g in again] == [g.body for g in seen]
        else:  # a path the kernel was not told is volatile is a difference
            assert replay.divergence is not None
            assert (replay.divergence.turn, replay.divergence.what) == (1, "body")


def test_requests_recorded_in_flight_together_may_come_in_either_order(
    recorded: tuple[Path, Path, list[Got]], tmp_path: Path
) -> None:
    folder, state, seen = recorded
    lines = exchanges.read(folder, state)
    together = tmp_path / "history" / folder.name
    together.mkdir(parents=True)
    again = Recording(together, state)
    for line in lines:
        exchanged = _exchanged(folder, line, exchanges.body(folder, line.answer))
        if line.seq in (2, 3):  # a side call beside the main one: both under way at once
            exchanged = replace(exchanged, started=lines[1].started.timestamp(), seconds=5.0)
        again.append(exchanged)
    order = [0, 2, 1, 3, 4, 5]
    for where_from, diverged in ((together, None), (folder, (2, "path"))):
        replay = Replay.load(where_from, state)
        gate = _replaying(replay)
        where = gate.start()
        try:
            got = [
                _send(where, CALLS[i][1], exchanges.body(folder, lines[i].request)) for i in order
            ]
        finally:
            gate.stop()
        if diverged is None:
            assert [g.body for g in got] == [seen[i].body for i in order]
            assert replay.finished
        else:
            assert replay.divergence is not None
            assert (replay.divergence.turn, replay.divergence.what) == diverged


AGENT = Path(__file__).parents[1] / "agents_real" / "model_agent.py"
FIX = [call("replace", path="calc.py", old="return a - b", new="return a + b"), say("fixed")]


def _unchanged(repo: Path) -> dict[str, bytes]:
    """What a replay must leave as it was: history/ but its replay-N/ folders, and git's refs."""
    kept = {
        path.relative_to(repo).as_posix(): path.read_bytes()
        for path in sorted((repo / "history").rglob("*"))
        if path.is_file() and not any(part.startswith("replay-") for part in path.parts)
    }
    return {**kept, "<refs>": git(repo, "show-ref", "--head").encode()}


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A real `seed.py once`: the command agent fixes calc.py through the gateway, recorded."""
    tmp = tmp_path_factory.mktemp("ran")
    with serving(FIX) as model:
        argv = json.dumps([sys.executable, str(AGENT), "olleh", "http://127.0.0.1:9/"])
        config = (
            f'[agent]\nbackend = "command"\ncommand = {argv}\nrepair_rounds = 0\n'
            f'api_base = "{model.origin}"\n'
        )
        repo = make_repo(tmp / "repo", BROKEN_ADD, config)
        done = seed(repo, "once")
    # the scripted server is stopped: nothing answers at api_base any more
    assert done.returncode == 0, done.stderr
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS" and record["network"] == "model-only", record["reason"]
    return repo, record


def test_seed_replay_runs_the_agent_again_offline_to_the_recorded_tree_and_changes_nothing(
    ran: tuple[Path, dict[str, Any]], bwrap: None
) -> None:
    repo, record = ran
    before = _unchanged(repo)
    # a listener where the model was: a replay has no upstream, so nothing connects to it
    port = int(tomllib.loads((repo / "seed.toml").read_text())["agent"]["api_base"].split(":")[-1])
    with socket.create_server(("127.0.0.1", port)) as upstream:
        upstream.setblocking(False)
        done = seed(repo, "replay", record["iteration_id"])
        with pytest.raises(BlockingIOError):
            upstream.accept()  # no connection came
    assert done.returncode == 0, done.stdout + done.stderr
    tree = record["agent_tree"]
    assert (
        tree and f"recorded tree {tree[:12]}, replayed tree {tree[:12]}: same tree" in done.stdout
    )
    assert "verdict: SUCCESS" in done.stdout
    assert _unchanged(repo) == before  # no ledger line, no record, no landing, no branch
    folder = repo / "history" / record["iteration_id"] / "replay-1"
    replayed = exchanges.read(folder, repo / ".git" / "seed")
    assert [line.status for line in replayed] == [200, 200]
    recorded = exchanges.read(folder.parent, repo / ".git" / "seed")
    # answered with the recorded content type and framing
    assert [line.answer_headers for line in replayed] == [
        {k: v for k, v in line.answer_headers.items() if k.startswith("content-")}
        for line in recorded
    ]
    # in the recorded checkout's path, as the agent's requests may carry it (aider's do)
    where = [
        line for line in (folder / "agent.log").read_text().splitlines() if "working in" in line
    ]
    assert where and where[0] in (folder.parent / "agent.log").read_text().splitlines()
    assert re.fullmatch(r"wt-[0-9]+-[0-9]+", record.get("checkout", "")), record.get("checkout")
    assert (folder / "agent.log").is_file()
    assert worktrees(repo) == [str(repo)]  # the replay's checkout is gone
    # a checkout left there (a replay killed outright) is the kernel's own: made afresh
    leftover = Path(where[0].removeprefix("working in ")) / "calc.py"
    leftover.parent.mkdir(parents=True)
    leftover.write_text("left over\n")
    again = seed(repo, "replay", record["iteration_id"])  # never over an earlier replay's files
    assert again.returncode == 0 and (folder.parent / "replay-2" / "model.jsonl").is_file()
    assert not leftover.parent.exists()


def test_the_recording_holds_the_upstreams_answer_headers(
    ran: tuple[Path, dict[str, Any]],
) -> None:
    repo, record = ran
    lines = exchanges.read(repo / "history" / record["iteration_id"], repo / ".git" / "seed")
    heads = [line.answer_headers for line in lines]
    assert [h.get("content-type") for h in heads] == ["text/event-stream"] * 2
    # framed by its length as the scripted server frames it; any other value kept by allow-list
    assert [h.get("content-length") for h in heads] == [str(line.answer.size) for line in lines]
    assert heads[0]["date"] == exchanges.REDACTED


def _copied(ran: tuple[Path, dict[str, Any]], tmp: Path) -> tuple[Path, dict[str, Any]]:
    """The recorded repository copied whole (its kernel state and key with it)."""
    repo = tmp / "repo"
    shutil.copytree(ran[0], repo, symlinks=True)
    return repo, ran[1]


def test_a_recording_edited_by_hand_is_refused_naming_the_line(
    ran: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    repo, record = _copied(ran, tmp_path)
    model = repo / "history" / record["iteration_id"] / exchanges.MODEL_FILE
    lines = model.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace("fixed", "fixes", 1)
    model.write_text("".join(lines))
    done = seed(repo, "replay", record["iteration_id"])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "model.jsonl line 2: differs from its seal" in done.stderr


def test_a_replay_waits_for_no_daemon_it_refuses_while_one_runs_on_the_repository(
    ran: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    # a replay shares the loop's run folder and integrity snapshot: beside a running daemon
    # it could disturb the daemon's agent run, so it takes the daemon's lock or refuses
    repo, record = _copied(ran, tmp_path)
    folder = repo / "history" / record["iteration_id"]
    replays = sorted(folder.glob("replay-*"))
    daemon = DaemonLock(repo / ".git" / "seed" / "daemon.lock")
    daemon.acquire()
    try:
        done = seed(repo, "replay", record["iteration_id"])
    finally:
        daemon.release()
    assert done.returncode == 2, done.stdout + done.stderr
    assert "another seed daemon" in done.stderr and "replay when it has stopped" in done.stderr
    assert sorted(folder.glob("replay-*")) == replays  # nothing of a run was made
    assert worktrees(repo) == [str(repo)]


def test_a_recording_changed_and_sealed_again_gives_another_tree_and_names_the_turn(
    ran: tuple[Path, dict[str, Any]], tmp_path: Path, bwrap: None
) -> None:
    repo, record = _copied(ran, tmp_path)
    folder = repo / "history" / record["iteration_id"]
    state = repo / ".git" / "seed"
    lines = exchanges.read(folder, state)
    for name in (exchanges.MODEL_FILE, exchanges.SEAL_FILE):
        (folder / name).unlink()
    again = Recording(folder, state)  # sealed again with the kernel's key, as the issue decided
    for line in lines:
        answer = exchanges.body(folder, line.answer)
        if line.seq == 1:  # the model proposes another fix
            answer = answer.replace(b"return a + b", b"return b + a")
        again.append(_exchanged(folder, line, answer))
    done = seed(repo, "replay", record["iteration_id"])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "same tree" not in done.stdout
    assert f"recorded tree {record['agent_tree'][:12]}" in done.stdout
    assert "diverged at turn 2: the body differs" in done.stdout
    assert "verdict: " in done.stdout


def test_round_two_is_replayed_after_round_one_with_the_judges_feedback(
    tmp_path: Path, bwrap: None
) -> None:
    """Round 1 breaks add() another way and is refused; round 2 fixes it. `--round 2` replays
    round 1 first (its tree, the judge's refusal), then round 2 to the landed tree."""
    wrong = call("replace", path="calc.py", old="return a - b", new="return b - a")
    right = call("replace", path="calc.py", old="return b - a", new="return a + b")
    with serving([wrong, say("done"), right, say("fixed")], text_only=True) as model:
        argv = json.dumps([sys.executable, str(AGENT), "olleh", "http://127.0.0.1:9/"])
        config = (
            f'[agent]\nbackend = "command"\ncommand = {argv}\nrepair_rounds = 1\n'
            f'api_base = "{model.origin}"\n'
        )
        repo = make_repo(tmp_path / "repo", BROKEN_ADD, config)
        assert seed(repo, "once").returncode == 0
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS" and len(record["rounds"]) == 2, record["reason"]
    done = seed(repo, "replay", record["iteration_id"], "--round", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    tree = record["agent_tree"][:12]
    assert "round 2: 2 model turns recorded" in done.stdout
    assert f"recorded tree {tree}, replayed tree {tree}: same tree" in done.stdout
    folder = repo / "history" / record["iteration_id"] / "replay-1"
    assert {p.name for p in folder.glob("agent*.log")} == {"agent.log", "agent-round-2.log"}

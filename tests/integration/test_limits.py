"""Usage limits pause, they do not fail; stuck runs end early (issue 42 items 5 and 6).

A command agent asks the scripted model through the kernel's gateway. The model answers
HTTP 429 with `retry-after: 5` at first: the run ends LIMITED with no failure counted, the
daemon asks nothing of the model for about 5 s, then goes on by itself and lands the fix;
`once` exits 5 on it. A model that answers the same tool call over and over ends the run as
STUCK long before its time cap, with the tokens it spent in the record."""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.agents_real.model import ScriptedModel, call, say, serving
from tests.fakes import notify_fakes
from tests.support import (
    BROKEN_ADD,
    fake_cli_config,
    fake_cli_env,
    git,
    make_repo,
    records,
    seed,
    start_daemon,
    wait_for,
)

AGENT = Path(__file__).parents[1] / "agents_real" / "model_agent.py"
KEY = "sk-real-0123456789abcdefghij"
NOWHERE = "-"
"""The agent looks around after its work for no key and no host (tests/integration/test_model_only.py does)."""
FIX = [call("replace", path="calc.py", old="return a - b", new="return a + b"), say("fixed")]


def _limit(seconds: int) -> dict[str, Any]:
    """The first two requests (the agent's ask and its one retry) are answered 429 with a
    retry-after of `seconds`, the rest by the script."""
    return {
        "error": (429, "rate limited"),
        "error_headers": (("retry-after", f"{seconds}"),),
        "errors": 2,
    }


def _repo(tmp: Path, model: ScriptedModel, extra: str = "", rounds: int = 5) -> Path:
    argv = json.dumps([sys.executable, str(AGENT), KEY[::-1], NOWHERE, str(rounds)])
    config = (
        f'[agent]\nbackend = "command"\ncommand = {argv}\nrepair_rounds = 0\n'
        f'api_base = "{model.origin}"\nkeys = ["SEED_TEST_KEY"]\n{extra}'
    )
    return make_repo(tmp / "repo", BROKEN_ADD, config)


def _told(out: Path) -> str:
    """[notify] with the recording command (tests/fakes/notify_fakes.py) writing to `out`."""
    argv = json.dumps([sys.executable, notify_fakes.__file__, str(out), "{event}", "{message}"])
    return f"[notify]\ncommand = {argv}\n"


def _at(record: dict[str, Any], field: str) -> float:
    return datetime.fromisoformat(record[field]).timestamp()


def _daemon_until_two_records(repo: Path) -> None:
    """Run the daemon until history holds two records, and let it stop (max_iterations)."""
    daemon = start_daemon(repo, env={"SEED_TEST_KEY": KEY})
    try:
        wait_for(lambda: len(records(repo)) >= 2, 240, "two records", alive=daemon)
        daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.communicate()


def _limited(record: dict[str, Any]) -> None:
    """A LIMITED record: no failure category, the reset it waits for in its reason."""
    assert record["outcome"] == "LIMITED", record["reason"]
    assert record["failure_category"] is None
    assert "HTTP 429 (rate_limit_exceeded)" in record["reason"]
    assert "it named its reset: the daemon waits until" in record["reason"]


def test_a_429_with_retry_after_pauses_the_daemon_which_resumes_and_lands(tmp_path: Path) -> None:
    told = tmp_path / "told.jsonl"
    with serving(FIX, **_limit(5)) as model:
        repo = _repo(tmp_path, model, "[daemon]\nmax_iterations = 2\n" + _told(told))
        _daemon_until_two_records(repo)
        asked = [r.at for r in model.requests]

    first, second = records(repo)
    _limited(first)
    assert second["outcome"] == "SUCCESS", second["reason"]
    assert "return a + b" in git(repo, "show", "HEAD:calc.py")
    limited_at = _at(first, "ended_at")
    # about 5 s after the limit answer, and not one request to the model meanwhile
    assert asked[1] < limited_at < asked[2]
    assert 4.5 <= asked[2] - asked[1] <= 60, asked
    assert len(asked) == 4  # two limited, then the fix and its end
    # no failure counted: the plan that landed was told of no failed attempt
    assert not second["plan"]["history"], second["plan"]["history"]
    assert not (repo / "history" / "limit.json").exists()  # cleared once the reset passed
    log = (repo / "history" / "daemon.log").read_text()
    assert "limited until" in log and "the usage limit has reset: the daemon goes on" in log
    [limited] = [c["argv"] for c in notify_fakes.calls(told) if c["argv"][0] == "limited"]
    assert "the daemon waits until" in limited[1] and "resumes by itself" in limited[1]
    halted = repo / "history" / "halt.json"
    assert not halted.exists() or not json.loads(halted.read_text())["halted"]


def test_once_exits_5_on_a_limit_and_the_daemon_resumes_after_the_reset(tmp_path: Path) -> None:
    # 45 s: time enough for `status` and a second `once` to meet the pause on a busy machine
    with serving(FIX, **_limit(45)) as model:
        repo = _repo(tmp_path, model, "[daemon]\nmax_iterations = 1\n")
        done = seed(repo, "once", env={"SEED_TEST_KEY": KEY})
        assert done.returncode == 5, done.stderr
        [first] = records(repo)
        _limited(first)
        pause = json.loads((repo / "history" / "limit.json").read_text())
        until = datetime.fromisoformat(pause["until"]).timestamp()
        assert 43 <= until - _at(first, "ended_at") <= 46, pause
        status = seed(repo, "status")
        assert "limited:     until " in status.stdout, status.stdout
        again = seed(repo, "once", env={"SEED_TEST_KEY": KEY})  # still limited: runs nothing
        assert again.returncode == 5 and len(records(repo)) == 1, again.stderr
        assert len(model.requests) == 2
        _daemon_until_two_records(repo)
        asked = [r.at for r in model.requests]

    second = records(repo)[1]
    assert second["outcome"] == "SUCCESS", second["reason"]
    assert asked[2] >= until - 0.5  # nothing asked of the model before the reset


def test_a_model_repeating_one_tool_call_ends_stuck_before_its_time_cap(tmp_path: Path) -> None:
    again = [call("replace", path="calc.py", old="no such text", new="anything")]
    with serving(again) as model:
        told = tmp_path / "told.jsonl"
        repo = _repo(tmp_path, model, "timeout_s = 240\n" + _told(told), rounds=100)
        started = time.monotonic()
        done = seed(repo, "once", env={"SEED_TEST_KEY": KEY})
        took = time.monotonic() - started
        asked = len(model.requests)

    assert done.returncode == 1, done.stderr
    [record] = records(repo)
    assert (record["outcome"], record["failure_category"]) == ("FAILURE", "STUCK"), record["reason"]
    # the first request has no step yet; the next 8 repeat one another, and the run ends there
    # (the agent may have sent its next request as the ninth answer's last bytes reached it,
    # before the gateway counted that answer: that one still goes)
    assert asked in (9, 10)
    assert record["wire_requests"] == asked and record["wire_tokens"] == asked * 1050
    assert "8 identical model requests in a row" in record["reason"]
    assert "(9,450 tokens spent)" in record["reason"]
    assert '"name": "replace"' in record["evidence"][0]
    assert record["durations"]["execute"] < 60 and took < 200
    report = (repo / "history" / record["iteration_id"] / "report.md").read_text()
    assert "STUCK" in report
    [stuck] = [c["argv"] for c in notify_fakes.calls(told) if c["argv"][0] == "stuck"]
    assert "8 identical model requests in a row" in stuck[1]


def test_model_requests_that_change_nothing_in_the_checkout_end_stuck(tmp_path: Path) -> None:
    # each request differs (no repeat), and none changes a byte of the checkout
    misses = [call("replace", path="calc.py", old=f"no text {n}", new="x") for n in range(60)]
    with serving(misses) as model:
        repo = _repo(tmp_path, model, "timeout_s = 240\nstuck_turns = 6\n", rounds=100)
        done = seed(repo, "once", env={"SEED_TEST_KEY": KEY})
        asked = len(model.requests)

    assert done.returncode == 1, done.stderr
    [record] = records(repo)
    assert (record["outcome"], record["failure_category"]) == ("FAILURE", "STUCK"), record["reason"]
    assert "no change to the checkout in 6 turns in a row (model requests)" in record["reason"]
    # the first request has no step yet (no turn); the next 6 change nothing (the agent may
    # have sent its next requests as the seventh answer's last bytes reached it, before the
    # gateway counted that answer: those still go)
    assert asked in (7, 8, 9), (asked, record["reason"])
    spent = re.search(r"\(([\d,]+) tokens spent\)", record["reason"])
    assert spent is not None and 7 * 1050 <= int(spent[1].replace(",", "")) <= asked * 1050


def _claude_limited(tmp: Path, network: str) -> tuple[int, dict[str, Any], float]:
    """`once` with the fake claude reporting its model's usage limit, resetting in 90 s."""
    reset = int(time.time()) + 90
    tmp.mkdir()
    config = fake_cli_config("claude", f'network = "{network}"\n')
    repo = make_repo(tmp / "repo", BROKEN_ADD, config)
    env = fake_cli_env(tmp, {"outcome": "limited", "reset": reset})
    done = seed(repo, "once", env=env)
    [record] = records(repo)
    return done.returncode, record, reset


def test_a_cli_limit_counts_only_where_no_gateway_serves_the_run(tmp_path: Path) -> None:
    """The fake claude's own result says its model's usage limit (api_error_status 429). With
    the network full that is the limit; through the gateway only the upstream's answer
    decides, and this upstream answered nothing."""
    code, record, reset = _claude_limited(tmp_path / "full", "full")
    assert (code, record["outcome"], record["failure_category"]) == (5, "LIMITED", None)
    assert "claude: API status 429" in record["reason"]
    pause = json.loads((tmp_path / "full" / "repo" / "history" / "limit.json").read_text())
    assert datetime.fromisoformat(pause["until"]).timestamp() == reset
    code, record, _ = _claude_limited(tmp_path / "wired", "model-only")
    assert (code, record["outcome"], record["failure_category"]) == (1, "FAILURE", "AGENT_ERROR")
    assert not (tmp_path / "wired" / "repo" / "history" / "limit.json").exists()

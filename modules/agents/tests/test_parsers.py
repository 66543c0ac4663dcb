"""Each adapter reads output captured from the real tools (docs/agent-clis.md) correctly."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time
from typing import Any

import pytest

from domain import FailureCategory
from modules.agents import aider, claude, codex, gemini, mini, opencode
from modules.agents.common import json_objects
from modules.agents.tests.helpers import make_plan, ran

CLAUDE_OK = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "num_turns": 4,
    "result": "Done. I fixed the off-by-one in parse().",
    "total_cost_usd": 0.16370575,
    "usage": {
        "input_tokens": 1203,
        "cache_creation_input_tokens": 5120,
        "cache_read_input_tokens": 48211,
        "output_tokens": 812,
    },
    "modelUsage": {
        "claude-sonnet-4-5": {
            "inputTokens": 1203,
            "outputTokens": 812,
            "cacheReadInputTokens": 48211,
            "cacheCreationInputTokens": 5120,
            "costUSD": 0.16370575,
        }
    },
}


def test_claude_success_reads_cost_tokens_turns_and_model() -> None:
    report = claude.AGENT.parse(make_plan(), ran(json.dumps(CLAUDE_OK) + "\n"))
    assert report.success and report.failure_category is None
    assert report.cost_usd == pytest.approx(0.16370575)
    assert report.input_tokens == 1203 + 5120 + 48211 and report.cached_tokens == 48211
    assert report.output_tokens == 812 and report.tokens_used == 1203 + 5120 + 48211 + 812
    assert (report.turns, report.model) == (4, "claude-sonnet-4-5")
    assert "off-by-one" in report.summary


def test_claude_api_error_with_exit_0_is_a_failure() -> None:
    final = {**CLAUDE_OK, "is_error": True, "result": "API Error: 401 invalid x-api-key"}
    final["api_error_status"] = 401
    report = claude.AGENT.parse(make_plan(), ran("Warning: noise\n" + json.dumps(final), 0))
    assert not report.success and report.failure_category == FailureCategory.AGENT_ERROR
    assert "401" in report.summary and "is_error true" in report.summary


def test_claude_max_turns_error_without_a_result_field() -> None:
    final = {
        "type": "result",
        "subtype": "error_max_turns",
        "is_error": True,
        "num_turns": 2,
        "errors": ["Reached maximum number of turns (1)"],
    }
    report = claude.AGENT.parse(make_plan(), ran(json.dumps(final), 1))
    assert not report.success and "Reached maximum number of turns" in report.summary
    assert report.turns == 2


def test_claude_without_a_result_object_is_a_failure() -> None:
    text = "Error: When using --print, --output-format=stream-json requires --verbose\n"
    report = claude.AGENT.parse(make_plan(), ran(text, 1))
    assert not report.success and "requires --verbose" in report.summary


def _assistant(ident: str, inputs: int, cached: int, outputs: int, text: str = "") -> str:
    """One assistant event of Claude Code 2.1's stream-json (one per content block)."""
    usage = {
        "input_tokens": inputs,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
        "output_tokens": outputs,
    }
    content = [{"type": "text", "text": text}]
    message = {"id": ident, "model": "qwen3-coder", "content": content, "usage": usage}
    return json.dumps({"type": "assistant", "message": message}) + "\n"


def test_claude_still_running_shows_the_usage_of_its_messages_so_far() -> None:
    text = json.dumps({"type": "system", "subtype": "init"}) + "\n"
    text += _assistant("msg_1", 800, 200, 1, "reading") + _assistant("msg_1", 800, 200, 1)
    # a file it read that speaks of turn limits is no refusal of claude's
    text += '{"type":"user","message":{"role":"user","content":"raise at the maximum turns"}}\n'
    text += _assistant("msg_2", 900, 300, 12)
    report = claude.AGENT.parse(make_plan(), ran(text, None))
    assert not report.success  # no result yet: the run's end decides
    assert (report.input_tokens, report.cached_tokens, report.output_tokens) == (2200, 500, 13)
    assert (report.tokens_used, report.model, report.cost_usd) == (2213, "qwen3-coder", 0.0)
    # at the end the result object's figures count, not the messages'
    final = claude.AGENT.parse(make_plan(), ran(text + json.dumps(CLAUDE_OK) + "\n"))
    assert final.success and final.cost_usd == CLAUDE_OK["total_cost_usd"]
    assert final.tokens_used == 1203 + 5120 + 48211 + 812 and final.refusals == ()


CODEX_OK = """\
Reading additional input from stdin...
{"type":"thread.started","thread_id":"01a202ff-6157-7770-8f01-078c94a91f2f"}
{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for `fake-model` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."}}
{"type":"turn.started"}
{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'echo hi > out.txt && echo done'","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'echo hi > out.txt && echo done'","aggregated_output":"done\\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Hello from fake"}}
{"type":"turn.completed","usage":{"input_tokens":1334,"cached_input_tokens":1000,"cache_write_input_tokens":0,"output_tokens":66,"reasoning_output_tokens":0}}
"""

CODEX_401 = """\
{"type":"turn.started"}
{"type":"error","message":"Reconnecting... 1/5 (unexpected status 401 Unauthorized: fake auth failure, url: http://127.0.0.1:18766/v1/responses)"}
{"type":"error","message":"unexpected status 401 Unauthorized: fake auth failure, url: http://127.0.0.1:18766/v1/responses"}
{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: fake auth failure, url: http://127.0.0.1:18766/v1/responses"}}
"""


def test_codex_reads_usage_from_turn_completed_and_reports_no_cost() -> None:
    report = codex.AGENT.parse(make_plan(), ran(CODEX_OK))
    assert report.success and report.summary == "Hello from fake"
    assert (report.input_tokens, report.cached_tokens, report.output_tokens) == (1334, 1000, 66)
    assert report.tokens_used == 1400 and report.cost_usd == 0 and report.turns == 1


def test_codex_turn_failed_is_a_failure() -> None:
    report = codex.AGENT.parse(make_plan(), ran(CODEX_401, 1))
    assert not report.success and "turn.failed" in report.summary and "401" in report.summary


def test_codex_usage_error_exit_2() -> None:
    text = (
        "error: unexpected argument '--full-auto' found\n\nUsage: codex exec [OPTIONS] [PROMPT]\n"
    )
    report = codex.AGENT.parse(make_plan(), ran(text, 2))
    assert not report.success and "exited 2" in report.summary


AIDER_OK = """\
Analytics have been permanently disabled.

Aider v0.86.2
Model: openai/fake-model with whole edit format
Git repo: none
Repo-map: disabled
Added hello.py to the chat.

Hello from fake chat

Tokens: 2.3k sent, 67 received. Cost: $0.0080 message, $0.0080 session.
"""

AIDER_401 = """\
Aider v0.86.2
Model: openai/fake-model with whole edit format

litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect
API key provided: fake
The API provider is not able to authenticate you. Check your API key.
"""


def test_aider_reads_the_tokens_and_cost_line() -> None:
    report = aider.AGENT.parse(make_plan(), ran(AIDER_OK))
    assert report.success and "Hello from fake chat" in report.summary
    assert (report.input_tokens, report.output_tokens, report.tokens_used) == (2300, 67, 2367)
    assert report.cost_usd == pytest.approx(0.008)
    assert (report.model, report.version) == ("openai/fake-model", "aider 0.86.2")


def test_aider_api_error_with_exit_0_is_a_failure() -> None:
    report = aider.AGENT.parse(make_plan(), ran(AIDER_401, 0))
    assert not report.success and report.failure_category == FailureCategory.AGENT_ERROR
    assert "AuthenticationError" in report.summary


def test_aider_cache_line_split_over_two_lines_and_unpriced_models() -> None:
    text = (
        "Tokens: 12k sent, 3.4k cache write, 9.1k cache hit, 512 received.\n"
        "Cost: $0.05 message, $0.12 session.\n"
        "Tokens: 650 sent, 4 received.\n"
    )
    report = aider.AGENT.parse(make_plan(), ran(text))
    assert report.input_tokens == 12000 + 9100 + 650 and report.cached_tokens == 9100
    assert report.output_tokens == 516 and report.turns == 2
    assert report.cost_usd == pytest.approx(0.12)


def _trajectory(status: str, cost: float = 0.004958) -> str:
    usage = {"prompt_tokens": 2345, "completion_tokens": 67, "total_tokens": 2412}
    return json.dumps(
        {
            "info": {
                "model_stats": {"instance_cost": cost, "api_calls": 2},
                "config": {"model": {"model_name": "openai/fake-model"}},
                "mini_version": "2.4.6",
                "exit_status": status,
                "submission": "",
            },
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {
                    "role": "assistant",
                    "content": "I will create the file.",
                    "extra": {"response": {"usage": usage}, "cost": 0.002479},
                },
                {
                    "role": "assistant",
                    "content": "Done, submitting.",
                    "extra": {"response": {"usage": usage}, "cost": 0.002479},
                },
                {"role": "exit", "content": "", "extra": {"exit_status": status, "submission": ""}},
            ],
            "trajectory_format": "mini-swe-agent-1.1",
        }
    )


def test_mini_submitted_reads_cost_tokens_and_version_from_the_trajectory() -> None:
    result = ran("", 0, artifacts={"trajectory.json": _trajectory("Submitted")})
    report = mini.AGENT.parse(make_plan(), result)
    assert report.success and report.summary == "Done, submitting."
    assert report.cost_usd == pytest.approx(0.004958) and report.turns == 2
    assert (report.input_tokens, report.output_tokens) == (4690, 134)
    assert (report.model, report.version) == ("openai/fake-model", "mini-swe-agent 2.4.6")


def test_mini_limits_exceeded_with_exit_0_is_a_failure() -> None:
    result = ran("", 0, artifacts={"trajectory.json": _trajectory("LimitsExceeded")})
    report = mini.AGENT.parse(make_plan(), result)
    assert not report.success and "LimitsExceeded" in report.summary
    assert report.tokens_used == 2 * 2412


def test_mini_without_a_trajectory_is_a_failure() -> None:
    report = mini.AGENT.parse(make_plan(), ran("Usage: mini [OPTIONS]\nNo such option\n", 2))
    assert not report.success and "no trajectory" in report.summary


GEMINI_OK = json.dumps(
    {
        "session_id": "a3554d3d-afe2-4ded-a286-bc1453e755c6",
        "response": "Hello from fake gemini",
        "stats": {
            "models": {
                "gemini-2.5-pro": {
                    "api": {"totalRequests": 1, "totalErrors": 0, "totalLatencyMs": 39},
                    "tokens": {
                        "input": 321,
                        "prompt": 321,
                        "candidates": 12,
                        "total": 333,
                        "cached": 0,
                        "thoughts": 0,
                        "tool": 0,
                    },
                }
            },
            "tools": {"totalCalls": 0},
            "files": {"totalLinesAdded": 0, "totalLinesRemoved": 0},
        },
    },
    indent=2,
)

GEMINI_400 = (
    "Error when talking to Gemini API Full report available at: /tmp/x.json\n"
    "    at async GeminiClient.sendMessageStream (file:///gemini.js:1:2)\n"
    '{"session_id":"9febd1b7","error":{"type":"Error","message":"{\\"error\\":{\\"code\\":400,'
    '\\"message\\":\\"API key not valid. Please pass a valid API key.\\"}}","code":400}}\n'
)


def test_gemini_reads_the_pretty_printed_document() -> None:
    report = gemini.AGENT.parse(
        make_plan(), ran("Warning: 256-color support not detected\n" + GEMINI_OK)
    )
    assert report.success and report.summary == "Hello from fake gemini"
    assert (report.tokens_used, report.input_tokens, report.output_tokens) == (333, 321, 12)
    assert (report.turns, report.model, report.cost_usd) == (1, "gemini-2.5-pro", 0.0)


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (41, "authentication"),
        (42, "bad input"),
        (44, "sandbox"),
        (52, "configuration"),
        (53, "turn limit"),
        (54, "tool failed"),
        (55, "not trusted"),
        (130, "cancelled"),
    ],
)
def test_gemini_exit_codes_are_named_in_the_failure(code: int, words: str) -> None:
    report = gemini.AGENT.parse(
        make_plan(), ran("Gemini CLI is not running in a trusted directory.\n", code)
    )
    assert not report.success and report.failure_category == FailureCategory.AGENT_ERROR
    assert words in report.summary and f"exited {code}" in report.summary


def test_gemini_http_error_on_stderr() -> None:
    report = gemini.AGENT.parse(make_plan(), ran(GEMINI_400, 144))
    assert not report.success and "API key not valid" in report.summary


OPENCODE_OK = """\
Performing one time database migration, may take a few minutes...
{"type":"step_start","timestamp":1795346797226,"sessionID":"ses_d","part":{"id":"prt_1","messageID":"msg_2","sessionID":"ses_d","type":"step-start"}}
{"type":"text","timestamp":1795346797226,"sessionID":"ses_d","part":{"id":"prt_2","messageID":"msg_2","sessionID":"ses_d","type":"text","text":"Hello from fake chat","time":{"start":1795346797167,"end":1795346797175}}}
{"type":"step_finish","timestamp":1795346797226,"sessionID":"ses_d","part":{"id":"prt_3","reason":"stop","messageID":"msg_2","sessionID":"ses_d","type":"step-finish","tokens":{"total":2412,"input":2345,"output":67,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0.002479}}
"""

OPENCODE_401 = """\
{"type":"error","timestamp":1795346806413,"sessionID":"ses_e","error":{"name":"APIError","data":{"message":"Incorrect API key provided: fake","statusCode":401,"isRetryable":false}}}
"""


def test_opencode_sums_step_finish_events() -> None:
    twice = OPENCODE_OK + OPENCODE_OK.splitlines()[-1] + "\n"
    report = opencode.AGENT.parse(make_plan(), ran(twice))
    assert report.success and report.summary == "Hello from fake chat"
    assert report.cost_usd == pytest.approx(2 * 0.002479)
    assert (report.tokens_used, report.input_tokens, report.output_tokens) == (4824, 4690, 134)
    assert report.turns == 2


def test_opencode_error_event_is_a_failure() -> None:
    report = opencode.AGENT.parse(make_plan(), ran(OPENCODE_401, 1))
    assert not report.success and "APIError: Incorrect API key" in report.summary


def test_a_timed_out_run_is_agent_timeout_for_every_adapter() -> None:
    for agent in (claude.AGENT, codex.AGENT, aider.AGENT, mini.AGENT, gemini.AGENT, opencode.AGENT):
        report = agent.parse(make_plan(), ran("", None, timed_out=True))
        assert report.failure_category == FailureCategory.AGENT_TIMEOUT, agent.name


def test_json_objects_skips_text_and_objects_inside_lines() -> None:
    text = 'noise {"not": "at line start"}\n{"a": 1}\n{broken\n{\n  "b": {"c": 2}\n}'
    assert list(json_objects(text)) == [{"a": 1}, {"b": {"c": 2}}]


def test_claude_cost_for_a_model_it_has_no_price_for_is_left_to_the_prices_table() -> None:
    # Claude Code 2.1.332 against a model it does not know (trimmed from a real run)
    unknown = {
        "inputTokens": 2400,
        "outputTokens": 150,
        "cacheReadInputTokens": 600,
        "cacheCreationInputTokens": 0,
        "costUSD": 0.01272,
        "costBasis": "unknown",
    }
    final = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "num_turns": 3,
        "result": "Fixed add().",
        "session_id": "d13c5974-f8e8-4fb8-9530-5cd9b8810127",
        "total_cost_usd": 0.01272,
        "modelUsage": {"qwen3-coder": unknown},
    }
    text = '[claude-code:unrecognized_model] {"model":"qwen3-coder"}\n' + json.dumps(final)
    report = claude.AGENT.parse(make_plan(), ran(text))
    assert report.success and report.cost_usd == 0  # the kernel prices it from [agent.prices]
    assert (report.input_tokens, report.cached_tokens, report.output_tokens) == (3000, 600, 150)
    known = {**unknown, "costUSD": 0.5, "costBasis": "list"}
    final["modelUsage"] = {"qwen3-coder": unknown, "claude-haiku-4-5": known}
    final["total_cost_usd"] = 0.51272
    report = claude.AGENT.parse(make_plan(), ran(json.dumps(final)))
    assert report.cost_usd == pytest.approx(0.5)  # only the part claude could price


def test_claude_api_error_exits_1_and_quotes_the_server() -> None:
    final = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "api_error_status": 401,
        "result": "Failed to authenticate. API Error: 401 loopback refuses this key",
    }
    report = claude.AGENT.parse(make_plan(), ran(json.dumps(final), 1))
    assert not report.success and report.failure_category == FailureCategory.AGENT_ERROR
    assert "API status 401, exit 1" in report.summary
    assert "loopback refuses this key" in report.summary


def test_aider_wrapped_api_error_and_offline_noise() -> None:
    # aider 0.86.2 offline, headless, without a git identity (from a real run)
    noise = (
        'Update git name with: git config user.name "Your Name"\n'
        "HTTPSConnectionPool(host='raw.githubusercontent.com', port=443): Max retries exceeded"
        " with url: /BerriAI/litellm/main/model_prices_and_context_window.json\n"
        "Warning: Input is not a terminal (fd=0).\n"
        "Aider v0.86.2\nModel: openai/qwen2.5-coder:7b with diff edit format\n"
    )
    failed = noise + (
        "litellm.AuthenticationError: AuthenticationError: OpenAIException - loopback \n"
        "refuses this key (44feb408)\n"
        "The API provider is not able to authenticate you. Check your API key.\n"
    )
    report = aider.AGENT.parse(make_plan(), ran(failed, 0))
    assert not report.success
    assert "OpenAIException - loopback refuses this key (44feb408)" in report.summary
    done = noise + "Fixing add().\n\nApplied edit to calc.py\nTokens: 1.0k sent, 50 received.\n"
    report = aider.AGENT.parse(make_plan(), ran(done, 0))
    assert report.success and report.summary == "Fixing add()."


def test_gemini_http_error_names_the_status_and_the_servers_words() -> None:
    # Gemini CLI 0.61.0 on an HTTP 401 (the tail of a real run): exit 401 % 256
    doc = {
        "session_id": "436517aa-61f1-40de-8a1a-a97565f63dfa",
        "error": {
            "type": "Error",
            "message": json.dumps(
                {"error": {"code": 401, "message": "no such key", "status": "UNAUTHENTICATED"}}
            ),
            "code": 401,
        },
    }
    text = "    at async Turn.run (file:///x.js:1:2) {\n  status: 401\n}\n" + json.dumps(
        doc, indent=2
    )
    report = gemini.AGENT.parse(make_plan(), ran(text, 145))
    assert not report.success and report.failure_category == FailureCategory.AGENT_ERROR
    assert report.summary == "gemini exited 145: the model API answered HTTP 401: no such key"


def test_claude_api_status_429_is_a_limit_with_its_reset() -> None:
    final = {**CLAUDE_OK, "is_error": True, "result": "Claude AI usage limit reached|1765080000"}
    final["api_error_status"] = 429
    report = claude.AGENT.parse(make_plan(), ran(json.dumps(final), 1))
    assert not report.success and "API status 429" in report.limited
    assert report.limited_until is not None and report.limited_until.timestamp() == 1765080000


def test_claude_limit_text_the_model_wrote_is_no_limit() -> None:
    # the same words as the model's own final text, with no API status: no limit
    final = {**CLAUDE_OK, "result": "Claude AI usage limit reached|1765080000"}
    assert claude.AGENT.parse(make_plan(), ran(json.dumps(final))).limited == ""
    final = {**final, "is_error": True, "api_error_status": 401}
    assert claude.AGENT.parse(make_plan(), ran(json.dumps(final), 1)).limited == ""


CODEX_LIMIT = """\
{"type":"turn.started"}
{"type":"turn.failed","error":{"message":"You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), or try again at 3:15 PM."}}
"""


def test_codex_turn_failed_on_a_usage_limit_is_a_limit() -> None:
    report = codex.AGENT.parse(make_plan(), ran(CODEX_LIMIT, 1))
    assert not report.success and "usage limit" in report.limited
    rate = CODEX_LIMIT.replace(
        "You've hit your usage limit.", "unexpected status 429 Too Many Requests:"
    )
    assert "429" in codex.AGENT.parse(make_plan(), ran(rate, 1)).limited
    assert codex.AGENT.parse(make_plan(), ran(CODEX_401, 1)).limited == ""


# Claude Code 2.1.332 on a claude.ai login at its 5-hour limit (the lines of a real run against
# the scripted model, tests/agents_real/test_limits.py; usage and other fields cut)
CLAUDE_LOGIN_LIMIT: list[dict[str, Any]] = [
    {
        "type": "rate_limit_event",
        "rate_limit_info": {
            "status": "rejected",
            "resetsAt": 1796693605,
            "rateLimitType": "five_hour",
        },
    },
    {
        "type": "assistant",
        "message": {"model": "<synthetic>", "role": "assistant", "content": []},
        "error": "rate_limit",
        "is_api_error_message": True,
        "api_error_status": 429,
        "api_error": "usage_limit_reached",
        "api_error_params": {"rate_limit_info": {"status": "rejected", "resetsAt": 1796693605}},
    },
    {
        **CLAUDE_OK,
        "is_error": True,
        "api_error_status": 429,
        "api_error": "usage_limit_reached",
        "result": "You've hit your 5-hour limit · resets 1:33am (UTC)",
    },
]


def test_claude_2_login_limit_resets_when_its_own_events_say() -> None:
    text = "\n".join(json.dumps(event) for event in CLAUDE_LOGIN_LIMIT) + "\n"
    report = claude.AGENT.parse(make_plan(), ran(text, 1))
    assert "You've hit your 5-hour limit" in report.limited
    assert report.limited_until is not None and report.limited_until.timestamp() == 1796693605
    # only the CLI's own events: the same object as a string a tool printed is no reset
    quoted = json.dumps({"type": "user", "tool_result": json.dumps(CLAUDE_LOGIN_LIMIT[0])})
    text = quoted + "\n" + json.dumps(CLAUDE_LOGIN_LIMIT[2]) + "\n"
    report = claude.AGENT.parse(make_plan(), ran(text, 1))
    assert report.limited and report.limited_until is None
    # nor a line a tool wrote into claude's output before its own error message (no params)
    synthetic = {k: v for k, v in CLAUDE_LOGIN_LIMIT[1].items() if k != "api_error_params"}
    lines = [CLAUDE_LOGIN_LIMIT[1], synthetic, CLAUDE_LOGIN_LIMIT[2]]
    text = "\n".join(json.dumps(event) for event in lines) + "\n"
    report = claude.AGENT.parse(make_plan(), ran(text, 1))
    assert report.limited and report.limited_until is None


def test_codex_limit_message_names_its_reset_in_local_time() -> None:
    now = datetime(2026, 12, 7, 23, 39, 35, tzinfo=UTC)
    later = codex.reset_of(
        "You\u2019ve hit your usage limit. ... or try again at Dec 8th, 2026 1:39 AM.", now
    )
    assert later == datetime(2026, 12, 8, 1, 40).astimezone(UTC)
    today = codex.reset_of("You've hit your usage limit. Try again at 11:52 PM.", now)
    assert today == datetime.combine(now.astimezone().date(), time(23, 53)).astimezone(UTC)
    assert codex.reset_of("You've hit your usage limit. Try again later.", now) is None
    assert codex.reset_of("exceeded retry limit, last status: 429 Too Many Requests", now) is None

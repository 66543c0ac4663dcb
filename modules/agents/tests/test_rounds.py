"""Repair rounds: each adapter continues its tool's own session where the tool can.

The flags and output fields were read in each tool's own source (issue 13's closing note names
the files): claude --resume with the result's session_id; codex exec ... resume THREAD_ID with
thread.started's thread_id (--sandbox and -C before `resume`); gemini --resume with the JSON
document's session_id; opencode run --session with the events' sessionID; aider
--restore-chat-history of the same chat history file; mini-swe-agent cannot continue a run.
"""

from __future__ import annotations

import json

import pytest

from domain import AgentContext
from modules.agents import aider, claude, codex, command, gemini, mini, opencode
from modules.agents.tests.helpers import make_context, make_plan, ran

REFUSED = "TEST_REGRESSION: tests/test_calc.py::test_add still fails"


def _round_two(resume: str = "S-1") -> AgentContext:
    return make_context().model_copy(update={"round": 2, "resume": resume, "feedback": REFUSED})


@pytest.mark.parametrize(
    ("agent", "flags"),
    [
        (claude.AGENT, ["--resume", "S-1"]),
        (gemini.AGENT, ["--resume", "S-1"]),
        (opencode.AGENT, ["--session", "S-1"]),
    ],
)
def test_a_round_continues_the_session_with_only_the_refusal(
    agent: claude.ClaudeAgent | gemini.GeminiAgent | opencode.OpencodeAgent, flags: list[str]
) -> None:
    spec = agent.run_spec(make_plan(), _round_two())
    argv = list(spec.argv)
    at = argv.index(flags[0])
    assert argv[at : at + 2] == flags and spec.resumes
    assert "## Round 2: the kernel refused your change" in spec.prompt
    assert REFUSED in spec.prompt and "## Goal" not in spec.prompt  # the session has the task


def test_codex_resumes_by_thread_id_with_its_sandbox_flags_before_the_subcommand() -> None:
    spec = codex.AGENT.run_spec(make_plan(), _round_two("0199a213-81c0"))
    argv = list(spec.argv)
    at = argv.index("resume")
    assert argv[at : at + 2] == ["resume", "0199a213-81c0"] and argv[-1] == spec.prompt
    assert argv.index("--sandbox") < at and argv.index("-C") < at and spec.resumes


def test_aider_reloads_its_chat_history_and_mini_and_commands_start_afresh() -> None:
    spec = aider.AGENT.run_spec(make_plan(), _round_two(""))
    assert "--restore-chat-history" in spec.argv and spec.resumes
    fresh = [
        mini.AGENT.run_spec(make_plan(), _round_two()),
        command.AGENT.run_spec(
            make_plan(), _round_two().model_copy(update={"command": ("agent", "{prompt_file}")})
        ),
    ]
    for run in fresh:
        assert run is not None and not run.resumes
        assert "## Goal" in run.prompt and "## Round 2: the kernel refused" in run.prompt


def test_without_a_session_id_a_round_starts_afresh_with_the_whole_task() -> None:
    spec = claude.AGENT.run_spec(make_plan(), _round_two(""))
    assert "--resume" not in spec.argv and not spec.resumes
    assert "## Goal" in spec.prompt and REFUSED in spec.prompt


def test_the_first_run_neither_resumes_nor_mentions_rounds() -> None:
    for agent in (claude.AGENT, codex.AGENT, gemini.AGENT, opencode.AGENT, aider.AGENT):
        spec = agent.run_spec(make_plan(), make_context())
        assert not spec.resumes and "Round" not in spec.prompt
        assert not {"--resume", "resume", "--session", "--restore-chat-history"} & set(spec.argv)


def test_each_tool_reports_its_session_id() -> None:
    result = {"type": "result", "subtype": "success", "is_error": False, "result": "ok"}
    assert (
        claude.AGENT.parse(make_plan(), ran(json.dumps({**result, "session_id": "c-1"}))).session
        == "c-1"
    )
    events = [
        {"type": "thread.started", "thread_id": "x-2"},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}},
    ]
    text = "\n".join(json.dumps(e) for e in events)
    assert codex.AGENT.parse(make_plan(), ran(text)).session == "x-2"
    document = json.dumps({"session_id": "g-3", "response": "done", "stats": {}}, indent=2)
    assert gemini.AGENT.parse(make_plan(), ran(document)).session == "g-3"
    step: dict[str, object] = {"type": "step_start", "sessionID": "ses_4", "part": {}}
    assert opencode.AGENT.parse(make_plan(), ran(json.dumps(step))).session == "ses_4"
    assert aider.AGENT.parse(make_plan(), ran("Tokens: 1 sent, 1 received.")).session == ""

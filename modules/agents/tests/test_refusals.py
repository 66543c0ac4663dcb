"""A tool's own refusals (a permission denial, its sandbox helper failing, an auth error, a
turn limit) are quoted verbatim from its output, in the shapes the real tools print."""

from __future__ import annotations

import json

from modules.agents import aider, claude, codex, gemini, opencode
from modules.agents.tests.helpers import make_context, make_plan, ran
from modules.agents.tests.test_parsers import AIDER_401, GEMINI_400, OPENCODE_401

# Claude Code 2.1's --output-format json result after an Edit it denied (print mode: nobody
# answers its permission prompt), as captured from the real CLI with the sandbox off
CLAUDE_DENIED = (
    '{"type":"result","subtype":"success","is_error":false,"num_turns":2,'
    '"result":"Fixed clamp(): restored the upper bound.","session_id":"9661",'
    '"permission_denials":[{"tool_name":"Edit","tool_use_id":"toolu_1","tool_input":'
    '{"file_path":"/home/u/.git/seed/wt/iter-0001/calc.py","old_string":"a","new_string":"b"}}],'
    '"total_cost_usd":0.01}\n'
)


def test_claude_permission_denials_are_quoted_as_printed() -> None:
    report = claude.AGENT.parse(make_plan(), ran(CLAUDE_DENIED))
    [quote] = report.refusals
    assert quote.startswith('"permission_denials":[{"tool_name":"Edit"')
    assert quote in CLAUDE_DENIED  # verbatim: the kernel finds it in its own log


def test_claude_without_denials_quotes_nothing() -> None:
    done = CLAUDE_DENIED.replace(
        CLAUDE_DENIED[CLAUDE_DENIED.index('"permission_denials"') : CLAUDE_DENIED.index(',"total')],
        '"permission_denials":[]',
    )
    assert claude.AGENT.parse(make_plan(), ran(done)).refusals == ()


def test_claude_turn_limit_is_quoted() -> None:
    final = {"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 2}
    text = json.dumps(final, separators=(",", ":"))
    report = claude.AGENT.parse(make_plan(), ran(text, 1))
    assert report.refusals == ('"subtype":"error_max_turns"',)


CODEX_HELPER = (
    '{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":'
    '"/bin/bash -lc \'sed -i s/a/b/ calc.py\'","aggregated_output":"bwrap: execvp '
    'codex-linux-sandbox: No such file or directory\\n","exit_code":1,"status":"failed"}}\n'
    '{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Done."}}\n'
    '{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}\n'
)


def test_codex_sandbox_helper_failing_is_quoted() -> None:
    report = codex.AGENT.parse(make_plan(), ran(CODEX_HELPER))
    assert report.success  # codex says it is done: the kernel decides what that is worth
    [quote] = report.refusals
    assert "codex-linux-sandbox: No such file or directory" in quote and quote in CODEX_HELPER


def test_codex_error_events_are_quoted() -> None:
    text = '{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized"}}\n'
    report = codex.AGENT.parse(make_plan(), ran(text, 1))
    assert report.refusals == (text.strip(),)


def test_an_auth_error_line_of_any_tool_is_quoted() -> None:
    text = "litellm.AuthenticationError: invalid api key provided\nTokens: 10 sent\n"
    report = aider.AGENT.parse(make_plan(), ran(text, 0))
    assert report.refusals == ("litellm.AuthenticationError: invalid api key provided",)


def test_codex_with_seeds_sandbox_off_and_home_under_tmp_says_so_before_it_runs() -> None:
    context = make_context(sandboxed=False).model_copy(update={"home": "/tmp/t/home"})
    spec = codex.AGENT.run_spec(make_plan(), context)
    assert "codex-linux-sandbox" in spec.cannot and "/tmp/t/home" in spec.cannot
    inside = make_context(sandboxed=True).model_copy(update={"home": "/tmp/t/home"})
    assert codex.AGENT.run_spec(make_plan(), inside).cannot == ""
    elsewhere = make_context(sandboxed=False).model_copy(update={"home": "/home/u"})
    assert codex.AGENT.run_spec(make_plan(), elsewhere).cannot == ""


def test_claude_with_seeds_sandbox_off_and_its_checkout_below_git_says_so() -> None:
    context = make_context(sandboxed=False).model_copy(
        update={"worktree": "/home/u/p/.git/seed/wt/iter-0001"}
    )
    assert "sensitive-file rule" in claude.AGENT.run_spec(make_plan(), context).cannot
    outside = make_context(sandboxed=False).model_copy(
        update={"worktree": "/home/u/.cache/seed/checkouts/ab12/iter-0001"}
    )
    assert claude.AGENT.run_spec(make_plan(), outside).cannot == ""


# codex-cli 0.169.0 with seed's sandbox off and HOME under /tmp, as the real CLI printed it
CODEX_NO_ALIASES = (
    "WARNING: proceeding, even though we could not create PATH aliases: Refusing to create "
    'helper binaries under temporary dir "/tmp" (codex_home: '
    'AbsolutePathBuf("/tmp/t/home/.codex"))\n'
    '{"type":"thread.started","thread_id":"01a2"}\n'
    '{"type":"turn.started"}\n'
    '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Fixed add()."}}\n'
    '{"type":"turn.completed","usage":{"input_tokens":2000,"output_tokens":100}}\n'
)


def test_codex_without_its_helper_aliases_is_quoted() -> None:
    report = codex.AGENT.parse(make_plan(), ran(CODEX_NO_ALIASES))
    [quote] = report.refusals
    assert "could not create PATH aliases" in quote and quote in CODEX_NO_ALIASES


def test_gemini_opencode_and_aider_errors_are_quoted_in_their_real_shapes() -> None:
    [said] = gemini.AGENT.parse(make_plan(), ran(GEMINI_400, 144)).refusals
    assert said.startswith('"error":{"type":"Error"') and said in GEMINI_400
    [said] = opencode.AGENT.parse(make_plan(), ran(OPENCODE_401, 1)).refusals
    assert '"name":"APIError"' in said and said in OPENCODE_401
    [said] = aider.AGENT.parse(make_plan(), ran(AIDER_401, 0)).refusals
    assert said.startswith("litellm.AuthenticationError") and said in AIDER_401

"""What each adapter asks the kernel to start: the verified flags, in an order the tools parse."""

from __future__ import annotations

import json

from modules.agents import aider, claude, codex, gemini, mini, opencode
from modules.agents.common import POINTER_PROMPT, PROMPT_ARG_LIMIT, prompt_argument
from modules.agents.tests.helpers import make_context, make_plan


def test_claude_puts_the_prompt_after_p_and_the_variadic_tool_list_last() -> None:
    spec = claude.AGENT.run_spec(make_plan(), make_context(model="sonnet"))
    argv = list(spec.argv)
    assert argv[:2] == ["claude", "-p"] and argv[2] == spec.prompt
    # stream-json (with --verbose, which print mode requires for it): usage as it goes
    assert argv[argv.index("--output-format") + 1] == "stream-json" and "--verbose" in argv
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert argv[argv.index("--max-turns") + 1] == "30"
    assert argv[argv.index("--model") + 1] == "sonnet"
    assert argv[argv.index("--max-budget-usd") + 1] == "2"
    assert argv[-2:] == ["--allowedTools", "Read,Edit,Bash(pytest:*)"]
    assert spec.version_argv == ("claude", "--version")


def test_claude_leaves_out_limits_that_are_switched_off() -> None:
    spec = claude.AGENT.run_spec(
        make_plan(max_cost_usd=0), make_context(max_turns=0, allowed_tools=[])
    )
    assert not {"--max-turns", "--max-budget-usd", "--allowedTools", "--model"} & set(spec.argv)


def test_codex_runs_exec_in_a_workspace_write_sandbox_rooted_at_the_worktree() -> None:
    spec = codex.AGENT.run_spec(make_plan(), make_context(model="gpt-5-codex"))
    argv = list(spec.argv)
    assert argv[:3] == ["codex", "exec", "--json"]
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"
    assert argv[argv.index("-C") + 1] == "{worktree}"
    assert "--skip-git-repo-check" in argv and "--full-auto" not in argv
    assert argv[argv.index("-m") + 1] == "gpt-5-codex"
    assert argv[-1] == spec.prompt


def test_codex_leaves_confinement_to_seeds_sandbox_when_it_is_on() -> None:
    spec = codex.AGENT.run_spec(make_plan(), make_context(sandboxed=True))
    argv = list(spec.argv)
    assert argv[argv.index("--sandbox") + 1] == "danger-full-access"
    assert spec.home == (".codex",)


def test_aider_reads_the_prompt_file_never_commits_and_keeps_side_files_out() -> None:
    spec = aider.AGENT.run_spec(make_plan(), make_context(api_base="http://127.0.0.1:9/v1"))
    argv = list(spec.argv)
    assert argv[argv.index("--message-file") + 1] == "{prompt_file}"
    assert "-m" not in argv  # -m is --message in aider, not --model
    for flag in ("--yes-always", "--no-auto-commits", "--no-dirty-commits", "--no-gitignore"):
        assert flag in argv
    for flag in ("--no-pretty", "--no-stream", "--no-check-update", "--analytics-disable"):
        assert flag in argv
    assert argv[argv.index("--chat-history-file") + 1].startswith("{run_dir}/")
    assert argv[argv.index("--openai-api-base") + 1] == "http://127.0.0.1:9/v1"
    assert argv[-2:] == ["calc.py", "tests/test_calc.py"]
    assert "exits 0" in spec.note


def test_mini_is_configured_through_its_environment_and_writes_a_trajectory() -> None:
    spec = mini.AGENT.run_spec(
        make_plan(max_cost_usd=1.5),
        make_context(model="openai/qwen", api_base="http://localhost:11434/v1", max_turns=12),
    )
    argv = list(spec.argv)
    assert argv[:3] == ["mini", "-y", "--exit-immediately"]
    assert argv[argv.index("-t") + 1] == spec.prompt
    assert argv[argv.index("-o") + 1] == "{run_dir}/trajectory.json"
    assert argv[argv.index("-m") + 1] == "openai/qwen"
    assert argv[argv.index("-l") + 1] == "1.5"
    assert "-c" not in argv  # any -c would replace mini's default config
    assert spec.version_argv == ()  # mini has no --version: the trajectory carries it
    assert spec.artifacts == ("trajectory.json",)
    assert spec.env["MSWEA_CONFIGURED"] == "true" and spec.env["MSWEA_SILENT_STARTUP"] == "1"
    assert spec.env["MSWEA_COST_TRACKING"] == "ignore_errors"
    assert spec.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert spec.env["MSWEA_GLOBAL_CALL_LIMIT"] == "12"
    assert spec.env["OPENAI_BASE_URL"] == "http://localhost:11434/v1"


def test_gemini_trusts_the_worktree_and_approves_everything() -> None:
    spec = gemini.AGENT.run_spec(make_plan(), make_context(model="gemini-2.5-pro"))
    argv = list(spec.argv)
    assert argv[:3] == ["gemini", "-p", spec.prompt]
    assert "--approval-mode=yolo" in argv and "--skip-trust" in argv
    assert "-y" not in argv and "--yolo" not in argv  # both together are refused
    assert argv[argv.index("--output-format") + 1] == "json"


def test_opencode_approves_permissions_and_prints_json_events() -> None:
    spec = opencode.AGENT.run_spec(make_plan(), make_context(model="anthropic/claude-sonnet-4-5"))
    argv = list(spec.argv)
    assert argv[:4] == ["opencode", "run", "--format", "json"]
    assert "--auto" in argv
    assert argv[argv.index("-m") + 1] == "anthropic/claude-sonnet-4-5"
    assert argv[-1] == spec.prompt


def test_extra_args_come_before_the_prompt() -> None:
    context = make_context(extra_args=["--agent", "build"])
    argv = list(opencode.AGENT.run_spec(make_plan(), context).argv)
    assert argv[-3:-1] == ["--agent", "build"]


def test_a_prompt_too_long_for_one_argument_points_at_the_prompt_file() -> None:
    assert prompt_argument("short") == "short"
    assert prompt_argument("x" * (PROMPT_ARG_LIMIT + 1)) == POINTER_PROMPT
    assert "{prompt_file}" in POINTER_PROMPT


def test_claude_inside_seeds_sandbox_bypasses_its_prompts_and_says_it_is_in_bubblewrap() -> None:
    spec = claude.AGENT.run_spec(make_plan(), make_context(sandboxed=True))
    argv = list(spec.argv)
    # acceptEdits denies every edit under .git/, where seed's worktrees live
    assert argv[argv.index("--permission-mode") + 1] == "bypassPermissions"
    assert spec.env == {"CLAUDE_CODE_BUBBLEWRAP": "1"}


def test_api_base_reaches_each_backend_in_the_form_it_takes() -> None:
    plan = make_plan()
    spec = claude.AGENT.run_spec(plan, make_context(api_base="http://127.0.0.1:4000/"))
    assert spec.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4000"
    assert spec.env["CLAUDE_CODE_MAX_RETRIES"] == "0"
    assert spec.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    spec = codex.AGENT.run_spec(plan, make_context(api_base="http://127.0.0.1:8000/v1"))
    overrides = [spec.argv[i + 1] for i, a in enumerate(spec.argv) if a == "-c"]
    assert overrides == [
        'model_provider="seed"',
        'model_providers.seed.name="seed"',
        'model_providers.seed.base_url="http://127.0.0.1:8000/v1"',
        'model_providers.seed.env_key="OPENAI_API_KEY"',
        'model_providers.seed.wire_api="responses"',
        'otel.metrics_exporter="none"',
    ]
    assert not spec.env  # never a key in the spec
    spec = gemini.AGENT.run_spec(plan, make_context(api_base="http://127.0.0.1:8080"))
    assert spec.env == {"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:8080"}
    spec = opencode.AGENT.run_spec(
        plan, make_context(model="qwen3-coder", api_base="http://127.0.0.1:11434/v1")
    )
    argv = list(spec.argv)
    assert argv[argv.index("-m") + 1] == "seed/qwen3-coder"
    config = json.loads(spec.env["OPENCODE_CONFIG_CONTENT"])
    provider = config["provider"]["seed"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"] == {
        "baseURL": "http://127.0.0.1:11434/v1",
        "apiKey": "{env:OPENAI_API_KEY}",
    }
    assert list(provider["models"]) == ["qwen3-coder"]
    assert spec.env["OPENCODE_DISABLE_MODELS_FETCH"] == "1"
    spec = aider.AGENT.run_spec(plan, make_context(api_base="http://127.0.0.1:9/v1"))
    argv = list(spec.argv)
    assert argv[argv.index("--edit-format") + 1] == "diff"
    assert argv[argv.index("--map-tokens") + 1] == "0"
    assert spec.env["GIT_CONFIG_KEY_0"] == "user.name"


def test_without_api_base_no_endpoint_setting_is_added() -> None:
    plan = make_plan()
    for adapter in (claude.AGENT, codex.AGENT, gemini.AGENT, opencode.AGENT):
        spec = adapter.run_spec(plan, make_context(model="m"))
        assert "-c" not in spec.argv and not spec.env, adapter.name
    assert "--edit-format" not in aider.AGENT.run_spec(plan, make_context()).argv

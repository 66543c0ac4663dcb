"""Fake `mini` (mini-swe-agent 2.4.6), faithful to docs/agent-clis.md section 4.

Outcomes: success (Submitted); limits (LimitsExceeded, and still exit 0). An unpriced model
(usage.cost null) raises RuntimeError (exit 1) unless MSWEA_COST_TRACKING=ignore_errors.
Without MSWEA_CONFIGURED a setup wizard reads stdin; without -t, -y or --exit-immediately
the run reads stdin too (an open pipe blocks).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from tests.fakes import fakecli

VERSION = "2.4.6"
_BOOL = {"-y", "--yolo", "--exit-immediately", "--help"}
_VALUE = {"-m", "--model", "--model-class", "--agent-class", "--environment-class", "-t"}
_VALUE |= {"--task", "-l", "--cost-limit", "-o", "--output"}
_REPEAT = {"-c", "--config"}


def _usage_error(message: str) -> int:
    box = f"│ {message:<76} │"
    fakecli.err(
        "Usage: mini [OPTIONS]\nTry 'mini --help' for help.\n"
        "╭─ Error ──────────────────────────────────────────────────────────────────────╮\n"
        f"{box}\n"
        "╰──────────────────────────────────────────────────────────────────────────────╯\n"
    )
    return 2


def _config_dir() -> Path:
    return Path(
        os.environ.get("MSWEA_GLOBAL_CONFIG_DIR") or Path.home() / ".config" / "mini-swe-agent"
    )


def _response(n: int, model: str, used: dict[str, Any], command: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{n}",
        "model": model,
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant"}}],
        "usage": {
            "prompt_tokens": used["input"],
            "completion_tokens": used["output"],
            "total_tokens": used["input"] + used["output"],
            "prompt_tokens_details": {"cached_tokens": used["cached"]},
        },
        "extra": {"command": command},
    }


def main(args: list[str]) -> int:
    fakecli.trace("mini", args)
    if not os.environ.get("MSWEA_SILENT_STARTUP"):
        fakecli.out(f"This is mini-swe-agent version {VERSION}.\n")
    if fakecli.stdin_kind() != "tty":
        fakecli.out("Warning: Input is not a terminal (fd=0).\n")
    try:
        flags = fakecli.parse_flags(args, _BOOL, _VALUE, repeat=_REPEAT)
    except fakecli.MissingValue as missing:
        return _usage_error(f"Option '{missing}' requires an argument.")
    except fakecli.UnknownFlag as unknown:
        return _usage_error(f"No such option: {unknown.arg}")
    if flags.positional:
        return _usage_error(f"Got unexpected extra argument ({flags.positional[0]})")
    options, configs = flags.options, flags.repeated
    if not os.environ.get("MSWEA_CONFIGURED"):
        fakecli.out("It looks like you are running mini for the first time. Let's set it up.\n")
        fakecli.read_stdin_to_eof()  # the setup wizard's prompts
        fakecli.out("EOFError: the setup wizard needs answers\n")
        return 1
    if configs and all("=" in c for c in configs):
        fakecli.out(
            "ValidationError: agent.system_template: Field required (a -c replaces mini.yaml)\n"
        )
        return 1
    model = str(options.get("-m", options.get("--model", os.environ.get("MSWEA_MODEL_NAME", ""))))
    if not model:
        fakecli.out("ValueError: No default model set. Please run `mini-extra config setup`.\n")
        return 1
    task = options.get("-t", options.get("--task"))
    if not isinstance(task, str):
        fakecli.out("What do you want to do?\n")
        task = fakecli.read_stdin_to_eof()
    yolo = bool(options.get("-y") or options.get("--yolo"))
    output = Path(
        str(options.get("-o", options.get("--output", _config_dir() / "last_mini_run.traj.json")))
    )
    plan = fakecli.script()
    fakecli.barriers(plan)
    used = fakecli.usage(plan)
    tracking = os.environ.get("MSWEA_COST_TRACKING", "default")
    messages: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": "You are a helpful assistant that can interact with a computer.",
        },
        {"role": "user", "content": f"Please solve this issue: {task[:200]}"},
    ]
    cost = 0.0
    calls = 0
    status, submission, code = "Submitted", "", 0
    exception = ""
    steps = ["apply the scripted edits", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
    per_step = {k: (v // len(steps) if isinstance(v, int) else v) for k, v in used.items()}
    for n, command in enumerate(steps, start=1):
        calls += 1
        if used["cost"] is None and tracking != "ignore_errors":
            status, code = "RuntimeError", 1
            exception = f"Error calculating cost for model {model}: perhaps it's not registered?"
            break
        step_cost = float(used["cost"] or 0) / len(steps)
        cost += step_cost
        messages.append(
            {
                "role": "assistant",
                "content": str(plan.get("summary", "Working on it."))
                if n == 1
                else "Done, submitting.",
                "extra": {
                    "response": _response(n, model, per_step, command),
                    "cost": step_cost,
                    "timestamp": time.time(),
                },
            }
        )
        if plan.get("outcome") == "limits":
            status = "LimitsExceeded"
            break
        if not yolo:
            fakecli.out(f"Execute `{command}`? [y/N] ")
            if not sys.stdin.readline().strip().lower().startswith("y"):
                messages.append({"role": "user", "content": "Command not executed"})
                continue
        if n == 1:
            changed = fakecli.apply_edits(plan, Path.cwd())
            messages.append(
                {
                    "role": "tool",
                    "content": json.dumps({"returncode": 0, "output": f"changed {changed}"}),
                }
            )
        fakecli.out(f"\nmini-swe-agent (step {n}, ${cost:.2f}):\n{command}\n")
    if not options.get("--exit-immediately") and status == "Submitted":
        fakecli.out(
            "Agent wants to finish. Type a comment to give it a new task or press enter to quit.\n"
        )
        sys.stdin.readline()
    exit_extra: dict[str, Any] = {"exit_status": status, "submission": submission}
    if exception:
        exit_extra.update(
            exception_str=exception, traceback="Traceback (most recent call last): ..."
        )
    messages.append({"role": "exit", "content": "", "extra": exit_extra})
    trajectory = {
        "info": {
            "model_stats": {"instance_cost": round(cost, 6), "api_calls": calls},
            "config": {
                "agent": {"mode": "yolo" if yolo else "confirm"},
                "model": {"model_name": model},
            },
            "mini_version": VERSION,
            "exit_status": status,
            "submission": submission,
        },
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1.1",
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(trajectory, indent=2), encoding="utf-8")
    if exception:
        fakecli.out(f"RuntimeError: {exception}\n")
    fakecli.out(f"Saved trajectory to '{output}'\n")
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

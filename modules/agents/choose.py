"""Which agent backend runs: the configured one, or for "auto" the first installed agent CLI.

The module server sees neither the person's PATH nor HOME: the kernel looks up each agent's
program itself and sends what it found (program name -> where it is installed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kernel.contracts import Agent


def choose_backend(
    wanted: str,
    config_name: str,
    installed: Mapping[str, str],
    agents: Mapping[str, Agent],
    order: Sequence[str],
) -> dict[str, Any]:
    """{name, reason, sources, fallback} for the configured backend name and the programs found."""
    if wanted != "auto":
        agent = agents[wanted]
        reason = f"configured in {config_name}"
        if agent.executable:
            found = installed.get(agent.executable)
            reason += (
                f" ({agent.executable} at {found})"
                if found
                else f", but {agent.executable} is not on PATH: its runs will fail"
            )
        return _choice(wanted, reason, agent.sources)
    for name in order:
        agent = agents.get(name)
        if agent is None or not agent.executable:
            continue
        found = installed.get(agent.executable)
        if found:
            return _choice(name, f"auto: {agent.executable} found at {found}", agent.sources)
    looked = ", ".join(order) or "no agent CLIs"
    fix = agents.get("ruff-fix")
    return _choice(
        "ruff-fix" if fix else "none",
        f"auto: no agent installed (looked for {looked}); ruff-fix takes lint and format gaps, the rest are planned and wait",
        fix.sources if fix else ("*",),
        fallback="none",
    )


def _choice(name: str, reason: str, sources: Sequence[str], fallback: str = "") -> dict[str, Any]:
    return {"name": name, "reason": reason, "sources": list(sources), "fallback": fallback}

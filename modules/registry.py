"""Short names for swappable parts, imported lazily; an unknown name lists the valid ones."""

from __future__ import annotations

import importlib

AGENTS: dict[str, str] = {
    "claude": "modules.agents.claude:AGENT",
    "codex": "modules.agents.codex:AGENT",
    "aider": "modules.agents.aider:AGENT",
    "mini": "modules.agents.mini:AGENT",
    "gemini": "modules.agents.gemini:AGENT",
    "opencode": "modules.agents.opencode:AGENT",
    "command": "modules.agents.command:AGENT",
    "ruff-fix": "modules.agents.ruff_fix:AGENT",
    "none": "modules.agents.none:AGENT",
}
"""Agent backends by the name seed.toml uses."""

AUTO_ORDER: tuple[str, ...] = ("claude", "codex", "aider", "gemini", "opencode", "mini")
"""Order in which backend = "auto" looks for an installed agent."""

ANALYZERS: dict[str, str] = {
    "quality": "modules.analyzers.quality:ANALYZER",
    "inbox": "modules.analyzers.inbox:ANALYZER",
    "roadmap": "modules.analyzers.roadmap:ANALYZER",
}
"""Analysers, all of which run on every analysis."""

RANKER = "modules.analyzers.rank:RANKER"
INBOX_READER = "modules.analyzers.inbox:READER"
PLANNER = "modules.planner:PLANNER"
REPORTER = "modules.reports.reporter:REPORTER"


class UnknownName(LookupError):
    """A name that is not in the registry."""


def resolve(target: str) -> object:
    """Import "package.module:ATTRIBUTE" and return the attribute."""
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute)


def agent_target(name: str) -> str:
    """The import target of an agent backend, or UnknownName listing the valid ones."""
    if name not in AGENTS:
        raise UnknownName(f"unknown agent backend {name!r}; valid: {', '.join(sorted(AGENTS))}")
    return AGENTS[name]

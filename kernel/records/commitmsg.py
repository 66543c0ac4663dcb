"""The kernel's commit messages and the author they carry.

The subject is the plan's goal (what the change does), the body the agent's summary, the gap
and the iteration, and the last paragraph the kernel's own trailer. Only the kernel writes
trailers: the agent's summary is text of the agent's (the agent controls it), so it is bounded,
stripped of control characters, and indented under a heading, where no line of it can be a
trailer (git reads trailers from the last paragraph only, at the start of a line).
"""

from __future__ import annotations

import os
from pathlib import Path

from domain import IterationPlan
from kernel import bounds
from kernel.isolation import procs

TRAILER = "Seed-Iteration"
"""The kernel's trailer: `git log --format='%(trailers:key=Seed-Iteration)'` finds seed's commits."""
SEED_NAME = "seed"
SEED_EMAIL = "seed@localhost"
SUBJECT_MAX = 72
SUMMARY_CHARS = 2000
SUMMARY_LINES = 30
_IDENTITY_MAX = 200


def clean(text: str) -> str:
    """The one cleaning (`bounds.clean`), tabs as spaces: no escape sequence, carriage return
    or bidirectional override reaches a log."""
    return bounds.clean(text).replace("\t", " ")


def subject(goal: str) -> str:
    """The goal's first line, as one bounded line."""
    line = " ".join(clean(goal).split()) or "an iteration of seed"
    return line if len(line) <= SUBJECT_MAX else line[: SUBJECT_MAX - 3].rstrip() + "..."


def _summary_block(summary: str) -> list[str]:
    """The agent's summary as indented lines under a heading (none when it said nothing)."""
    lines = [" ".join(line.split()) for line in clean(summary)[:SUMMARY_CHARS].split("\n")]
    lines = [line for line in lines if line][:SUMMARY_LINES]
    if not lines:
        return []
    # indented: a continuation line to git, never a `Key: value` trailer of its own
    return ["The agent's summary:", *(f"    {line}" for line in lines), ""]


def message(plan: IterationPlan, summary: str, *, note: str = "") -> str:
    """The commit message of an iteration's verified tree."""
    body = [
        subject(plan.goal),
        "",
        *_summary_block(summary),
        f"Gap: {' '.join(clean(plan.gap.key).split())[:300]}",
        f"Iteration: {plan.iteration_id}",
    ]
    if note:  # the kernel's own words: approved by a person, landed once a blocker cleared
        body.append(" ".join(clean(note).split())[:300])
    body += ["", f"{TRAILER}: {plan.iteration_id}", ""]
    return "\n".join(body)


def _identity_part(value: str) -> str:
    """A name or email git accepts as is: one line, no angle brackets, bounded."""
    return " ".join(clean(value).replace("<", "").replace(">", "").split())[:_IDENTITY_MAX]


def repository_user(root: Path) -> tuple[str, str]:
    """The person's `git config user.name/email` for this repository ('' when unset).

    A separate read-only step: `git config --get` runs no hooks, filters or helpers, so the
    person's global configuration may take part here, unlike in the kernel's other git commands.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(LC_ALL="C", GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")
    found: list[str] = []
    for key in ("user.name", "user.email"):
        result = procs.run(
            ["git", "config", "--get", key],
            cwd=root,
            timeout_s=30,
            env=env,
            interruptible=False,
            sweep_rounds=0,
            max_bytes=4096,
        )
        found.append(_identity_part(result.text()) if result.ok else "")
    return found[0], found[1]


def author(root: Path, name: str, email: str) -> tuple[str, str]:
    """The author of the kernel's commits: [git] user_name/user_email when set, else the
    repository's configured user, else seed."""
    name, email = _identity_part(name), _identity_part(email)
    if not (name and email):
        user_name, user_email = repository_user(root)
        name, email = name or user_name, email or user_email
    return name or SEED_NAME, email or SEED_EMAIL

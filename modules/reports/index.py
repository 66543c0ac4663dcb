"""history/README.md: the latest iterations, totals, the halt and the quarantined gaps."""

from __future__ import annotations

from domain import HistoryDigest, HistoryRow
from modules.reports.common import (
    OUTCOMES,
    category_note,
    cell_code,
    code,
    count,
    md,
    money,
    percent,
    shorten,
    success_rate,
    tokens,
    utc,
)


def _halt(digest: HistoryDigest) -> list[str]:
    halt = digest.halt
    if not halt.halted:
        return ["Not halted: agents run when there is work they can take.", ""]
    since = f" since {utc(halt.since)}" if halt.since else ""
    by = f" (after {halt.iteration_id})" if halt.iteration_id else ""
    return [
        f"**HALTED**{since}{by}: {md(halt.reason)}",
        "",
        "The daemon keeps watching and writing plans but runs no agent until you look at the "
        f"reason above and run `{digest.command} resume`.",
        "",
    ]


def _totals(digest: HistoryDigest) -> list[str]:
    t = digest.totals
    rate, wins, attempts = success_rate(t.agent_landed, t.agent_runs)
    budget = f" of {money(t.max_cost_usd_per_day)}" if t.max_cost_usd_per_day else ""
    runs_budget = f" of {t.max_iterations_per_day}" if t.max_iterations_per_day else ""
    lines = [
        "## Totals",
        "",
        "| Iterations | Success rate | Cost today | Cost overall | Tokens overall |",
        "|---|---|---|---|---|",
        f"| {count(t.iterations)} | {percent(rate)} ({wins} of {attempts} that ran an agent) "
        f"| {money(t.cost_today_usd)}{budget} ({t.iterations_today}{runs_budget} {'run' if t.iterations_today == 1 and not runs_budget else 'runs'} on {t.day or 'today'}) "
        f"| {money(t.cost_usd)} | {tokens(t.tokens_used)} |",
        "",
    ]
    seen = [o.value for o in OUTCOMES if t.by_outcome.get(o.value)]
    seen += sorted(k for k in t.by_outcome if k not in seen and t.by_outcome[k])
    if seen:
        lines += ["Outcomes: " + ", ".join(f"{o} {t.by_outcome[o]:,}" for o in seen) + ".", ""]
    return lines


def _quarantined(digest: HistoryDigest) -> list[str]:
    if not digest.quarantined:
        return []
    lines = [
        "## Quarantined gaps",
        "",
        "These failed again and again; they are skipped until their files change or a person "
        "drops a matching task into inbox/.",
        "",
    ]
    lines += [f"- {code(key)}" for key in digest.quarantined]
    return [*lines, ""]


def _row(row: HistoryRow) -> str:
    category = category_note(
        row.outcome.value, row.failure_category.value if row.failure_category else ""
    )
    outcome = row.outcome.value + (f" {category}" if category else "")
    gap = f"{row.gap_source}: {md(shorten(row.gap_title or row.gap_key, 70))}"
    return (
        f"| [{row.iteration_id}]({row.iteration_id}/report.md) | {utc(row.started_at)} "
        f"| {gap} | {outcome} | {money(row.cost_usd)} |"
    )


def render_index(digest: HistoryDigest) -> str:
    """The index of history/: newest iterations first, totals, the halt, quarantined gaps."""
    lines = [
        "# history",
        "",
        f"What the seed daemon planned, did and proved in {md(digest.root_name) or 'this repository'}. "
        f"Rewritten after every iteration (last {utc(digest.generated_at, True)}). "
        f"`{digest.command} history` lists and filters every iteration; `{digest.command} report` "
        "writes [index.html](index.html) with charts.",
        "",
    ]
    lines += _halt(digest)
    lines += _totals(digest)
    lines += _quarantined(digest)
    if digest.top_gaps:
        lines += ["## Top gaps at the latest analysis", ""]
        lines += [
            f"{g.rank}. {cell_code(g.key)} {md(shorten(g.title, 80))} ({g.source}, {g.severity.value})"
            + (f": {md(g.skipped)}" if g.skipped else "")
            for g in digest.top_gaps
        ]
        lines.append("")
    if digest.events:
        lines += ["## Recent events", ""]
        lines += [f"- {utc(e.at)} {e.kind}: {md(shorten(e.message, 200))}" for e in digest.events]
        lines.append("")
    lines += ["## Latest iterations", ""]
    if digest.rows:
        lines += ["| Iteration | Started | Gap | Outcome | Cost |", "|---|---|---|---|---|"]
        lines += [_row(r) for r in digest.rows]
        shown = len(digest.rows)
        if digest.totals.iterations > shown:
            lines += [
                "",
                f"The latest {shown:,} of {digest.totals.iterations:,}; "
                f"`{digest.command} history --limit 0` lists them all.",
            ]
    else:
        lines.append("No iterations yet.")
    lines += [
        "",
        "## In this folder",
        "",
        "- one folder per iteration: `report.md`, `plan.json`, `record.json`, `agent.log`",
        "- `records.jsonl`: one line per iteration; `events.jsonl`: halts, resumes, recoveries",
        f"- `status.json`: what the daemon is doing now (`{digest.command} status`)",
        "- nothing here is committed",
        "",
    ]
    return "\n".join(lines)

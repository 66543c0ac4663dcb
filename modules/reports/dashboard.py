"""history/index.html: one self-contained page (inline SVG and CSS, a little script, no network).

The charts are drawn here, in Python, so they show without script. The table of iterations
ships its rows as compact JSON; the latest ones are also written as plain HTML, and the
script (when it runs) takes over with filters and pages through all of them.
"""

from __future__ import annotations

import json
from html import escape

from domain import HistoryDigest, HistoryRow
from domain.fitness import FitnessFigures
from modules.reports import page, svg
from modules.reports.common import (
    OUTCOME_COLORS,
    OUTCOMES,
    category_note,
    count,
    money,
    money_tick,
    noun,
    percent,
    plural,
    seconds,
    shorten,
    success_rate,
    tokens,
    utc,
)
from modules.reports.trends import Binned, phase_stats, success_by_source

STATIC_ROWS = 100
"""Rows written as HTML (the page shows them even with script off)."""
TITLE_CHARS = 90


def _when(row: HistoryRow) -> str:
    return utc(row.started_at)[:-1]


def _took(row: HistoryRow) -> float:
    total = sum(row.durations.values())
    return total if total else max((row.ended_at - row.started_at).total_seconds(), 0.0)


def _category(row: HistoryRow) -> str:
    category = row.failure_category.value if row.failure_category else ""
    note = category_note(row.outcome.value, category)
    if not row.candidates:
        return note
    tried = f"{len(row.candidates)} candidates, {sum(c.value == 'SUCCESS' for c in row.candidates)} passed"
    return f"{note}; {tried}" if note else tried


def _table_data(rows: tuple[HistoryRow, ...]) -> str:
    """Rows as compact JSON arrays, safe inside a <script> element."""
    outcomes = [o.value for o in OUTCOMES]
    index = {o: i for i, o in enumerate(outcomes)}
    data = {
        "outcomes": outcomes,
        "rows": [
            [
                r.iteration_id,
                _when(r),
                index.get(r.outcome.value, 0),
                _category(r),
                r.gap_source,
                shorten(r.gap_title or r.gap_key, TITLE_CHARS),
                round(r.cost_usd, 4),
                round(_took(r), 1),
            ]
            for r in rows
        ],
    }
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _static_row(row: HistoryRow) -> str:
    category = f" <small>{escape(_category(row))}</small>" if _category(row) else ""
    return (
        f'<tr><td><a href="{escape(row.iteration_id)}/report.md">{escape(row.iteration_id)}</a></td>'
        f"<td>{escape(_when(row))}</td>"
        f'<td><span class="o o-{row.outcome.value}">{row.outcome.value}</span>{category}</td>'
        f"<td>{escape(row.gap_source)}</td>"
        f"<td>{escape(shorten(row.gap_title or row.gap_key, TITLE_CHARS))}</td>"
        f'<td class="num">{escape(money(row.cost_usd))}</td>'
        f'<td class="num">{escape(seconds(_took(row)))}</td></tr>'
    )


def _tiles(digest: HistoryDigest) -> str:
    t = digest.totals
    rate, wins, attempts = success_rate(t.agent_landed, t.agent_runs)
    empty: dict[str, int] = {}
    latest_open = next((r.open_gaps for r in digest.rows if r.open_gaps), empty)
    budget = f" of {money(t.max_cost_usd_per_day)}" if t.max_cost_usd_per_day else ""
    open_gaps = sum(latest_open.values())
    tiles = [
        (count(t.iterations), noun(t.iterations, "iteration")),
        (percent(rate), f"success rate ({wins:,} of {plural(attempts, 'agent run')})"),
        (money(t.cost_today_usd), f"spent today{budget}"),
        (money(t.cost_usd), f"spent overall, {tokens(t.tokens_used)} tokens"),
        (count(open_gaps), f"open {noun(open_gaps, 'gap')} at the latest baseline"),
        (count(len(digest.quarantined)), f"quarantined {noun(len(digest.quarantined), 'gap')}"),
    ]
    return (
        '<section class="tiles">'
        + "".join(
            f'<div class="tile"><b>{escape(v)}</b><span>{escape(label)}</span></div>'
            for v, label in tiles
        )
        + _daemon_tile(digest)
        + "</section>"
    )


def _daemon_tile(digest: HistoryDigest) -> str:
    """The daemon's real state: halted, running or stopped (from its lock when the page was made)."""
    daemon, halt = digest.daemon, digest.halt
    if not daemon.known:
        where = ""
    elif daemon.running:
        where = "the daemon is running" + (f" (pid {daemon.pid})" if daemon.pid else "")
        where += f": {daemon.phase}" if daemon.phase and not halt.halted else ""
    else:
        where = "no daemon is running"
    if halt.halted:
        return (
            f'<div class="tile bad" id="daemon"><b>HALTED</b><span>{escape(shorten(halt.reason, 160))}'
            f"<br>{escape(where)}{'; ' if where else ''}run <code>{escape(digest.command)} resume</code></span></div>"
        )
    if daemon.limited_until is not None and daemon.limited_for:
        until = f"{daemon.limited_until:%Y-%m-%d %H:%M:%S}Z"
        return (
            f'<div class="tile" id="daemon"><b>limited until {until}</b><span>'
            f"{escape(daemon.limited_for)}'s usage limit: the portfolio's other agents run "
            f"meanwhile. {escape(where)}</span></div>"
        )
    if daemon.limited_until is not None:
        until = f"{daemon.limited_until:%Y-%m-%d %H:%M:%S}Z"
        return (
            f'<div class="tile" id="daemon"><b>limited until {until}</b><span>the model\'s usage '
            f"limit: no agent runs until then; the daemon resumes by itself. {escape(where)}</span></div>"
        )
    if daemon.running:
        return (
            f'<div class="tile good" id="daemon"><b>running</b><span>{escape(where)}</span></div>'
        )
    if daemon.known:
        return (
            '<div class="tile" id="daemon"><b>stopped</b><span>no daemon is running; start one '
            f"with <code>{escape(digest.command)} run</code></span></div>"
        )
    return (
        '<div class="tile" id="daemon"><b>not halted</b><span>daemon state not known</span></div>'
    )


def _phase_table(digest: HistoryDigest) -> str:
    stats = phase_stats(digest.rows)
    if not stats:
        return ""
    body = "".join(
        f"<tr><td>{escape(p)}</td><td class=num>{seconds(med)}</td><td class=num>{seconds(p90)}</td>"
        f"<td class=num>{seconds(total)}</td><td class=num>{n:,}</td></tr>"
        for p, med, p90, total, n in stats
    )
    return (
        '<table class="small"><thead><tr><th>phase</th><th>median</th><th>90th pct</th>'
        f"<th>total</th><th>iterations</th></tr></thead><tbody>{body}</tbody></table>"
    )


def _by_candidates(digest: HistoryDigest) -> list[tuple[int, int, int, int]]:
    """Per number of candidates per gap: iterations landed, iterations, candidates run."""
    seen: dict[int, list[int]] = {}
    for row in digest.rows:
        if row.outcome.value == "WAITING":
            continue  # no agent ran
        n = max(len(row.candidates), 1)
        counts = seen.setdefault(n, [0, 0, 0])
        counts[0] += row.outcome.value == "SUCCESS"
        counts[1] += 1
        counts[2] += sum(1 for c in row.candidates if c.value != "ABORTED") or 1
    return [(n, c[0], c[1], c[2]) for n, c in sorted(seen.items())]


def _charts(digest: HistoryDigest) -> str:
    binned = Binned(digest.rows)
    labels = binned.buckets.labels
    unit = binned.buckets.unit
    outcomes = binned.outcomes()
    gaps = binned.open_quality_gaps()
    phases = binned.phase_means()
    by_source = success_by_source(digest.rows)
    sections = [
        (
            f"Outcomes per {unit}",
            svg.stacked_bars(
                "chart-outcomes", f"Outcomes per {unit}", labels, outcomes, integer=True
            )
            + svg.legend(outcomes),
        ),
        (
            "Success rate by gap source",
            svg.hbars(
                "chart-success",
                "Success rate by gap source",
                [
                    (
                        source,
                        rate,
                        f"{percent(rate)} ({wins:,} of {n:,})",
                        OUTCOME_COLORS["SUCCESS"],
                    )
                    for source, rate, wins, n in by_source
                ],
            ),
        ),
        (
            "Landed rate by candidates per gap",
            svg.hbars(
                "chart-candidates",
                "Landed rate by candidates per gap",
                [
                    (
                        f"{n} per gap",
                        wins / total,
                        f"{percent(wins / total)} ({wins:,} of {total:,}; {tried:,} candidates)",
                        OUTCOME_COLORS["SUCCESS"],
                    )
                    for n, wins, total, tried in _by_candidates(digest)
                ],
            ),
        ),
        (
            f"Cost per {unit}",
            svg.stacked_bars(
                "chart-cost", f"Cost per {unit}", labels, [binned.cost()], money, money_tick
            ),
        ),
        (
            "Open quality gaps",
            svg.lines(
                "chart-gaps", "Open quality gaps at each baseline", labels, gaps, integer=True
            )
            + svg.legend(gaps),
        ),
        (
            f"Time per phase (mean per iteration, per {unit})",
            svg.stacked_bars("chart-phases", "Mean time per phase", labels, phases, seconds)
            + svg.legend(phases)
            + _phase_table(digest),
        ),
    ]
    return "".join(
        f'<section class="card"><h2>{escape(title)}</h2>{body}</section>'
        for title, body in sections
    )


_FIGURES = (("valid", "valid"), ("recall", "recall"), ("top1", "top-1"), ("top3", "top-3"))


def _generations(digest: HistoryDigest) -> str:
    """Fitness by generation: generation 0 is the first one's base; a row per part."""
    notes = digest.generations
    if not notes:
        return ""
    steps: list[tuple[int, str, dict[str, FitnessFigures]]] = [(0, "", notes[0].before)]
    steps += [(n.number, n.commit[:12], n.after) for n in notes]
    rows = "".join(
        f"<tr><td class=num>{number}</td><td><code>{escape(commit)}</code></td>"
        f"<td>{escape(part)}</td><td class=num>{f.cases:,}</td>"
        + "".join(f"<td class=num>{getattr(f, name):.0%}</td>" for name, _ in _FIGURES)
        + f"<td class=num>{f.precision:.2f}</td></tr>"
        for number, commit, parts in steps
        for part, f in sorted(parts.items())
    )
    heads = "".join(f"<th>{label}</th>" for _, label in _FIGURES)
    return (
        '<section class="card"><h2>Fitness by generation</h2>'
        "<p><small>How well each landed generation of the planning modules plans the kernel's "
        "cases (<code>python seed.py fitness</code>); generation 0 is the first one's base."
        "</small></p>"
        '<table class="small"><thead><tr><th>generation</th><th>commit</th><th>part</th>'
        f"<th>cases</th>{heads}<th>precision</th></tr></thead><tbody>{rows}</tbody></table>"
        "</section>"
    )


def _top_gaps(digest: HistoryDigest) -> str:
    if not digest.top_gaps and not digest.quarantined and not digest.events:
        return ""
    items = "".join(
        f"<li><code>{escape(g.key)}</code> {escape(shorten(g.title, 100))} "
        f"<small>{escape(g.source)}, {escape(g.severity.value)}"
        + (f", {escape(g.skipped)}" if g.skipped else "")
        + "</small></li>"
        for g in digest.top_gaps
    )
    held = "".join(f"<li><code>{escape(k)}</code></li>" for k in digest.quarantined)
    events = "".join(
        f"<li><small>{escape(utc(e.at))}</small> <b>{escape(e.kind)}</b> "
        f"{escape(shorten(e.message, 200))}</li>"
        for e in digest.events
    )
    return (
        '<section class="card"><h2>Gaps and events</h2>'
        + (f"<h3>Top of the latest ranking</h3><ol>{items}</ol>" if items else "")
        + (f"<h3>Quarantined</h3><ul>{held}</ul>" if held else "")
        + (f"<h3>Recent events</h3><ul>{events}</ul>" if events else "")
        + "</section>"
    )


def _table(digest: HistoryDigest) -> str:
    rows = digest.rows
    sources = sorted({r.gap_source for r in rows})
    present = {r.outcome.value for r in rows}
    outcome_options = "".join(
        f'<option value="{o.value}">{o.value}</option>' for o in OUTCOMES if o.value in present
    )
    source_options = "".join(f'<option value="{escape(s)}">{escape(s)}</option>' for s in sources)
    static = "".join(_static_row(r) for r in rows[:STATIC_ROWS])
    note = (
        f"the latest {STATIC_ROWS:,} of {plural(len(rows), 'iteration')}"
        if len(rows) > STATIC_ROWS
        else plural(len(rows), "iteration")
    )
    return (
        '<section class="card wide"><h2>Iterations</h2>'
        '<div id="controls" hidden>'
        f'<select id="f-outcome"><option value="">every outcome</option>{outcome_options}</select>'
        f'<select id="f-source"><option value="">every source</option>{source_options}</select>'
        '<input id="f-text" type="search" placeholder="id, gap or category">'
        '<button id="prev" type="button">newer</button><span id="pageinfo"></span>'
        '<button id="next" type="button">older</button></div>'
        f'<p id="shown">Showing {note}, newest first.</p>'
        '<table id="iterations"><thead><tr><th>iteration</th><th>started (UTC)</th>'
        "<th>outcome</th><th>source</th><th>gap</th><th>cost</th><th>time</th></tr></thead>"
        f"<tbody>{static}</tbody></table>"
        f'<script type="application/json" id="data">{_table_data(rows)}</script>'
        "</section>"
    )


def render_dashboard(digest: HistoryDigest) -> str:
    """The whole page."""
    title = f"seed history: {digest.root_name}" if digest.root_name else "seed history"
    rows = digest.rows
    span = (
        f"{utc(rows[-1].started_at)} to {utc(rows[0].started_at)}" if rows else "no iterations yet"
    )
    header = (
        f"<header><h1>{escape(title)}</h1><p>{escape(span)} · generated "
        f"{escape(utc(digest.generated_at, True))}"
        + (f" · backend {escape(digest.backend)}" if digest.backend else "")
        + ' · <a href="README.md">README.md</a></p></header>'
    )
    body = header + _tiles(digest) + '<main class="grid">' + _charts(digest)
    body += _generations(digest) + _top_gaps(digest) + _table(digest) + "</main>"
    return page.document(title, body)

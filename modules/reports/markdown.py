"""report.md for one iteration: what was chosen and why, the plan, what happened, the proof."""

from __future__ import annotations

from domain import (
    Diagnostic,
    FailureCategory,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    Tool,
)
from modules.reports.common import (
    category_note,
    cell_code,
    code,
    md,
    money,
    ordered_phases,
    plural,
    seconds,
    shorten,
    utc,
)

HEADLINES: dict[IterationOutcome, str] = {
    IterationOutcome.SUCCESS: "landed on the branch",
    IterationOutcome.ROLLBACK: "changes rejected and discarded",
    IterationOutcome.FAILURE: "the agent did not finish",
    IterationOutcome.NO_CHANGE: "the agent changed nothing",
    IterationOutcome.WAITING: "planned; waiting for an agent that can take it",
    IterationOutcome.MERGE_BLOCKED: "verified, but could not be merged; the work is kept",
    IterationOutcome.KEPT: "verified, but it edits base tests or no test ran some of its lines; kept for a person to approve",
    IterationOutcome.ABORTED: "stopped before it finished; the work was discarded",
    IterationOutcome.PROPOSED: "verified and pushed to the remote, waiting for the team's review",
    IterationOutcome.LIMITED: "the model's usage limit was reached; the daemon waits for its reset and goes on (no failure counted)",
}

CATEGORY_HINTS: dict[FailureCategory, str] = {
    FailureCategory.TEST_REGRESSION: "a test that passed before fails after the change",
    FailureCategory.GAP_NOT_CLOSED: "the gap's tests still fail; nothing that passed before broke",
    FailureCategory.TEST_TIMEOUT: "the tests ran past their time limit",
    FailureCategory.FLAKY_TEST: "a test failed, then passed (or also failed before the change)",
    FailureCategory.COMPILATION_ERROR: "the change does not compile",
    FailureCategory.TYPE_ERROR: "the change adds type errors",
    FailureCategory.LINT_ERROR: "the change adds lint or formatting errors",
    FailureCategory.IMPORT_ERROR: "a module no longer imports",
    FailureCategory.SANDBOX_VIOLATION: "something outside the worktree was touched: the daemon halts",
    FailureCategory.HYGIENE_VIOLATION: "tests were weakened (the third in a UTC day halts the daemon)",
    FailureCategory.ALLOWLIST_VIOLATION: "files outside the plan's allowlist changed (the next plan for the gap allows them)",
    FailureCategory.BUDGET_EXCEEDED: "a cost, token or iteration budget ran out",
    FailureCategory.GROWTH_LIMIT: "the change grew past the allowed size",
    FailureCategory.RUN_LIMIT: "the run passed a bound on what it may use of the daemon (the third in a UTC day halts it)",
    FailureCategory.PUBLIC_NAME_REMOVED: "a public function or class the gap does not name is gone from the tree",
    FailureCategory.FITNESS_REGRESSION: "the changed planning modules plan the kernel's corpus worse than the base's (`seed.py fitness`)",
    FailureCategory.AGENT_ERROR: "the agent exited with an error or reported failure",
    FailureCategory.AGENT_TIMEOUT: "the agent ran past its time limit and was ended",
    FailureCategory.MERGE_BLOCKED: "the branch moved or the checkout is in the way",
    FailureCategory.STUCK: "the run repeated one step with no change, or its turns changed nothing, so it was ended early",
    FailureCategory.UNKNOWN: "no category fits",
}


def _where(d: Diagnostic) -> str:
    if d.node_id:
        return d.node_id
    place = d.file or "(no file)"
    if d.line:
        place += f":{d.line}" + (f":{d.column}" if d.column else "")
    return place


def diagnostic_line(d: Diagnostic) -> str:
    """One new problem: where, which tool and rule, and the message."""
    if d.tool == Tool.PYTEST:
        what = d.exc_type or d.rule or "failed"
        frame = f" (at {d.frame_file}:{d.frame_line})" if d.frame_file else ""
        text = f"- {code(_where(d))} {d.rule or 'failed'}: {md(what)}"
        if d.message:
            text += f": {md(shorten(d.message, 300))}"
        return text + frame
    rule = f" {d.rule}" if d.rule else ""
    return f"- {code(_where(d))} {d.tool.value}{rule}: {md(shorten(d.message, 300))}"


def _result(record: IterationRecord) -> str:
    if record.outcome == IterationOutcome.SUCCESS and record.commit:
        return f"commit {code(record.commit[:12])} (`git show {record.commit[:12]}`)"
    if record.outcome == IterationOutcome.PROPOSED:
        where = record.pull_request or f"branch {code(f'seed/{record.iteration_id}')}"
        return f"commit {code((record.commit or '')[:12])} proposed at {md(where)}"
    if record.kept_branch:
        shown = f"kept on branch {code(record.kept_branch)} (`git log -p {record.kept_branch}`)"
        if record.changed_tests:
            shown += "; it changes what these base tests expect: " + ", ".join(
                code(t) for t in record.changed_tests
            )
        if f"approve {record.iteration_id}`" in record.reason:
            return shown  # the reason gives the whole command (with --root when needed)
        return f"{shown}; land it with `python seed.py approve {record.iteration_id}`"
    if record.outcome == IterationOutcome.WAITING:
        return "nothing ran; the plan is in plan.json"
    return "nothing landed; the worktree was discarded"


def _usage(record: IterationRecord) -> str:
    text = f"{record.tokens_used:,} tokens, {money(record.cost_usd)}"
    if record.input_tokens or record.output_tokens:
        text = f"{record.tokens_used:,} tokens ({record.input_tokens:,} in, {record.output_tokens:,} out), {money(record.cost_usd)}"
    if record.cost_basis:
        text += f" ({record.cost_basis})"
    if record.agent_turns:
        text += f", {plural(record.agent_turns, 'turn')}"
    if record.agent_model:
        text += f", model {md(record.agent_model)}"
    return text


def _summary(record: IterationRecord) -> list[str]:
    category = category_note(
        record.outcome.value, record.failure_category.value if record.failure_category else ""
    )
    outcome = record.outcome.value + (f" · {category}" if category else "")
    total = sum(record.durations.values())
    elapsed = (record.ended_at - record.started_at).total_seconds()
    agent = record.backend or "-"
    if record.agent_key:
        agent += f" (portfolio entry {code(record.agent_key)})"
    if record.agent_version:
        agent += f" ({md(record.agent_version)})"
    if record.agent_exit_code is not None:
        agent += f", exit {record.agent_exit_code}"
    gap = record.gap
    rows = [
        ("Outcome", f"**{outcome}**: {HEADLINES[record.outcome]}"),
        ("Gap", f"{cell_code(gap.key)} {md(gap.title)} ({gap.category.value}, {gap.source})"),
        (
            "When",
            f"{utc(record.started_at, True)} to {utc(record.ended_at, True)} "
            f"({seconds(max(elapsed, total))})",
        ),
        ("Agent", agent),
        ("Tokens and cost", _usage(record)),
        ("Result", _result(record)),
    ]
    if record.uncovered:
        shown = ", ".join(code(u) for u in record.uncovered[:20])
        more = f" and {len(record.uncovered) - 20} more" if len(record.uncovered) > 20 else ""
        rows.append(("Tests", f"no test ran these lines: {shown}{more}"))
    if record.sandboxed is False:
        rows.insert(4, ("Sandbox", "**off**: this run was NOT sandboxed"))
    if record.network:
        full = f"**{md(record.network)}**: the agent could reach any host"
        rows.insert(4, ("Network", "model-only" if record.network == "model-only" else full))
    if record.wire_requests:
        wire = f"{record.wire_requests} requests, {record.wire_tokens:,} tokens, ${record.wire_cost_usd:.4f}"
        rows.insert(5, ("Model (wire)", wire))
    if record.agent_note:
        rows.insert(4, ("Note", md(record.agent_note)))
    if record.base:
        rows.append(("Started from", code(record.base[:12])))
    lines = ["| | |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return lines


def _why(record: IterationRecord) -> list[str]:
    plan = record.plan
    chosen = next((g for g in record.ranking if g.key == record.gap.key), None)
    lines = ["", "## Why this gap", ""]
    open_total = sum(record.open_gaps.values())
    if chosen is not None:
        place = f"Ranked #{chosen.rank}" + (
            f" of {plural(open_total, 'open gap')}" if open_total else ""
        )
        reason = chosen.rank_reason or (plan.gap.rank_reason if plan else "")
        lines.append(
            f"{place}, severity {chosen.severity.value}" + (f": {md(reason)}." if reason else ".")
        )
        ahead = [g for g in record.ranking if g.rank < chosen.rank]
        if ahead and all(g.skipped for g in ahead):
            lines.append("Every gap ranked above it was passed over (see below).")
        elif ahead:
            lines.append("The planner preferred it to the gaps ranked above it (see its notes).")
    elif plan is not None and plan.gap.rank_reason:
        lines.append(f"{md(plan.gap.rank_reason)}.")
    else:
        lines.append("The record holds no ranking for this iteration.")
    if plan is not None and plan.notes:
        lines += ["", "Planner notes:", ""]
        lines += [f"- {md(note)}" for note in plan.notes]
    others = [g for g in record.ranking if g.key != record.gap.key]
    if others:
        lines += [
            "",
            "Other gaps at the time:",
            "",
            "| # | Gap | Source | Severity | Passed over because |",
            "|---|---|---|---|---|",
        ]
        below = chosen.rank if chosen else 0
        lines += [
            f"| {g.rank} | {cell_code(g.key)} {md(shorten(g.title, 80))} | {g.source} | "
            f"{g.severity.value} | "
            f"{md(g.skipped) or ('ranked lower' if g.rank > below else 'the planner chose another')} |"
            for g in others
        ]
    if record.open_gaps:
        by_source = ", ".join(f"{s} {n}" for s, n in sorted(record.open_gaps.items()))
        lines += ["", f"Open gaps at the baseline: {by_source}."]
    return lines


def _plan(plan: IterationPlan) -> list[str]:
    lines = [
        "",
        "## Plan",
        "",
        f"**Goal:** {md(plan.goal)}",
        "",
        f"Kind {plan.task_kind.value}, risk **{plan.estimated_risk.value}**, "
        f"agent time limit {seconds(plan.budget.timeout_s)}, "
        f"at most {plan.budget.max_changed_lines} changed lines and {plan.budget.max_new_files} new files.",
        "",
        "Actions:",
        "",
    ]
    lines += [
        f"- {a.action_type.value} {', '.join(code(f) for f in a.target_files) or '(any file)'}: {md(a.description)}"
        for a in plan.actions
    ] or ["- (none)"]
    allowed = ", ".join(code(p) for p in plan.allowed_paths) or "any file that is not protected"
    lines += ["", f"Allowed files: {allowed}"]
    if plan.agents:  # the planner's learned order of the portfolio (the first is sent alone)
        order = ", ".join(code(a) for a in plan.agents)
        lines += ["", f"Agents, in the order dealt: {order}. Why: {md(plan.agents_why)}"]
    if plan.forbidden_paths:
        lines.append(f"Forbidden files: {', '.join(code(p) for p in plan.forbidden_paths)}")
    lines += ["", "Acceptance criteria:", ""]
    lines += [
        f"- {code(' '.join((c.check.value, *c.args)))}" + (f": {md(c.text)}" if c.text else "")
        for c in plan.criteria
    ] or ["- (none)"]
    if plan.history:
        lines += ["", "Earlier attempts at this gap:", ""]
        lines += [
            f"- {n.iteration_id} {n.outcome.value}"
            + (f" {n.failure_category.value}" if n.failure_category else "")
            + (f": {md(shorten(n.reason, 200))}" if n.reason else "")
            for n in plan.history
        ]
    return lines


def _agent(record: IterationRecord) -> list[str]:
    if not (record.ran_agent or record.agent_summary or record.touched_files):
        return []
    lines = ["", "## What the agent did", ""]
    if record.agent_summary:
        lines += [f"> {md(line) or ' '}" for line in record.agent_summary.strip().splitlines()[:40]]
        lines.append("")
    if record.touched_files:
        d = record.diff
        lines.append(
            f"Changed {d.files} file{'' if d.files == 1 else 's'} (+{d.insertions} -{d.deletions}"
            + (f", {d.new_files} new" if d.new_files else "")
            + "):"
        )
        lines.append("")
        lines += [f"- {code(f)}" for f in record.touched_files[:100]]
        if len(record.touched_files) > 100:
            lines.append(f"- ... and {len(record.touched_files) - 100} more")
    elif record.ran_agent:
        lines.append("No files changed.")
    if record.repairs:
        lines += ["", "Repaired by the kernel before judging (ruff's own fixers):", ""]
        lines += [f"- {md(r)}" for r in record.repairs[:50]]
    return lines


def _rounds(record: IterationRecord) -> list[str]:
    if not record.rounds:
        return []
    lines = [
        "",
        "## Rounds",
        "",
        "The kernel refused a change and the agent got another round:",
        "",
    ]
    for r in record.rounds:
        verdict = r.outcome.value + (f" {r.failure_category.value}" if r.failure_category else "")
        how = ", continuing its session" if r.resumed else ""
        used = f", {r.tokens_used} tokens, ${r.cost_usd:.4f}" if r.tokens_used or r.cost_usd else ""
        lines.append(f"- Round {r.number}: {verdict}{how}{used}: {md(r.reason)}")
    return lines


def _turns(record: IterationRecord) -> list[str]:
    turns = record.model_turns
    if not turns:
        return []
    rounds = len({t.round for t in turns}) > 1
    lines = [
        "",
        "## The model, turn by turn",
        "",
        "Each request through the kernel's gateway, with the usage read from the answer:",
        "",
        "| Turn | Status | Input | Output | Cached | Cost | Seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in turns:
        turn = f"{t.round}.{t.seq}" if rounds else str(t.seq)
        lines.append(
            f"| {turn} | {md(t.status)} | {t.input:,} | {t.output:,} | {t.cached:,} | "
            f"${t.cost_usd:.4f} | {t.seconds:.2f} |"
        )
    lines.append(
        f"| **all** | | **{sum(t.input for t in turns):,}** | **{sum(t.output for t in turns):,}** | "
        f"**{sum(t.cached for t in turns):,}** | **${sum(t.cost_usd for t in turns):.4f}** | "
        f"**{sum(t.seconds for t in turns):.2f}** |"
    )
    if record.wire_requests > len(turns):
        lines.append(
            f"\n... and {record.wire_requests - len(turns)} more (model.jsonl has them all)"
        )
    return lines


def _proof(record: IterationRecord) -> list[str]:
    lines: list[str] = []
    if record.verdicts:
        lines += ["", "## Verdicts", "", "| Criterion | Verdict | Evidence |", "|---|---|---|"]
        for v in record.verdicts:
            name = cell_code(" ".join((v.check.value, *v.args)))
            if v.text:
                name += f" {md(v.text)}"
            verdict = "pass" if v.passed else "**FAIL**"
            lines.append(f"| {name} | {verdict} | {md(shorten(v.evidence, 400)) or '-'} |")
    if record.failures:
        lines += ["", "## New problems the change introduced", ""]
        lines += [diagnostic_line(d) for d in record.failures[:50]]
        if len(record.failures) > 50:
            lines.append(f"- ... and {len(record.failures) - 50} more (record.json has them all)")
    if record.evidence:
        lines += ["", "## Evidence", ""]
        lines += [f"- {md(shorten(e, 500))}" for e in record.evidence[:50]]
    if record.checkout_changes:
        lines += ["", "## Your checkout changed during the run (left as it was)", ""]
        lines += [f"- {code(f)}" for f in record.checkout_changes[:50]]
    if record.differences:
        lines += ["", "## Where seed's runs differ from the project's own", ""]
        lines += [f"- {md(shorten(d, 500))}" for d in record.differences[:20]]
    return lines


def _time(record: IterationRecord) -> list[str]:
    if not record.durations:
        return []
    lines = ["", "## Time", "", "| Phase | Time |", "|---|---|"]
    lines += [
        f"| {phase} | {seconds(record.durations[phase])} |"
        for phase in ordered_phases(record.durations)
    ]
    lines.append(f"| **total** | **{seconds(sum(record.durations.values()))}** |")
    return lines


def _files(record: IterationRecord) -> list[str]:
    links: list[str] = []
    if record.candidates:  # each candidate ran in a folder of its own, next to this one
        links += [
            f"[candidate {c.number} agent.log](../{record.iteration_id}-c{c.number}/agent.log)"
            for c in record.candidates
        ]
    elif record.ran_agent:
        links.append("[agent.log](agent.log)")
    if record.plan is not None:
        links.append("[plan.json](plan.json)")
    links.append("[record.json](record.json)")
    return ["", "## Files", "", " · ".join(links), "", "[All iterations](../README.md)"]


def render_record(record: IterationRecord) -> str:
    """The iteration's report.md."""
    title = f"# {record.iteration_id}: {record.outcome.value}"
    if record.failure_category:
        title += f" ({record.failure_category.value})"
    lines = [title, "", f"> {md(record.reason) or HEADLINES[record.outcome]}", ""]
    if record.failure_category:
        lines += [
            f"{record.failure_category.value}: {CATEGORY_HINTS[record.failure_category]}.",
            "",
        ]
    lines += _summary(record)
    lines += _why(record)
    if record.plan is not None:
        lines += _plan(record.plan)
    lines += _agent(record)
    lines += _rounds(record)
    lines += _turns(record)
    lines += _proof(record)
    lines += _time(record)
    lines += _files(record)
    return "\n".join(lines) + "\n"

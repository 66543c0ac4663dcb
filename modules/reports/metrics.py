"""The Prometheus text exposition (format 0.0.4) of a metrics snapshot, as prometheus_client writes it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from domain import MetricsSnapshot

Sample = tuple[str, Mapping[str, str], float]
"""A sample's name, its labels and its value."""


def number(value: float) -> str:
    """A sample value as Go (and prometheus_client) writes it: 2.0, +Inf, NaN, 1e+21."""
    value = float(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:  # Go switches to exponents sooner than Python
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def _label(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _family(name: str, kind: str, help_text: str, samples: Iterable[Sample]) -> list[str]:
    help_text = help_text.replace("\\", r"\\").replace("\n", r"\n")
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for sample, labels, value in samples:
        tags = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
        lines.append(f"{sample}{{{tags}}} {number(value)}" if tags else f"{sample} {number(value)}")
    return lines


def _counts(snap: MetricsSnapshot) -> list[str]:
    return [
        *_family(
            "seed_iterations_total",
            "counter",
            "Iterations recorded, by outcome.",
            (
                ("seed_iterations_total", {"outcome": o}, n)
                for o, n in sorted(snap.by_outcome.items())
            ),
        ),
        *_family(
            "seed_candidates_total",
            "counter",
            "Candidates run ([candidates] n > 1), by outcome (SUCCESS: it passed everything).",
            (
                ("seed_candidates_total", {"outcome": o}, n)
                for o, n in sorted(snap.candidates_by_outcome.items())
            ),
        ),
        *_family(
            "seed_open_gaps",
            "gauge",
            "Open gaps at the latest analysis, by source.",
            (("seed_open_gaps", {"source": s}, n) for s, n in sorted(snap.open_gaps.items())),
        ),
    ]


def _money(snap: MetricsSnapshot) -> list[str]:
    one: list[tuple[str, str, str, float]] = [
        (
            "seed_cost_usd_total",
            "counter",
            "Dollars spent on agents over every iteration.",
            snap.cost_usd,
        ),
        (
            "seed_tokens_total",
            "counter",
            "Tokens used by agents over every iteration.",
            snap.tokens,
        ),
        ("seed_cost_today_usd", "gauge", "Dollars spent today (UTC).", snap.cost_today_usd),
        (
            "seed_budget_left_today_usd",
            "gauge",
            "Dollars left of today's budget.",
            snap.budget_left_today_usd,
        ),
    ]
    return [
        line for name, kind, text, v in one for line in _family(name, kind, text, [(name, {}, v)])
    ]


def _phases(snap: MetricsSnapshot) -> list[str]:
    samples: list[Sample] = []
    for phase, total in sorted(snap.phases.items()):
        samples.append(("seed_phase_duration_seconds_count", {"phase": phase}, total.count))
        samples.append(("seed_phase_duration_seconds_sum", {"phase": phase}, total.seconds))
    return [
        *_family(
            "seed_phase_duration_seconds",
            "summary",
            "Seconds spent per iteration phase, over every iteration.",
            samples,
        ),
        *_family(
            "seed_stuck_runs_total",
            "counter",
            "Iterations whose run was ended as STUCK (also in seed_iterations_total as FAILURE).",
            [("seed_stuck_runs_total", {}, snap.stuck)],
        ),
        *_family(
            "seed_limited_until_seconds",
            "gauge",
            "When the usage limit in force resets, in epoch seconds (0: none holds).",
            [("seed_limited_until_seconds", {}, snap.limited_until)],
        ),
        *_family(
            "seed_halted",
            "gauge",
            "1 when the daemon is halted.",
            [("seed_halted", {}, 1.0 if snap.halted else 0.0)],
        ),
        *_family(
            "seed_daemon_phase",
            "gauge",
            "The phase the daemon is in (1).",
            [("seed_daemon_phase", {"phase": snap.phase or "unknown"}, 1.0)],
        ),
    ]


def render_metrics(snap: MetricsSnapshot) -> str:
    """The /metrics page: iterations by outcome, open gaps, money, time per phase, halt, phase."""
    return "\n".join([*_counts(snap), *_money(snap), *_phases(snap)]) + "\n"

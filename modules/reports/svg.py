"""Inline SVG charts with no dependencies: stacked bars, lines and horizontal bars.

Every mark carries a <title> (the browser shows it on hover); coordinates are rounded so
a chart of ninety buckets stays a few tens of kilobytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 600
HEIGHT = 210
_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 10, 12, 30


@dataclass(frozen=True)
class Series:
    """One named, coloured row of values, one per bucket (None: no value there)."""

    name: str
    color: str
    values: Sequence[float | None]


def _n(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def nice_scale(value: float, integer: bool = False) -> tuple[float, float]:
    """(top, step) of an axis from 0 covering value in about four steps of 1, 2, 2.5 or 5
    times a power of ten; whole steps only for counts."""
    if value <= 0:
        return (4.0, 1.0) if integer else (1.0, 0.25)
    raw = value / 4
    power = 10.0 ** math.floor(math.log10(raw))
    step = 10 * power
    for multiple in (1, 2, 2.5, 5, 10):
        candidate = multiple * power
        if integer and (candidate < 1 or candidate != int(candidate)):
            continue
        if candidate >= raw:
            step = candidate
            break
    if integer:
        step = max(step, 1.0)
    return step * math.ceil(value / step - 1e-9), step


def _frame(chart_id: str, title: str, body: list[str]) -> str:
    return (
        f'<svg id="{escape(chart_id)}" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-label="{escape(title)}" preserveAspectRatio="xMidYMid meet">'
        f"<title>{escape(title)}</title>" + "".join(body) + "</svg>"
    )


def _empty(chart_id: str, title: str) -> str:
    return _frame(
        chart_id,
        title,
        [
            f'<text class="empty" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">'
            "no data yet</text>"
        ],
    )


def _axes(labels: Sequence[str], top: float, step: float, fmt: Callable[[float], str]) -> list[str]:
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    out: list[str] = []
    for i in range(round(top / step) + 1):
        value = step * i
        y = _TOP + plot_h - plot_h * value / top
        out.append(
            f'<line class="grid" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{_n(y)}" y2="{_n(y)}"/>'
            f'<text class="tick" x="{_LEFT - 6}" y="{_n(y + 4)}" text-anchor="end">'
            f"{escape(fmt(value))}</text>"
        )
    if labels:
        step_labels = max(1, math.ceil(len(labels) / 6))
        slot = plot_w / len(labels)
        for i in range(0, len(labels), step_labels):
            x = _LEFT + slot * (i + 0.5)
            out.append(
                f'<text class="tick" x="{_n(x)}" y="{HEIGHT - 10}" text-anchor="middle">'
                f"{escape(labels[i])}</text>"
            )
    return out


def stacked_bars(
    chart_id: str,
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    fmt: Callable[[float], str] = _n,
    tick: Callable[[float], str] | None = None,
    integer: bool = False,
) -> str:
    """One bar per label, the series stacked in order (fmt for values, tick for the axis)."""
    totals = [sum((s.values[i] or 0.0) for s in series) for i in range(len(labels))]
    if not labels or not any(totals):
        return _empty(chart_id, title)
    top, step = nice_scale(max(totals), integer)
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    slot = plot_w / len(labels)
    bar = min(max(slot * 0.8, 1.0), 48.0)
    body = _axes(labels, top, step, tick or fmt)
    for i, label in enumerate(labels):
        base = _TOP + plot_h
        x = _LEFT + slot * i + (slot - bar) / 2
        for s in series:
            value = s.values[i] or 0.0
            if value <= 0:
                continue
            h = plot_h * value / top
            base -= h
            body.append(
                f'<rect x="{_n(x)}" y="{_n(base)}" width="{_n(bar)}" height="{_n(max(h, 0.5))}" '
                f'fill="{s.color}"><title>{escape(label)}: {escape(s.name)} {escape(fmt(value))}'
                "</title></rect>"
            )
    return _frame(chart_id, title, body)


def lines(
    chart_id: str,
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    fmt: Callable[[float], str] = _n,
    integer: bool = False,
) -> str:
    """One line per series across the labels; None leaves a gap."""
    values = [v for s in series for v in s.values if v is not None]
    if not labels or not values:
        return _empty(chart_id, title)
    top, step = nice_scale(max(values), integer)
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    slot = plot_w / len(labels)
    body = _axes(labels, top, step, fmt)
    for s in series:
        runs: list[list[str]] = [[]]
        for i, value in enumerate(s.values):
            if value is None:
                runs.append([])
                continue
            x = _LEFT + slot * (i + 0.5)
            y = _TOP + plot_h - plot_h * value / top
            runs[-1].append(f"{_n(x)},{_n(y)}")
        for run in runs:
            if len(run) > 1:
                body.append(
                    f'<polyline fill="none" stroke="{s.color}" stroke-width="2" '
                    f'points="{" ".join(run)}"><title>{escape(s.name)}</title></polyline>'
                )
            elif run:
                x, y = run[0].split(",")
                body.append(
                    f'<circle cx="{x}" cy="{y}" r="2.5" fill="{s.color}">'
                    f"<title>{escape(s.name)}</title></circle>"
                )
        last = next(((i, v) for i, v in reversed(list(enumerate(s.values))) if v is not None), None)
        if last is not None:
            i, value = last
            body.append(
                f'<circle cx="{_n(_LEFT + slot * (i + 0.5))}" cy="{_n(_TOP + plot_h - plot_h * value / top)}" '
                f'r="3" fill="{s.color}"><title>{escape(labels[i])}: {escape(s.name)} '
                f"{escape(fmt(value))}</title></circle>"
            )
    return _frame(chart_id, title, body)


def hbars(
    chart_id: str, title: str, items: Sequence[tuple[str, float, str, str]], row: float = 26
) -> str:
    """Horizontal bars: (label, fraction of the full width 0..1, text beside the bar, colour)."""
    if not items:
        return _empty(chart_id, title)
    height = _TOP + row * len(items) + 8
    label_w = 110
    plot_w = WIDTH - label_w - 140
    body: list[str] = []
    for i, (label, fraction, text, color) in enumerate(items):
        y = _TOP + row * i
        w = max(plot_w * min(max(fraction, 0.0), 1.0), 1.0)
        body.append(
            f'<text class="tick" x="{label_w - 8}" y="{_n(y + row * 0.62)}" text-anchor="end">'
            f"{escape(label)}</text>"
            f'<rect class="track" x="{label_w}" y="{_n(y + 4)}" width="{plot_w}" height="{_n(row - 8)}"/>'
            f'<rect x="{label_w}" y="{_n(y + 4)}" width="{_n(w)}" height="{_n(row - 8)}" fill="{color}">'
            f"<title>{escape(label)}: {escape(text)}</title></rect>"
            f'<text class="tick" x="{label_w + plot_w + 8}" y="{_n(y + row * 0.62)}">{escape(text)}</text>'
        )
    return (
        f'<svg id="{escape(chart_id)}" class="chart" viewBox="0 0 {WIDTH} {_n(height)}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>' + "".join(body) + "</svg>"
    )


def legend(series: Sequence[Series]) -> str:
    """An HTML legend for the series (colour swatch and name)."""
    return (
        '<div class="legend">'
        + "".join(
            f'<span><i style="background:{s.color}"></i>{escape(s.name)}</span>' for s in series
        )
        + "</div>"
    )

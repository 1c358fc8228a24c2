"""The figures of the correlation section, as SVG written by hand (no library, no timestamp: the same input gives the
same bytes): a scatter of the models (accuracy here against the score on another benchmark), and the items' accuracy
by similarity bin, ours beside another benchmark's, each bin's 95% interval as a whisker."""

from __future__ import annotations

import math
from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

from benchmark.correlation import Bin, Correlation

WIDTH, HEIGHT = 520, 320
LEFT, RIGHT, TOP, BOTTOM = 56, 20, 48, 44
INK, GRID, AXIS = "#333333", "#e5e5e5", "#333333"
SERIES = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")


def _document(title: str, body: list[str]) -> bytes:
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'font-family="sans-serif">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        *body,
        "</svg>",
    ]
    return ("\n".join(lines) + "\n").encode()


def _text(x: float, y: float, text: str, *, anchor: str = "middle", size: int = 10, rotate: bool = False) -> str:
    turn = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor={quoteattr(anchor)} font-size="{size}" fill="{INK}"{turn}>'
        f"{escape(text)}</text>"
    )


def _line(x1: float, y1: float, x2: float, y2: float, colour: str = GRID) -> str:
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}" stroke-width="1"/>'


def _span(values: Sequence[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    if high == low:
        low, high = low - 0.5, high + 0.5
    pad = (high - low) * 0.08
    return low - pad, high + pad


def _axes(body: list[str], x_label: str, y_label: str, x_span, y_span, *, x_ticks, y_ticks, percent_y: bool):
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x_of(value: float) -> float:
        return LEFT + (value - x_span[0]) / (x_span[1] - x_span[0]) * plot_w

    def y_of(value: float) -> float:
        return TOP + (y_span[1] - value) / (y_span[1] - y_span[0]) * plot_h

    for tick in y_ticks:
        body.append(_line(LEFT, y_of(tick), WIDTH - RIGHT, y_of(tick)))
        body.append(_text(LEFT - 6, y_of(tick) + 3, f"{tick * 100:.0f}%" if percent_y else f"{tick:g}", anchor="end"))
    for tick in x_ticks:
        body.append(_text(x_of(tick), HEIGHT - BOTTOM + 14, f"{tick:g}"))
    body.append(_line(LEFT, TOP, LEFT, HEIGHT - BOTTOM, AXIS))
    body.append(_line(LEFT, HEIGHT - BOTTOM, WIDTH - RIGHT, HEIGHT - BOTTOM, AXIS))
    body.append(_text(LEFT + plot_w / 2, HEIGHT - 8, x_label))
    body.append(_text(14, TOP + plot_h / 2, y_label, rotate=True))
    return x_of, y_of


def _ticks(span: tuple[float, float], count: int = 5) -> list[float]:
    """Round ticks inside the span: a step of 1, 2 or 5 times a power of ten, about `count` of them."""
    raw = (span[1] - span[0]) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(factor * power for factor in (1, 2, 5, 10) if factor * power >= raw)
    first = math.ceil(span[0] / step)
    return [round(k * step, 10) for k in range(first, math.floor(span[1] / step) + 1)]


def scatter_svg(result: Correlation, *, benchmark: str, release: str) -> bytes:
    """The models: accuracy on the release (x, %) against the score on `benchmark` (y), each point named."""
    title = f"Models on {release} against {benchmark}"
    body = [_text(LEFT, 18, title, anchor="start", size=12)]
    if not result.models:
        return _document(title, body)
    x_span = _span([ours for _, ours, _ in result.models])
    y_span = _span([theirs for _, _, theirs in result.models])
    x_of, y_of = _axes(
        body,
        f"accuracy on {release} (macro)",
        benchmark,
        x_span,
        y_span,
        x_ticks=_ticks(x_span),
        y_ticks=_ticks(y_span),
        percent_y=False,
    )
    for name, ours, theirs in result.models:
        body.append(f'<circle cx="{x_of(ours):.1f}" cy="{y_of(theirs):.1f}" r="4" fill="{SERIES[0]}"/>')
        body.append(_text(x_of(ours) + 6, y_of(theirs) - 6, name, anchor="start", size=9))
    return _document(title, body)


def bins_svg(series: Sequence[tuple[str, list[Bin]]], *, title: str) -> bytes:
    """Accuracy by similarity bin, one line of points per series (ours first), each with its interval."""
    body = [_text(LEFT, 18, title, anchor="start", size=12)]
    edges = sorted({edge for _, bins in series for b in bins for edge in (b.low, b.high)})
    if not edges:
        return _document(title, body)
    x_span = (edges[0], edges[-1])
    x_of, y_of = _axes(
        body,
        "DINOv3 similarity of the pair",
        "accuracy",
        x_span,
        (0.0, 1.0),
        x_ticks=edges,
        y_ticks=[0.0, 0.25, 0.5, 0.75, 1.0],
        percent_y=True,
    )
    for index, (name, bins) in enumerate(series):
        colour = SERIES[index % len(SERIES)]
        shift = (index - (len(series) - 1) / 2) * 6
        points = []
        for b in bins:
            if b.accuracy is None:
                continue
            x = x_of((b.low + b.high) / 2) + shift
            if b.interval is not None:
                body.append(_line(x, y_of(b.interval[0]), x, y_of(b.interval[1]), colour))
            body.append(f'<circle cx="{x:.1f}" cy="{y_of(float(b.accuracy)):.1f}" r="3.5" fill="{colour}"/>')
            points.append(f"{x:.1f},{y_of(float(b.accuracy)):.1f}")
        if len(points) > 1:
            body.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        legend_x = LEFT + index * 160
        body.append(f'<rect x="{legend_x}" y="{TOP - 20}" width="10" height="10" fill="{colour}"/>')
        body.append(_text(legend_x + 14, TOP - 11, name, anchor="start", size=10))
    return _document(title, body)

"""The figure of the release report: the human-model gap per category (a bar per model, its 95% interval as a
whisker), drawn once as integer rectangles and texts, then written as SVG (by hand) and as PNG (zlib and struct: a
raster of the same rectangles, without the texts; the report's PNG, with its texts, is evaluation/results/raster.py).
No timestamp, no font, no third-party library: the same report always gives the same bytes."""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass
from fractions import Fraction
from xml.sax.saxutils import escape, quoteattr

from benchmark.apportion import exact, round_half_up
from benchmark.report import Report
from benchmark.taxonomy import ABBREVIATIONS, CATEGORIES

WIDTH, HEIGHT = 720, 360
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 40, 36
PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
BACKGROUND, AXIS, GRID, WHISKER, INK = "#ffffff", "#333333", "#e5e5e5", "#222222", "#333333"


@dataclass(frozen=True)
class Box:
    x: int
    y: int
    width: int
    height: int
    fill: str


@dataclass(frozen=True)
class Label:
    x: int
    y: int
    text: str
    anchor: str = "middle"  # start, middle or end
    size: int = 11


def _points(value) -> Fraction:
    return exact(value) * 100


def _scale(report: Report) -> tuple[int, int, int]:
    """The axis in points: its bottom, top and tick step, multiples of 10 that hold every bar and whisker and 0."""
    values = [Fraction(0)]
    for row in report.gaps:
        for cell in row.categories.values():
            if cell is not None:
                values += [_points(cell.estimate), *(_points(v) for v in (cell.low, cell.high) if v is not None)]
    low, high = math.floor(min(values) / 10) * 10, math.ceil(max(values) / 10) * 10
    if high == low:
        high = low + 10
    step = 10 if high - low <= 60 else 20
    return low, high, step


def _title(report: Report) -> str:
    return f"Human-model gap per category (points, 95% interval), release {report.release} ({report.split})"


LEGEND_ROW = 14  # the height of a row of the legend
CHARACTER = 7  # the width a character of the legend takes, at its size (about: the labels' font is the viewer's)


def _legend(report: Report) -> list[tuple[int, int, int, str]]:
    """(x, y, index, label) of each model's key: as many per row as fit the figure's width, then the next row (run
    names are long, and a row that ran past the edge hid the last ones)."""
    entries, x, y = [], LEFT, 24
    for index, row in enumerate(report.gaps):
        label = row.label.removeprefix("Humans - ")
        width = 24 + CHARACTER * len(label)
        if x > LEFT and x + width > WIDTH - RIGHT:
            x, y = LEFT, y + LEGEND_ROW
        entries.append((x, y, index, label))
        x += width
    return entries


def gap_drawing(report: Report) -> list[Box | Label]:
    """The shapes of the figure, in painting order: the plot starts below the legend's last row."""
    low, high, step = _scale(report)
    legend = _legend(report)
    plot_top = TOP + (legend[-1][1] - 24 if legend else 0)
    plot_height = HEIGHT - plot_top - BOTTOM
    plot_width = WIDTH - LEFT - RIGHT

    def y_of(points) -> int:
        return plot_top + round_half_up((high - exact(points)) * plot_height / (high - low))

    shapes: list[Box | Label] = [Box(0, 0, WIDTH, HEIGHT, BACKGROUND)]
    first_tick = -(-low // step) * step
    for tick in range(first_tick, high + 1, step):
        shapes.append(Box(LEFT, y_of(tick), plot_width, 1, AXIS if tick == 0 else GRID))
        shapes.append(Label(LEFT - 6, y_of(tick) + 4, f"{tick:+d}" if tick else "0", "end", 10))
    shapes.append(Box(LEFT, plot_top, 1, plot_height + 1, AXIS))
    group = plot_width // len(CATEGORIES)
    models = max(1, len(report.gaps))
    bar = max(2, (group - 8) // models)
    for place, category in enumerate(CATEGORIES):
        start = LEFT + place * group + (group - bar * models) // 2
        shapes.append(Label(LEFT + place * group + group // 2, HEIGHT - BOTTOM + 16, ABBREVIATIONS[category]))
        for index, row in enumerate(report.gaps):
            cell = row.categories[category]
            if cell is None:
                continue
            x = start + index * bar
            top, bottom = sorted((y_of(_points(cell.estimate)), y_of(0)))
            shapes.append(Box(x, top, bar - 1, max(1, bottom - top), PALETTE[index % len(PALETTE)]))
            if cell.low is not None:
                whisker_top, whisker_bottom = y_of(_points(cell.high)), y_of(_points(cell.low))
                middle = x + (bar - 1) // 2
                shapes.append(Box(middle, whisker_top, 1, max(1, whisker_bottom - whisker_top), WHISKER))
                cap = max(1, (bar - 1) // 3)
                for y in (whisker_top, whisker_bottom):
                    shapes.append(Box(middle - cap, y, 2 * cap + 1, 1, WHISKER))
    shapes.append(
        Label(LEFT, 16, f"Human-model gap per category, release {report.release} ({report.split})", "start", 13)
    )
    for x, y, index, label in legend:
        shapes.append(Box(x, y, 10, 10, PALETTE[index % len(PALETTE)]))
        shapes.append(Label(x + 14, y + 9, label, "start", 10))
    return shapes


def gap_svg(report: Report) -> bytes:
    """The figure as an SVG document (UTF-8, no timestamp)."""
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'font-family="sans-serif">',
        f"<title>{escape(_title(report))}</title>",
    ]
    for shape in gap_drawing(report):
        if isinstance(shape, Box):
            lines.append(
                f'<rect x="{shape.x}" y="{shape.y}" width="{shape.width}" height="{shape.height}" fill="{shape.fill}"/>'
            )
        else:
            lines.append(
                f'<text x="{shape.x}" y="{shape.y}" text-anchor={quoteattr(shape.anchor)} font-size="{shape.size}" '
                f'fill="{INK}">{escape(shape.text)}</text>'
            )
    lines.append("</svg>")
    return ("\n".join(lines) + "\n").encode()


def _rgb(colour: str) -> bytes:
    return bytes.fromhex(colour.removeprefix("#"))


def _chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def gap_png(report: Report) -> bytes:
    """The figure as a PNG (8-bit RGB, the rectangles of the drawing; texts are the SVG's only)."""
    pixels = [bytearray(WIDTH * 3) for _ in range(HEIGHT)]
    for shape in gap_drawing(report):
        if not isinstance(shape, Box):
            continue
        left, right = max(0, shape.x), min(WIDTH, shape.x + shape.width)
        if right <= left:
            continue
        run = _rgb(shape.fill) * (right - left)
        for y in range(max(0, shape.y), min(HEIGHT, shape.y + shape.height)):
            pixels[y][left * 3 : right * 3] = run
    raw = b"".join(b"\x00" + bytes(row) for row in pixels)
    header = struct.pack(">IIBBBBB", WIDTH, HEIGHT, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b"")
    )

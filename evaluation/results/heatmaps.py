"""A sweep's heatmap, drawn once as boxes and labels and written as SVG (server-side) or PNG (Pillow): one block per
series (a model run, the humans of a study), its cells coloured by accuracy, each with its accuracy, 95% interval
and count; one row for a one-factor sweep, a grid (second factor down, first across) for two."""

from __future__ import annotations

import io
from dataclasses import dataclass
from xml.sax.saxutils import escape

from PIL import Image, ImageDraw

from evaluation.results.raster import font, png_text

CELL_W, CELL_H = 96, 54
LEFT, TOP, GAP = 120, 58, 36
LIGHT, DARK = (244, 246, 251), (31, 78, 153)


@dataclass(frozen=True)
class Box:
    x: int
    y: int
    w: int
    h: int
    fill: tuple[int, int, int]


@dataclass(frozen=True)
class Label:
    x: int
    y: int
    text: str
    size: int = 12
    colour: tuple[int, int, int] = (34, 34, 34)
    anchor: str = "start"  # start or middle
    bold: bool = False


def shade(accuracy: float | None) -> tuple[int, int, int]:
    if accuracy is None:
        return (255, 255, 255)
    return tuple(round(light + (dark - light) * accuracy) for light, dark in zip(LIGHT, DARK, strict=True))


def _level(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def heatmap_drawing(results: dict, axes: list[dict]) -> tuple[int, int, list]:
    first = axes[0]
    rows = results["rows"]
    columns = len(first["levels"])
    block_h = TOP + len(rows) * CELL_H + GAP
    grid = len(rows) > 1
    width = LEFT + columns * CELL_W + (300 if grid else 20)
    items: list = []
    y0 = 10
    series = results["series"] or []
    for line in series:
        items.append(Label(10, y0 + 14, line.label, size=13, bold=True))
        if not grid:
            items.append(Label(10, y0 + 30, _threshold_text(line.thresholds[0], axes), size=11, colour=(100, 100, 100)))
        for column, level in enumerate(first["levels"]):
            x = LEFT + column * CELL_W + CELL_W // 2
            items.append(Label(x, y0 + TOP + len(rows) * CELL_H + 14, _level(level), anchor="middle", size=11))
        for row_number, row in enumerate(rows):
            y = y0 + TOP + row_number * CELL_H
            if row is not None:
                items.append(Label(10, y + CELL_H // 2 + 4, f"{axes[1]['factor']} {_level(row)}", size=11))
                found = {**line.thresholds[row_number], "row": None}
                x = LEFT + columns * CELL_W + 10
                items.append(
                    Label(x, y + CELL_H // 2 + 4, _threshold_text(found, axes), size=11, colour=(100, 100, 100))
                )
            for column in range(columns):
                cell = line.cells[column * len(rows) + row_number]
                x = LEFT + column * CELL_W
                items.append(Box(x, y, CELL_W - 2, CELL_H - 2, shade(cell["accuracy"])))
                ink = (255, 255, 255) if (cell["accuracy"] or 0) > 0.55 else (34, 34, 34)
                if cell["accuracy"] is None:
                    items.append(Label(x + CELL_W // 2, y + CELL_H // 2 + 4, "—", anchor="middle", colour=ink))
                    continue
                items.append(Label(x + CELL_W // 2, y + 20, f"{cell['accuracy']:.0%}", anchor="middle", colour=ink))
                spread = "" if cell["low"] is None else f"{cell['low']:.0%}–{cell['high']:.0%} · "
                items.append(
                    Label(
                        x + CELL_W // 2, y + 38, f"{spread}n={cell['answered']}", size=10, anchor="middle", colour=ink
                    )
                )
        items.append(Label(LEFT, y0 + TOP - 6, first["factor"], size=11, colour=(100, 100, 100)))
        y0 += block_h + 14
    if not series:
        items.append(Label(10, 30, "No model run or study has answered pairs of this sweep yet.", size=13))
        y0 = 50
    return width, y0, items


def _interval_text(found: dict) -> str:
    """The 95% interval, an end marked < or > where it goes on past the first or last level swept (ASCII: the PNG's
    font has no other signs)."""
    low = f"{'<' if found['low_censored'] else ''}{found['low']:.1f}"
    high = f"{'>' if found['high_censored'] else ''}{found['high']:.1f}"
    return f"[{low}, {high}]"


def _threshold_text(found: dict, axes: list[dict]) -> str:
    where = "" if found["row"] is None else f"{axes[1]['factor']} {_level(found['row'])}: "
    interval = f" {_interval_text(found)}" if found["low"] is not None else ""
    if found["level"] is None:
        # The fitted crossing lies past the levels; the part of its interval within them is still shown.
        return f"{where}{found['target']:.0%} not crossed within the levels{interval}"
    step = " (a step)" if found["step"] else ""
    return f"{where}{found['target']:.0%} at {axes[0]['factor']} {found['level']:.1f}{interval}{step}"


def _hex(colour: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*colour)


def heatmap_svg(results: dict, axes: list[dict]) -> bytes:
    width, height, items = heatmap_drawing(results, axes)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'font-family="system-ui, sans-serif">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for item in items:
        if isinstance(item, Box):
            parts.append(
                f'<rect x="{item.x}" y="{item.y}" width="{item.w}" height="{item.h}" fill="{_hex(item.fill)}" rx="3"/>'
            )
        else:
            weight = ' font-weight="600"' if item.bold else ""
            parts.append(
                f'<text x="{item.x}" y="{item.y}" font-size="{item.size}" fill="{_hex(item.colour)}" '
                f'text-anchor="{item.anchor}"{weight}>{escape(item.text)}</text>'
            )
    parts.append("</svg>")
    return ("\n".join(parts) + "\n").encode()


def heatmap_png(results: dict, axes: list[dict]) -> bytes:
    width, height, items = heatmap_drawing(results, axes)
    image = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    for item in items:
        if isinstance(item, Box):
            draw.rectangle((item.x, item.y, item.x + item.w - 1, item.y + item.h - 1), fill=item.fill)
            continue
        anchor = "ms" if item.anchor == "middle" else "ls"
        draw.text(
            (item.x, item.y), png_text(item.text, item.size), fill=item.colour, font=font(item.size), anchor=anchor
        )
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()

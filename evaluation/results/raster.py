"""PNG figures with their texts (Pillow): the labels a figure's font can draw, and the release report's gap figure
(benchmark/figure.py draws its shapes; its own PNG writer has no font, so it leaves the texts out).

Pillow's bundled font lacks many characters (the en-dash of "38%–90%", "≥", accented letters): each one it lacks is
written as its ASCII form (a hyphen, ">="), never as the box or "?" of a missing glyph."""

from __future__ import annotations

import io
import unicodedata
from functools import cache

from PIL import Image, ImageDraw, ImageFont

from benchmark.figure import HEIGHT, INK, WIDTH, Box, gap_drawing
from benchmark.report import Report

ASCII_FORMS = {
    "–": "-",
    "—": "-",
    "−": "-",
    "‐": "-",
    "≥": ">=",
    "≤": "<=",
    "×": "x",
    "Δ": "d",
    "’": "'",
    "‘": "'",
    "“": '"',
    "”": '"',
    "\u00a0": " ",
    "\u202f": " ",
}


@cache
def font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


@cache
def _missing_glyph(size: int) -> tuple:
    mask = font(size).getmask("\uffff")
    return mask.size, bytes(mask)


def has_glyph(character: str, size: int) -> bool:
    if character.isspace():
        return True
    mask = font(size).getmask(character)
    return (mask.size, bytes(mask)) != _missing_glyph(size)


def png_text(text: str, size: int) -> str:
    """The text with every character the font lacks at this size in its ASCII form."""
    out = []
    for character in text:
        if has_glyph(character, size):
            out.append(character)
            continue
        ascii_form = ASCII_FORMS.get(character)
        if ascii_form is None:
            ascii_form = unicodedata.normalize("NFKD", character).encode("ascii", "ignore").decode() or "?"
        out.append(ascii_form)
    return "".join(out)


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


def gap_png(report: Report) -> bytes:
    """The report's gap figure as PNG, with its title, legend, axis ticks and category labels. The same report gives
    the same bytes (no timestamp in the file)."""
    image = Image.new("RGB", (WIDTH, HEIGHT), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    anchors = {"start": "ls", "middle": "ms", "end": "rs"}
    for shape in gap_drawing(report):
        if isinstance(shape, Box):
            box = (shape.x, shape.y, shape.x + shape.width - 1, shape.y + shape.height - 1)
            draw.rectangle(box, fill=_rgb(shape.fill))
        else:
            text = png_text(shape.text, shape.size)
            draw.text((shape.x, shape.y), text, fill=_rgb(INK), font=font(shape.size), anchor=anchors[shape.anchor])
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()

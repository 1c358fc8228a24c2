"""The figure of the gaps per category: a well-formed SVG and a valid PNG of the same rectangles, the same bytes for
the same report."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ElementTree
import zlib

from benchmark.figure import (
    CHARACTER,
    HEIGHT,
    LEFT,
    PALETTE,
    PNG_SIGNATURE,
    WIDTH,
    Box,
    Label,
    gap_drawing,
    gap_png,
    gap_svg,
)
from benchmark.report import compute_report
from tests.benchmark.test_report import RELEASE, demo_input

SVG = "{http://www.w3.org/2000/svg}"


def demo_report(seed: int = 23):
    items, humans, models = demo_input(seed)
    return compute_report(**RELEASE, items=items, humans=humans, models=models)


def png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the filtered scanlines of a PNG, reading its chunks and checking each CRC."""
    assert data[:8] == PNG_SIGNATURE
    place, chunks = 8, {}
    while place < len(data):
        (length,) = struct.unpack(">I", data[place : place + 4])
        tag, body = data[place + 4 : place + 8], data[place + 8 : place + 8 + length]
        (crc,) = struct.unpack(">I", data[place + 8 + length : place + 12 + length])
        assert crc == zlib.crc32(tag + body)
        chunks[tag] = chunks.get(tag, b"") + body
        place += 12 + length
    width, height, depth, colour, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, colour) == (8, 2) and b"IEND" in chunks
    return width, height, zlib.decompress(chunks[b"IDAT"])


def test_the_svg_is_well_formed_and_draws_a_bar_per_model_and_category():
    report = demo_report()
    root = ElementTree.fromstring(gap_svg(report))
    assert root.tag == f"{SVG}svg" and root.get("viewBox") == f"0 0 {WIDTH} {HEIGHT}"
    fills = [rect.get("fill") for rect in root.iter(f"{SVG}rect")]
    answered = [sum(cell is not None for cell in row.categories.values()) for row in report.gaps]
    assert [fills.count(colour) for colour in PALETTE[:2]] == [count + 1 for count in answered]  # + the legend's key
    texts = [text.text for text in root.iter(f"{SVG}text")]
    assert {"AT", "AC", "gpt-4o", "qwen_2.5 & co"} <= set(texts)
    assert root.find(f"{SVG}title").text == "Human-model gap per category (points, 95% interval), release v1 (test)"


def test_the_png_has_its_signature_size_and_the_bars_colours():
    report = demo_report()
    width, height, raw = png_pixels(gap_png(report))
    assert (width, height) == (WIDTH, HEIGHT) and len(raw) == HEIGHT * (1 + 3 * WIDTH)
    bar = next(shape for shape in gap_drawing(report) if isinstance(shape, Box) and shape.fill == PALETTE[1])
    x, y = bar.x, bar.y + bar.height // 2  # its left edge: the whisker runs down its middle
    row = raw[y * (1 + 3 * WIDTH) : (y + 1) * (1 + 3 * WIDTH)]
    assert row[0] == 0 and row[1 + 3 * x : 4 + 3 * x] == bytes.fromhex(PALETTE[1][1:])


def test_the_figure_is_the_same_bytes_for_the_same_report_and_others_for_another():
    assert gap_svg(demo_report()) == gap_svg(demo_report()) and gap_png(demo_report()) == gap_png(demo_report())
    assert gap_svg(demo_report(seed=24)) != gap_svg(demo_report())
    assert gap_png(demo_report(seed=24)) != gap_png(demo_report())


def test_a_long_legend_wraps_inside_the_figure_and_the_plot_starts_below_it():
    items = [("state_a_1", "state", "natural", "c1"), ("state_a_2", "state", "natural", "c2")]
    humans = [("state_a_1", "p", True), ("state_a_2", "p", True)]
    names = [f"model-{n} · standard · multiple choice · prompt {n:08x} · temperature 0.7" for n in range(4)]
    report = compute_report(
        release="v1",
        release_hash="x",
        split="test",
        items=items,
        humans=humans,
        models={name: [("state_a_1", False), ("state_a_2", True)] for name in names},
    )
    keys = [shape for shape in gap_drawing(report) if isinstance(shape, Label) and shape.text in names]
    assert sorted(label.text for label in keys) == sorted(names)  # every model keyed, none dropped
    assert all(label.x + CHARACTER * len(label.text) <= WIDTH for label in keys)  # none past the right edge
    assert len({label.y for label in keys}) > 1  # wrapped onto rows
    axis = next(s for s in gap_drawing(report) if isinstance(s, Box) and s.x == LEFT and s.width == 1)
    assert axis.y > max(label.y for label in keys)  # the plot starts below the legend
    bars = [s for s in gap_drawing(report) if isinstance(s, Box) and s.fill in PALETTE and s.y > axis.y]
    assert bars and all(axis.y <= bar.y and bar.y + bar.height <= axis.y + axis.height for bar in bars)  # inside

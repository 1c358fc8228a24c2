"""The PNG figures draw every text with glyphs their font has: the heatmap's intervals ("38%–90%") with a hyphen,
never a missing-glyph box, and the release report's gap figure with its title, legend and labels."""

from __future__ import annotations

import io

import pytest
from PIL import Image, ImageDraw

from benchmark.figure import gap_png as gap_png_without_texts
from evaluation.results.heatmaps import heatmap_png
from evaluation.results.raster import gap_png, has_glyph, png_text
from evaluation.results.sweeps import Series
from tests.benchmark.test_figure import demo_report

THRESHOLD = {"row": None, "target": 0.75, "level": None, "low": None, "high": None, "step": False}


@pytest.fixture
def drawn(monkeypatch) -> list[tuple[str, int]]:
    """The texts a PNG writer draws, with their font size."""
    texts = []
    original = ImageDraw.ImageDraw.text

    def record(self, xy, text, *args, **kwargs):
        texts.append((text, kwargs["font"].size))
        return original(self, xy, text, *args, **kwargs)

    monkeypatch.setattr(ImageDraw.ImageDraw, "text", record)
    return texts


def test_the_heatmap_png_writes_the_en_dash_of_an_interval_as_a_hyphen(drawn):
    cells = [
        {"accuracy": 0.62, "low": 0.38, "high": 0.9, "answered": 12},
        {"accuracy": None, "low": None, "high": None, "answered": 0},
    ]
    line = Series("gpt-4o · release v2", "model", [], cells=cells, thresholds=[THRESHOLD])
    png = heatmap_png({"series": [line], "rows": [None]}, [{"factor": "object_size", "levels": [8, 12]}])
    assert png.startswith(b"\x89PNG")
    texts = [text for text, _ in drawn]
    assert "38%-90% · n=12" in texts and "-" in texts  # the interval, and the empty cell's dash
    for text, size in drawn:
        missing = [character for character in text if not has_glyph(character, size)]
        assert not missing, f"{text!r} draws {missing} as missing glyphs"


def test_png_text_keeps_what_the_font_has_and_writes_the_rest_in_ascii():
    assert png_text("38%–90% · n=12", 10) == "38%-90% · n=12"
    assert png_text("≥ 0.8 — Δ 2", 11) == ">= 0.8 - d 2"
    assert png_text("Université", 11) == "Universite"


def test_the_report_gap_png_has_its_texts(drawn):
    report = demo_report()
    with_texts = Image.open(io.BytesIO(gap_png(report))).convert("L")
    without = Image.open(io.BytesIO(gap_png_without_texts(report))).convert("L")
    assert with_texts.size == without.size
    title = (56, 4, 600, 20)  # where the title is written, above the legend and the plot
    assert min(with_texts.crop(title).getdata()) < 100, "the title's ink"
    assert min(without.crop(title).getdata()) > 200, "the plain raster has no text there"
    texts = [text for text, _ in drawn]
    assert any(text.startswith("Human-model gap per category") for text in texts)
    assert {"AT", "AC"} <= set(texts)
    assert gap_png(report) == gap_png(report), "the same report, the same bytes"

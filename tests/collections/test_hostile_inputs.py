"""Hostile inputs to a collection import each fail alone, with the file (and line) named, and the rest imports: a
mask whose header declares more pixels than the limit (refused before a pixel of it is decoded), a JSONL line
nested thousands deep, a line that is not UTF-8, a file name that is not UTF-8."""

from __future__ import annotations

import json
import os

import pytest
from PIL import PngImagePlugin

from annotator.collections.services import collection_import
from annotator.models import Image, PairCandidate
from tests.collection_fixtures import levir_folder, mask, mvtec_folder, picture

pytestmark = pytest.mark.django_db


@pytest.fixture
def decoded(monkeypatch):
    """The PNG files whose pixels were decoded."""
    names = []
    load = PngImagePlugin.PngImageFile.load

    def spy(self):
        names.append("/".join(str(getattr(self, "filename", "") or "").split("/")[-2:]))
        return load(self)

    monkeypatch.setattr(PngImagePlugin.PngImageFile, "load", spy)
    return names


def test_masks_over_the_pixel_limit_are_refused_before_decoding_and_the_rest_imports(tmp_path, settings, decoded):
    settings.IMPORT_MAX_IMAGE_PIXELS = 200_000  # the 48x32 images are far below; the 600x600 masks above
    root = mvtec_folder(tmp_path / "mvtec")
    for stem in ("000", "001"):
        mask(root / f"bottle/ground_truth/broken_large/{stem}_mask.png", [(1, 1, 5, 5)], size=(600, 600))
    picture(root / "bottle/test/scratch/000.png", 56, spot=(2, 2, 6, 6))
    mask(root / "bottle/ground_truth/scratch/000_mask.png", [(2, 2, 6, 6)])

    job = collection_import(source=str(root), name="mvtec", domain="industrial", sync=True)

    assert job.status == "succeeded"
    refused = sorted({e for e in job.errors if "IMPORT_MAX_IMAGE_PIXELS" in e})  # a mask may serve two pairs
    assert refused == [
        f"bottle/ground_truth/broken_large/{stem}_mask.png: the mask is 600x600 = 360000 pixels, over the limit of "
        "200000 pixels (IMPORT_MAX_IMAGE_PIXELS); nothing was decoded: its pair is left out"
        for stem in ("000", "001")
    ]
    assert "scratch/000_mask.png" in decoded  # the mask within the limit was read
    assert not [name for name in decoded if name.startswith("broken_large/")]  # the others never were
    candidate = PairCandidate.objects.get()
    assert candidate.source_id == "bottle_scratch_000" and candidate.regions


def test_a_deeply_nested_line_and_a_line_not_utf8_fail_alone_with_file_and_line(tmp_path):
    root = tmp_path / "edits"
    for number in range(1, 5):
        picture(root / f"img/{number}.png", 30 + number)
    lines = [
        json.dumps({"image_1": "img/1.png", "image_2": "img/2.png"}).encode(),
        b'{"image_1": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        b'{"image_1": "img/\xff.png", "image_2": "img/2.png"}',
        json.dumps({"image_1": "img/3.png", "image_2": "img/4.png"}).encode(),
    ]
    manifest = root / "pairs.jsonl"
    manifest.write_bytes(b"\n".join(lines) + b"\n")

    job = collection_import(source=str(manifest), name="edits", domain="synthetic", sync=True)

    assert job.status == "succeeded", job.errors
    assert job.errors == [
        "pairs.jsonl:2: not valid JSON (nested deeper than 32 levels: line 1 column 1 (char 0))",
        "pairs.jsonl:3: not UTF-8: byte 0xff at byte offset 17 of the line "
        f"(offset {len(lines[0]) + len(lines[1]) + 2 + 17} of the file)",
    ], job.errors
    names = sorted(PairCandidate.objects.values_list("image_1__original_name", "image_2__original_name"))
    assert names == [("img/1.png", "img/2.png"), ("img/3.png", "img/4.png")]


def test_a_file_name_that_is_not_utf8_fails_alone_and_the_rest_imports(tmp_path):
    root = levir_folder(tmp_path / "levir")
    for side in ("A", "B"):
        picture(tmp_path / "scratch.png", 80)
        os.rename(tmp_path / "scratch.png", os.fsencode(root / side) + b"/bad\xff.png")

    job = collection_import(source=str(root), name="levir_cd", domain="aerial", sync=True)

    assert job.status == "succeeded"
    assert job.errors == [
        "A/bad\\xff.png: the file name is not UTF-8: rename it; the rest is imported",
        "B/bad\\xff.png: the file name is not UTF-8: rename it; the rest is imported",
    ]
    assert Image.objects.count() == 4 and PairCandidate.objects.count() == 2

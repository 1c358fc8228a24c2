"""Difference regions in an export: the provenance sidecar carries them on image_1 / image_2 as written (traded
with the images when the export swapped them), the official records stay exactly as they are, and importing the
export keeps them; a broken region in the sidecar is refused with its line, and nothing is imported."""

from __future__ import annotations

import json

import pytest

from annotator.export.pair_import import PairImportError, pairs_import
from annotator.export.services import ExportOptions, benchmark_export
from annotator.models import Pair
from annotator.similarity.services import current_fingerprint
from benchmark.records import FIELDS, record_item_id
from tests.export_fixtures import all_records, make_pair, read_jsonl

pytestmark = pytest.mark.django_db


def export(root):
    return benchmark_export(options=ExportOptions(out=str(root), reproducible=True, val_fraction=0))


def box(image, x):
    return {"image": image, "x": x, "y": 2, "w": 10, "h": 8}


@pytest.fixture
def pairs_with_regions():
    """Temporal pairs that all answer "second image": the export trades the images of half of them."""
    pairs = [make_pair(category="temporal", regions=[box(1, n), box(2, 50 + n)]) for n in range(6)]
    pairs.append(make_pair(category="temporal"))  # none marked
    return pairs


def test_the_sidecar_carries_the_regions_on_the_images_as_written(tmp_path, pairs_with_regions):
    result = export(tmp_path / "out")
    assert result["swapped"] > 0
    records = all_records(tmp_path / "out")
    assert all(list(record) == list(FIELDS) for record in records)  # the official records carry nothing more
    assert "regions" not in (tmp_path / "out/data/test.jsonl").read_text()
    lines = read_jsonl(tmp_path / "out/metadata/items.jsonl")
    assert len(lines) == len(pairs_with_regions)
    marked = [line for line in lines if line["regions"]]
    assert len(marked) == 6 and sum(line["swapped"] for line in lines) == result["swapped"]
    for line in marked:
        first = next(region for region in line["regions"] if region["x"] < 50)  # drawn on the pair's image 1
        second = next(region for region in line["regions"] if region["x"] >= 50)
        # An item whose images the export traded has that box on image_2, where that image now is.
        assert (first["image"], second["image"]) == ((2, 1) if line["swapped"] else (1, 2))
        assert second["x"] == 50 + first["x"] and (first["y"], first["w"], first["h"]) == (2, 10, 8)
    assert {line["swapped"] for line in marked} == {True, False}


def test_importing_an_export_keeps_its_regions(tmp_path, pairs_with_regions, annotator):
    export(tmp_path / "first")
    sidecar = {line["item_id"]: line["regions"] for line in read_jsonl(tmp_path / "first/metadata/items.jsonl")}
    Pair.objects.all().delete()
    pairs_import(folder=tmp_path / "first", user=annotator)
    Pair.objects.update(status=Pair.Status.ACCEPTED, similarity=0.9, similarity_model=current_fingerprint())
    assert sorted(map(json.dumps, Pair.objects.values_list("regions", flat=True))) == sorted(
        map(json.dumps, sidecar.values())
    )
    export(tmp_path / "second")
    again = {line["item_id"]: line["regions"] for line in read_jsonl(tmp_path / "second/metadata/items.jsonl")}
    assert again == sidecar  # already balanced: nothing traded twice


def split_records(tmp_path, name: str) -> list[dict]:
    path = tmp_path / f"out/data/{name}.jsonl"
    return read_jsonl(path) if path.is_file() else []


def test_a_region_outside_its_image_in_the_sidecar_refuses_its_record_naming_both_lines(
    tmp_path, pairs_with_regions, annotator
):
    export(tmp_path / "out")
    path = tmp_path / "out/metadata/items.jsonl"
    lines = read_jsonl(path)
    lines[2]["regions"] = [box(1, 0), {"image": 2, "x": 155, "y": 0, "w": 10, "h": 5}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    Pair.objects.all().delete()
    at = {
        record_item_id(r): (name, n) for name in ("test", "val") for n, r in enumerate(split_records(tmp_path, name), 1)
    }
    name, number = at[lines[2]["item_id"]]
    with pytest.raises(PairImportError) as refused:
        pairs_import(folder=tmp_path / "out", user=annotator, all_or_none=True)
    assert refused.value.problems == [
        f"data/{name}.jsonl:{number}: regions: region 2: the box (155, 0, 10×5) runs outside image 2 (160×120). "
        "(metadata/items.jsonl:3)"
    ]
    assert not Pair.objects.exists()
    result = pairs_import(folder=tmp_path / "out", user=annotator)
    assert [(v.file, v.line, v.field) for v in result["refused"]] == [(f"data/{name}.jsonl", number, "regions")]
    assert result["pairs"] == len(lines) - 1

"""What an export says about itself: the provenance sidecar (metadata/items.jsonl) against the database, the card's
similarity figures, and a card the Hugging Face Hub reads (`datasets.load_dataset`, offline)."""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime

import pytest

from annotator.export.pair_import import pairs_import
from annotator.export.services import MANIFEST, ExportOptions, benchmark_export, opaque_user_id
from annotator.models import Frame, Pair, Review
from annotator.similarity.services import current_fingerprint
from benchmark.records import FIELDS
from tests.export_fixtures import all_records, make_pair, read_jsonl, record, write_dataset

pytestmark = pytest.mark.django_db


def export(tmp_path, name="out", **options):
    return benchmark_export(options=ExportOptions(out=str(tmp_path / name), reproducible=True, **options))


@pytest.fixture
def mixed_pairs(tmp_path, annotator, reviewer, coordinator):
    """Video pairs by an annotator, accepted by a reviewer; one below the threshold that a coordinator overrode;
    an imported pair without a video."""
    pairs = [make_pair(category=c, author=annotator, similarity=s) for c, s in (("temporal", 0.91), ("state", 0.87))]
    pairs += [make_pair(category="action", question="What did he do?", answer="sat", distractors=["stood"])]
    overridden = make_pair(category="viewpoint", answer="left", distractors=["right"], similarity=0.733)
    Pair.objects.filter(pk=overridden.pk).update(
        similarity_override_reason="close-up: the change is subtle",
        similarity_override_by=coordinator,
        similarity_override_at=datetime(2026, 11, 3, 9, 30, tzinfo=UTC),
    )
    for pair in [*pairs, overridden]:
        Review.objects.create(pair=pair, reviewer=reviewer, decision=Review.Decision.ACCEPT)
    pairs_import(folder=write_dataset(tmp_path / "in", [record(1, source="levir", source_id="7")]), user=annotator)
    Pair.objects.filter(source="levir").update(
        status="accepted", similarity=0.95, similarity_model=current_fingerprint()
    )
    return Pair.objects.all()


def test_the_sidecar_matches_the_database(tmp_path, mixed_pairs, annotator, reviewer, coordinator):
    result = export(tmp_path, val_fraction=0.3)
    out = tmp_path / "out"
    lines = read_jsonl(out / "metadata/items.jsonl")
    split_of = {}
    records = {}
    for split in ("test", "val"):
        for r in read_jsonl(out / f"data/{split}.jsonl"):
            assert list(r) == list(FIELDS)  # the official records carry nothing more
            key = f"{r['category']}_{r['source']}_{r['source_id']}"
            split_of[key], records[key] = split, r
    assert {line["item_id"] for line in lines} == set(split_of) and len(lines) == result["items"] == 5

    for line in lines:
        r = records[line["item_id"]]
        pair = Pair.objects.get(category=r["category"], source=r["source"], source_id=r["source_id"])
        assert line["split"] == split_of[line["item_id"]]
        assert line["similarity"] == pair.similarity and line["similarity_model"] == pair.similarity_model
        assert line["input_size"] == 224
        assert line["annotator"] == opaque_user_id(pair.author_id) and line["annotator"] != "alice"
        if pair.video:
            frames = [Frame.objects.get(image=image).timestamp for image in (pair.image_1, pair.image_2)]
            assert line["origin"] == {
                "video": pair.video.yt8m_id,
                "timestamps": frames[::-1] if line["swapped"] else frames,
            }
            assert line["group"] == f"yt8m:{pair.video.yt8m_id}"
            assert line["reviewer"] == opaque_user_id(reviewer.pk)
        else:
            files = [
                "images/aerial/change/1_a.jpg",
                "images/aerial/change/1_b.jpg",
            ]  # as the imported folder named them
            assert line["origin"] == {"source": "levir", "files": files} and line["swapped"] is False
            assert line["reviewer"] is None and line["group"] is None
        if pair.similarity_override_reason:
            assert line["similarity_override"] == {
                "by": opaque_user_id(coordinator.pk),
                "at": "2026-11-03T09:30:00Z",
                "reason": "close-up: the change is subtle",
            }
        else:
            assert line["similarity_override"] is None
    assert {line["annotator"] for line in lines} >= {opaque_user_id(annotator.pk)}
    text = (out / "metadata/items.jsonl").read_text()
    assert "alice" not in text and "rita" not in text and "cora" not in text

    listed = dict(reversed(line.split("  ", 1)) for line in (out / MANIFEST).read_text().splitlines())
    assert listed["metadata/items.jsonl"] == hashlib.sha256((out / "metadata/items.jsonl").read_bytes()).hexdigest()


def test_the_card_gives_the_overrides_and_the_similarity_distribution(tmp_path, mixed_pairs):
    result = export(tmp_path, val_fraction=0)
    card = (tmp_path / "out/README.md").read_text()
    # Five items: 0.733, 0.87, 0.91, 0.93, 0.95; the 5th percentile (inclusive) lies between the first two.
    assert result["overrides"] == 1 and "override of the threshold: 1" in card
    assert "min 0.7330, 5th percentile 0.7604, median 0.9100" in card


def test_the_sidecar_records_no_usernames_even_for_odd_ones(tmp_path):
    from tests.conftest import make_user

    author = make_user("x" * 16)  # as long as an opaque id: still never written
    make_pair(author=author)
    export(tmp_path, val_fraction=0)
    assert "x" * 16 not in (tmp_path / "out/metadata/items.jsonl").read_text()


# --- The Hugging Face Hub's reader -------------------------------------------------------------------------------


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf/datasets"))
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf/datasets"))
    return datasets


@pytest.mark.torch
def test_load_dataset_reads_both_splits_with_their_features_and_the_images_as_pictures(
    tmp_path, offline_hub, mixed_pairs, monkeypatch
):
    from PIL import Image as PILImage

    result = export(tmp_path, val_fraction=0.3)
    out = tmp_path / "out"
    monkeypatch.chdir(out)  # image paths are relative to the folder: `datasets` opens them from the working directory
    loaded = offline_hub.load_dataset(str(out))
    assert set(loaded) == {"test", "val"}
    for split in ("test", "val"):
        assert loaded[split].num_rows == result["splits"][split] > 0
        assert list(loaded[split].features) == list(FIELDS)  # not the sidecar's columns
        assert isinstance(loaded[split].features["image_1"], offline_hub.Image)
        assert isinstance(loaded[split].features["image_2"], offline_hub.Image)
        assert loaded[split].features["distractors"].feature.dtype == "string"
        assert loaded[split].features["has_caption"].dtype == "bool"
    first = read_jsonl(out / "data/test.jsonl")[0]
    row = loaded["test"][0]
    assert {k: v for k, v in row.items() if k not in ("image_1", "image_2")} == {
        k: v for k, v in first.items() if k not in ("image_1", "image_2")
    }
    for field in ("image_1", "image_2"):
        assert isinstance(row[field], PILImage.Image)
        with PILImage.open(out / first[field]) as stored:
            assert row[field].size == stored.size and row[field].tobytes() == stored.convert(row[field].mode).tobytes()
    paths = loaded["test"].cast_column("image_1", offline_hub.Image(decode=False))[0]["image_1"]["path"]
    assert paths == first["image_1"] and os.path.isfile(out / paths)


@pytest.mark.torch
def test_load_dataset_reads_an_export_whose_val_was_left_out(tmp_path, offline_hub):
    make_pair()
    make_pair(category="action", question="What did he do?", answer="sat", distractors=["stood"])
    result = export(tmp_path, val_fraction=0)
    assert result["left_out"] == ["val"]
    loaded = offline_hub.load_dataset(str(tmp_path / "out"))
    assert set(loaded) == {"test"} and loaded["test"].num_rows == 2
    assert sorted(loaded["test"]["source_id"]) == sorted(r["source_id"] for r in all_records(tmp_path / "out"))

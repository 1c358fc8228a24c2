"""What an export says about itself: the provenance sidecar (metadata/items.jsonl) against the database, the card's
similarity figures. (What `datasets` reads of an export: tests/export/test_hub_view.py.)"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest

from annotator.export.pair_import import pairs_import
from annotator.export.services import MANIFEST, ExportOptions, benchmark_export, opaque_user_id
from annotator.models import Frame, Pair, Review
from annotator.similarity.services import current_fingerprint
from benchmark.records import FIELDS
from tests.export_fixtures import make_pair, read_jsonl, record, write_dataset

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
            frames = [Frame.objects.get(image=image) for image in (pair.image_1, pair.image_2)]
            frames = frames[::-1] if line["swapped"] else frames
            assert line["origin"] == {
                "video": pair.video.yt8m_id,
                "timestamps": [frame.timestamp for frame in frames],
                "pts": [frame.pts for frame in frames],
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

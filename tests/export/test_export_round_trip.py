"""Round trips: import an export, export it again, and nothing moves: every video stays in one split, every
record comes back field by field (same split, same orientation), with or without the provenance sidecar."""

from __future__ import annotations

import json
import shutil

import pytest

from annotator.export.pair_import import PairImportError, pairs_import
from annotator.export.services import MANIFEST, ExportOptions, benchmark_export
from annotator.models import Caption, Pair
from annotator.similarity.services import current_fingerprint
from benchmark.records import source_group
from tests.export_fixtures import accepted_caption, make_pair, make_video, read_jsonl, video_with_pairs

pytestmark = pytest.mark.django_db

OPTIONS = {"val_fraction": 0.3, "seed": 4}


def export(out, **options):
    return benchmark_export(options=ExportOptions(out=str(out), reproducible=True, **{**OPTIONS, **options}))


def build_pairs(reviewer) -> dict[str, str]:
    """Pairs of several videos (shared frames, several categories, binary and not, a caption, a pair without
    a source_id); returns each pair's item-id-less key (source_id as exported) -> its video."""
    for n in range(6):
        pairs = video_with_pairs(2 + n % 3, category=("temporal", "state", "viewpoint")[n % 3])
        if pairs[0].category == "viewpoint":
            Pair.objects.filter(pk__in=[p.pk for p in pairs]).update(answer="left", distractors=["right"])
        if n == 1:
            accepted_caption(pairs[0], reviewer, "The lid is open in the second image.")
    for _ in range(4):  # pairs of one video that share no frame: only the video (or its group) joins them
        video = make_video(frames=4)
        frames = [frame.image for frame in video.frames.order_by("index")]
        for first, second, category in ((0, 1, "temporal"), (2, 3, "emotion")):
            pair = make_pair(video=video, category=category, question="Which one?")
            Pair.objects.filter(pk=pair.pk).update(image_1=frames[first], image_2=frames[second])
    video = make_video(frames=2)
    make_pair(video=video, category="quality", question="Which is sharper?", source_id="")
    make_pair(video=video, category="action", question="What did he do?", answer="sat", distractors=["stood"])
    return {p.source_id or f"{p.video.yt8m_id}_{p.pk}": p.video.yt8m_id for p in Pair.objects.select_related("video")}


def split_of(out) -> dict[str, str]:
    return {r["source_id"]: split for split in ("test", "val") for r in read_jsonl(out / f"data/{split}.jsonl")}


def assert_videos_whole(out, video_of: dict[str, str]) -> None:
    splits = split_of(out)
    per_video: dict[str, set] = {}
    for source_id, split in splits.items():
        per_video.setdefault(video_of[source_id], set()).add(split)
    assert all(len(s) == 1 for s in per_video.values()), per_video
    assert set(splits.values()) == {"test", "val"}


def reimport(folder, user) -> None:
    """A fresh database (the exported pairs gone), the folder imported, then reviewed as the app would."""
    Pair.objects.all().delete()
    pairs_import(folder=folder, user=user)
    Pair.objects.update(status=Pair.Status.ACCEPTED, similarity=0.9, similarity_model=current_fingerprint())
    Caption.objects.update(status=Caption.Status.ACCEPTED, chosen=True)


def assert_same_records(first, second) -> None:
    for split in ("test", "val"):
        before, after = read_jsonl(first / f"data/{split}.jsonl"), read_jsonl(second / f"data/{split}.jsonl")
        assert len(before) == len(after) > 0
        for old, new in zip(before, after, strict=True):
            assert new == old, {k: (old[k], new[k]) for k in old if old[k] != new[k]}
        assert (first / f"data/{split}.jsonl").read_bytes() == (second / f"data/{split}.jsonl").read_bytes()


def test_import_export_import_export_keeps_every_video_in_one_split_and_every_record(tmp_path, annotator, reviewer):
    video_of = build_pairs(reviewer)
    first = tmp_path / "first"
    result = export(first)
    assert result["swapped"] > 0  # the round trip also has to keep orientations the export chose
    assert_videos_whole(first, video_of)

    reimport(first, annotator)
    assert not Pair.objects.filter(group_key="").exists()
    second = tmp_path / "second"
    export(second)
    assert_videos_whole(second, video_of)
    assert_same_records(first, second)

    reimport(second, annotator)
    third = tmp_path / "third"
    export(third)
    assert_same_records(second, third)
    sidecar = [{k: v for k, v in line.items() if k in ("item_id", "split", "group", "swapped")}
               for line in read_jsonl(third / "metadata/items.jsonl")]  # fmt: skip
    assert sidecar == [{**line, "swapped": False} for line in sidecar]  # already balanced: nothing to trade
    first_sidecar = {line["item_id"]: line for line in read_jsonl(first / "metadata/items.jsonl")}
    for line in sidecar:
        assert (line["split"], line["group"]) == (first_sidecar[line["item_id"]]["split"],
                                                  first_sidecar[line["item_id"]]["group"])  # fmt: skip


def test_without_the_sidecar_the_source_id_gives_the_video(tmp_path, annotator, reviewer):
    video_of = build_pairs(reviewer)
    first = tmp_path / "first"
    export(first)
    shutil.rmtree(first / "metadata")
    kept = [line for line in (first / MANIFEST).read_text().splitlines() if "metadata/" not in line]
    (first / MANIFEST).write_text("".join(f"{line}\n" for line in kept))

    reimport(first, annotator)
    groups = dict(Pair.objects.values_list("source_id", "group_key"))
    assert all(groups[source_id] == f"yt8m:{video}" for source_id, video in video_of.items())
    second = tmp_path / "second"
    export(second)
    assert_videos_whole(second, video_of)
    assert_same_records(first, second)


@pytest.mark.parametrize(
    ("source", "source_id", "group"),
    [
        ("yt8m", "abc123_42_45", "yt8m:abc123"),
        ("yt8m", "a_b-c_7_9", "yt8m:a_b-c"),  # YouTube ids may hold '_' and '-'
        ("yt8m", "abc123_57", "yt8m:abc123"),  # the id an export derives: <video>_<pair id>
        ("changeit", "clip9_3_8", "changeit:clip9"),
        ("levir", "7", ""),
        ("mvtec", "bottle_7", ""),  # one number: an item of its own outside yt8m
    ],
)
def test_source_group_reads_the_video_part_of_a_source_id(source, source_id, group):
    assert source_group(source, source_id) == group


def test_a_sidecar_line_that_names_no_item_imports_nothing_and_a_bad_group_refuses_its_record(tmp_path, annotator):
    make_pair()
    export(tmp_path / "out", val_fraction=0)
    Pair.objects.all().delete()
    sidecar = tmp_path / "out/metadata/items.jsonl"
    [item] = [json.loads(line)["item_id"] for line in sidecar.read_text().splitlines()]
    clean = sidecar.read_text()
    sidecar.write_text(clean + json.dumps({"item_id": item, "group": 7}) + "\nnot json\n")
    with pytest.raises(PairImportError) as error:
        pairs_import(folder=tmp_path / "out", user=annotator)
    assert error.value.problems[0] == (
        "data/test.jsonl:1: 'group' must be null or a string of at most 200 characters (metadata/items.jsonl:2)"
    )
    assert error.value.problems[1].startswith("metadata/items.jsonl:3: invalid JSON")
    assert not Pair.objects.exists()

    sidecar.write_text(clean + json.dumps({"item_id": item, "group": 7}) + "\n")
    result = pairs_import(folder=tmp_path / "out", user=annotator)
    assert result["pairs"] == 0 and [(v.file, v.line, v.field) for v in result["refused"]] == [
        ("data/test.jsonl", 1, "group")
    ]

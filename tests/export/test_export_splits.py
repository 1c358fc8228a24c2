"""The export's plan: no empty split ever, val allotted over the whole export, groups kept whole, binary answers
balanced per category and split, and a plan that depends on item ids only (never on database ids)."""

from __future__ import annotations

import hashlib
import random
from collections import Counter

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command

from annotator.export.services import ExportOptions, benchmark_export
from annotator.models import Pair
from tests.export_fixtures import accepted_caption, all_records, make_pair, read_jsonl, video_with_pairs

pytestmark = pytest.mark.django_db

BINARY = ("state", "emotion", "temporal", "quantity", "quality")


def export(tmp_path, name="out", **options):
    return benchmark_export(options=ExportOptions(out=str(tmp_path / name), reproducible=True, **options))


def assert_no_empty_split_file(out):
    for split in ("test", "val"):
        path = out / f"data/{split}.jsonl"
        assert not path.exists() or read_jsonl(path), f"{path.name} is empty"


def card_header(out) -> str:
    return (out / "README.md").read_text().split("---")[1]


def test_a_41_item_export_puts_round_a_tenth_in_val_stratified_by_category(tmp_path):
    sizes = {"temporal": 8, "viewpoint": 6, "action": 5, "state": 4, "existence": 4, "spatial": 4, "attribute": 3,
             "quality": 3, "quantity": 2, "emotion": 2}  # fmt: skip
    for category, count in sizes.items():
        for _ in range(count):
            make_pair(category=category, question="Which one?", answer="first image", distractors=["second image"])
    result = export(tmp_path)
    assert result["items"] == 41 and result["splits"] == {"test": 37, "val": 4}  # round(0.1 x 41)
    # Largest remainders: the four val items go to the four largest remainders of 0.1 x n (0.8, 0.6, 0.5, 0.4 ...).
    val_per_category = {c: sum(cell["val"] for cell in d.values()) for c, d in result["counts"].items()}
    assert sum(val_per_category.values()) == 4 and val_per_category["temporal"] == 1
    assert val_per_category["viewpoint"] == 1 and val_per_category["action"] == 1
    assert_no_empty_split_file(tmp_path / "out")


@pytest.mark.parametrize("fraction", [0.05, 0.1, 0.3])
def test_val_gets_a_group_even_when_its_share_rounds_to_zero(tmp_path, fraction):
    make_pair(category="temporal")
    for category in ("viewpoint", "action"):
        make_pair(category=category, question="What changed?", answer="left", distractors=["right"])
    result = export(tmp_path, val_fraction=fraction)
    assert result["splits"] == {"test": 2, "val": 1}
    assert_no_empty_split_file(tmp_path / "out")


def test_test_keeps_a_group_when_val_would_take_them_all(tmp_path):
    video_with_pairs(2)
    make_pair()
    result = export(tmp_path, val_fraction=0.9)
    assert result["splits"]["test"] >= 1 and result["splits"]["val"] >= 1


def test_two_items_of_one_video_leave_val_out_and_every_reader_is_told(tmp_path, capsys):
    video_with_pairs(2)
    call_command("export_benchmark", "--out", str(tmp_path / "out"), "--reproducible")
    out = tmp_path / "out"
    captured = capsys.readouterr()
    assert "warning: The val split has no item: data/val.jsonl and its config are left out" in captured.err
    assert len(read_jsonl(out / "data/test.jsonl")) == 2 and not (out / "data/val.jsonl").exists()
    header = card_header(out)
    assert "split: test" in header and "split: val" not in header and "name: val" not in header
    assert "The val split has no item" in (out / "README.md").read_text()
    assert "data/val.jsonl" not in (out / "manifest.sha256").read_text()
    assert_no_empty_split_file(out)


def test_a_split_left_out_of_an_s3_export_is_not_in_its_current_version(tmp_path, s3_bucket):
    from annotator.export.services import s3_export_current
    from subtlebench.storage import s3_client

    for _ in range(3):
        make_pair()
    uri = f"s3://{s3_bucket}/b"
    benchmark_export(options=ExportOptions(out=uri, val_fraction=0.3))
    keys = {o["Key"] for o in s3_client().list_objects_v2(Bucket=s3_bucket, Prefix="b/")["Contents"]}
    assert s3_export_current(uri)["root"] + "data/val.jsonl" in keys
    benchmark_export(options=ExportOptions(out=uri, val_fraction=0, replace=True))
    root = s3_export_current(uri)["root"]
    keys = {o["Key"] for o in s3_client().list_objects_v2(Bucket=s3_bucket, Prefix="b/")["Contents"]}
    assert not [key for key in keys if key.endswith("data/val.jsonl")] and root + "data/test.jsonl" in keys


def test_an_export_with_no_item_writes_no_split_file_and_says_so(tmp_path):
    make_pair(answer="x", distractors=["x"])
    dry = benchmark_export(options=ExportOptions(out=str(tmp_path / "out")), dry_run=True)
    assert dry["items"] == 0 and "no item to export" in dry["warnings"][0]
    result = export(tmp_path)
    assert result["left_out"] == ["test", "val"] and "cannot run on an empty benchmark" in result["warnings"][0]
    assert not (tmp_path / "out/data/test.jsonl").exists() and not (tmp_path / "out/data/val.jsonl").exists()
    assert "no item to export" in (tmp_path / "out/README.md").read_text()


def test_no_group_straddles_the_splits_whatever_the_seed(tmp_path):
    videos = [video_with_pairs(n, category="temporal") for n in (1, 2, 3, 4, 2, 1, 3)]
    for seed in range(5):
        export(tmp_path, name=f"s{seed}", val_fraction=0.3, seed=seed)
        split_of = {}
        for split in ("test", "val"):
            for r in read_jsonl(tmp_path / f"s{seed}/data/{split}.jsonl"):
                split_of[r["source_id"]] = split
        assert all(len({split_of[p.source_id] for p in pairs}) == 1 for pairs in videos)


# --- Balanced answers -------------------------------------------------------------------------------------------


def content_of(image) -> str:
    with default_storage.open(image.file.name, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()[:32]


def test_binary_answers_are_balanced_per_category_and_split_from_a_70_30_pick(tmp_path):
    picker = random.Random(11)
    stored = {}
    for n in range(200):
        answer = "first image" if picker.random() < 0.7 else "second image"
        other = "second image" if answer == "first image" else "first image"
        pair = make_pair(category=BINARY[n % 5], question="Which one?", answer=answer, distractors=[other])
        stored[pair.source_id] = pair
    assert 0.65 < sum(p.answer == "first image" for p in stored.values()) / 200 < 0.75  # the lean to undo

    result = export(tmp_path, val_fraction=0.2)
    out = tmp_path / "out"
    for split in ("test", "val"):
        records = read_jsonl(out / f"data/{split}.jsonl")
        for category in BINARY:
            answers = [r["answer"] for r in records if r["category"] == category]
            firsts = answers.count("first image")
            assert answers and abs(firsts - len(answers) / 2) <= max(0.05 * len(answers), 1), (split, category)
            shares = result["answer_first"][category][split]
            assert shares == [firsts, len(answers)]
    # Each swapped item still asks about the same picture: the answer names the image it named before.
    provenance = {line["item_id"]: line for line in read_jsonl(out / "metadata/items.jsonl")}
    swapped = 0
    for r in all_records(out):
        pair = stored[r["source_id"]]
        right = pair.image_1 if pair.answer == "first image" else pair.image_2
        named = r["image_1"] if r["answer"] == "first image" else r["image_2"]
        assert content_of(right) in named
        assert r["distractors"] == [{"first image": "second image", "second image": "first image"}[r["answer"]]]
        is_swapped = r["answer"] != pair.answer
        assert provenance[f"{r['category']}_yt8m_{r['source_id']}"]["swapped"] is is_swapped
        assert (content_of(pair.image_1) in r["image_2"]) is is_swapped
        swapped += is_swapped
    assert swapped == result["swapped"] > 0
    card = (out / "README.md").read_text()
    for category in BINARY:
        test_share, val_share = (result["answer_first"][category][s] for s in ("test", "val"))
        assert f"| {category} | {100 * test_share[0] / test_share[1]:.0f}% ({test_share[0]}/{test_share[1]}) |" in card
        assert f"({val_share[0]}/{val_share[1]}) |" in card


def test_the_orientation_ignores_the_stored_one(tmp_path):
    """Two databases with the same items stored the other way round give the same records."""
    for n in range(12):
        make_pair(category="state", question="Which one?", answer="first image", distractors=["second image"],
                  source_id=f"v{n}_1_2")  # fmt: skip
    export(tmp_path, name="a", val_fraction=0)
    for pair in Pair.objects.all():
        pair.image_1, pair.image_2 = pair.image_2, pair.image_1
        pair.answer, pair.distractors = "second image", ["first image"]
        pair.save()
    export(tmp_path, name="b", val_fraction=0)
    assert (tmp_path / "a/data/test.jsonl").read_bytes() == (tmp_path / "b/data/test.jsonl").read_bytes()
    answers = Counter(r["answer"] for r in read_jsonl(tmp_path / "a/data/test.jsonl"))
    assert answers == {"first image": 6, "second image": 6}


def test_an_item_whose_caption_or_question_names_a_place_keeps_its_orientation(tmp_path, reviewer):
    captioned = []
    for _ in range(6):
        pair = make_pair(category="temporal", answer="first image", distractors=["second image"])
        accepted_caption(pair, reviewer, "The sun is lower in the second image.")
        captioned.append(pair.source_id)
    placed = [
        make_pair(category="quality", question="Is the first image sharper?", answer="first image",
                  distractors=["second image"]).source_id
        for _ in range(6)
    ]  # fmt: skip
    for seed in range(4):
        export(tmp_path, name=f"s{seed}", val_fraction=0, seed=seed)
        for r in read_jsonl(tmp_path / f"s{seed}/data/test.jsonl"):
            if r["source_id"] in captioned or r["source_id"] in placed:
                assert r["answer"] == "first image"


def test_the_split_and_the_orientation_do_not_depend_on_database_ids(tmp_path):
    specs = [(f"v{n:02d}", BINARY[n % 5] if n % 3 else "viewpoint") for n in range(30)]

    def build(order):
        for yt8m, category in order:
            fields = {"answer": "left", "distractors": ["right"]} if category == "viewpoint" else {}
            make_pair(category=category, question="Which?", source_id=f"{yt8m}_0_1", **fields)

    build(specs)
    export(tmp_path, name="a", val_fraction=0.3, seed=5)
    Pair.objects.all().delete()
    build(reversed(specs))  # the same items, created in the other order: other ids, other videos
    export(tmp_path, name="b", val_fraction=0.3, seed=5)

    def by_split(name):
        return {
            split: sorted((r["source_id"], r["answer"]) for r in read_jsonl(tmp_path / name / f"data/{split}.jsonl"))
            for split in ("test", "val")
        }

    assert by_split("a") == by_split("b") and by_split("a")["val"]

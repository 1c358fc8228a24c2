"""`import_pairs`: a dataset in the benchmark format becomes submitted pairs, a bad record left out and named (or
nothing imported with --all-or-none); and back again."""

from __future__ import annotations

import shutil

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.core.management.base import CommandError

from annotator.export.format import validate_dataset
from annotator.export.pair_import import PairImportError, pairs_import
from annotator.export.services import ExportOptions, benchmark_export
from annotator.models import Caption, Image, Pair
from annotator.similarity.services import current_fingerprint
from benchmark.records import record_item_id
from tests.export_fixtures import all_records, make_pair, record, write_dataset

pytestmark = pytest.mark.django_db


def small_dataset(root):
    return write_dataset(
        root,
        [
            record(1),
            record(2, has_caption=True, caption="A white car is parked by the road."),
            record(
                3,
                category="state",
                domain="industrial",
                source="mvtec",
                source_id="bottle_7",
                question="Which bottle is broken?",
                answer="second image",
                distractors=["first image"],
            ),
        ],
        [record(4, image_1="images/aerial/change/1_a.jpg")],  # shares an image with record 1
    )


def test_it_imports_records_as_submitted_pairs_with_their_images(tmp_path, annotator):
    result = pairs_import(folder=small_dataset(tmp_path / "in"), user=annotator)

    assert result == {"pairs": 4, "images": 7, "captions": 1, "refused": []}
    pairs = {p.source_id: p for p in Pair.objects.all()}
    assert set(pairs) == {"1", "2", "bottle_7", "4"}
    bottle = pairs["bottle_7"]
    assert (bottle.status, bottle.category, bottle.domain, bottle.source) == (
        "submitted",
        "state",
        "industrial",
        "mvtec",
    )
    assert bottle.question == "Which bottle is broken?" and bottle.distractors == ["first image"]
    assert bottle.author == annotator and bottle.video is None and bottle.submitted_at is not None
    assert pairs["4"].image_1 == pairs["1"].image_1
    assert Image.objects.count() == 7
    for image in Image.objects.all():
        assert default_storage.exists(image.file.name) and default_storage.exists(image.thumbnail.name)
        assert (image.width, image.height) == (160, 120) and len(image.sha256) == 64
    assert Caption.objects.get().text == "A white car is parked by the road."


def test_a_bad_record_is_left_out_with_its_file_line_and_field_and_the_others_are_imported(tmp_path):
    root = write_dataset(tmp_path / "in", [record(1), record(2), record(3, answer="a tree")])
    result = pairs_import(folder=root)
    assert [(v.file, v.line, v.field, v.message) for v in result["refused"]] == [
        ("data/test.jsonl", 3, "answer", "the answer 'a tree' is among the distractors")
    ]
    assert (result["pairs"], result["images"]) == (2, 4)
    assert set(Pair.objects.values_list("source_id", flat=True)) == {"1", "2"}


def test_all_or_none_imports_nothing_when_a_record_is_bad_and_names_it(tmp_path):
    root = write_dataset(tmp_path / "in", [record(1), record(2), record(3, answer="a tree")])
    with pytest.raises(PairImportError) as error:
        pairs_import(folder=root, all_or_none=True)
    assert error.value.problems == ["data/test.jsonl:3: the answer 'a tree' is among the distractors"]
    assert Pair.objects.count() == 0 and Image.objects.count() == 0
    assert not (tmp_path / "media").exists() or not any((tmp_path / "media").rglob("*.jpg"))


def test_an_item_already_in_the_database_is_left_out(tmp_path):
    make_pair(category="existence", source="levir", source_id="2")
    root = write_dataset(tmp_path / "in", [record(1), record(2)])
    [problem] = pairs_import(folder=root)["refused"]
    assert str(problem) == "data/test.jsonl:2: item existence_levir_2 already exists in the database"
    assert Pair.objects.filter(source="levir").count() == 2  # the one before and record 1


def test_a_failure_while_writing_removes_the_files_it_wrote(tmp_path, monkeypatch, annotator):
    root = small_dataset(tmp_path / "in")
    real_create = Pair.objects.create
    calls = []

    def failing_create(**fields):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("database went away")
        return real_create(**fields)

    monkeypatch.setattr(Pair.objects, "create", failing_create)
    with pytest.raises(RuntimeError):
        pairs_import(folder=root, user=annotator)
    assert Pair.objects.count() == 0 and Image.objects.count() == 0
    assert not any((tmp_path / "media").rglob("*.jpg"))


def test_it_only_imports_from_the_import_folders(tmp_path, settings):
    settings.IMPORT_ROOTS = [(tmp_path / "allowed").resolve()]
    root = write_dataset(tmp_path / "elsewhere", [record(1)])
    with pytest.raises(PairImportError, match="outside the import folders"):
        pairs_import(folder=root)


def test_the_command_prints_each_problem_and_fails(tmp_path, capsys):
    root = write_dataset(tmp_path / "in", [record(1, category="colour")])
    with pytest.raises(CommandError, match=r"1 record\(s\) left out: 1 problem"):
        call_command("import_pairs", str(root))
    assert "data/test.jsonl:1: unknown category 'colour'" in capsys.readouterr().err
    assert not Pair.objects.exists()


def test_the_command_imports_and_credits_the_user(tmp_path, annotator, capsys):
    call_command("import_pairs", str(small_dataset(tmp_path / "in")), "--user", "alice")
    assert "Imported 4 pairs, 7 images, 1 captions." in capsys.readouterr().out
    assert set(Pair.objects.values_list("author__username", flat=True)) == {"alice"}


def test_a_dataset_survives_import_accept_export_and_validate_unchanged(tmp_path, annotator):
    source = small_dataset(tmp_path / "in")
    original = sorted(all_records(source), key=lambda r: r["source_id"])
    pairs_import(folder=source, user=annotator)
    # Accept as review and the similarity worker would: status, a passing similarity, the caption chosen.
    Pair.objects.update(status=Pair.Status.ACCEPTED, similarity=0.91, similarity_model=current_fingerprint())
    Caption.objects.update(status=Caption.Status.ACCEPTED, chosen=True)

    benchmark_export(options=ExportOptions(out=str(tmp_path / "out"), val_fraction=0))

    assert list(validate_dataset(tmp_path / "out")) == []
    exported = sorted(all_records(tmp_path / "out"), key=lambda r: r["source_id"])
    image_fields = ("image_1", "image_2")
    assert [{k: v for k, v in r.items() if k not in image_fields} for r in exported] == [
        {k: v for k, v in r.items() if k not in image_fields} for r in original
    ]
    for before, after in zip(original, exported, strict=True):
        for field in image_fields:
            assert (tmp_path / "out" / after[field]).read_bytes() == (source / before[field]).read_bytes()


def test_captions_without_a_user_to_credit_import_nothing_and_say_how(tmp_path, capsys):
    root = small_dataset(tmp_path / "in")
    with pytest.raises(PairImportError) as refused:
        pairs_import(folder=root)
    assert refused.value.problems == [
        "1 record has a caption (data/test.jsonl:2) and a caption needs an author: run import_pairs with "
        "--user USERNAME to credit that user with the captions; nothing was imported"
    ]
    with pytest.raises(CommandError, match="nothing imported"):
        call_command("import_pairs", str(root))
    assert "--user USERNAME" in capsys.readouterr().err
    assert Pair.objects.count() == Image.objects.count() == Caption.objects.count() == 0


def test_records_without_captions_import_without_a_user(tmp_path):
    pairs_import(folder=write_dataset(tmp_path / "in", [record(1), record(2)]))
    assert Pair.objects.count() == 2 and set(Pair.objects.values_list("author", flat=True)) == {None}


def test_an_imported_records_raw_folder_and_generation_info_are_exported_as_they_came(tmp_path, annotator):
    info = {"model": "an editing model", "prompt": "add a car"}
    source = write_dataset(
        tmp_path / "in", [record(1, raw_folder="LEVIR-CD_existence_pairs", generation_info=info)], package=True
    )
    pairs_import(folder=source, user=annotator)
    Pair.objects.update(status=Pair.Status.ACCEPTED, similarity=0.91, similarity_model=current_fingerprint())
    benchmark_export(options=ExportOptions(out=str(tmp_path / "out"), val_fraction=0))
    [exported] = all_records(tmp_path / "out")
    assert (exported["raw_folder"], exported["generation_info"]) == ("LEVIR-CD_existence_pairs", info)


def test_import_of_a_real_export_then_export_reproduces_every_record_field_by_field(tmp_path, reviewer, annotator):
    """Records are compared by item id across both splits: the split of an item may differ between the two
    exports (the database ids differ), its record may not."""
    from tests.export_fixtures import accepted_caption, video_with_pairs

    captioned = make_pair(category="viewpoint", domain="gaming", answer="left", distractors=["right", "up"])
    accepted_caption(captioned, reviewer, "The camera panned left.")
    make_pair(category="temporal", source_id="")  # exported under its derived source_id
    video_with_pairs(3, category="state", question="Which door is open?")
    for n in range(4):
        make_pair(
            category="existence",
            domain="aerial",
            question="What was added?",
            answer=f"a car {n}",
            distractors=["a tree", "a house"],
        )
    first = tmp_path / "first"
    benchmark_export(options=ExportOptions(out=str(first), val_fraction=0.3, reproducible=True))
    assert list(validate_dataset(first)) == []
    before = {record_item_id(r): r for r in all_records(first)}
    assert len(before) == 9 and sum(r["has_caption"] for r in before.values()) == 1
    assert (first / "data/val.jsonl").is_file()

    Pair.objects.all().delete()
    imported = tmp_path / "first-again"
    shutil.copytree(first, imported)
    call_command("import_pairs", str(imported), "--user", "alice")
    # Review accepts every imported pair and its caption; the similarity worker scores them.
    Pair.objects.update(status=Pair.Status.ACCEPTED, similarity=0.91, similarity_model=current_fingerprint())
    Caption.objects.update(status=Caption.Status.ACCEPTED, chosen=True)
    second = tmp_path / "second"
    benchmark_export(options=ExportOptions(out=str(second), val_fraction=0.3, reproducible=True))

    assert list(validate_dataset(second)) == []
    after = {record_item_id(r): r for r in all_records(second)}
    assert after.keys() == before.keys()
    for identifier, record_before in before.items():
        assert after[identifier] == record_before, identifier
        for field in ("image_1", "image_2"):
            path = after[identifier][field]
            assert (second / path).read_bytes() == (first / record_before[field]).read_bytes()


def test_a_record_the_database_cannot_hold_is_left_out_not_a_traceback(tmp_path, annotator):
    root = write_dataset(
        tmp_path / "in",
        [
            record(1),
            record(2, source="s" * 51),
            record(3, has_caption=True, caption="A car\u0000 appeared."),
            record(4, generation_info={"prompt": "add a car\u0000"}),
        ],
    )
    result = pairs_import(folder=root, user=annotator)
    assert [str(problem) for problem in result["refused"]] == [
        "data/test.jsonl:2: field 'source' is 51 characters (at most 50)",
        "data/test.jsonl:3: field 'caption' holds U+0000, which no database text holds",
        "data/test.jsonl:4: field 'generation_info' holds U+0000, which no database text holds",
    ]
    assert list(Pair.objects.values_list("source_id", flat=True)) == ["1"]

"""The paper's own records are valid records: the official adapter's example record, the generic questions rule
templates write and a `generation_info` of any of its forms import and validate; a folder with a broken record
imports the others and names it, or nothing with --all-or-none; and what protects the benchmark is still refused."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotator.export.format import validate_dataset
from annotator.export.pair_import import pairs_import
from annotator.export.services import ExportOptions, benchmark_export
from annotator.models import Image, Pair, Release
from annotator.releases.services import release_files_write
from annotator.similarity.services import current_fingerprint
from benchmark.records import record_item_id
from tests.export_fixtures import all_records, record, write_dataset

pytestmark = pytest.mark.django_db

# The example record of the official adapter (dataset_adapters/unified_adapter.py), as it is but its image paths,
# which it gives as elided Hub URLs.
OFFICIAL_EXAMPLE = {
    "image_1": "images/changeit/state/0.png",
    "image_2": "images/changeit/state/0_2.png",
    "question": "In which image is the apple peeled more?",
    "answer": "second image",
    "distractors": ["first image"],
    "has_caption": False,
    "caption": None,
    "category": "state",
    "domain": "natural",
    "source": "changeit",
    "source_id": "0",
    "raw_folder": "changeIt_state_pairs",
    "generation_info": None,
}
HUB = "https://huggingface.co/datasets/KRAFTON/VLM-SubtleBench/resolve/main/"


def generic(n: int, category: str, question: str, answer="second image", distractors=("first image",)) -> dict:
    return record(
        n, category=category, domain="natural", question=question, answer=answer, distractors=list(distractors)
    )


GENERIC_RECORDS = [
    generic(1, "quality", "Which image has better quality?", "first image", ["second image"]),
    generic(2, "emotion", "In which image does the person look happier?"),
    generic(3, "existence", "What was added in the second image?", "a dog", ["a cat", "a bike", "a lamp"]),
    generic(4, "quantity", "In which image are there more people?", "first image", ["second image"]),
    generic(5, "temporal", "Which image was taken later?"),
]


def accept_every_pair() -> None:
    """As review and the similarity worker would."""
    Pair.objects.update(status=Pair.Status.ACCEPTED, similarity=0.91, similarity_model=current_fingerprint())


def test_the_official_adapters_example_record_validates_and_imports(tmp_path, annotator):
    root = write_dataset(tmp_path / "in", [OFFICIAL_EXAMPLE], package=True)
    assert [str(v) for v in validate_dataset(root)] == []
    call_command("validate_benchmark", str(root), stdout=io.StringIO())

    out = io.StringIO()
    call_command("import_pairs", str(root), "--user", "alice", stdout=out)
    assert "Imported 1 pairs, 2 images, 0 captions." in out.getvalue()
    pair = Pair.objects.get()
    assert (pair.question, pair.answer, pair.distractors) == (
        "In which image is the apple peeled more?",
        "second image",
        ["first image"],
    )
    assert (pair.category, pair.source, pair.source_id, pair.raw_folder) == (
        "state",
        "changeit",
        "0",
        "changeIt_state_pairs",
    )


def test_image_paths_given_as_hub_urls_are_read_from_the_folder_as_the_official_adapter_reads_them(tmp_path):
    root = write_dataset(tmp_path / "in", [OFFICIAL_EXAMPLE])
    as_urls = {**OFFICIAL_EXAMPLE, "image_1": HUB + OFFICIAL_EXAMPLE["image_1"], "image_2": HUB + "images/x/0_2.png"}
    (root / "data/test.jsonl").write_text(json.dumps(as_urls) + "\n")
    (root / "images/x").mkdir()
    (root / "images/changeit/state/0_2.png").rename(root / "images/x/0_2.png")
    assert [str(v) for v in validate_dataset(root, contract=False)] == []

    elsewhere = {**as_urls, "source_id": "1", "image_2": "https://example.org/0_2.png"}
    (root / "data/test.jsonl").write_text(json.dumps(as_urls) + "\n" + json.dumps(elsewhere) + "\n")
    [problem] = pairs_import(folder=root)["refused"]
    assert (problem.line, problem.field) == (2, "image_2")
    assert "image URL 'https://example.org/0_2.png' names no file of the folder" in problem.message
    pair = Pair.objects.get()
    assert (pair.image_1.original_name, pair.image_2.original_name) == (OFFICIAL_EXAMPLE["image_1"], "images/x/0_2.png")


def test_the_generic_questions_of_rule_templates_validate_and_import(tmp_path):
    root = write_dataset(tmp_path / "in", GENERIC_RECORDS, package=True)
    assert [str(v) for v in validate_dataset(root)] == []
    result = pairs_import(folder=root)
    assert (result["pairs"], result["refused"]) == (5, [])
    assert sorted(Pair.objects.values_list("question", flat=True)) == sorted(r["question"] for r in GENERIC_RECORDS)


def test_a_folder_with_one_broken_record_imports_the_others_and_names_the_broken_one(tmp_path):
    broken = {**GENERIC_RECORDS[1], "distractors": ["second image"]}  # the answer is also the distractor
    root = write_dataset(tmp_path / "in", [OFFICIAL_EXAMPLE, *GENERIC_RECORDS[:1]], [broken, *GENERIC_RECORDS[2:]])

    errors, out = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("import_pairs", str(root), stderr=errors, stdout=out)
    assert errors.getvalue().splitlines() == ["data/val.jsonl:1: the answer 'second image' is among the distractors"]
    assert "Imported 5 pairs" in out.getvalue()
    assert str(failed.value) == f"1 record(s) left out: 1 problem(s) in {root}, listed above; the others were imported"
    assert set(Pair.objects.values_list("category", flat=True)) == {
        "state",
        "quality",
        "existence",
        "quantity",
        "temporal",
    }


def test_all_or_none_imports_nothing_and_says_why(tmp_path):
    broken = {**GENERIC_RECORDS[1], "generation_info": 7}
    root = write_dataset(tmp_path / "in", [OFFICIAL_EXAMPLE, broken, *GENERIC_RECORDS[2:]])

    errors = io.StringIO()
    with pytest.raises(CommandError, match=r"nothing imported \(--all-or-none\): 1 problem\(s\) in "):
        call_command("import_pairs", str(root), "--all-or-none", stderr=errors)
    assert errors.getvalue().splitlines() == [
        "data/test.jsonl:2: field 'generation_info' must be dict or str or null, got int"
    ]
    assert not Pair.objects.exists() and not Image.objects.exists()


GENERATION_INFOS = [
    {"model": "an editing model", "prompt": "add a dog", "seed": 3},
    json.dumps({"model": "an editing model", "prompt": "add a cat"}),  # as `datasets` gives back a string feature
    "edited by hand in GIMP",
    None,
]


def test_generation_info_as_object_string_or_null_survives_import_export_and_release(tmp_path, annotator):
    records = [
        record(n, answer=f"a car {n}", generation_info=info, source="edits")
        for n, info in enumerate(GENERATION_INFOS, 1)
    ]
    root = write_dataset(tmp_path / "in", records, package=True)
    assert [str(v) for v in validate_dataset(root)] == []
    pairs_import(folder=root, user=annotator)
    assert [Pair.objects.get(source_id=r["source_id"]).generation_info for r in records] == GENERATION_INFOS
    accept_every_pair()

    benchmark_export(options=ExportOptions(out=str(tmp_path / "v1"), val_fraction=0, release=True))
    assert list(validate_dataset(tmp_path / "v1")) == []
    written = {record_item_id(r): r["generation_info"] for r in all_records(tmp_path / "v1")}
    assert written == {record_item_id(r): r["generation_info"] for r in records}

    release_files_write(release=Release.objects.get(), out=tmp_path / "again")
    assert list(validate_dataset(tmp_path / "again")) == []
    assert all_records(tmp_path / "again") == all_records(tmp_path / "v1")

    # The release's files imported again, under another source: the release holds its pairs, which stay.
    again = all_records(tmp_path / "again")
    (tmp_path / "again/data/test.jsonl").write_text("".join(json.dumps({**r, "source": "copy"}) + "\n" for r in again))
    assert pairs_import(folder=tmp_path / "again", user=annotator)["refused"] == []
    copies = Pair.objects.filter(source="copy")
    assert [copies.get(source_id=r["source_id"]).generation_info for r in records] == GENERATION_INFOS


@pytest.mark.parametrize(
    "change, field, problem",
    [
        ({"question": "Did a car appear?"}, "question", "the question names the answer 'a car' and no other option"),
        ({"distractors": ["a tree", "A  TREE"]}, "distractors", "duplicate options: 'a tree' = 'A  TREE'"),
        (
            {"category": "quality", "answer": "the left one", "distractors": ["the right one"]},
            "answer",
            "quality questions have exactly the options 'first image' and 'second image'",
        ),
        ({"question": ""}, "question", "the question is empty"),
        ({"question": "What " * 120 + "changed?"}, "question", "the question is 608 characters (at most 500)"),
        ({"answer": "a " + "very " * 50 + "red car"}, "answer", "the answer is 259 characters (at most 200)"),
    ],
)
def test_what_protects_the_benchmark_is_still_refused_by_validate_and_import(tmp_path, change, field, problem):
    root = write_dataset(tmp_path / "in", [record(1), record(2, **change)])
    [violation] = validate_dataset(root, contract=False)
    assert (violation.line, violation.field) == (2, field) and violation.message.startswith(problem)
    [refused] = pairs_import(folder=root)["refused"]
    assert refused == violation
    assert list(Pair.objects.values_list("source_id", flat=True)) == ["1"]

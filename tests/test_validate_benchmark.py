"""`validate_benchmark`: each rule catches its violation and names the file and line."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotator.export.format import validate_dataset
from tests.export_fixtures import record, write_dataset


def violations(root) -> list[str]:
    return [str(v) for v in validate_dataset(root)]


def test_a_clean_dataset_has_no_violations_and_the_command_says_so(tmp_path, capsys):
    write_dataset(tmp_path, [record(1), record(2, has_caption=True, caption="A car appeared.")], [record(3)])
    assert violations(tmp_path) == []
    call_command("validate_benchmark", str(tmp_path))
    assert "no violations" in capsys.readouterr().out


def test_it_reports_a_missing_field(tmp_path):
    broken = record(2)
    del broken["raw_folder"]
    write_dataset(tmp_path, [record(1), broken])
    assert violations(tmp_path) == ["data/test.jsonl:2: missing field 'raw_folder'"]


def test_it_reports_an_extra_field(tmp_path):
    write_dataset(tmp_path, [record(1, split="test")])
    assert violations(tmp_path) == ["data/test.jsonl:1: extra field 'split'"]


def test_it_reports_a_wrong_type(tmp_path):
    write_dataset(tmp_path, [record(1, source_id=7, has_caption="no")])
    assert violations(tmp_path) == [
        "data/test.jsonl:1: field 'has_caption' must be bool, got str",
        "data/test.jsonl:1: field 'source_id' must be str, got int",
    ]


def test_it_reports_an_unknown_category(tmp_path):
    write_dataset(tmp_path, [record(1, category="Temporal")])
    assert violations(tmp_path) == ["data/test.jsonl:1: unknown category 'Temporal'"]


def test_it_reports_an_unknown_domain(tmp_path):
    write_dataset(tmp_path, [record(1, domain="satellite")])
    assert violations(tmp_path) == ["data/test.jsonl:1: unknown domain 'satellite'"]


def test_it_reports_an_answer_among_the_distractors(tmp_path):
    write_dataset(tmp_path, [record(1, answer="a tree")])
    assert violations(tmp_path) == ["data/test.jsonl:1: the answer 'a tree' is among the distractors"]


def test_it_reports_more_than_four_distractors(tmp_path):
    write_dataset(tmp_path, [record(1, distractors=["a", "b", "c", "d", "e"])])
    assert violations(tmp_path) == ["data/test.jsonl:1: 5 distractors (at most 4)"]


def test_it_reports_duplicate_options(tmp_path):
    write_dataset(tmp_path, [record(1, distractors=["a tree", "a tree"])])
    assert violations(tmp_path) == ["data/test.jsonl:1: duplicate options: 'a tree'"]


def test_it_reports_a_duplicate_item_id_across_files(tmp_path):
    write_dataset(tmp_path, [record(1)], [record(2, source_id="1")])
    assert violations(tmp_path) == [
        "data/val.jsonl:1: duplicate item id 'existence_levir_1' (first at data/test.jsonl:1)"
    ]


def test_it_reports_a_missing_image(tmp_path):
    write_dataset(tmp_path, [record(1)])
    (tmp_path / "images/aerial/change/1_b.jpg").unlink()
    assert violations(tmp_path) == ["data/test.jsonl:1: image_2 'images/aerial/change/1_b.jpg' is missing"]


def test_it_reports_an_unreadable_image(tmp_path):
    write_dataset(tmp_path, [record(1)])
    (tmp_path / "images/aerial/change/1_a.jpg").write_bytes(b"not a jpeg")
    [problem] = violations(tmp_path)
    assert problem.startswith("data/test.jsonl:1: image_1 'images/aerial/change/1_a.jpg' is not a readable image")


def test_it_reports_an_image_path_outside_the_folder(tmp_path):
    write_dataset(tmp_path, [record(1, image_1="../secret.jpg")])
    assert violations(tmp_path) == [
        "data/test.jsonl:1: field 'image_1': image path '../secret.jpg' must be relative to the dataset folder, "
        "without '..'"
    ]


def test_it_reports_invalid_json_and_a_caption_mismatch(tmp_path):
    write_dataset(tmp_path, ["{not json", json_record := record(2, has_caption=True, caption=None)])
    assert json_record["has_caption"] is True
    result = violations(tmp_path)
    assert result[0].startswith("data/test.jsonl:1: invalid JSON")
    assert result[1] == "data/test.jsonl:2: has_caption is true but caption is empty"


def test_it_reports_a_folder_without_data_files(tmp_path):
    assert violations(tmp_path) == [f"{tmp_path}: neither data/test.jsonl nor data/val.jsonl exists"]


def test_the_command_lists_every_violation_and_fails(tmp_path, capsys):
    write_dataset(tmp_path, [record(1, answer="a tree"), record(2, domain="space")])
    with pytest.raises(CommandError, match="2 violations"):
        call_command("validate_benchmark", str(tmp_path))
    output = capsys.readouterr().out.splitlines()
    assert output == [
        "data/test.jsonl:1: the answer 'a tree' is among the distractors",
        "data/test.jsonl:2: unknown domain 'space'",
    ]

"""`validate_benchmark`: each rule catches its violation and names the file and line.

The record rules are checked on small hand-written folders; the rules of the folder as a whole (splits, card,
manifest) on real exports made by the app's export, then tampered with.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotator.export.format import validate_dataset
from annotator.export.pair_import import PairImportError, pairs_import
from annotator.export.services import ExportOptions, benchmark_export
from annotator.models import Pair
from tests.export_fixtures import make_pair, read_jsonl, record, write_dataset, write_manifest


def violations(root) -> list[str]:
    """The record rules only: these folders are bare data files, as a labelled set prepared elsewhere is."""
    return [str(v) for v in validate_dataset(root, contract=False)]


def all_violations(root) -> list[str]:
    return [str(v) for v in validate_dataset(root)]


def test_a_clean_dataset_has_no_violations_and_the_command_says_so(tmp_path, capsys):
    write_dataset(
        tmp_path, [record(1), record(2, has_caption=True, caption="A car appeared.")], [record(3)], package=True
    )
    assert all_violations(tmp_path) == []
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
    write_dataset(tmp_path, [record(1, answer="a tree"), record(2, domain="space")], package=True)
    with pytest.raises(CommandError, match="2 violations"):
        call_command("validate_benchmark", str(tmp_path))
    output = capsys.readouterr().out.splitlines()
    assert output == [
        "data/test.jsonl:1: the answer 'a tree' is among the distractors",
        "data/test.jsonl:2: unknown domain 'space'",
    ]


# --- The folder as a whole, on real exports -----------------------------------------------------------------


@pytest.fixture
def export(db, tmp_path):
    """A real export with items in both splits: two temporal pairs, two viewpoint pairs, half of each in val."""
    for _ in range(2):
        make_pair(category="temporal")
        make_pair(category="viewpoint", question="How did the camera move?", answer="left", distractors=["right"])
    out = tmp_path / "export"
    benchmark_export(options=ExportOptions(out=str(out), val_fraction=0.5, reproducible=True))
    return out


def reseal(root) -> None:
    """Rewrite the manifest after a tampering, so that only the rule under test is broken."""
    write_manifest(root)


def set_card_count(root, split: str, count: int) -> None:
    card = (root / "README.md").read_text()
    card, replaced = re.subn(rf"(- name: {split}\n    num_bytes: \d+\n    num_examples: )\d+", rf"\g<1>{count}", card)
    assert replaced == 1
    (root / "README.md").write_text(card)


def first_line_of(root, split: str) -> dict:
    return read_jsonl(root / f"data/{split}.jsonl")[0]


def rewrite(root, split: str, records: list[dict]) -> None:
    import json

    (root / f"data/{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_real_export_has_no_violations_and_sha256sum_agrees_with_its_manifest(export):
    assert len(read_jsonl(export / "data/test.jsonl")) == 2 and len(read_jsonl(export / "data/val.jsonl")) == 2
    assert all_violations(export) == []
    check = subprocess.run(["sha256sum", "--quiet", "-c", "manifest.sha256"], cwd=export, capture_output=True)
    assert check.returncode == 0, check.stdout


def test_it_refuses_an_export_with_no_item_and_says_why(db, tmp_path):
    benchmark_export(options=ExportOptions(out=str(tmp_path / "empty"), reproducible=True))
    assert all_violations(tmp_path / "empty") == [
        "data: the export has no item: the official evaluator has nothing to evaluate and crashes",
        "data/test.jsonl: missing: the official evaluator reads the test split unless told otherwise "
        "(FileNotFoundError)",
        "README.md:4: a config needs data_files: a list of {split, path}",
        "README.md:7: no dataset_info.splits with the count of each split",
    ]


def test_it_refuses_an_empty_split_file(export):
    (export / "data/val.jsonl").write_text("")
    set_card_count(export, "val", 0)
    reseal(export)
    assert all_violations(export) == [
        "data/val.jsonl: empty split: the official evaluator crashes on it (ValueError: max_workers must be "
        "greater than 0); leave the file and its config out",
        "README.md: the Parquet shards of the val split hold 2 rows, but data/val.jsonl has 0 records",
    ]


def test_it_refuses_a_configured_split_whose_file_is_missing(export):
    (export / "data/val.jsonl").unlink()
    reseal(export)
    found = all_violations(export)
    assert len(found) == 2, found
    assert found[0] == "README.md: the Parquet shards of the val split hold 2 rows, but data/val.jsonl has 0 records"
    assert re.fullmatch(r"README\.md:\d+: dataset_info split 'val' has no file data/val\.jsonl", found[1])
    # A card that names the JSONL (as a folder prepared elsewhere may) is told the file is missing.
    card = (export / "README.md").read_text()
    (export / "README.md").write_text(re.sub(r"    path:\n    - parquet/val-[^\n]+", "    path: data/val.jsonl", card))
    (export / "parquet/val-00000-of-00001.parquet").unlink()
    reseal(export)
    found = all_violations(export)
    assert re.fullmatch(r"README\.md:\d+: config data file data/val\.jsonl does not exist", found[0]), found


def test_it_refuses_an_export_without_its_test_split(export):
    (export / "data/test.jsonl").unlink()
    reseal(export)
    found = all_violations(export)
    assert (
        "data/test.jsonl: missing: the official evaluator reads the test split unless told otherwise "
        "(FileNotFoundError)"
    ) in found


def test_it_catches_a_zeroed_hash_in_the_manifest(export):
    manifest = (export / "manifest.sha256").read_text().splitlines()
    number = next(n for n, line in enumerate(manifest, 1) if line.endswith("  data/test.jsonl"))
    actual = manifest[number - 1][:64]
    manifest[number - 1] = "0" * 64 + "  data/test.jsonl"
    (export / "manifest.sha256").write_text("\n".join(manifest) + "\n")
    assert all_violations(export) == [
        f"manifest.sha256:{number}: data/test.jsonl: sha256 {actual} does not match the listed {'0' * 64}"
    ]
    assert subprocess.run(["sha256sum", "--quiet", "-c", "manifest.sha256"], cwd=export).returncode != 0


def test_it_catches_a_changed_file_that_the_manifest_still_lists(export):
    [image] = [p for p in (export / "images").rglob("*.jpg")][:1]
    image.write_bytes(image.read_bytes() + b"\0")  # still a readable JPEG, but not the bytes that were exported
    [problem] = all_violations(export)
    assert re.fullmatch(
        rf"manifest\.sha256:\d+: {image.relative_to(export)}: sha256 [0-9a-f]{{64}} does not "
        rf"match the listed [0-9a-f]{{64}}",
        problem,
    )


def test_it_catches_a_listed_file_that_is_missing(export):
    with open(export / "manifest.sha256", "a") as manifest:
        manifest.write(f"{hashlib.sha256(b'x').hexdigest()}  images/yt8m/temporal/gone.jpg\n")
    count = len((export / "manifest.sha256").read_text().splitlines())
    assert all_violations(export) == [f"manifest.sha256:{count}: images/yt8m/temporal/gone.jpg is listed but missing"]


def test_it_catches_a_file_the_manifest_does_not_list(export):
    shutil.copy(next((export / "images").rglob("*.jpg")), export / "images/extra.jpg")
    assert all_violations(export) == ["images/extra.jpg: not listed in manifest.sha256"]


def test_it_catches_a_missing_manifest_and_a_line_that_is_not_sha256sum(export, tmp_path):
    other = tmp_path / "copy"
    shutil.copytree(export, other)
    (other / "manifest.sha256").unlink()
    assert all_violations(other) == [
        "manifest.sha256: missing: the list of every file and its sha256 (sha256sum format)"
    ]
    with open(export / "manifest.sha256", "a") as manifest:
        manifest.write("deadbeef  README.md\n")
    count = len((export / "manifest.sha256").read_text().splitlines())
    assert all_violations(export) == [f"manifest.sha256:{count}: not a sha256sum line ('<64 hex digits>  <path>')"]


def test_it_catches_an_answer_equal_to_a_distractor_up_to_case_and_spaces_and_import_refuses_it(export):
    records = read_jsonl(export / "data/test.jsonl")
    number, target = next((n, r) for n, r in enumerate(records, 1) if r["category"] == "viewpoint")
    target.update(question="How did the mug on the desk move?", answer="to the right", distractors=["TO THE RIGHT  "])
    rewrite(export, "test", records)
    reseal(export)
    expected = f"data/test.jsonl:{number}: the answer 'to the right' is among the distractors (as 'TO THE RIGHT  ')"
    assert all_violations(export) == [expected]
    Pair.objects.all().delete()  # the pairs of the export, which would clash with its records
    with pytest.raises(PairImportError) as refused:
        pairs_import(folder=export, all_or_none=True)
    assert refused.value.problems == [expected]


def test_it_catches_a_duplicate_item_id_across_the_splits(export):
    test_record = first_line_of(export, "test")
    val_records = read_jsonl(export / "data/val.jsonl")
    val_records[0].update(category=test_record["category"], source_id=test_record["source_id"])
    if test_record["category"] == "viewpoint":
        val_records[0].update(question="How did the camera move?", answer="left", distractors=["right"])
    else:
        val_records[0].update(
            question="Which image was taken later?", answer="second image", distractors=["first image"]
        )
    rewrite(export, "val", val_records)
    reseal(export)
    identifier = f"{test_record['category']}_{test_record['source']}_{test_record['source_id']}"
    assert all_violations(export) == [
        f"data/val.jsonl:1: duplicate item id {identifier!r} (first at data/test.jsonl:1)"
    ]


def test_it_catches_an_image_that_is_cut_short_or_missing(export):
    record_ = first_line_of(export, "val")
    image = export / record_["image_2"]
    data = image.read_bytes()
    image.write_bytes(data[: len(data) // 2])  # the header is intact: only decoding the pixels fails
    reseal(export)
    [problem] = all_violations(export)
    assert problem.startswith(f"data/val.jsonl:1: image_2 {record_['image_2']!r} is not a readable image")
    image.unlink()
    reseal(export)
    assert all_violations(export) == [f"data/val.jsonl:1: image_2 {record_['image_2']!r} is missing"]


def test_it_catches_a_card_count_that_is_not_the_files_count(export):
    set_card_count(export, "test", 3)
    reseal(export)
    [problem] = all_violations(export)
    assert re.fullmatch(
        r"README\.md:\d+: dataset_info split 'test': num_examples is 3, but data/test\.jsonl has 2 records",
        problem,
    )
    line = int(problem.split(":")[1])
    assert (export / "README.md").read_text().splitlines()[line - 1] == "  - name: test"


def test_it_catches_a_card_without_its_yaml_header_or_missing(export, tmp_path):
    other = tmp_path / "copy"
    shutil.copytree(export, other)
    (other / "README.md").unlink()
    reseal(other)
    assert all_violations(other) == ["README.md: missing: the dataset card with configs and dataset_info"]
    card = (export / "README.md").read_text()
    (export / "README.md").write_text(card.split("---\n", 2)[2])
    reseal(export)
    assert all_violations(export) == [
        "README.md:1: no YAML header (a first line '---'): the Hugging Face Hub reads configs and dataset_info from it"
    ]


def test_the_command_prints_one_violation_per_line_and_exits_non_zero(export, capsys):
    (export / "data/val.jsonl").write_text("")
    with pytest.raises(CommandError, match=r"violations in"):
        call_command("validate_benchmark", str(export))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 3
    assert all(re.match(r"^[\w./]+(:\d+)?: \S", line) for line in lines), lines
    assert "data/val.jsonl: empty split" in "\n".join(lines)


def test_it_catches_a_config_that_calls_one_split_by_the_others_name(export):
    card = (export / "README.md").read_text()
    shard = "parquet/test-00000-of-00001.parquet"
    swapped = card.replace(f"  - split: test\n    path:\n    - {shard}", f"  - split: val\n    path:\n    - {shard}")
    assert swapped != card
    (export / "README.md").write_text(swapped)
    reseal(export)
    [problem, unconfigured] = all_violations(export)
    assert re.fullmatch(rf"README\.md:\d+: config split 'val' points at {shard}, the test split", problem)
    assert unconfigured == "README.md: data/test.jsonl has records but no config of the card gives its split"


def test_it_reads_the_other_forms_of_data_files_the_hub_reads(export):
    card = (export / "README.md").read_text()
    header, body = card.split("dataset_info:", 1)
    for data_files in (
        "  data_files:\n    test: data/test.jsonl\n    val: [data/val.jsonl]\n",
        '  data_files: "data/*.jsonl"\n',
    ):
        (export / "README.md").write_text(
            "---\nconfigs:\n- config_name: default\n" + data_files + "dataset_info:" + body
        )
        reseal(export)
        assert all_violations(export) == [], data_files


def test_a_manifest_written_from_dot_slash_paths_is_read_as_sha256sum_reads_it(export):
    manifest = (export / "manifest.sha256").read_text()
    (export / "manifest.sha256").write_text(manifest.replace("  ", "  ./"))
    assert all_violations(export) == []
    assert subprocess.run(["sha256sum", "--quiet", "-c", "manifest.sha256"], cwd=export).returncode == 0

"""The export service and `export_benchmark`: format, selection, splits, determinism, atomicity, S3."""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections import defaultdict
from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.core.management.base import CommandError

from annotator.export.format import validate_dataset
from annotator.export.services import (
    MANIFEST,
    ExportError,
    ExportOptions,
    benchmark_export,
    export_queryset,
    export_run,
    export_start,
    s3_export_current,
    s3_export_download,
)
from annotator.jobs.services import UnitRef, job_task_failed
from annotator.models import Caption, Image, Job, JobTask, Pair
from annotator.similarity.services import current_fingerprint
from benchmark.records import FIELDS
from subtlebench.storage import s3_client
from tests.cut_proxy import CutProxy
from tests.export_fixtures import (
    accepted_caption,
    all_records,
    make_pair,
    make_video,
    read_jsonl,
    tree_bytes,
    video_with_pairs,
)

pytestmark = pytest.mark.django_db


def export(tmp_path, name="out", **options):
    return benchmark_export(options=ExportOptions(out=str(tmp_path / name), reproducible=True, **options))


def test_it_writes_records_the_official_evaluator_reads(tmp_path, reviewer):
    captioned = make_pair(category="viewpoint", domain="gaming", answer="left", distractors=["right", "up"])
    accepted_caption(captioned, reviewer, "The camera panned left.")
    plain = make_pair(category="temporal")
    Caption.objects.create(pair=plain, author=reviewer, text="not chosen", status=Caption.Status.ACCEPTED)

    result = export(tmp_path, val_fraction=0)
    out = tmp_path / "out"

    assert result["items"] == 2 and result["splits"] == {"test": 2, "val": 0}
    records = {r["category"]: r for r in read_jsonl(out / "data/test.jsonl")}
    assert not (out / "data/val.jsonl").exists()  # an empty split is left out, not written empty
    assert result["left_out"] == ["val"] and "val split has no item" in result["warnings"][0]
    for r in records.values():
        assert list(r) == list(FIELDS)
        assert r["raw_folder"] == f"yt8m_{r['category']}_pairs" and r["generation_info"] is None
        for field in ("image_1", "image_2"):
            assert r[field].startswith(f"images/yt8m/{r['category']}/") and (out / r[field]).is_file()
    assert records["viewpoint"]["has_caption"] is True
    assert records["viewpoint"]["caption"] == "The camera panned left."
    assert records["viewpoint"]["answer"] == "left" and records["viewpoint"]["distractors"] == ["right", "up"]
    assert records["viewpoint"]["domain"] == "gaming" and records["viewpoint"]["source_id"] == captioned.source_id
    assert records["temporal"]["has_caption"] is False and records["temporal"]["caption"] is None
    assert list(validate_dataset(out)) == []


def test_it_names_image_files_by_content_without_frame_index_or_timestamp(tmp_path):
    pair = make_pair()
    export(tmp_path, val_fraction=0)
    r = read_jsonl(tmp_path / "out/data/test.jsonl")[0]
    [provenance] = read_jsonl(tmp_path / "out/metadata/items.jsonl")
    # The export may trade the images of a binary item to balance the answers; the metadata says so.
    images = (pair.image_2, pair.image_1) if provenance["swapped"] else (pair.image_1, pair.image_2)
    for field, image in zip(("image_1", "image_2"), images, strict=True):
        digest = hashlib.sha256(image.file.read()).hexdigest()
        assert r[field] == f"images/yt8m/temporal/{digest[:32]}.jpg"
        assert "000000" not in r[field] and "000001" not in r[field]


def test_it_writes_identical_images_once_and_joins_their_pairs_in_one_split(tmp_path):
    from tests.factories import make_pair as make_lookalike_pair

    pairs = [make_lookalike_pair() for _ in range(6)]  # the shared factory's videos all have the same frames
    for pair in pairs:
        for image in (pair.image_1, pair.image_2):
            image.sha256 = hashlib.sha256(image.file.read()).hexdigest()
            image.save(update_fields=["sha256"])
    result = export(tmp_path, val_fraction=0.5)
    assert result["images"] == 2 and len(list((tmp_path / "out/images").rglob("*.jpg"))) == 2
    assert sorted(result["splits"].values()) == [0, 6]


def test_it_writes_each_image_once_however_many_items_use_it(tmp_path):
    video_with_pairs(4, category="temporal")  # 5 frames, 4 pairs: 8 image uses
    result = export(tmp_path, val_fraction=0)
    files = list((tmp_path / "out/images").rglob("*.jpg"))
    used = {r[f] for r in all_records(tmp_path / "out") for f in ("image_1", "image_2")}
    assert len(files) == len(used) == 5 == result["images"]


def test_it_puts_an_image_used_in_two_categories_in_one_folder(tmp_path):
    video = make_video(frames=2)
    make_pair(video=video, category="temporal")
    make_pair(video=video, category="quality", question="Which image of the harbour is sharper?")
    export(tmp_path, val_fraction=0)
    records = all_records(tmp_path / "out")
    assert records[0]["image_1"] == records[1]["image_1"]
    assert len(list((tmp_path / "out/images").rglob("*.jpg"))) == 2


def test_it_keeps_every_video_and_shared_image_in_one_split(tmp_path):
    videos = [video_with_pairs(3, category="temporal") for _ in range(8)]
    videos += [video_with_pairs(2, category="action", question="What did the person do?") for _ in range(8)]
    export(tmp_path, val_fraction=0.3, seed=3)
    split_of = {}
    for split in ("test", "val"):
        for r in read_jsonl(tmp_path / f"out/data/{split}.jsonl"):
            split_of[r["source_id"]] = split
    splits_per_video = [{split_of[p.source_id] for p in pairs} for pairs in videos]
    assert all(len(s) == 1 for s in splits_per_video)
    assert {"test", "val"} == set().union(*splits_per_video)
    test_images = {r[f] for r in read_jsonl(tmp_path / "out/data/test.jsonl") for f in ("image_1", "image_2")}
    val_images = {r[f] for r in read_jsonl(tmp_path / "out/data/val.jsonl") for f in ("image_1", "image_2")}
    assert not test_images & val_images


def test_it_gives_each_category_about_the_asked_val_fraction(tmp_path):
    for _ in range(20):
        make_pair(category="temporal")
    for _ in range(10):
        make_pair(category="state", question="Which apple is peeled more?")
    result = export(tmp_path, val_fraction=0.2)
    assert result["counts"]["temporal"]["natural"] == {"test": 16, "val": 4}
    assert result["counts"]["state"]["natural"] == {"test": 8, "val": 2}


def test_it_changes_the_split_with_the_seed_and_keeps_it_without(tmp_path):
    for _ in range(30):
        make_pair()

    def val_ids(name, seed):
        export(tmp_path, name=name, val_fraction=0.3, seed=seed, replace=True)
        return {r["source_id"] for r in read_jsonl(tmp_path / name / "data/val.jsonl")}

    assert val_ids("a", 1) == val_ids("b", 1)
    assert val_ids("a", 1) != val_ids("c", 2)


def test_it_writes_byte_identical_exports_for_the_same_database_and_options(tmp_path, reviewer):
    for category in ("temporal", "viewpoint", "action"):
        accepted_caption(video_with_pairs(2, category=category)[0], reviewer)
        make_pair(category=category, source_id="")
    export(tmp_path, name="first", val_fraction=0.3)
    export(tmp_path, name="second", val_fraction=0.3)
    first, second = tree_bytes(tmp_path / "first"), tree_bytes(tmp_path / "second")
    assert first == second and len(first) > 10


def test_it_lists_every_file_in_the_manifest_with_its_sha256(tmp_path):
    video_with_pairs(3)
    export(tmp_path)
    out = tmp_path / "out"
    listed = {}
    for line in (out / MANIFEST).read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    files = {n: hashlib.sha256(b).hexdigest() for n, b in tree_bytes(out).items() if n != MANIFEST}
    assert listed == files


def test_it_writes_a_card_with_configs_dataset_info_counts_and_provenance(tmp_path, settings):
    settings.SIMILARITY_THRESHOLD = 0.8
    make_pair(category="temporal")
    export(tmp_path, val_fraction=0, seed=7)
    card = (tmp_path / "out/README.md").read_text()
    header = card.split("---")[1]
    shard = "parquet/test-00000-of-00001.parquet"
    assert f"configs:\n- config_name: default\n  data_files:\n  - split: test\n    path:\n    - {shard}\n" in header
    images = "  - name: image_1\n    dtype: image\n  - name: image_2\n    dtype: image"
    assert f"dataset_info:\n  features:\n{images}" in header
    assert "\nlicense: cc-by-4.0\n" in header  # the video frames' source, yt8m: YouTube-8M's license
    size = (tmp_path / "out" / shard).stat().st_size
    assert f"  - name: test\n    num_bytes: {size}\n    num_examples: 1\n" in header
    assert "| temporal | natural | 1 | 0 |" in card
    assert current_fingerprint() in card and "similarity threshold: 0.8" in card and "seed: 7" in card
    assert "exported: 1970-01-01T00:00:00Z" in card


def test_it_exports_only_accepted_pairs_that_pass_the_subtlety_rule(tmp_path):
    passing = make_pair(similarity=0.9)
    overridden = make_pair(similarity=0.5, similarity_override_reason="verified by hand")
    make_pair(similarity=0.5)
    make_pair(similarity=None)
    make_pair(status=Pair.Status.SUBMITTED)
    result = export(tmp_path, val_fraction=0)
    assert {r["source_id"] for r in all_records(tmp_path / "out")} == {passing.source_id, overridden.source_id}
    assert result["considered"] == 2


def test_it_applies_min_similarity_category_and_domain(tmp_path):
    keep = make_pair(similarity=0.95, category="temporal", domain="gaming")
    make_pair(similarity=0.85, category="temporal", domain="gaming")
    make_pair(similarity=0.95, category="action", domain="gaming")
    make_pair(similarity=0.95, category="temporal", domain="natural")
    options = ExportOptions(out="x", min_similarity=0.9, categories=("temporal",), domains=("gaming",))
    assert list(export_queryset(options)) == [keep]


def test_it_skips_invalid_questions_and_says_why(tmp_path):
    good = make_pair()
    among = make_pair(answer="first image", distractors=["first image"])
    many = make_pair(answer="left", distractors=["right", "up", "down", "forward", "backward"])
    empty = make_pair(answer=" ")
    doubled = make_pair(answer="left", distractors=["right", "right"])
    result = export(tmp_path, val_fraction=0)
    assert [r["source_id"] for r in all_records(tmp_path / "out")] == [good.source_id]
    reasons = {s["pair"]: s["reason"] for s in result["skipped"]}
    assert "among the distractors" in reasons[among.pk]
    assert "5 distractors (at most 4)" in reasons[many.pk]
    assert "answer is empty" in reasons[empty.pk]
    assert "duplicate options" in reasons[doubled.pk]
    assert result["skipped_count"] == 4


def test_it_derives_a_stable_source_id_for_pairs_without_one(tmp_path):
    pair = make_pair(source_id="")
    export(tmp_path, val_fraction=0)
    assert read_jsonl(tmp_path / "out/data/test.jsonl")[0]["source_id"] == f"{pair.video.yt8m_id}_{pair.pk}"


def test_dry_run_prints_counts_and_skips_and_writes_nothing(tmp_path, capsys):
    make_pair(category="temporal")
    bad = make_pair(answer="x", distractors=["x"])
    call_command("export_benchmark", "--out", str(tmp_path / "out"), "--dry-run", "--val-fraction", "0")
    output = capsys.readouterr().out
    assert "temporal   natural     test      1  val      0" in output
    assert f"skipped pair {bad.pk}: the answer 'x' is among the distractors" in output
    assert "Dry run: 1 items" in output
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == [tmp_path / "media"]


def test_an_unreadable_image_fails_its_item_alone_with_the_reason(tmp_path):
    kept = make_pair()
    broken = make_pair()
    default_storage.delete(broken.image_2.file.name)

    result = export(tmp_path, val_fraction=0)

    assert [r["source_id"] for r in all_records(tmp_path / "out")] == [kept.source_id]
    [skipped] = result["skipped"]
    assert skipped["pair"] == broken.pk and result["skipped_count"] == 1
    assert skipped["reason"].startswith(f"image {broken.image_2_id} file '{broken.image_2.file.name}' cannot be read")
    assert list(validate_dataset(tmp_path / "out")) == []
    # No temporary folder left behind (the ledger of temporary paths is under var/).
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "var") == ["media", "out"]


def test_a_truncated_frame_fails_its_item_with_the_reason_and_the_others_export(tmp_path, capsys):
    kept = video_with_pairs(2)
    broken = make_pair()
    path = Path(default_storage.path(broken.image_1.file.name))
    recorded = hashlib.sha256(path.read_bytes()).hexdigest()  # as sampling records it, from the bytes it stored
    Image.objects.filter(pk=broken.image_1_id).update(sha256=recorded)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a frame cut short on disk

    call_command("export_benchmark", "--out", str(tmp_path / "out"), "--val-fraction", "0")

    output = capsys.readouterr().out
    reason = (
        f"skipped pair {broken.pk}: image {broken.image_1_id} file '{broken.image_1.file.name}' is corrupt: "
        f"its sha256 is {hashlib.sha256(path.read_bytes()).hexdigest()}, not the {recorded} recorded"
    )
    assert reason in output and "Exported 2 items" in output and "; 1 skipped." in output
    assert sorted(r["source_id"] for r in all_records(tmp_path / "out")) == sorted(p.source_id for p in kept)
    assert list(validate_dataset(tmp_path / "out")) == []
    exported = {p.name for p in (tmp_path / "out/images").rglob("*") if p.is_file()}
    assert hashlib.sha256(path.read_bytes()).hexdigest()[:32] + ".jpg" not in exported
    assert not [p for p in (tmp_path / "out").rglob("*.part")]


def test_it_refuses_to_replace_a_folder_that_is_not_an_export(tmp_path):
    make_pair()
    (tmp_path / "home").mkdir()
    (tmp_path / "home/notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="not an earlier export"):
        export(tmp_path, name="home")
    assert (tmp_path / "home/notes.txt").read_text() == "mine"


def test_it_exports_to_s3_with_the_manifest_last_and_the_same_bytes(tmp_path, s3_bucket, reviewer):
    accepted_caption(video_with_pairs(2)[0], reviewer)
    make_pair(category="action", question="What did the person do?")
    export(tmp_path, name="local", val_fraction=0.5)
    result = benchmark_export(
        options=ExportOptions(out=f"s3://{s3_bucket}/bench/v1", reproducible=True, val_fraction=0.5)
    )
    client = s3_client()
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket)["Contents"]}
    local = tree_bytes(tmp_path / "local")
    current = s3_export_current(f"s3://{s3_bucket}/bench/v1")
    root = f"bench/v1/versions/{result['version']}/"
    assert current["root"] == root and current["zip_key"] == f"bench/v1/versions/{result['version']}.zip"
    assert keys == {root + name for name in local} | {current["zip_key"], "bench/v1/current.json"}
    for name, data in local.items():
        assert client.get_object(Bucket=s3_bucket, Key=root + name)["Body"].read() == data
    zipped = client.get_object(Bucket=s3_bucket, Key=current["zip_key"])["Body"].read()
    assert sorted(zipfile.ZipFile(io.BytesIO(zipped)).namelist()) == sorted(local)
    assert result["target"] == "s3" and result["items"] == 3 and result["zip_key"] == current["zip_key"]


def test_it_uploads_the_manifest_after_every_other_file(tmp_path, s3_bucket, monkeypatch):
    make_pair()
    from annotator.export import services as export_module

    uploaded = []
    real = export_module.upload_file
    monkeypatch.setattr(
        export_module, "upload_file", lambda c, p, b, k, beats=None: (uploaded.append(k), real(c, p, b, k, beats))
    )
    result = benchmark_export(options=ExportOptions(out=f"s3://{s3_bucket}/x"))
    assert uploaded[-2:] == [f"x/versions/{result['version']}/{MANIFEST}", "x/current.json"]  # the switch is last
    assert [k for k in uploaded if "/images/" in k] == uploaded[:2]


def test_no_video_is_split_even_when_its_pairs_have_different_categories(tmp_path):
    by_video = defaultdict(set)
    for _ in range(10):
        video = make_video(frames=2)
        make_pair(video=video, category="temporal")
        make_pair(video=video, category="state", question="Which is more open?")
    export(tmp_path, val_fraction=0.3)
    pairs = {p.source_id: p.video_id for p in Pair.objects.all()}
    for split in ("test", "val"):
        for r in read_jsonl(tmp_path / f"out/data/{split}.jsonl"):
            by_video[pairs[r["source_id"]]].add(split)
    assert all(len(splits) == 1 for splits in by_video.values())


def test_identical_images_in_two_categories_leave_one_file_and_no_stray(tmp_path):
    from tests.factories import make_pair as make_lookalike_pair

    make_lookalike_pair(category="temporal")  # the shared factory's frames are identical across videos
    make_lookalike_pair(category="quality", question="Which image of the harbour is sharper?")
    export(tmp_path, val_fraction=0)
    records = all_records(tmp_path / "out")
    assert [r["image_1"].split("/")[2] for r in records] == ["temporal", "temporal"]
    files = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out/images").rglob("*.jpg"))
    assert files == sorted({r[f] for r in records for f in ("image_1", "image_2")})


def test_it_retries_a_failed_upload_and_gives_up_with_a_clear_error(tmp_path, s3_bucket, monkeypatch):
    from botocore.exceptions import EndpointConnectionError

    from annotator.export import services as export_module

    make_pair()
    monkeypatch.setattr(export_module, "UPLOAD_PAUSE", 0)
    failures = {"left": 2}
    real_client = export_module.s3_client

    def flaky_client():
        client = real_client()
        real_upload = client.upload_file

        def upload_file(path, bucket, key, **options):
            if key.endswith("data/test.jsonl") and failures["left"]:
                failures["left"] -= 1
                raise EndpointConnectionError(endpoint_url="http://s3")
            return real_upload(path, bucket, key, **options)

        client.upload_file = upload_file
        return client

    monkeypatch.setattr(export_module, "s3_client", flaky_client)
    benchmark_export(options=ExportOptions(out=f"s3://{s3_bucket}/a"))
    assert failures["left"] == 0
    assert s3_export_current(f"s3://{s3_bucket}/a") is not None

    failures["left"] = 10
    with pytest.raises(ExportError, match=r"upload of s3://.*/b/versions/.*/data/test.jsonl failed after 4 attempts"):
        benchmark_export(options=ExportOptions(out=f"s3://{s3_bucket}/b"))
    keys = {o["Key"] for o in s3_client().list_objects_v2(Bucket=s3_bucket, Prefix="b/").get("Contents", [])}
    assert "b/current.json" not in keys and s3_export_current(f"s3://{s3_bucket}/b") is None  # no export there


def test_a_derived_source_id_that_clashes_with_a_real_one_is_skipped_with_its_reason(tmp_path):
    derived = make_pair(source_id="")
    real = make_pair(source_id=f"{derived.video.yt8m_id}_{derived.pk}")
    result = export(tmp_path, val_fraction=0)
    assert [r["source_id"] for r in all_records(tmp_path / "out")] == [real.source_id]
    assert result["skipped"] == [
        {
            "pair": derived.pk,
            "reason": f"its derived item id 'temporal_yt8m_{real.source_id}' is taken by another pair's source_id",
        }
    ]


# --- Honest targets ------------------------------------------------------------------------------------------


def test_it_refuses_a_target_whose_parent_folder_is_missing_and_creates_nothing(tmp_path):
    make_pair()
    with pytest.raises(CommandError, match=r"missing/dir does not exist: create the folder first"):
        call_command("export_benchmark", "--out", str(tmp_path / "missing/dir/x"))
    assert not (tmp_path / "missing").exists()
    with pytest.raises(CommandError, match=r"^/nonexistent/dir does not exist"):
        call_command("export_benchmark", "--out", "/nonexistent/dir/x")
    assert not Path("/nonexistent").exists()


def test_it_replaces_an_earlier_export_only_with_replace(tmp_path, capsys):
    make_pair()
    call_command("export_benchmark", "--out", str(tmp_path / "out"), "--val-fraction", "0")
    before = tree_bytes(tmp_path / "out")
    make_pair()
    with pytest.raises(CommandError, match=r"out already holds an export \(written .*\): replace it explicitly"):
        call_command("export_benchmark", "--out", str(tmp_path / "out"), "--val-fraction", "0")
    assert tree_bytes(tmp_path / "out") == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "var") == ["media", "out"]  # nothing was staged

    call_command("export_benchmark", "--out", str(tmp_path / "out"), "--val-fraction", "0", "--replace")
    assert len(read_jsonl(tmp_path / "out/data/test.jsonl")) == 2
    assert list(validate_dataset(tmp_path / "out")) == []


def test_it_replaces_an_export_in_s3_only_with_replace(s3_bucket):
    make_pair()
    benchmark_export(options=ExportOptions(out=f"s3://{s3_bucket}/bench"))
    make_pair()
    with pytest.raises(ExportError, match=rf"s3://{s3_bucket}/bench already holds an export"):
        benchmark_export(options=ExportOptions(out=f"s3://{s3_bucket}/bench"))
    result = benchmark_export(options=ExportOptions(out=f"s3://{s3_bucket}/bench", replace=True))
    assert result["items"] == 2


def s3_keys(bucket: str, prefix: str) -> set[str]:
    pages = s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {item["Key"] for page in pages for item in page.get("Contents", [])}


def test_an_s3_replace_cut_mid_upload_leaves_the_previous_export_current_whole_and_valid(
    tmp_path, s3_bucket, s3_server, settings, monkeypatch, capsys
):
    from annotator.export import services as export_module

    video_with_pairs(2)
    uri = f"s3://{s3_bucket}/bench"
    first = benchmark_export(options=ExportOptions(out=uri, reproducible=True))
    s3_export_download(uri, tmp_path / "before")
    before = tree_bytes(tmp_path / "before")
    video_with_pairs(3)  # the new export has other data files and more images

    proxy = CutProxy(int(s3_server.rsplit(":", 1)[1]), cut_after=3)  # three images get through, then the line drops
    settings.S3_ENDPOINT_URL, settings.S3_MAX_ATTEMPTS = proxy.url, 1
    monkeypatch.setattr(export_module, "UPLOAD_PAUSE", 0)
    try:
        with pytest.raises(ExportError, match=r"upload of s3://.*/bench/versions/.* failed after 4 attempts"):
            benchmark_export(options=ExportOptions(out=uri, reproducible=True, replace=True))
    finally:
        proxy.close()
        settings.S3_ENDPOINT_URL = s3_server
    assert proxy.puts == 4  # the cut came mid-upload: some of the new version's objects are there

    assert s3_export_current(uri)["version"] == first["version"]
    s3_export_download(uri, tmp_path / "after")
    assert tree_bytes(tmp_path / "after") == before
    call_command("validate_benchmark", uri)
    assert f"{uri}: no violations" in capsys.readouterr().out

    # The next replace switches to its own version and removes the previous one and what the cut upload left.
    second = benchmark_export(options=ExportOptions(out=uri, reproducible=True, replace=True))
    assert second["items"] == 5
    versions = {key.split("/")[2].removesuffix(".zip") for key in s3_keys(s3_bucket, "bench/versions/")}
    assert versions == {second["version"]}
    call_command("validate_benchmark", uri)


def test_a_second_run_of_an_s3_export_finds_its_own_jobs_export_there_and_replaces_it(s3_bucket, coordinator):
    make_pair()
    uri = f"s3://{s3_bucket}/bench"
    job = export_start(options=ExportOptions(out=uri), user=coordinator)
    # Its first run uploaded and switched the pointer, then its worker died before the job was counted.
    first = benchmark_export(options=ExportOptions(out=uri), job_id=job.pk)
    assert s3_export_current(uri)["job"] == job.pk

    job = export_run(job_id=job.pk)  # the second run: the export there is its own, not another's
    assert (job.status, job.errors) == ("succeeded", [])
    current = s3_export_current(uri)
    assert current["version"] == job.result["version"] != first["version"] and current["job"] == job.pk
    assert not s3_keys(s3_bucket, f"bench/versions/{first['version']}")  # the first run's copy is gone
    with pytest.raises(ExportError, match="already holds an export"):  # another job still may not replace it
        benchmark_export(options=ExportOptions(out=uri), job_id=job.pk + 1)


def test_an_s3_that_does_not_answer_pauses_an_export_and_it_resumes(s3_bucket, s3_server, settings, coordinator):
    make_pair()
    settings.S3_MAX_ATTEMPTS = 1
    proxy = CutProxy(int(s3_server.rsplit(":", 1)[1]))
    settings.S3_ENDPOINT_URL = proxy.url
    uri = f"s3://{s3_bucket}/bench"
    job = export_start(options=ExportOptions(out=uri), user=coordinator)
    unit = job.tasks.get()
    try:
        proxy.cut_now()
        with pytest.raises(ExportError) as raised:
            export_run(job_id=job.pk, unit=UnitRef(unit.pk, celery_id="first", worker="w1@host"))
        job.refresh_from_db()
        assert job.status == "running" and job.errors == []
        claim = JobTask.objects.get(pk=unit.pk).token
        assert job_task_failed(task_id=unit.pk, token=claim, error=raised.value) == "paused"  # as the task ends
        assert "the S3 storage does not answer" in Job.objects.get(pk=job.pk).pause_reason

        proxy.restore()
        job = export_run(job_id=job.pk, unit=UnitRef(unit.pk, celery_id="later", worker="w1@host"))
        assert (job.status, job.errors) == ("succeeded", []) and s3_export_current(uri)["job"] == job.pk
    finally:
        proxy.close()


def test_an_s3_export_from_before_pointers_is_replaced_and_its_files_removed(tmp_path, s3_bucket, capsys):
    make_pair()
    export(tmp_path, name="flat")
    client = s3_client()
    for name in tree_bytes(tmp_path / "flat"):  # the layout of an export written before pointers
        client.upload_file(str(tmp_path / "flat" / name), s3_bucket, f"old/{name}")
    client.put_object(Bucket=s3_bucket, Key="old.zip", Body=b"zip")
    uri = f"s3://{s3_bucket}/old"
    assert s3_export_current(uri)["version"] is None
    with pytest.raises(ExportError, match="already holds an export"):
        benchmark_export(options=ExportOptions(out=uri))

    result = benchmark_export(options=ExportOptions(out=uri, replace=True))

    kept = s3_keys(s3_bucket, "old")
    assert kept == {key for key in kept if key.startswith(("old/versions/", "old/current.json"))} and kept
    assert s3_export_current(uri)["version"] == result["version"]
    call_command("validate_benchmark", uri)
    assert f"{uri}: no violations" in capsys.readouterr().out


def test_an_export_replaced_from_the_command_line_is_marked_replaced_in_its_job(tmp_path, coordinator):
    from annotator.export.services import export_run, export_start

    make_pair()
    job = export_run(job_id=export_start(options=ExportOptions(out=str(tmp_path / "out")), user=coordinator).pk)
    assert job.status == "succeeded" and "replaced_at" not in job.result
    call_command("export_benchmark", "--out", str(tmp_path / "out"), "--replace")
    job.refresh_from_db()
    assert job.result["replaced_by"] is None and job.result["replaced_at"]
    assert job.result["items"] == 1  # the rest of its record is kept


def test_a_dry_run_says_what_a_real_run_would_refuse(tmp_path, capsys):
    make_pair()
    call_command("export_benchmark", "--out", str(tmp_path / "out"))
    capsys.readouterr()
    call_command("export_benchmark", "--out", str(tmp_path / "out"), "--dry-run")
    assert "A real run would stop: " in capsys.readouterr().out
    call_command("export_benchmark", "--out", str(tmp_path / "out"), "--dry-run", "--replace")
    assert "A real run would stop" not in capsys.readouterr().out


def test_an_image_gone_from_s3_storage_fails_its_item_alone(tmp_path, s3_storage):
    kept = make_pair()
    broken = make_pair()
    s3_client().delete_object(Bucket=s3_storage, Key=f"media/{broken.image_1.file.name}")

    result = export(tmp_path, val_fraction=0)

    assert [r["source_id"] for r in all_records(tmp_path / "out")] == [kept.source_id]
    [skipped] = result["skipped"]
    assert skipped["pair"] == broken.pk and f"image {broken.image_1_id} file" in skipped["reason"]
    assert "cannot be read from storage" in skipped["reason"]
    assert list(validate_dataset(tmp_path / "out")) == []

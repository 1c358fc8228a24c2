"""Importing image collections: layouts, masks to regions, given pairs to candidates or review, bad input reported
by file and line while the rest imports, re-runs, the S3 prefix, the command."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from annotator.collections.services import (
    CollectionSourceError,
    collection_import,
    collection_import_run,
    collection_import_unit,
)
from annotator.jobs.services import UnitRef, job_task_claim, job_task_failed
from annotator.models import Collection, Image, Job, JobCancelled, JobTask, Pair, PairCandidate
from tests.collection_fixtures import levir_folder, mask, mvtec_folder, picture
from tests.conftest import wait_until
from tests.cut_proxy import CutProxy
from tests.factories import unit_of_a_dead_run

pytestmark = pytest.mark.django_db


def test_it_imports_an_mvtec_folder_with_candidates_and_regions_from_masks(tmp_path):
    job = collection_import(source=str(mvtec_folder(tmp_path / "mvtec")), name="mvtec", domain="industrial", sync=True)

    assert (job.status, job.errors) == ("succeeded", [])
    assert job.result["layout"] == "mvtec" and job.result["images"] == 4 and job.result["candidates"] == 3
    collection = Collection.objects.get(name="mvtec")
    assert (collection.domain, collection.layout) == ("industrial", "mvtec")
    assert set(Image.objects.filter(collection=collection).values_list("label", flat=True)) == {"bottle"}
    candidates = {c.source_id: c for c in PairCandidate.objects.all()}
    assert set(candidates) == {
        "bottle_broken_large_000",
        "bottle_broken_large_001",
        "bottle_broken_large_000_001",
    }
    small = candidates["bottle_broken_large_000"]
    assert small.image_1.original_name == "bottle/train/good/000.png"
    assert small.image_2.original_name == "bottle/test/broken_large/000.png"
    assert small.regions == [{"image": 2, "x": 4, "y": 5, "w": 6, "h": 6}]
    assert (small.domain, small.source, small.group_key, small.origin) == (
        "industrial",
        "mvtec",
        "mvtec:bottle",
        "given",
    )
    severity = candidates["bottle_broken_large_000_001"]  # two defects of one type: the smaller one first
    assert severity.image_1.original_name.endswith("000.png") and severity.image_2.original_name.endswith("001.png")
    assert {r["image"] for r in severity.regions} == {1, 2}
    # The new images are queued for embedding on the similarity worker.
    embed = JobTask.objects.get(name="annotator.tasks.embed_images")
    assert sorted(embed.kwargs["image_ids"]) == sorted(Image.objects.values_list("pk", flat=True))


def test_it_imports_a_change_detection_folder_matched_by_name(tmp_path):
    job = collection_import(source=str(levir_folder(tmp_path / "levir")), name="levir_cd", domain="aerial", sync=True)

    assert (job.status, job.errors, job.result["layout"]) == ("succeeded", [], "change_detection")
    one = PairCandidate.objects.get(source_id="train_1")
    assert one.image_1.original_name == "A/train_1.png" and one.image_2.original_name == "B/train_1.png"
    assert one.regions == [{"image": 2, "x": 10, "y": 4, "w": 10, "h": 8}]
    assert PairCandidate.objects.get(source_id="train_2").regions == []
    assert default_storage.exists(one.image_2.file.name) and default_storage.exists(one.image_2.thumbnail.name)


def test_a_malformed_collection_gives_one_error_per_problem_and_imports_the_rest(tmp_path):
    root = levir_folder(tmp_path / "levir")
    picture(root / "A/lonely.png", 80)  # no B image
    (root / "A/broken.png").write_bytes(b"not a png at all")
    (root / "B/broken.png").write_bytes(b"\x89PNG\r\n\x1a\n cut short")
    picture(root / "B/train_2.jpg", 90, fmt="JPEG")  # a second B file named train_2

    job = collection_import(source=str(root), name="levir_cd", domain="aerial", sync=True)

    assert job.status == "succeeded"
    assert sorted(job.errors) == sorted(
        [
            "B/train_2.png: another file in B/ has the name train_2 (train_2.jpg)",
            "A/lonely.png: no B/lonely.* to pair it with",
            "A/broken.png: is not a readable image (not one of the formats JPEG, PNG, WEBP, GIF, BMP)",
            "B/broken.png: is not a readable image (not one of the formats JPEG, PNG, WEBP, GIF, BMP)",
        ]
    ), job.errors
    assert sorted(PairCandidate.objects.values_list("source_id", flat=True)) == ["train_1", "train_2"]


def test_a_pair_list_makes_candidates_and_pairs_for_review_and_refuses_traversal_and_duplicates(tmp_path, annotator):
    root = tmp_path / "edits"
    for number in range(1, 5):
        picture(root / f"img/{number}.png", 30 + number)
    (tmp_path / "x.png").write_bytes((root / "img/1.png").read_bytes())
    rows = [
        {"image_1": "img/1.png", "image_2": "img/2.png"},
        {
            "image_1": "img/3.png",
            "image_2": "img/4.png",
            "category": "attribute",
            "question": "What changed about the cup on the left?",
            "answer": "its colour",
            "distractors": ["its size", "its handle"],
            "regions": [{"image": 2, "x": 1, "y": 1, "w": 5, "h": 5}],
        },
        {"image_1": "../x.png", "image_2": "img/2.png"},
        {"image_1": "img/1.png", "image_2": "img/2.png"},
        {
            "image_1": "img/1.png",
            "image_2": "img/4.png",
            "category": "attribute",
            "question": "What changed?",
            "answer": "a",
            "distractors": ["a"],
        },
    ]
    manifest = root / "pairs.jsonl"
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))

    job = collection_import(source=str(manifest), name="edits", domain="synthetic", created_by=annotator, sync=True)

    assert job.status == "succeeded" and job.result["layout"] == "pair_list"
    assert job.errors[0] == (
        "pairs.jsonl:3, field image_1: '../x.png' leaves the manifest's folder (no absolute paths or ..)"
    )
    assert job.errors[1] == "pairs.jsonl:4: the pair img/1.png, img/2.png already appears on line 1"
    assert job.errors[2].startswith("pairs.jsonl:5, field ")
    assert len(job.errors) == 3
    candidate = PairCandidate.objects.get()
    assert (candidate.image_1.original_name, candidate.image_2.original_name) == ("img/1.png", "img/2.png")
    pair = Pair.objects.get()
    assert (pair.status, pair.category, pair.domain, pair.source, pair.author) == (
        "submitted",
        "attribute",
        "synthetic",
        "edits",
        annotator,
    )
    assert pair.regions == [{"image": 2, "x": 1, "y": 1, "w": 5, "h": 5}]


def test_a_re_run_reuses_images_and_adds_nothing_twice(tmp_path):
    root = mvtec_folder(tmp_path / "mvtec")
    collection_import(source=str(root), name="mvtec", domain="industrial", sync=True)
    job = collection_import(source=str(root), name="mvtec", domain="industrial", sync=True)

    assert (job.result["images_new"], job.result["candidates"], job.result["already"]) == (0, 0, 3)
    assert Image.objects.count() == 4 and PairCandidate.objects.count() == 3


def test_a_unit_run_again_after_its_worker_died_counts_its_progress_from_the_start(tmp_path):
    job = collection_import(source=str(levir_folder(tmp_path / "levir")), name="levir_cd", domain="aerial")
    unit = unit_of_a_dead_run(job, steps=3)
    job = collection_import_run(**unit.kwargs, unit=UnitRef(unit.pk, worker="celery@second"))
    assert job.status == "succeeded" and job.total > 0
    assert job.done == job.total  # not the dead run's 3 on top


def test_a_mask_of_another_size_leaves_its_pair_out_with_the_reason(tmp_path):
    root = mvtec_folder(tmp_path / "mvtec")
    mask(root / "bottle/ground_truth/broken_large/000_mask.png", [(1, 1, 2, 2)], size=(10, 10))

    job = collection_import(source=str(root), name="mvtec", domain="industrial", sync=True)

    assert any(e.startswith("bottle/ground_truth/broken_large/000_mask.png: the mask is 10×10") for e in job.errors)
    assert "bottle_broken_large_000" not in set(PairCandidate.objects.values_list("source_id", flat=True))


def test_a_source_outside_the_import_folders_is_refused_before_any_job(tmp_path, settings):
    settings.IMPORT_ROOTS = [(tmp_path / "allowed").resolve()]
    with pytest.raises(CollectionSourceError) as refused:
        collection_import(source=str(mvtec_folder(tmp_path / "mvtec")), name="mvtec", domain="industrial")
    assert "outside the import folders" in refused.value.detail
    assert not Job.objects.exists()


def test_a_failure_while_writing_leaves_no_rows_and_no_files(tmp_path, monkeypatch):
    root = levir_folder(tmp_path / "levir")

    def boom(**kwargs):
        raise RuntimeError("the similarity queue is gone")

    monkeypatch.setattr("annotator.collections.services.images_queue_embeddings", boom)
    with pytest.raises(RuntimeError):
        collection_import(source=str(root), name="levir_cd", domain="aerial", sync=True)

    job = Job.objects.get(kind="import")
    assert job.status == "failed" and "the similarity queue is gone" in job.errors[0]
    assert not Image.objects.exists() and not PairCandidate.objects.exists() and not Collection.objects.exists()
    assert not list((tmp_path / "media").rglob("*.png"))


def test_it_imports_from_an_s3_prefix(tmp_path, s3_bucket):
    from subtlebench.storage import s3_client

    root = levir_folder(tmp_path / "levir")
    client = s3_client()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        client.upload_file(str(path), s3_bucket, f"sets/levir/{path.relative_to(root).as_posix()}")
    client.put_object(Bucket=s3_bucket, Key="sets/other/A/x.png", Body=b"elsewhere")

    job = collection_import(source=f"s3://{s3_bucket}/sets/levir", name="levir_s3", domain="aerial", sync=True)

    assert (job.status, job.errors, job.result["layout"]) == ("succeeded", [], "change_detection")
    assert job.result["images"] == 4
    assert PairCandidate.objects.get(source_id="train_1").regions == [{"image": 2, "x": 10, "y": 4, "w": 10, "h": 8}]


def test_a_slow_first_run_that_goes_on_after_a_second_run_imported_writes_nothing(tmp_path, settings):
    root = levir_folder(tmp_path / "levir")
    job = collection_import(source=str(root), name="levir_cd", domain="aerial")
    unit = job.tasks.get()
    first = job_task_claim(unit=UnitRef(unit.pk, celery_id="first", worker="w1@host"))
    gone = timezone.now() - timedelta(seconds=settings.JOB_STALE_SECONDS + 1)
    JobTask.objects.filter(pk=unit.pk).update(heartbeat=gone)  # judged gone: nothing said it still ran the unit
    collection_import_run(**unit.kwargs, unit=UnitRef(unit.pk, celery_id="second", worker="w2@host"))
    job.refresh_from_db()
    assert job.status == "succeeded" and job.result["images"] == 4
    made = (Image.objects.count(), PairCandidate.objects.count(), Job.objects.filter(kind="similarity").count())
    assert made == (4, 2, 1)

    with pytest.raises(JobCancelled):  # the first run, back from its slow step: the job is done, keyed by it
        collection_import_unit(str(root), "levir_cd", "aerial", "auto", job=first.job, progress=first)
    assert (Image.objects.count(), PairCandidate.objects.count(), Job.objects.filter(kind="similarity").count()) == made
    assert JobTask.objects.get(pk=unit.pk).attempts == 2 and not first.complete()


def test_an_s3_that_does_not_answer_pauses_the_import_rather_than_failing_it_and_it_resumes(
    tmp_path, s3_bucket, s3_server, settings
):
    from subtlebench.storage import s3_client

    root = levir_folder(tmp_path / "levir")
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        s3_client().upload_file(str(path), s3_bucket, f"sets/levir/{path.relative_to(root).as_posix()}")
    settings.S3_MAX_ATTEMPTS = 1
    proxy = CutProxy(int(s3_server.rsplit(":", 1)[1]))
    settings.S3_ENDPOINT_URL = proxy.url
    job = collection_import(source=f"s3://{s3_bucket}/sets/levir", name="levir_s3", domain="aerial")
    unit = job.tasks.get()
    try:
        proxy.cut_now()
        with pytest.raises(Exception) as raised:
            collection_import_run(**unit.kwargs, unit=UnitRef(unit.pk, celery_id="first", worker="w1@host"))
        job.refresh_from_db()
        assert job.status == "running" and job.errors == []  # not "cannot be read from S3": S3 is away
        claim = JobTask.objects.get(pk=unit.pk).token
        assert job_task_failed(task_id=unit.pk, token=claim, error=raised.value) == "paused"  # as the task ends
        job = Job.objects.get(pk=job.pk)
        assert job.state == "paused" and "the S3 storage does not answer" in job.pause_reason

        proxy.restore()
        collection_import_run(**unit.kwargs, unit=UnitRef(unit.pk, celery_id="later", worker="w1@host"))
    finally:
        proxy.close()
    job = Job.objects.get(pk=job.pk)
    assert (job.status, job.errors, job.result["images"]) == ("succeeded", [], 4)


def test_the_command_reports_problems_and_counts(tmp_path, capsys):
    root = levir_folder(tmp_path / "levir")
    picture(root / "B/alone.png", 99)

    call_command("import_collection", str(root), "--name", "levir_cd", "--domain", "aerial")

    out, err = capsys.readouterr()
    assert "B/alone.png: no A/alone.* to pair it with" in err
    assert "4 images (4 new), 2 candidate pairs, 0 pairs for review" in out
    with pytest.raises(CommandError, match="exists with the domain aerial"):
        call_command("import_collection", str(root), "--name", "levir_cd", "--domain", "medical")


def test_a_csv_pair_list_reads_distractor_columns_and_names_bad_rows(tmp_path):
    root = tmp_path / "edits"
    for number in range(1, 4):
        picture(root / f"{number}.png", 20 + number)
    (root / "pairs.csv").write_text(
        "image_1,image_2,category,question,answer,distractor_1,distractor_2\n"
        "1.png,2.png,attribute,What changed about the left cup?,its colour,its size,its handle\n"
        "1.png,3.png,,,,,\n"
        "2.png,missing.png,,,,,\n"
        "1.png,1.png,,,,,\n"
    )

    job = collection_import(source=str(root / "pairs.csv"), name="edits", domain="synthetic", sync=True)

    assert job.errors == [
        "pairs.csv:4, field image_2: missing.png is missing",
        "pairs.csv:5: image_1 and image_2 are the same file (1.png)",
    ]
    assert Pair.objects.get().distractors == ["its size", "its handle"]
    assert PairCandidate.objects.get().source_id == "1_3"


def test_a_manifest_of_plain_images_imports_them_with_labels_and_no_pairs(tmp_path):
    root = tmp_path / "scans"
    picture(root / "a.png", 10)
    picture(root / "b.png", 20)
    (root / "images.csv").write_text("path,label\na.png,lung\nb.png,lung\na.png,lung\n")

    job = collection_import(source=str(root / "images.csv"), name="scans", domain="medical", sync=True)

    assert (job.status, job.result["layout"], job.errors) == (
        "succeeded",
        "manifest",
        ["images.csv:4, field path: a.png already appears on line 2"],
    )
    assert sorted(Image.objects.values_list("original_name", "label")) == [("a.png", "lung"), ("b.png", "lung")]
    assert not PairCandidate.objects.exists() and Collection.objects.get().domain == "medical"


@pytest.mark.django_db(transaction=True)
def test_the_unit_keeps_beating_while_the_one_write_transaction_runs(tmp_path, monkeypatch, settings):
    """A long write is never taken for a vanished worker: a thread beats the unit's heartbeat, visible at once."""
    settings.JOB_HEARTBEAT_SECONDS = 0.05
    from annotator.collections import services

    real_stored = services._stored
    seen = []

    def slow_stored(*args, **kwargs):
        unit = JobTask.objects.get(name=services.IMPORT_TASK)  # read committed: the thread's beats show
        if not seen:
            seen.append(unit.heartbeat)
            # Waits (inside the write transaction) for a beat from the other thread; fails after 30 s without one.
            seen.append(wait_until(lambda: JobTask.objects.get(pk=unit.pk).heartbeat > seen[0], 30, "a heartbeat"))
        return real_stored(*args, **kwargs)

    monkeypatch.setattr(services, "_stored", slow_stored)
    job = collection_import(source=str(levir_folder(tmp_path / "levir")), name="levir_cd", domain="aerial", sync=True)

    assert job.status == "succeeded"
    assert seen[1] is True
    assert JobTask.objects.get(name=services.IMPORT_TASK).status == "done"

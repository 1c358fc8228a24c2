"""/healthz (issue 25): JSON, a status per part and overall; 503 only when the database or the broker is down (a
broker that answers PING but refuses writes is down); the deep check (beat's tick, workers per queue, storage,
units waiting for the sweeper) only for staff or the HEALTHZ_TOKEN, and it says what is wrong."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from annotator.jobs.services import jobs_health_part
from annotator.models import Job, JobTask
from subtlebench.models import Tick
from tests.conftest import make_user, wait_until

pytestmark = pytest.mark.django_db

TOKEN = "healthz-test-token"


@pytest.fixture
def operator(settings):
    """A client that sends the HEALTHZ_TOKEN. No worker runs in these tests but where one is started: the deep
    check's broadcast waits a twentieth of a second for replies instead of the deployment's second."""
    settings.HEALTHZ_TOKEN = TOKEN
    settings.HEALTH_WORKER_TIMEOUT_SECONDS = 0.05
    return Client(HTTP_AUTHORIZATION=f"Bearer {TOKEN}")


def deep(client) -> dict:
    response = client.get("/healthz", {"deep": "1"})
    assert response.status_code in (200, 503), response.content
    return response.json()


def test_the_plain_check_names_each_part_and_no_detail(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "parts": {"database": {"status": "ok"}, "broker": {"status": "ok"}}}


def test_the_plain_check_wants_get(client):
    assert client.post("/healthz").status_code == 405


def test_the_deep_check_is_refused_without_staff_or_the_token(client, client_for, coordinator, settings):
    settings.HEALTHZ_TOKEN = TOKEN
    assert client.get("/healthz", {"deep": "1"}).status_code == 403
    assert Client(HTTP_AUTHORIZATION="Bearer wrong").get("/healthz", {"deep": "1"}).status_code == 403
    assert client_for(coordinator).get("/healthz", {"deep": "1"}).status_code == 403  # a role is not staff
    settings.HEALTHZ_TOKEN = ""
    assert Client(HTTP_AUTHORIZATION="Bearer ").get("/healthz", {"deep": "1"}).status_code == 403  # no token: none
    staff = make_user("operator")
    staff.is_staff = True
    staff.save()
    settings.HEALTH_WORKER_TIMEOUT_SECONDS = 0.05  # no worker runs here (the operator fixture says why)
    answer = client_for(staff).get("/healthz", {"deep": "1"})
    assert answer.status_code in (200, 503) and set(answer.json()["parts"]) >= {"beat", "workers", "storage", "jobs"}


def test_the_deep_check_says_beat_is_down_when_it_never_ticked_or_ticked_long_ago(operator, settings, caplog):
    settings.BEAT_STALE_SECONDS = 60
    beat = deep(operator)["parts"]["beat"]
    assert (beat["status"], beat["last_tick_seconds_ago"]) == ("degraded", None)
    assert "never ticked" in beat["detail"]
    Tick.record(Tick.BEAT, now=timezone.now() - timedelta(seconds=300))
    with caplog.at_level(logging.WARNING, logger="subtlebench.health"):
        health = deep(operator)
    beat = health["parts"]["beat"]
    assert beat["status"] == "degraded" and 299 <= beat["last_tick_seconds_ago"] < 400
    assert "beat last ticked 3" in beat["detail"] and "no sweeps are sent" in beat["detail"]
    assert "health: beat degraded" in caplog.text
    Tick.record(Tick.BEAT)
    assert deep(operator)["parts"]["beat"]["status"] == "ok"


def test_a_pending_unit_waiting_while_beat_is_down_is_reported_and_logged(operator, settings, caplog):
    settings.JOB_SWEEP_SECONDS = 60
    Tick.record(Tick.BEAT, now=timezone.now() - timedelta(hours=1))
    job = Job.objects.create(kind=Job.Kind.EXPORT, title="an export")
    unit = JobTask.objects.create(job=job, name="annotator.tasks.export_benchmark", kwargs={"job_id": job.pk})
    assert deep(operator)["parts"]["jobs"]["status"] == "ok"  # just created: the sweeper has time to send it
    JobTask.objects.filter(pk=unit.pk).update(created=timezone.now() - timedelta(minutes=10))
    with caplog.at_level(logging.WARNING, logger="subtlebench.health"):
        jobs = deep(operator)["parts"]["jobs"]
    assert (jobs["status"], jobs["pending_waiting"]) == ("degraded", 1)
    assert "1 unit(s) pending since" in jobs["detail"] and "beat looks down" in jobs["detail"]
    assert jobs["sweep_last_ran_seconds_ago"] is None and "the sweeper never ran" in jobs["detail"]
    assert "health: jobs degraded: 1 unit(s) pending" in caplog.text
    # The jobs page says it too.
    coordinator = make_user("cora", "coordinator")
    page = Client()
    page.force_login(coordinator)
    body = page.get("/jobs/").content.decode()
    assert "it looks down" in body and "1 unit waiting to be sent since" in body


def running_unit(worker: str, silent_seconds: float) -> JobTask:
    job = Job.objects.create(kind=Job.Kind.EXPORT, title="an export", status=Job.Status.RUNNING)
    beat = timezone.now() - timedelta(seconds=silent_seconds)
    return JobTask.objects.create(
        job=job, name="annotator.tasks.export_benchmark", status="running", worker=worker, heartbeat=beat
    )


def test_a_unit_running_on_a_worker_that_does_not_answer_and_stopped_beating_is_reported(operator, settings):
    settings.JOB_HEARTBEAT_SECONDS = 20
    settings.JOB_STALE_SECONDS = 300
    running_unit("celery@busy", silent_seconds=5)  # beat a moment ago: alive, though it did not answer
    assert deep(operator)["parts"]["jobs"]["status"] == "ok"
    dead = running_unit("celery@gone", silent_seconds=60)  # two beats missed, and no answer from its worker
    jobs = deep(operator)["parts"]["jobs"]
    assert (jobs["status"], jobs["running_on_dead_workers"]) == ("degraded", 1)
    assert "1 unit(s) running on a worker that looks dead (" in jobs["detail"]
    assert f": unit {dead.pk} of job {dead.job_id} on celery@gone, silent since " in jobs["detail"]


def test_a_silent_unit_of_a_worker_that_answers_is_reported_once_the_sweeper_should_have_requeued_it(settings):
    settings.JOB_HEARTBEAT_SECONDS = 20
    settings.JOB_STALE_SECONDS = 300
    unit = running_unit("celery@alive", silent_seconds=60)  # a slow step: its worker answers
    assert jobs_health_part({"celery@alive"})["status"] == "ok"
    JobTask.objects.filter(pk=unit.pk).update(heartbeat=timezone.now() - timedelta(seconds=400))
    jobs = jobs_health_part({"celery@alive"})
    assert (jobs["status"], jobs["running_on_dead_workers"]) == ("degraded", 1)
    assert jobs_health_part(None)["running_on_dead_workers"] == 1  # the workers not asked: the sweeper's rule alone
    JobTask.objects.filter(pk=unit.pk).update(status="done")
    assert jobs_health_part(None)["status"] == "ok"


def test_the_deep_check_reports_the_broker_down_when_it_refuses_writes(operator, private_redis, settings):
    settings.CELERY_BROKER_URL = private_redis.url
    client = private_redis.client()
    client.mset({f"ballast:{number}": b"x" * 1000 for number in range(300)})
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", "1mb")
    assert client.ping()  # PING still answers: only a write shows it
    response = operator.get("/healthz", {"deep": "1"})
    assert response.status_code == 503
    health = response.json()
    assert health["status"] == "down"
    assert health["parts"]["database"]["status"] == "ok"
    assert health["parts"]["broker"]["status"] == "down"
    assert health["parts"]["broker"]["detail"] == "refuses writes (command not allowed when used memory > 'maxmemory'.)"
    assert health["parts"]["workers"] == {
        "status": "degraded",
        "detail": "not asked: the broker is down",
        "queues": {"default": [], "similarity": []},
    }


def test_the_storage_part_says_when_the_media_folder_takes_no_file(operator, settings, tmp_path):
    assert deep(operator)["parts"]["storage"] == {"status": "ok", "detail": "media folder writable"}
    assert not list(settings.MEDIA_ROOT.glob(".healthz-*"))  # the probe is removed
    (tmp_path / "a-file").write_text("not a folder")
    settings.MEDIA_ROOT = tmp_path / "a-file" / "media"
    health = operator.get("/healthz", {"deep": "1"})
    storage = health.json()["parts"]["storage"]
    assert storage["status"] == "degraded" and "media folder not writable" in storage["detail"]
    assert (health.status_code, health.json()["status"]) == (200, "degraded")  # storage alone is never a 503


def test_the_storage_part_asks_the_s3_bucket(operator, s3_bucket, settings):
    settings.S3_BUCKET = s3_bucket
    assert deep(operator)["parts"]["storage"] == {"status": "ok", "detail": f"bucket {s3_bucket}"}
    settings.S3_BUCKET = "no-such-bucket-here"
    storage = deep(operator)["parts"]["storage"]
    assert storage["status"] == "degraded" and "bucket no-such-bucket-here unreachable" in storage["detail"]


@pytest.mark.e2e
def test_the_deep_check_lists_the_workers_per_queue(operator, celery_worker_process, settings):
    settings.HEALTH_WORKER_TIMEOUT_SECONDS = 1.0
    assert deep(operator)["parts"]["workers"]["queues"]["default"] == []
    celery_worker_process(queues="default")
    # A busy machine's worker may miss one broadcast's 1 s window: ask until it answers (the deadline decides).
    workers = wait_until(lambda: (w := deep(operator)["parts"]["workers"])["queues"]["default"] and w, 60, "a reply")
    assert len(workers["queues"]["default"]) == 1 and workers["queues"]["default"][0].startswith("test")
    assert workers["queues"]["similarity"] == []
    assert workers["status"] == "degraded" and workers["detail"] == "no worker consumes similarity"

"""A unit whose message the broker lost (issue 25): the sweeper asks the broker (its queue lists, the priority
lists, the unacknowledged hash) and sends again a queued unit whose message is in none of them, at once when the
broker lost its data (FLUSHALL, a restart without it); a unit whose message is there is left alone. And beat's
scheduler records its tick, which /healthz?deep=1 reads.

Everything broker-side runs in processes of their own on a private Redis (`manage.py sweep`, a real worker, beat).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from annotator.models import Domain, Job, JobTask, Video
from annotator.videos.services import _import_create, import_entries, sampling_parameters
from devtools.localservices import BASE_DIR
from subtlebench.models import Tick
from tests.conftest import database_url, wait_until
from tests.fault_fixtures import stop_process
from tests.video_fixtures import *  # noqa: F403 (fixtures)
from tests.worker_zygote import python_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PRIORITY_SEP = "\x06\x16"


def run(settings, broker_url: str, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": broker_url,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "IMPORT_ROOTS": os.pathsep.join(str(p) for p in settings.IMPORT_ROOTS),
        **extra_env,
    }
    return python_run(list(args), cwd=BASE_DIR, env=env, timeout=120)


def sweep(settings, broker_url: str, **extra_env: str) -> str:
    done = run(settings, broker_url, "manage.py", "sweep", **extra_env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def unsent_import(folder) -> tuple[Job, JobTask]:
    """An import of one video whose unit is written but not handed to any broker yet (as after a broker error)."""
    every, count = sampling_parameters(None, 3)
    job = _import_create(str(folder), import_entries(str(folder)), every, count, Domain.NATURAL, None, True, "", "")
    unit = job.tasks.get()
    JobTask.objects.filter(pk=unit.pk).update(created=timezone.now() - timedelta(minutes=1))
    return job, unit


def message_ids(client, key: str) -> list[str]:
    return [json.loads(raw)["headers"]["id"] for raw in client.lrange(key, 0, -1)]


def test_a_unit_whose_message_waits_in_a_queue_or_is_unacknowledged_is_not_sent_again(
    h264_video, settings, private_redis
):
    job, unit = unsent_import(h264_video.parent)
    assert "1 sent" in sweep(settings, private_redis.url)
    unit.refresh_from_db()
    assert (unit.status, unit.sends) == ("queued", 1)
    broker = private_redis.client()
    assert message_ids(broker, "default") == [unit.celery_id]

    # Looked for at once (no grace): found in its queue, not sent again.
    out = sweep(settings, private_redis.url, JOB_BROKER_CHECK_SECONDS="0")
    assert "0 resent" in out and "sent again" not in out
    # In a priority list of its queue (kombu's "<queue>\x06\x16<step>").
    raw = broker.rpop("default")
    broker.lpush(f"default{PRIORITY_SEP}3", raw)
    assert "0 resent" in sweep(settings, private_redis.url, JOB_BROKER_CHECK_SECONDS="0")
    # Received by a worker, not acknowledged: kombu's `unacked` hash, tag -> [message, exchange, routing key].
    raw = broker.rpop(f"default{PRIORITY_SEP}3")
    broker.hset("unacked", "a-delivery-tag", json.dumps([json.loads(raw), "", "default"]))
    broker.zadd("unacked_index", {"a-delivery-tag": 1.0})
    assert "0 resent" in sweep(settings, private_redis.url, JOB_BROKER_CHECK_SECONDS="0")
    unit.refresh_from_db()
    assert (unit.status, unit.sends, unit.error) == ("queued", 1, "")

    # Gone from all of them: sent again, once it waited JOB_BROKER_CHECK_SECONDS.
    broker.delete("unacked", "unacked_index")
    assert "0 resent" in sweep(settings, private_redis.url, JOB_BROKER_CHECK_SECONDS="600")
    out = sweep(settings, private_redis.url, JOB_BROKER_CHECK_SECONDS="0")
    assert "1 resent" in out and f"sent again: unit {unit.pk} of job {job.pk}" in out
    unit.refresh_from_db()
    assert (unit.status, unit.sends) == ("queued", 2) and "the broker lost it" in unit.error
    assert message_ids(broker, "default") == [unit.celery_id]


def test_after_flushall_the_sweep_sends_a_queued_unit_again_at_once_and_a_worker_finishes_the_job(
    h264_video, settings, private_redis, celery_worker_process
):
    job, unit = unsent_import(h264_video.parent)
    assert "1 sent" in sweep(settings, private_redis.url)
    unit.refresh_from_db()
    first_message = unit.celery_id
    private_redis.client().flushall()  # the message and the sweeper's marker are gone

    celery_worker_process(queues="default", CELERY_BROKER_URL=private_redis.url)
    # The unit was queued seconds ago, well within JOB_BROKER_CHECK_SECONDS (30 s): the lost marker says the broker
    # lost its data, so it is looked for at once.
    out = sweep(settings, private_redis.url)
    assert "1 resent" in out and "the broker lost it" in out, out
    wait_until(lambda: not Job.objects.get(pk=job.pk).is_active, 90, "the import sent again to finish")
    job.refresh_from_db()
    unit.refresh_from_db()
    assert job.status == "succeeded", job.errors
    assert (unit.status, unit.sends, unit.attempts) == ("done", 2, 1)  # sent twice, run once
    assert unit.celery_id != first_message
    video = Video.objects.get()
    assert (video.status, video.frame_count) == ("sampled", 3)
    assert "0 resent" in sweep(settings, private_redis.url, JOB_BROKER_CHECK_SECONDS="0")  # done: left alone


def test_beat_records_its_tick_and_the_deep_check_says_when_it_stopped(settings, private_redis, tmp_path):
    settings.HEALTHZ_TOKEN = "t"
    settings.BEAT_STALE_SECONDS = 3
    operator = Client(HTTP_AUTHORIZATION="Bearer t")
    env = {**os.environ, "DATABASE_URL": database_url(), "CELERY_BROKER_URL": private_redis.url}
    env.update(BEAT_TICK_SECONDS="0.5", JOB_SWEEP_SECONDS="60", CLEANUP_MINUTES="0", SIMILARITY_CATCH_UP_MINUTES="0")
    log = open(tmp_path / "beat.log", "w")
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "subtlebench", "beat", "-s", str(tmp_path / "schedule")],
        cwd=BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: Tick.age(Tick.BEAT) is not None, 60, "beat's first tick")
        first = Tick.objects.get(name=Tick.BEAT).at
        wait_until(lambda: Tick.objects.get(name=Tick.BEAT).at > first, 30, "beat's next tick")
        assert operator.get("/healthz", {"deep": "1"}).json()["parts"]["beat"]["status"] == "ok"
    finally:
        stop_process(beat)
        log.close()
    wait_until(lambda: Tick.age(Tick.BEAT) > 3, 30, "beat's tick to go stale")
    beat_part = operator.get("/healthz", {"deep": "1"}).json()["parts"]["beat"]
    assert beat_part["status"] == "degraded" and "no sweeps are sent" in beat_part["detail"]


def test_a_message_that_was_only_slow_and_is_sent_again_runs_its_unit_once(
    h264_video, settings, private_redis, celery_worker_process
):
    job, unit = unsent_import(h264_video.parent)
    assert "1 sent" in sweep(settings, private_redis.url)
    broker = private_redis.client()
    in_transit = broker.rpop("default")  # the first message, away from the broker for a while
    assert "1 resent" in sweep(settings, private_redis.url, JOB_BROKER_CHECK_SECONDS="0")
    broker.lpush("default", in_transit)  # ... and back: both messages are delivered
    assert len(broker.lrange("default", 0, -1)) == 2

    celery_worker_process(queues="default", CELERY_BROKER_URL=private_redis.url)
    wait_until(lambda: not Job.objects.get(pk=job.pk).is_active, 90, "the import to finish")
    wait_until(lambda: not broker.llen("default") and not broker.hlen("unacked"), 60, "both deliveries to end")
    job.refresh_from_db()
    unit.refresh_from_db()
    assert job.status == "succeeded" and (job.done, job.total, job.result["videos_ok"]) == (1, 1, 1)
    assert (unit.status, unit.sends, unit.attempts) == ("done", 2, 1)  # delivered twice, claimed and run once
    video = Video.objects.get()
    assert (video.status, video.frame_count) == ("sampled", 3)
    # The broker's lists can be empty while the worker still runs the second delivery (the CI log ended at its
    # "received"): wait for its line, and fail if it never comes.
    log = settings.MEDIA_ROOT.parent / "worker-0.log"
    wait_until(lambda: "this delivery does nothing" in log.read_text(), 30, "the second delivery's line in the log")
    unit.refresh_from_db()
    assert (unit.status, unit.attempts) == ("done", 1)  # the second delivery ran nothing

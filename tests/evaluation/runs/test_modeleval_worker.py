"""End to end: a real Celery worker evaluates a model served on loopback; killed (SIGKILL) mid-run, the sweeper
requeues the run and a new worker finishes it without sending again an item that has a stored result; the API
key (an environment variable of the worker) appears in no page, log line or database column."""

from __future__ import annotations

import logging
import signal
import time
from collections import Counter

import pytest
from django.db import connection

from annotator.jobs.services import jobs_sweep
from annotator.llm.endpoints import endpoint_create
from annotator.models import Job
from evaluation.models import ModelItemResult
from evaluation.runs.services import evaluation_start
from tests.conftest import wait_until
from tests.model_server import ModelServer
from tests.modeleval_fixtures import bind_key, make_plan_release, policy_for, predicted_accuracy

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

KEY_ENV = "SUBTLEBENCH_MODEL_KEY_E2E"
KEY = "sk-live-5d0b9e7a41c2f8836e1d"
PLAN = {"temporal": (12, 9), "spatial": (12, 3), "attribute": (8, 8), "quality": (8, 0)}
WORKER = {"JOB_HEARTBEAT_SECONDS": "0.2", KEY_ENV: KEY}


def finished(job: Job) -> bool:
    job.refresh_from_db()
    return not job.is_active


def tables_holding(text: str) -> list[str]:
    """Every table of the database with a row whose text (all its columns, JSON included: the row cast to text)
    holds `text`. SQL rather than pg_dump, whose client must match the server's version (the embedded
    PostgreSQL of a fresh machine is newer than a system pg_dump, and a fresh machine may have none)."""
    found = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            quoted = connection.ops.quote_name(table)
            cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {quoted} AS t WHERE strpos(t::text, %s) > 0)", [text])
            if cursor.fetchone()[0]:
                found.append(table)
    return found


def test_a_killed_run_resumes_without_sending_a_stored_item_again_and_the_key_never_leaks(
    celery_worker_process, coordinator, client_for, settings, monkeypatch, caplog
):
    caplog.set_level(logging.DEBUG)
    settings.JOB_STALE_SECONDS = 1.5
    release, records = make_plan_release(PLAN)
    echo = records[1]["question"]  # this item's error body quotes the Authorization header back
    server = ModelServer(latency=0.15, policy=policy_for(records)).start()
    server.faults[echo] = "echo-key"
    bind_key(settings, KEY_ENV, server.base_url)
    try:
        endpoint = endpoint_create(
            user=coordinator,
            name="tiny",
            base_url=server.base_url,
            model_id="tiny-vlm",
            api_key_env=KEY_ENV,
            concurrency=2,
            timeout_s=10,
        )
        worker = celery_worker_process(**WORKER)
        evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release)
        job = evaluation.job
        wait_until(lambda: ModelItemResult.objects.filter(evaluation=evaluation).count() >= 8, 60, "results")
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=20)
        time.sleep(0.5)  # requests the killed worker had in flight reach the server
        stored_before = set(evaluation.results.values_list("question_id", flat=True))
        answered_before = set(evaluation.results.filter(is_correct__isnull=False).values_list("question_id", flat=True))
        sent_before = Counter(seen.question for seen in server.requests)
        assert 8 <= len(stored_before) < len(records)
        job.refresh_from_db()
        assert job.status == Job.Status.RUNNING

        time.sleep(2)  # the unit's heartbeat goes stale
        celery_worker_process(**WORKER)
        assert jobs_sweep()["requeued"] == 1
        wait_until(lambda: finished(job), 90, "the resumed run to finish")
    finally:
        server.stop()

    # The echoing item never gets an answer: the run ends incomplete (a failed request is no answer), not succeeded.
    evaluation.refresh_from_db()
    assert job.status == Job.Status.FAILED and evaluation.state == "incomplete", job.errors
    assert job.errors[0].startswith("Incomplete: 1 of 40 items have no answer after up to 3 asks each: 1 rejected")
    ids = {f"{r['category']}_yt8m_{r['source_id']}": r["question"] for r in records}
    sent_after = Counter(seen.question for seen in server.requests)
    for question_id in answered_before:
        assert sent_after[ids[question_id]] == sent_before[ids[question_id]], question_id  # never sent again
    assert sent_after[echo] >= sent_before[echo] + 1  # the failed item, asked again
    assert evaluation.results.count() == len(records)
    assert job.tasks.get().attempts == 2
    expected = predicted_accuracy(records)
    echo_category = records[1]["category"]
    per_category = job.result["per_category"]
    for category, accuracy in expected.items():
        if category != echo_category:
            assert per_category[category]["accuracy"] == accuracy
    failed = evaluation.results.get(failure__gt="")
    assert failed.failure == "rejected"  # the endpoint's reason, its echo of the key removed
    assert failed.failure_message == "the endpoint refuses the request (HTTP 400): bad request with Bearer [redacted]"
    assert failed.asks == settings.MODEL_EVAL_ITEM_TRIES
    assert job.result["failures"] == {"rejected": 1}

    # The key: sent to the server, and nowhere else.
    assert {seen.authorization for seen in server.requests} == {f"Bearer {KEY}"}
    pages = [
        "/models/",
        f"/models/runs/{evaluation.pk}/",
        f"/models/runs/{evaluation.pk}/results/",
        f"/jobs/{job.pk}/",
        f"/api/models/runs/{evaluation.pk}/",
        "/api/models/",
        f"/api/jobs/{job.pk}/",
    ]
    client = client_for(coordinator)
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert KEY not in body.decode(), url
    # The scan finds what is there (the endpoint's model id and key variable's name), and never the key.
    assert "annotator_modelendpoint" in tables_holding("tiny-vlm") and tables_holding(KEY_ENV)
    assert tables_holding(KEY) == []
    logs = "".join(path.read_text() for path in settings.MEDIA_ROOT.parent.glob("worker-*.log"))
    assert "evaluate_model_task" in logs and KEY not in logs
    assert KEY not in caplog.text

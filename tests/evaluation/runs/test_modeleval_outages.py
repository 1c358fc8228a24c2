"""Model runs when the endpoint fails (issue 25), against the loopback model server (tests/model_server.py): a failed
request is never an answer; a run pauses while its endpoint is down and resumes when it is back, asking its failed
items again; a run of failures ends not succeeded with the reason; a whole-request deadline a trickling server
cannot stretch; a cancel that cuts the worker's request off; any ended run can be retried; test connection."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from annotator.jobs.services import UnitRef, job_cancel, job_retry
from annotator.llm.endpoints import endpoint_create
from annotator.models import Job, JobTask, ModelEndpoint
from evaluation.runs.results_files import results_file
from evaluation.runs.services import evaluation_run, evaluation_start
from subtlebench.errors import Invalid
from tests.cut_proxy import CutProxy
from tests.model_server import ModelServer
from tests.modeleval_fixtures import *  # noqa: F403 (fixtures: plan_release, server)
from tests.modeleval_fixtures import make_plan_release, policy_for


@pytest.fixture
def fast(settings):
    settings.MODEL_EVAL_BACKOFF_SECONDS = 0.01
    settings.MODEL_EVAL_BACKOFF_MAX_SECONDS = 0.05
    settings.MODEL_EVAL_RETRIES = 1
    settings.MODEL_EVAL_PAUSE_AFTER_FAILURES = 3


def endpoint_for(server, coordinator, **fields):
    values = {"name": "tiny", "base_url": server.base_url, "model_id": "tiny-vlm", "concurrency": 2, "timeout_s": 5}
    return endpoint_create(user=coordinator, **{**values, **fields})


def start(endpoint, coordinator, release):
    return evaluation_start(endpoint=endpoint, user=coordinator, release=release)


def true_accuracy(records) -> float:
    return sum(record["_right"] for record in records) / len(records)


def wait_for(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_server_killed_mid_run_pauses_it_and_the_run_asks_the_failed_items_again_when_it_is_back(
    db, coordinator, server, plan_release, fast
):
    release, records = plan_release
    killed = threading.Event()

    def kill_after_five(question, options):
        if len(server.requests) >= 5 and not killed.is_set():
            killed.set()
            # Killed while answering: nothing listens any more and open connections are cut (this one too).
            stopping = threading.Thread(target=server.stop)
            stopping.start()
            stopping.join()
        return policy_for(records)(question, options)

    server.policy = kill_after_five
    evaluation = evaluation_run(evaluation_id=start(endpoint_for(server, coordinator), coordinator, release).pk)
    job = evaluation.job
    job.refresh_from_db()
    # What the run saw, said when it did not pause: the server's count tells whether answers came after the kill.
    outcome = (
        f"{evaluation.state}, {evaluation.answered} answered, {evaluation.failed} failed: "
        f"{evaluation.pause_reason or job.errors}; the server got {len(server.requests)} chat requests"
    )
    assert killed.is_set() and evaluation.state == "paused" and job.status == Job.Status.RUNNING, outcome
    assert "requests in a row failed" in evaluation.pause_reason and evaluation.failed >= 3
    assert evaluation.answered < len(records)
    # While paused, the accuracy counts only the answered items.
    assert results_file(evaluation)["accuracy"] == evaluation.correct / evaluation.answered
    failed_before = set(evaluation.results.filter(is_correct__isnull=True).values_list("question_id", flat=True))
    answered_before = set(evaluation.results.filter(is_correct__isnull=False).values_list("question_id", flat=True))

    server.policy = policy_for(records)
    server.requests.clear()
    server.restart()
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and evaluation.state == "succeeded", job.errors
    assert evaluation.answered == len(records) and evaluation.failed == 0
    assert evaluation.accuracy == true_accuracy(records)
    # Exactly the items without an answer were asked after the restart, each once: the failed ones among them.
    by_id = {f"{r['category']}_yt8m_{r['source_id']}": r["question"] for r in records}
    unanswered = {question for question_id, question in by_id.items() if question_id not in answered_before}
    asked = [seen.question for seen in server.requests]
    assert sorted(asked) == sorted(unanswered)
    assert {by_id[question_id] for question_id in failed_before} <= set(asked)


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("500", "Model tiny is down: the endpoint answered HTTP 500; it has been down"),
        ("html", "Most requests failed: 13 of 13 items have no answer after up to 3 asks each: 13 malformed"),
    ],
)
def test_a_run_of_failures_ends_not_succeeded_with_what_failed(
    db, coordinator, server, plan_release, fast, settings, mode, reason
):
    release, _ = plan_release
    settings.MODEL_EVAL_PAUSE_MAX_SECONDS = 0  # down: fail at once rather than pause
    server.mode = mode
    evaluation = evaluation_run(evaluation_id=start(endpoint_for(server, coordinator), coordinator, release).pk)
    job = evaluation.job
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and evaluation.state == "failed"
    assert reason in job.errors[0]
    assert evaluation.answered == 0 and job.result["accuracy"] is None
    if mode == "html":
        assert "not a chat completion answer (the body is not JSON)" in job.errors[0]


def test_every_request_500_pauses_first_and_shows_why_and_when(db, coordinator, server, plan_release, fast, client_for):
    release, _ = plan_release
    server.mode = "500"
    evaluation = evaluation_run(evaluation_id=start(endpoint_for(server, coordinator), coordinator, release).pk)
    assert evaluation.state == "paused" and "HTTP 500" in evaluation.pause_reason
    page = client_for(coordinator).get(f"/models/runs/{evaluation.pk}/").content.decode()
    assert 'id="run-paused"' in page and "HTTP 500" in page and "Next try at" in page
    api = client_for(coordinator).get(f"/api/models/runs/{evaluation.pk}/").json()
    assert api["state"] == "paused" and api["paused_until"] and "HTTP 500" in api["pause_reason"]


def test_a_storage_outage_pauses_a_run_with_the_reason_and_it_resumes_when_the_storage_is_back(
    db, coordinator, s3_storage, s3_server, fast, settings, client_for
):
    settings.S3_MAX_ATTEMPTS = 1  # boto3's own retries would ride out nothing here: the line is cut until restored
    proxy = CutProxy(int(s3_server.rsplit(":", 1)[1]))
    settings.S3_ENDPOINT_URL = proxy.url  # the media storage's client is made on its first use: through the proxy
    release, records = make_plan_release(plan={"temporal": (2, 1), "attribute": (2, 2)})
    server = ModelServer(policy=policy_for(records)).start()
    try:
        proxy.cut_now()
        evaluation = evaluation_run(evaluation_id=start(endpoint_for(server, coordinator), coordinator, release).pk)
        job = Job.objects.get(pk=evaluation.job_id)
        assert (evaluation.state, job.status, job.state) == ("paused", "running", "paused"), evaluation.pause_reason
        assert "The images cannot be read: the S3 storage does not answer" in evaluation.pause_reason
        assert evaluation.failed == 0 and not evaluation.results.exists()  # no item is counted failed for it
        assert "S3 storage does not answer" in job.pause_reason  # the job's page says it too
        page = client_for(coordinator).get(f"/jobs/{job.pk}/").content.decode()
        assert "S3 storage does not answer" in page

        proxy.restore()
        evaluation = evaluation_run(evaluation_id=evaluation.pk)  # its countdown ran out: the unit runs again
    finally:
        server.stop()
        proxy.close()
    assert evaluation.state == "succeeded" and evaluation.answered == len(records)
    assert evaluation.accuracy == true_accuracy(records)


def test_a_trickling_server_cannot_hold_a_request_past_its_deadline(db, coordinator, tmp_path, fast, settings):
    settings.MODEL_EVAL_ITEM_TRIES = 1
    release, records = make_plan_release(plan={"temporal": (2, 1)})
    server = ModelServer(policy=policy_for(records)).start()
    server.mode, server.trickle_seconds = "trickle", 1.0  # a ~300-byte answer: 5 minutes a request
    try:
        endpoint = endpoint_for(server, coordinator, timeout_s=2)
        evaluation = evaluation_run(evaluation_id=start(endpoint, coordinator, release).pk)
    finally:
        server.stop()
    job = evaluation.job
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and "Most requests failed: 2 of 2 items" in job.errors[0]
    rows = list(evaluation.results.order_by("pk"))
    assert [row.failure for row in rows] == ["timeout", "timeout"]
    assert all("within 2 s (the deadline covers connecting" in row.failure_message for row in rows)
    # Each request ended near its 2 s deadline, far from the 300 s the server would have taken.
    assert all(row.latency_ms < 3 * 2000 for row in rows), [row.latency_ms for row in rows]


def test_cancelling_a_run_cuts_off_the_request_in_flight(transactional_db, coordinator, plan_release, settings):
    release, records = plan_release
    server = ModelServer(policy=policy_for(records)).start()
    server.mode, server.trickle_seconds = "trickle", 1.0
    endpoint = endpoint_for(server, coordinator, timeout_s=600, concurrency=1)
    evaluation = start(endpoint, coordinator, release)
    outcome = {}

    def worker():
        try:
            outcome["evaluation"] = evaluation_run(evaluation_id=evaluation.pk)
        finally:
            connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        wait_for(lambda: len(server.requests) >= 1, 30, "the first request")
        job_cancel(job=Job.objects.get(pk=evaluation.job_id), user=coordinator)
        # The worker returns well inside its 600 s deadline: the cancel cut its request off.
        thread.join(timeout=60)
        assert not thread.is_alive()
    finally:
        server.stop()
        thread.join()
    job = Job.objects.get(pk=evaluation.job_id)
    assert job.status == Job.Status.CANCELLED
    assert job.tasks.get().status == JobTask.Status.CANCELLED
    assert not evaluation.results.exists()  # a cut-off request is no result


@pytest.mark.parametrize("ended", [Job.Status.SUCCEEDED, Job.Status.FAILED])
def test_retrying_an_ended_run_asks_only_its_failed_items_again(
    db, coordinator, server, plan_release, fast, settings, ended
):
    release, records = plan_release
    settings.MODEL_EVAL_ITEM_TRIES = 1
    bad = [records[1]["question"], records[6]["question"]]
    server.faults = {question: "garbage" for question in bad}
    evaluation = evaluation_run(evaluation_id=start(endpoint_for(server, coordinator), coordinator, release).pk)
    first = evaluation.job
    first.refresh_from_db()
    assert evaluation.state == "incomplete" and evaluation.failed == 2
    # A run that "succeeded" with failed items (before issue 25) can be retried too.
    Job.objects.filter(pk=first.pk).update(status=ended)
    server.faults, server.requests[:] = {}, []
    again = job_retry(job=Job.objects.get(pk=first.pk), user=coordinator)
    unit = again.tasks.get()
    evaluation = evaluation_run(unit=UnitRef(unit.pk), **unit.kwargs)
    again.refresh_from_db()
    assert evaluation.job_id == again.pk and again.status == Job.Status.SUCCEEDED, again.errors
    assert sorted(seen.question for seen in server.requests) == sorted(bad)
    assert evaluation.answered == len(records) and evaluation.accuracy == true_accuracy(records)


def test_the_api_and_the_results_file_count_answered_failed_and_not_asked(
    db, coordinator, server, plan_release, fast, settings, client_for
):
    release, records = plan_release
    settings.MODEL_EVAL_ITEM_TRIES = 1
    server.faults = {records[0]["question"]: "garbage", records[5]["question"]: "500"}
    evaluation = evaluation_run(evaluation_id=start(endpoint_for(server, coordinator), coordinator, release).pk)
    answered = len(records) - 2
    client = client_for(coordinator)
    api = client.get(f"/api/models/runs/{evaluation.pk}/").json()
    assert (api["answered"], api["failed"], api["not_asked"]) == (answered, 2, 0)
    assert api["state"] == "incomplete" and api["accuracy"] == evaluation.correct / answered
    assert api["summary"]["accuracy"] == api["accuracy"]
    data = client.get(f"/api/models/runs/{evaluation.pk}/results/").json()
    assert (data["answered_count"], data["failed_count"], data["not_asked_count"]) == (answered, 2, 0)
    assert data["accuracy"] == data["correct_count"] / answered
    assert data["correct_count"] == sum(e["is_correct"] for e in data["questions"] if "error" not in e)
    page = client.get(f"/models/runs/{evaluation.pk}/").content.decode()
    assert f"{answered} of {len(records)}, {evaluation.correct} correct" in page and "of the answered items" in page


def test_test_connection_checks_the_endpoint_before_registering_it(db, coordinator, server, client_for):
    endpoint = endpoint_for(server, coordinator, test_connection=True)
    assert endpoint.pk and [seen.body["max_tokens"] for seen in server.requests] == [1]
    with pytest.raises(Invalid, match="model nope is not served by wrong; it serves: tiny-vlm"):
        endpoint_for(server, coordinator, name="wrong", model_id="nope", test_connection=True)
    server.mode = "500"
    with pytest.raises(Invalid, match="Test connection failed: the endpoint answered HTTP 500"):
        endpoint_for(server, coordinator, name="broken", test_connection=True)
    server.mode = ""
    response = client_for(coordinator).post(
        "/api/models/create/",
        {"name": "by-api", "base_url": server.base_url, "model_id": "nope"},
        content_type="application/json",
    )
    assert response.status_code == 400 and "is not served by by-api" in response.content.decode()
    # The page's box, checked by default on the form.
    page = "/models/endpoints/new/"
    assert 'name="test_connection"' in client_for(coordinator).get(page).content.decode()
    fields = {"name": "by-page", "base_url": server.base_url, "concurrency": 1, "timeout_s": 5, "test_connection": "on"}
    response = client_for(coordinator).post(page, {**fields, "model_id": "nope"}, follow=True)
    assert response.redirect_chain == [(page, 302)]
    assert "model nope is not served by by-page; it serves: tiny-vlm" in response.content.decode()
    response = client_for(coordinator).post(page, {**fields, "model_id": "tiny-vlm"})
    assert response.status_code == 302 and ModelEndpoint.objects.filter(name="by-page").exists()


def test_a_database_blip_while_the_server_is_down_says_what_was_stored_never_that_nothing_was_sent(
    db, coordinator, server, plan_release, fast, monkeypatch
):
    from django.db import OperationalError

    from evaluation.runs import services

    release, records = plan_release
    server.latency = 0.05
    evaluation = start(endpoint_for(server, coordinator, concurrency=1), coordinator, release)
    unit = UnitRef(JobTask.objects.get(job_id=evaluation.job_id).pk, celery_id="celery-1")
    store, calls = services._store, []

    def store_then_blip(evaluation, results):
        calls.append(len(results))
        if len(calls) == 2:
            server.stop()  # the model server goes down, then the database drops the connection
            raise OperationalError("server closed the connection unexpectedly")
        store(evaluation, results)

    monkeypatch.setattr(services, "_store", store_then_blip)
    with pytest.raises(OperationalError):
        evaluation_run(evaluation_id=evaluation.pk, unit=unit)
    monkeypatch.setattr(services, "_store", store)
    # The task's retry (same Celery id) takes its unit back and finds the endpoint down.
    evaluation = evaluation_run(evaluation_id=evaluation.pk, unit=unit)
    stored = evaluation.results.count()
    assert stored == calls[0] >= 1 and len(server.requests) > stored  # sent more than it could store
    assert evaluation.state == "paused" and "Nothing was sent" not in evaluation.pause_reason
    assert f"Stored so far: {stored} of {len(records)} items ({stored} answered, 0 failed)" in evaluation.pause_reason
    server.restart()

"""Model evaluation runs against a local OpenAI-compatible server on loopback (tests/model_server.py): accuracy per
category as the server's rule predicts, failures per item with their reason (asked again, then "incomplete"), a
paused run on a dead endpoint, resume without sending an answered item twice, the official results file and its
import, endpoints' validation. Outages, deadlines and cancels: test_modeleval_outages.py."""

from __future__ import annotations

import json

import pytest

from annotator.llm.endpoints import endpoint_create
from annotator.models import Job, JobTask, ModelEndpoint
from evaluation.models import ModelEvaluation, ModelItemResult
from evaluation.runs.results_files import results_file
from evaluation.runs.services import evaluation_run, evaluation_start
from evaluation.runs.summaries import evaluation_summary
from subtlebench.errors import Conflict, Forbidden, Invalid
from tests.factories import make_pair
from tests.model_server import ModelServer
from tests.modeleval_fixtures import *  # noqa: F403 (fixtures: plan_release, server)
from tests.modeleval_fixtures import bind_key, policy_for, predicted_accuracy

KEY_ENV = "SUBTLEBENCH_MODEL_KEY_TEST"
KEY = "sk-test-8c1f0e4d2b7a9c3e5f6a1b2c"


@pytest.fixture
def fast_retries(settings):
    settings.MODEL_EVAL_BACKOFF_SECONDS = 0.01
    settings.MODEL_EVAL_BACKOFF_MAX_SECONDS = 0.05
    settings.MODEL_EVAL_RETRIES = 2


def endpoint_for(server, coordinator, **fields) -> ModelEndpoint:
    values = {"name": "tiny", "base_url": server.base_url, "model_id": "tiny-vlm", "concurrency": 4, "timeout_s": 5}
    return endpoint_create(user=coordinator, **{**values, **fields})


def run_release(endpoint, coordinator, release, **fields) -> ModelEvaluation:
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release, **fields)
    return evaluation_run(evaluation_id=evaluation.pk)


def test_it_scores_each_category_as_the_server_rule_predicts(
    db, coordinator, server, plan_release, monkeypatch, settings
):
    release, records = plan_release
    monkeypatch.setenv(KEY_ENV, KEY)
    bind_key(settings, KEY_ENV, server.base_url)
    endpoint = endpoint_for(server, coordinator, api_key_env=KEY_ENV)
    evaluation = run_release(endpoint, coordinator, release, seed=3)
    job = evaluation.job
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.errors
    summary = job.result
    predicted = predicted_accuracy(records)
    assert {c: v["accuracy"] for c, v in summary["per_category"].items()} == predicted
    assert summary["total"] == len(records) == job.total == job.done
    assert summary["failures"] == {}
    assert evaluation.prompt_tokens > 0 and evaluation.completion_tokens == 12 * len(records)
    # Each item was sent once, with the key from the variable, and the options shown as the seed shuffled them.
    assert len(server.requests) == len(records)
    assert {seen.authorization for seen in server.requests} == {f"Bearer {KEY}"}
    stored = {row.question_id: row for row in evaluation.results.all()}
    for seen in server.requests:
        row = next(r for r in stored.values() if r.options == seen.options)
        assert row.options[ord(row.correct_letter) - 65].startswith("the true")
    assert len({row.correct_letter for row in stored.values()}) > 1


def test_each_bad_answer_fails_its_item_with_the_reason_and_the_run_goes_on(
    db, coordinator, server, plan_release, fast_retries
):
    release, records = plan_release
    questions = [r["question"] for r in records]
    server.hang_seconds = 3
    server.faults = {
        questions[0]: "timeout",
        questions[1]: "429",
        questions[2]: "500",
        questions[3]: "malformed",
        questions[4]: "garbage",
        questions[5]: "429-once",  # retried, then answered
        questions[6]: "500-once",
    }
    endpoint = endpoint_for(server, coordinator, timeout_s=1)
    evaluation = run_release(endpoint, coordinator, release)
    job = evaluation.job
    job.refresh_from_db()
    # Four items never got an answer: the run is not a success, and says which and why. A reply without a letter
    # is an answer, unparsable and wrong (as the official evaluator scores it), asked once.
    assert job.status == Job.Status.FAILED and evaluation.state == "incomplete", job.errors
    assert job.errors[0].startswith("Incomplete: 4 of 13 items have no answer after up to 3 asks each")
    assert job.result["failures"] == {"malformed": 1, "rate_limited": 1, "server_error": 1, "timeout": 1}
    assert job.result["unparsable"] == evaluation.unparsable == 1
    rows = {row.question_id: row for row in evaluation.results.all()}
    by_question = {r["question"]: f"{r['category']}_yt8m_{r['source_id']}" for r in records}
    timeout = rows[by_question[questions[0]]]
    assert timeout.is_correct is None and "within 1 s" in timeout.failure_message
    limited = rows[by_question[questions[1]]]
    assert (
        limited.attempts == 3
        and "HTTP 429" in limited.failure_message
        and "after 3 attempts" in limited.failure_message
    )
    assert "HTTP 500" in rows[by_question[questions[2]]].failure_message
    unparsable = rows[by_question[questions[3]]]
    assert (unparsable.parse_outcome, unparsable.is_correct, unparsable.failure) == ("unparsable", False, "")
    assert unparsable.response_text == "I cannot tell which option is right." and server.sent(questions[3]) == 1
    assert "not a chat completion answer" in rows[by_question[questions[4]]].failure_message
    for recovered in (questions[5], questions[6]):
        row = rows[by_question[recovered]]
        assert row.failure == "" and row.attempts == 2 and row.is_correct is not None
    # Each failed item was asked MODEL_EVAL_ITEM_TRIES times, each ask retried MODEL_EVAL_RETRIES times.
    assert server.sent(questions[1]) == 3 * 3 and rows[by_question[questions[1]]].asks == 3
    assert evaluation.failed == 4 and evaluation.answered == len(records) - 4
    assert evaluation_summary(evaluation)["accuracy"] == evaluation.correct / evaluation.answered


def test_an_unknown_model_fails_the_run_before_anything_is_sent(db, coordinator, server, plan_release, fast_retries):
    release, records = plan_release
    server.served = ["tiny-vlm", "other-vlm"]
    endpoint = endpoint_for(server, coordinator, model_id="no-such-model")
    evaluation = run_release(endpoint, coordinator, release)
    job = evaluation.job
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and evaluation.state == "failed"
    assert job.errors[0].startswith("model no-such-model is not served by tiny; it serves: tiny-vlm, other-vlm")
    assert server.requests == [] and not evaluation.results.exists()


def test_a_run_whose_endpoint_is_down_pauses_then_fails_once_down_too_long(db, coordinator, plan_release, settings):
    release, _ = plan_release
    dead = ModelServer().start()
    url = dead.base_url
    dead.stop()  # nothing listens there now
    endpoint = endpoint_create(user=coordinator, name="down", base_url=url, model_id="m", timeout_s=30)
    evaluation = run_release(endpoint, coordinator, release)
    job = evaluation.job
    job.refresh_from_db()
    # Paused, not failed: the unit is queued again (for its countdown), the page says why and when.
    assert job.status == Job.Status.RUNNING and evaluation.state == "paused" and job.errors == []
    assert "Model down is down: could not reach the endpoint" in evaluation.pause_reason
    assert (
        "Stored so far: 0 of 13 items" in evaluation.pause_reason and "Nothing was sent" not in evaluation.pause_reason
    )
    assert evaluation.paused_until is not None
    assert job.tasks.get().status == JobTask.Status.QUEUED
    # Still down once MODEL_EVAL_PAUSE_MAX_SECONDS passed: the run fails with the reason.
    settings.MODEL_EVAL_PAUSE_MAX_SECONDS = 0
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and evaluation.state == "failed"
    assert len(job.errors) == 1 and "could not reach the endpoint; it has been down" in job.errors[0]
    assert not evaluation.results.exists()
    assert not job.tasks.filter(status=JobTask.Status.RUNNING).exists()


def test_a_missing_key_variable_fails_the_run_with_its_name(
    db, coordinator, server, plan_release, monkeypatch, settings
):
    release, _ = plan_release
    monkeypatch.delenv("SUBTLEBENCH_MODEL_KEY_UNSET", raising=False)
    bind_key(settings, "SUBTLEBENCH_MODEL_KEY_UNSET", server.base_url)
    endpoint = endpoint_for(server, coordinator, api_key_env="SUBTLEBENCH_MODEL_KEY_UNSET")
    evaluation = run_release(endpoint, coordinator, release)
    evaluation.job.refresh_from_db()
    assert evaluation.job.status == Job.Status.FAILED
    assert "SUBTLEBENCH_MODEL_KEY_UNSET" in evaluation.job.errors[0] and "not set" in evaluation.job.errors[0]
    assert not server.requests


def test_a_restarted_run_sends_only_the_items_without_a_result(db, coordinator, server, plan_release):
    release, records = plan_release
    endpoint = endpoint_for(server, coordinator)
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release)
    evaluation_run(evaluation_id=evaluation.pk)
    first = {row.question_id for row in evaluation.results.all()}
    # Keep five results, as if the worker died after storing them; the unit is claimable again (requeued).
    kept = sorted(first)[:5]
    evaluation.results.exclude(question_id__in=kept).delete()
    Job.objects.filter(pk=evaluation.job_id).update(status=Job.Status.RUNNING, finished=None)
    JobTask.objects.filter(job=evaluation.job).update(status=JobTask.Status.PENDING, token="")
    server.requests.clear()
    evaluation_run(evaluation_id=evaluation.pk)
    sent = [seen.question for seen in server.requests]
    assert len(sent) == len(records) - 5 == len(set(sent))
    kept_questions = {r["question"] for r in records if f"{r['category']}_yt8m_{r['source_id']}" in kept}
    assert not kept_questions & set(sent)
    assert evaluation.results.count() == len(records)
    # A second delivery of the finished unit does nothing.
    server.requests.clear()
    evaluation_run(evaluation_id=evaluation.pk)
    assert server.requests == []


def test_the_results_file_is_the_official_layout_and_the_release_import_reads_it(db, coordinator):
    from evaluation.runs.results_files import model_results_import
    from tests.modeleval_release_factories import make_release

    pairs = [make_pair(category="temporal") for _ in range(4)]
    release = make_release([(pair, "test", False) for pair in pairs])
    server = ModelServer().start()  # answers the first option shown
    try:
        endpoint = endpoint_for(server, coordinator)
        evaluation = evaluation_start(
            endpoint=endpoint, user=coordinator, source="release", release=release, split="test"
        )
        evaluation = evaluation_run(evaluation_id=evaluation.pk)
    finally:
        server.stop()
    data = results_file(evaluation)
    for key in ("model", "temperature", "total_questions_loaded", "total_questions_evaluated", "skipped_items"):
        assert key in data
    assert data["model"] == "tiny-vlm" and data["total_questions_evaluated"] == 4
    entry = data["questions"][0]
    for key in ("question_id", "question_text", "options", "negatives", "correct_answer", "correct_letter"):
        assert key in entry
    assert entry["predicted_answer"] == "A" and entry["predicted_answer_text"] == entry["options"][0]
    assert entry["question_text"] == "Which image was taken later?"
    assert data["accuracy"] == sum(e["is_correct"] for e in data["questions"]) / 4
    run = model_results_import(user=coordinator, release=release, name="tiny", content=json.dumps(data).encode())
    assert run.items == 4 == len(pairs) and run.parameters["unknown"] == 0
    assert sorted(run.results.values_list("is_correct", flat=True)) == sorted(
        e["is_correct"] for e in data["questions"]
    )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://host/v1", "http:// or https://"),
        ("http://user:pw@host/v1", "No user or password"),
        ("http://host/v1?x=1", "No query"),
        ("file:///etc/passwd", "http:// or https://"),
        ("http://host:99999/v1", "port"),
    ],
)
def test_it_refuses_a_base_url_it_should_not_fetch(db, coordinator, url, message):
    with pytest.raises(Invalid, match=message):
        endpoint_create(user=coordinator, name="x", base_url=url, model_id="m")


def test_endpoint_rules(db, coordinator, annotator, settings):
    endpoint_create(user=coordinator, name="one", base_url="http://gpu:8000/v1/", model_id="m")
    assert ModelEndpoint.objects.get().base_url == "http://gpu:8000/v1"
    with pytest.raises(Conflict, match="already registered"):
        endpoint_create(user=coordinator, name="one", base_url="http://gpu:8000/v1", model_id="m")
    with pytest.raises(Invalid, match="MODEL_API_KEY_ENV_PREFIX"):
        endpoint_create(user=coordinator, name="two", base_url="http://gpu/v1", model_id="m", api_key_env="sk-abc d")
    with pytest.raises(Forbidden):
        endpoint_create(user=annotator, name="three", base_url="http://gpu/v1", model_id="m")
    settings.MODEL_ENDPOINT_HOSTS = ["gpu"]
    with pytest.raises(Invalid, match="MODEL_ENDPOINT_HOSTS"):
        endpoint_create(user=coordinator, name="four", base_url="http://169.254.169.254/v1", model_id="m")
    assert ModelItemResult.objects.count() == 0


def test_retrying_a_failed_run_continues_it_under_the_new_job(db, coordinator, plan_release, fast_retries):
    from annotator.jobs.services import job_retry

    release, records = plan_release
    server = ModelServer(policy=policy_for(records)).start()
    endpoint = endpoint_for(server, coordinator)
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release)
    evaluation_run(evaluation_id=evaluation.pk)
    kept = sorted(evaluation.results.values_list("question_id", flat=True))[:4]
    evaluation.results.exclude(question_id__in=kept).delete()
    first_job = evaluation.job
    Job.objects.filter(pk=first_job.pk).update(status=Job.Status.FAILED)
    server.requests.clear()
    again = job_retry(job=first_job, user=coordinator)
    unit = again.tasks.get()
    from annotator.jobs.services import UnitRef

    evaluation_run(unit=UnitRef(unit.pk), **unit.kwargs)
    evaluation.refresh_from_db()
    assert evaluation.job_id == again.pk
    again.refresh_from_db()
    assert again.status == Job.Status.SUCCEEDED and again.done == len(records)
    assert len(server.requests) == len(records) - 4
    server.stop()


def test_a_run_whose_requests_all_fail_to_connect_pauses_and_asks_them_again_when_back(
    db, coordinator, server, plan_release, fast_retries
):
    release, records = plan_release
    server.drop_chat = True  # up for GET /models, every chat request's connection dropped
    evaluation = run_release(endpoint_for(server, coordinator, concurrency=1), coordinator, release)
    job = evaluation.job
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING and evaluation.state == "paused"
    assert "8 requests in a row failed (the last: could not reach the endpoint" in evaluation.pause_reason
    stored = evaluation.results.count()
    assert 8 <= stored < len(records)  # stopped sending early, not one failure per item
    assert set(evaluation.results.values_list("failure", flat=True)) == {"unreachable"}
    server.drop_chat = False
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and evaluation.state == "succeeded", job.errors
    assert evaluation.answered == len(records) and evaluation.failed == 0 and evaluation.paused_until is None


def test_a_run_from_before_releases_keeps_its_answers_and_is_never_asked_again(
    db, coordinator, server, plan_release, client_for
):
    from annotator.jobs.services import job_retry

    release, records = plan_release
    evaluation = run_release(endpoint_for(server, coordinator), coordinator, release)
    # As evaluation migration 0015 leaves a run from before releases: an import that keeps its endpoint and answers.
    ModelEvaluation.objects.filter(pk=evaluation.pk).update(
        source="import", release=None, split="", parameters={"retired_source": "export"}
    )
    evaluation.refresh_from_db()
    assert evaluation.on == "before releases: an export's split"
    data = results_file(evaluation)
    assert len(data["questions"]) == len(records) and data["total_questions_evaluated"] == len(records)
    assert {entry["question_text"] for entry in data["questions"]} == {r["question"] for r in records}
    client = client_for(coordinator)
    page = client.get(f"/models/runs/{evaluation.pk}/").content.decode()
    assert '<span class="muted">before releases:</span> an export&#x27;s split' in page
    download = b"".join(client.get(f"/models/runs/{evaluation.pk}/results/").streaming_content)
    assert len(json.loads(download)["questions"]) == len(records)
    Job.objects.filter(pk=evaluation.job_id).update(status=Job.Status.FAILED)
    with pytest.raises(Conflict, match="an imported run now"):
        job_retry(job=evaluation.job, user=coordinator)
    # A message for it still in the broker ends its job with the reason, and nothing is sent.
    Job.objects.filter(pk=evaluation.job_id).update(status=Job.Status.RUNNING, finished=None, errors=[])
    JobTask.objects.filter(job=evaluation.job).update(status=JobTask.Status.PENDING, token="")
    server.requests.clear()
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    job = evaluation.job
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and server.requests == []
    assert job.errors == [
        f"Run {evaluation.pk} is an imported run (before releases: an export's split): its answers "
        "are kept, it has no items to ask. Start a run on a release's split instead."
    ]
    assert evaluation.results.count() == len(records) and evaluation.answered == len(records)

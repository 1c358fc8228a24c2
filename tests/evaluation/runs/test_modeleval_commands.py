"""`manage.py add_model` and `manage.py evaluate_model`: register, evaluate in the foreground (accuracy per category,
the results file) or as a job, and clear errors for bad arguments."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotator.models import Job, JobTask, ModelEndpoint
from evaluation.models import ModelEvaluation
from tests.model_server import ModelServer
from tests.modeleval_fixtures import make_plan_release, policy_for, predicted_accuracy


@pytest.fixture
def release(db):
    """(release v1, its records)."""
    return make_plan_release()


@pytest.fixture
def server(release):
    server = ModelServer(policy=policy_for(release[1])).start()
    yield server
    server.stop()


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_it_registers_a_model_and_evaluates_a_release_in_the_foreground(db, server, release, tmp_path):
    _, records = release
    said = run("add_model", "tiny", "--base-url", server.base_url, "--model-id", "tiny-vlm", "--concurrency", "3")
    assert "registered model tiny" in said and "(connection tested)" in said
    assert ModelEndpoint.objects.get().concurrency == 3
    assert [seen.body["max_tokens"] for seen in server.requests] == [1]  # test connection's one tiny request
    server.requests.clear()
    out = tmp_path / "mc_evaluation_results.json"
    said = run("evaluate_model", "tiny", "--release", "v1", "--out", str(out), "--seed", "2")
    for category, accuracy in predicted_accuracy(records).items():
        assert any(line.startswith(category) and f"{100 * accuracy:6.1f}%" in line for line in said.splitlines())
    data = json.loads(out.read_text())
    assert data["total_questions_evaluated"] == len(records) and data["random_seed"] == 2
    job = ModelEvaluation.objects.get().job
    assert job.status == Job.Status.SUCCEEDED and job.tasks.get().status == JobTask.Status.DONE


def test_async_queues_a_job_for_the_workers(db, server, release, django_capture_on_commit_callbacks):
    run("add_model", "tiny", "--base-url", server.base_url, "--model-id", "tiny-vlm")
    server.requests.clear()  # test connection's request
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        said = run("evaluate_model", "tiny", "--release", "v1", "--async")
    assert "queued run" in said and len(callbacks) == 1
    assert ModelEvaluation.objects.get().job.status == Job.Status.QUEUED
    assert server.requests == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["evaluate_model", "nope", "--release", "v1"], "No model named 'nope'"),
        (["evaluate_model", "tiny"], "the following arguments are required: --release"),
        (["evaluate_model", "tiny", "--release", "v999"], "no such release"),
        (["evaluate_model", "tiny", "--release", "v1", "--async", "--out", "x.json"], "--out needs the run"),
        (["add_model", "bad", "--base-url", "ftp://x/v1", "--model-id", "m"], "http:// or https://"),
        (["add_model", "tiny", "--base-url", "http://gpu/v1", "--model-id", "m"], "already registered"),
        (["add_model", "big", "--base-url", "http://gpu/v1", "--model-id", "m", "--concurrency", "0"], "concurrency"),
    ],
)
def test_bad_arguments_are_clear_errors(db, server, args, message):
    run("add_model", "tiny", "--base-url", server.base_url, "--model-id", "tiny-vlm")
    with pytest.raises(CommandError, match=message):
        run(*args)


def test_a_failed_run_is_a_command_error_with_its_reason(db, release, tmp_path):
    dead = ModelServer().start()
    url = dead.base_url
    dead.stop()
    with pytest.raises(CommandError, match="Test connection failed: could not reach the endpoint"):
        run("add_model", "down", "--base-url", url, "--model-id", "m")
    run("add_model", "down", "--base-url", url, "--model-id", "m", "--no-test")
    with pytest.raises(CommandError, match="paused: Model down is down: could not reach the endpoint"):
        run("evaluate_model", "down", "--release", "v1")


def test_evaluate_model_takes_the_strategy_settings_and_an_extraction_model(db, server, release, tmp_path):
    _, records = release
    server.faults = {records[0]["question"]: "malformed"}
    run("add_model", "tiny", "--base-url", server.base_url, "--model-id", "tiny-vlm")
    run("add_model", "reader", "--base-url", server.base_url, "--model-id", "tiny-vlm")
    prompt = tmp_path / "prompt.json"
    prompt.write_text(json.dumps({"system": "Look twice."}))
    server.requests.clear()
    said = run(
        "evaluate_model", "tiny", "--release", "v1", "--strategy", "overlapped", "--temperature", "0.3",
        "--max-tokens", "64", "--prompt-file", str(prompt), "--extraction", "reader",
    )  # fmt: skip
    assert "unparsable replies: 1" in said and "accuracy with LLM extraction" in said
    evaluation = ModelEvaluation.objects.get()
    assert evaluation.strategy == "overlapped" and evaluation.extraction_endpoint.name == "reader"
    asked = [seen for seen in server.requests if seen.images]
    assert len(asked) == len(records) and all(len(seen.images) == 3 for seen in asked)
    assert {(seen.system, seen.body["temperature"], seen.body["max_tokens"]) for seen in asked} == {
        ("Look twice.", 0.3, 64)
    }
    with pytest.raises(CommandError, match="--extraction nobody: no model of that name"):
        run("evaluate_model", "tiny", "--release", "v1", "--extraction", "nobody")

"""Request profiles against a loopback server with the rules OpenAI's reasoning models enforce (tests/model_server.py,
mode "reasoning": HTTP 400 for `max_tokens` and for a temperature other than 1): registering with the reasoning
preset, a run, a judge and an extractor of that kind; the wrong preset pauses a run on the endpoint's own reason.
Replies larger than MODEL_REPLY_MAX_BYTES, an endpoint that echoes its key, and reasoning kept apart from the answer."""

from __future__ import annotations

import logging

import pytest

from annotator.llm.client import REDACTED, ChatClient, endpoint_reason, redact
from annotator.llm.endpoints import EndpointUnusable, endpoint_create, endpoint_profile_update, endpoint_test
from annotator.llm.profiles import RequestProfile
from annotator.models import Job, ModelEndpoint
from evaluation.models import ModelEvaluation, ModelItemResult
from evaluation.results.release_report import release_report_of
from evaluation.runs.naming import run_names
from evaluation.runs.services import evaluation_run, evaluation_start
from subtlebench.errors import Invalid
from tests.evaluation.runs.test_description_judge import (
    TABLE,
    world,  # noqa: F401 (a fixture: two loopback servers)
)
from tests.model_server import ModelServer
from tests.modeleval_fixtures import *  # noqa: F403 (fixtures: plan_release, server)
from tests.modeleval_fixtures import bind_key, policy_for, predicted_accuracy

KEY_ENV = "SUBTLEBENCH_MODEL_KEY_PROFILES"
KEY = "sk-echo-3f9a1c7e5b2d4a6c8e0f1a2b"


def register(server, coordinator, name="thinker", **fields) -> ModelEndpoint:
    values = {"name": name, "base_url": server.base_url, "model_id": "tiny-vlm", "concurrency": 2, "timeout_s": 5}
    return endpoint_create(user=coordinator, **{**values, **fields})


def run_release(endpoint, coordinator, release, **fields):
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release, **fields)
    return evaluation_run(evaluation_id=evaluation.pk)


# --- Writing requests -------------------------------------------------------------------------------------------


def test_each_preset_writes_the_token_limit_temperature_and_effort_its_server_takes():
    settings_ = {"max_tokens": 64, "temperature": 0, "reasoning_effort": "high"}
    assert RequestProfile().body(settings_) == {"max_tokens": 64, "temperature": 0}
    reasoning = RequestProfile(token_field="max_completion_tokens", temperature=False, effort=True)
    assert reasoning.body(settings_) == {"max_completion_tokens": 64, "reasoning_effort": "high"}
    assert RequestProfile(token_field="").body(settings_) == {"temperature": 0}
    seeded = RequestProfile(extra_body={"seed": 7, "top_p": 0.9}, image_detail="low")
    assert seeded.body({"temperature": 1}) == {"seed": 7, "top_p": 0.9, "temperature": 1}
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:x"}}]}
    assert seeded.messages([image])[0]["content"][0]["image_url"] == {"url": "data:x", "detail": "low"}


def test_a_run_setting_its_endpoint_does_not_take_is_refused_naming_the_field(db, coordinator, server, plan_release):
    release, _ = plan_release
    server.mode = "reasoning"
    thinker = register(server, coordinator, request_preset="openai_reasoning")
    with pytest.raises(Invalid) as refused:
        evaluation_start(endpoint=thinker, user=coordinator, release=release, temperature=0)
    assert "temperature" in refused.value.errors and "takes no temperature" in refused.value.errors["temperature"][0]
    plain = register(server, coordinator, name="plain")
    with pytest.raises(Invalid) as refused:
        evaluation_start(endpoint=plain, user=coordinator, release=release, effort="high")
    assert "effort" in refused.value.errors
    with pytest.raises(Invalid) as refused:
        endpoint_profile_update(user=coordinator, endpoint=plain, extra_body={"logit_bias": {}})
    assert "extra_body" in refused.value.errors and "allowed" in refused.value.errors["extra_body"][0]


# --- A reasoning model ------------------------------------------------------------------------------------------


def test_a_reasoning_model_registers_answers_every_item_and_keeps_its_reasoning_apart(
    db, coordinator, server, plan_release
):
    release, records = plan_release
    server.mode = "reasoning"
    server.reasoning = "Thinking: ### Answer\nE"  # a letter in the reasoning is never read as the answer
    thinker = register(
        server, coordinator, request_preset="openai_reasoning", test_connection=True, price_prompt=2, price_completion=8
    )
    assert thinker.token_field == "max_completion_tokens" and not thinker.sends_temperature
    evaluation = run_release(thinker, coordinator, release, effort="low")
    job = evaluation.job
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.errors
    assert {c: v["accuracy"] for c, v in job.result["per_category"].items()} == predicted_accuracy(records)
    bodies = [seen.body for seen in server.requests]
    assert all("max_tokens" not in body and "temperature" not in body for body in bodies)
    assert {body["max_completion_tokens"] for body in bodies} == {1, 1024}  # the test's 1, the run's default
    assert {body.get("reasoning_effort") for body in bodies[1:]} == {"low"}
    rows = list(evaluation.results.all())
    assert {row.reasoning_tokens for row in rows} == {server.reasoning_tokens}
    assert {row.reasoning_text for row in rows} == {server.reasoning}
    assert all(row.parse_outcome == "parsed" for row in rows)
    assert evaluation.reasoning_tokens == server.reasoning_tokens * len(records)
    expected = (evaluation.prompt_tokens * 2 + evaluation.completion_tokens * 8) / 1_000_000
    assert (
        job.result["cost"] == pytest.approx(expected) and job.result["reasoning_tokens"] == evaluation.reasoning_tokens
    )


def test_a_reasoning_judge_and_extractor_work_with_their_own_settings(db, coordinator, server, plan_release):
    release, records = plan_release
    wrong = next(r for r in records if not r["_right"])
    server.faults = {wrong["question"]: "malformed"}
    extractor = ModelServer(policy=policy_for(records)).start()
    extractor.mode = "reasoning"
    try:
        reader = register(extractor, coordinator, name="reader", request_preset="openai_reasoning")
        evaluation = run_release(
            register(server, coordinator, name="model"),
            coordinator,
            release,
            extraction_endpoint=reader,
            extraction_effort="medium",
        )
    finally:
        extractor.stop()
    assert evaluation.job.status == Job.Status.SUCCEEDED
    assert evaluation.extracted_correct == 0 and evaluation.unparsable == 1
    row = evaluation.results.get(parse_outcome="unparsable")
    assert row.extraction == "letter"
    (seen,) = extractor.requests
    assert seen.body.get("reasoning_effort") == "medium"
    assert "temperature" not in seen.body and "max_tokens" not in seen.body and "max_completion_tokens" not in seen.body
    assert evaluation.parameters["extraction_request"] == {"reasoning_effort": "medium"}


def test_a_description_run_with_a_reasoning_judge_sends_what_it_takes(db, coordinator, world):  # noqa: F811
    world["judge"].mode = "reasoning"
    model = register(world["model"], coordinator, name="describer")
    judge = endpoint_create(
        user=coordinator,
        name="judge",
        base_url=world["judge"].base_url,
        model_id="tiny-judge",
        timeout_s=5,
        request_preset="openai_reasoning",
    )
    evaluation = evaluation_start(
        endpoint=model,
        user=coordinator,
        source="release",
        release=world["release"],
        task="description",
        judge=judge,
        judge_max_tokens=2000,
        judge_effort="high",
    )
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    data = world
    verdicts = [row.is_correct for row in evaluation.results.order_by("pk") if row.failure == ""]
    assert len(verdicts) == sum(1 for *_, verdict in TABLE.values() if verdict is not None)
    bodies = [seen.body for seen in data["judge"].requests]
    assert bodies and all(
        body["max_completion_tokens"] == 2000 and body["reasoning_effort"] == "high" and "temperature" not in body
        for body in bodies
    )
    assert evaluation.parameters["judge_request"] == {"max_tokens": 2000, "reasoning_effort": "high"}


def test_with_the_wrong_preset_the_run_pauses_after_the_first_refusals_and_names_the_reason(
    db, coordinator, server, plan_release, settings, client_for
):
    release, records = plan_release
    server.mode = "reasoning"
    settings.MODEL_EVAL_PAUSE_AFTER_REFUSALS = 3
    with pytest.raises(Invalid) as refused:  # the test shows the endpoint's reason
        register(server, coordinator, test_connection=True)
    assert "HTTP 400" in str(refused.value.errors["base_url"]) and "max_completion_tokens" in str(
        refused.value.errors["base_url"]
    )
    plain = register(server, coordinator)
    evaluation = evaluation_start(endpoint=plain, user=coordinator, release=release)
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    assert evaluation.paused_until is not None
    assert evaluation.pause_reason.startswith(
        "paused: the endpoint refuses the request (HTTP 400): Unsupported parameter: 'max_tokens'"
    )
    # Stopped early: at most the refusals and the requests already in flight were sent, each item once.
    asked = [seen.question for seen in server.requests]
    assert len(asked) <= settings.MODEL_EVAL_PAUSE_AFTER_REFUSALS + 2 * plain.concurrency < len(records)
    assert len(set(asked)) == len(asked)
    summary_reasons = client_for(coordinator).get(f"/api/models/runs/{evaluation.pk}/").json()["summary"]["reasons"]
    assert len(summary_reasons) == 1 and summary_reasons[0]["count"] == evaluation.failed
    assert summary_reasons[0]["failure"] == ModelItemResult.Failure.REJECTED
    page = client_for(coordinator).get(f"/models/runs/{evaluation.pk}/").content.decode()
    assert "Unsupported parameter: &#x27;max_tokens&#x27; is not supported" in page


# --- Bounded replies, redaction ---------------------------------------------------------------------------------


def test_a_reply_larger_than_the_limit_fails_with_a_clear_reason(db, coordinator, server, settings):
    settings.MODEL_REPLY_MAX_BYTES = 64 * 1024
    server.huge_bytes = 10 * settings.MODEL_REPLY_MAX_BYTES
    endpoint = register(server, coordinator)
    server.mode = "huge"
    with pytest.raises(EndpointUnusable) as failed:
        endpoint_test(endpoint)
    assert "larger than MODEL_REPLY_MAX_BYTES (65536 bytes)" in str(failed.value)


def test_redact_removes_keys_their_json_escapes_and_configured_secrets(settings, monkeypatch):
    monkeypatch.setenv(settings.MODEL_API_KEY_ENV_PREFIX + "OTHER", "sk-other-secret-value")
    text = f"key sk-a/b-1234 escaped {'sk-a/b-1234'.replace('/', chr(92) + '/')} other sk-other-secret-value"
    text += f" app {settings.SECRET_KEY}"
    shown = redact(text, "sk-a/b-1234")
    assert "sk-a" not in shown and "sk-other" not in shown and settings.SECRET_KEY not in shown
    assert shown.count(REDACTED) == 4
    assert redact("abc", "ab") == "abc"  # a secret that short would redact ordinary words
    body = '{"error": {"message": "bad\\nkey sk-a/b-1234 \\u0007 here"}}'
    assert endpoint_reason(body, "sk-a/b-1234") == f"bad key {REDACTED} here"
    assert endpoint_reason("<html>internal page</html>") == ""


def test_a_client_redacts_its_key_and_the_configured_secrets_as_redact_does(settings, monkeypatch):
    """A client works its redaction out once (not per reply): the same text comes out as `redact`'s."""
    monkeypatch.setenv(settings.MODEL_API_KEY_ENV_PREFIX + "OTHER", "sk-other-secret-value")
    client = ChatClient(base_url="http://127.0.0.1:9/v1", model_id="tiny-vlm", api_key="sk-a/b-1234")
    text = f"key sk-a/b-1234 escaped {'sk-a/b-1234'.replace('/', chr(92) + '/')} other sk-other-secret-value"
    text += f" app {settings.SECRET_KEY}"
    shown = client.redact(text)
    assert shown == redact(text, "sk-a/b-1234")
    assert "sk-a" not in shown and "sk-other" not in shown and settings.SECRET_KEY not in shown
    assert shown.count(REDACTED) == 4
    assert client.redact("") == ""


def test_an_endpoint_that_echoes_its_key_shows_it_nowhere(
    db, coordinator, server, plan_release, monkeypatch, client_for, caplog, settings
):
    caplog.set_level(logging.DEBUG)
    release, records = plan_release
    monkeypatch.setenv(KEY_ENV, KEY)
    bind_key(settings, KEY_ENV, server.base_url)
    server.mode = "echo-key"
    server.faults = {records[0]["question"]: "echo-key"}  # and a refusal that quotes it
    endpoint = register(server, coordinator, api_key_env=KEY_ENV, test_connection=True)
    evaluation = run_release(endpoint, coordinator, release)
    assert {seen.authorization for seen in server.requests} == {f"Bearer {KEY}"}
    assert evaluation.answered == len(records) - 1
    stored = [
        value
        for row in ModelItemResult.objects.filter(evaluation=evaluation)
        for value in (row.response_text, row.reasoning_text, row.failure_message)
    ]
    assert any(REDACTED in value for value in stored) and not any(KEY in value for value in stored)
    client = client_for(coordinator)
    for url in (f"/models/runs/{evaluation.pk}/", f"/api/models/runs/{evaluation.pk}/", "/models/", "/api/models/"):
        assert KEY not in client.get(url).content.decode(), url
    evaluation.job.refresh_from_db()
    assert KEY not in str(evaluation.job.result) and KEY not in str(evaluation.job.errors)
    assert KEY not in caplog.text


# --- Two profiles of one model, two rows ------------------------------------------------------------------------


def test_one_model_at_two_efforts_is_two_named_rows_of_the_release_report(
    db, coordinator, server, plan_release, client_for
):
    release, _ = plan_release
    server.mode = "reasoning"
    thinker = register(server, coordinator, request_preset="openai_reasoning")
    low = run_release(thinker, coordinator, release, effort="low")
    high = run_release(thinker, coordinator, release, effort="high")
    assert low.parameters["request"]["reasoning_effort"] == "low"
    names = run_names([low, high])
    assert names[low.pk].startswith("thinker · standard") and names[low.pk].endswith("reasoning low")
    assert names[high.pk] == names[low.pk].removesuffix("reasoning low") + "reasoning high"
    split = low.split
    report = release_report_of(release, split=split)
    assert sorted(row.label for row in report.models) == sorted(names.values())
    markdown = client_for(coordinator).get(f"/releases/{release.name}/report/{split}/{release.name}-{split}-report.md")
    assert markdown.status_code == 200
    assert all(name in markdown.content.decode() for name in names.values())


def test_the_run_form_as_it_stands_suits_a_reasoning_endpoint_and_a_plain_one(
    db, coordinator, server, plan_release, client_for, settings, django_capture_on_commit_callbacks
):
    """The form's temperature starts blank: no temperature for an endpoint that takes none, the deployment's
    default for one that takes it."""
    release, _ = plan_release
    thinker = register(server, coordinator, request_preset="openai_reasoning")
    plain = register(server, coordinator, name="plain")
    client = client_for(coordinator)
    form = client.get("/models/runs/new/").content.decode()
    field = form[form.index('id="id_temperature"') - 200 : form.index('id="id_temperature"') + 100]
    assert "value=" not in field.split("<input", 1)[-1].split(">")[0]  # blank, not the default
    for endpoint in (thinker, plain):
        with django_capture_on_commit_callbacks(execute=False):
            response = client.post(
                "/models/runs/new/", {"endpoint": endpoint.pk, "release": release.pk, "split": "test", "seed": 0}
            )
        assert response.status_code == 302, response.content.decode()[:500]
    thinker_run, plain_run = (ModelEvaluation.objects.get(endpoint=e) for e in (thinker, plain))
    assert "temperature" not in thinker_run.parameters["request"]
    assert plain_run.parameters["request"]["temperature"] == settings.MODEL_EVAL_TEMPERATURE

"""The /models/ pages and the models API: who may, forms and their errors, a run started from the page and the API,
its detail and results file."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotator.llm.endpoints import endpoint_create
from annotator.models import Job, ModelEndpoint
from evaluation.models import ModelEvaluation
from evaluation.runs.results_files import results_file
from evaluation.runs.services import evaluation_run
from tests.factories import make_pair
from tests.model_server import ModelServer
from tests.modeleval_fixtures import bind_key
from tests.modeleval_release_factories import make_release

PAGES = ["/models/", "/models/endpoints/new/", "/models/runs/new/"]


@pytest.fixture
def server():
    server = ModelServer().start()
    yield server
    server.stop()


@pytest.mark.parametrize("url", PAGES)
def test_it_sends_an_anonymous_visitor_to_log_in(client, url):
    response = client.get(url)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.parametrize("url", PAGES)
def test_it_refuses_a_non_coordinator(client_for, annotator, reviewer, url):
    assert client_for(annotator).get(url).status_code == 403
    assert client_for(reviewer).get(url).status_code == 403


def test_it_refuses_a_wrong_method(client_for, coordinator):
    client = client_for(coordinator)
    assert client.post("/models/").status_code == 405
    assert client.put("/models/endpoints/new/").status_code == 405


def test_a_coordinator_registers_a_model_and_a_bad_url_is_refused_beside_its_field(client_for, coordinator, settings):
    client = client_for(coordinator)
    fields = {"name": "qwen", "model_id": "Qwen/Qwen2.5-VL-7B-Instruct", "concurrency": 8, "timeout_s": 60}
    page = "/models/endpoints/new/"
    response = client.post(page, {**fields, "base_url": "http://me:pw@gpu:8000/v1"}, follow=True)
    # Post/Redirect/Get: the form comes back on its page, as sent, with the reason beside the field.
    assert response.redirect_chain == [(page, 302)] and "No user or password" in response.content.decode()
    assert 'value="qwen"' in response.content.decode()
    response = client.post(page, {**fields, "base_url": "http://gpu:8000/v1", "api_key_env": "X Y"}, follow=True)
    assert response.redirect_chain == [(page, 302)] and "MODEL_API_KEY_ENV_PREFIX" in response.content.decode()
    key = {"api_key_env": "SUBTLEBENCH_MODEL_KEY_K"}
    bind_key(settings, key["api_key_env"], "http://gpu:8000/v1")
    response = client.post("/models/endpoints/new/", {**fields, "base_url": "http://gpu:8000/v1", **key})
    assert response.status_code == 302
    endpoint = ModelEndpoint.objects.get()
    assert (endpoint.name, endpoint.api_key_env, endpoint.created_by) == ("qwen", key["api_key_env"], coordinator)
    response = client.post("/models/endpoints/new/", {**fields, "base_url": "http://gpu:8000/v1"}, follow=True)
    assert response.redirect_chain == [(page, 302)] and "already registered" in response.content.decode()
    page = client.get("/models/").content.decode()
    assert "qwen" in page and "http://gpu:8000/v1" in page


def test_a_run_started_from_the_page_shows_its_progress_and_downloads_the_results(
    client_for, coordinator, server, django_capture_on_commit_callbacks
):
    pairs = [make_pair(category="temporal") for _ in range(3)]
    release = make_release([(pair, "test", False) for pair in pairs] + [(make_pair(category="spatial"), "val", False)])
    endpoint = endpoint_create(user=coordinator, name="tiny", base_url=server.base_url, model_id="tiny-vlm")
    client = client_for(coordinator)
    response = client.post("/models/runs/new/", {"endpoint": endpoint.pk, "split": "test", "seed": 0}, follow=True)
    assert response.redirect_chain == [("/models/runs/new/", 302)] and "Pick the release" in response.content.decode()
    data = {"endpoint": endpoint.pk, "release": release.pk, "split": "test", "seed": 1}
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post("/models/runs/new/", data)
    evaluation = ModelEvaluation.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/models/runs/{evaluation.pk}/"
    assert (evaluation.release, evaluation.split, evaluation.items) == (release, "test", len(pairs))
    assert "queued" in client.get(response["Location"]).content.decode()
    # The poll of an active run renders its status only: no intervals (they read every result).
    polled = client.get(f"/models/runs/{evaluation.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="run-intervals-later"' in polled and 'id="run-intervals"' not in polled
    evaluation_run(evaluation_id=evaluation.pk)
    page = client.get(f"/models/runs/{evaluation.pk}/").content.decode()
    assert "succeeded" in page and "Download results file" in page and "temporal" in page
    partial = client.get(f"/models/runs/{evaluation.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<section id="run-status"') and 'id="run-intervals"' in partial
    download = client.get(f"/models/runs/{evaluation.pk}/results/")
    assert "attachment" in download["Content-Disposition"] and download.streaming
    streamed = b"".join(download.streaming_content).decode()
    assert json.loads(streamed)["total_questions_evaluated"] == 3
    evaluation.refresh_from_db()
    assert streamed == json.dumps(results_file(evaluation), indent=2, ensure_ascii=False)


def test_the_list_page_runs_a_fixed_number_of_queries(client_for, coordinator, server):
    endpoint = endpoint_create(user=coordinator, name="tiny", base_url=server.base_url, model_id="tiny-vlm")
    client = client_for(coordinator)
    from evaluation.runs.services import evaluation_start

    release = make_release([(make_pair(category="temporal"), "test", False)])
    evaluation_start(endpoint=endpoint, user=coordinator, release=release)
    with CaptureQueriesContext(connection) as one:
        client.get("/models/")
    for _ in range(3):
        evaluation_start(endpoint=endpoint, user=coordinator, release=release)
    with CaptureQueriesContext(connection) as four:
        client.get("/models/")
    assert len(four) == len(one)


def test_the_api_registers_a_model_starts_a_run_and_serves_its_results(
    client_for, coordinator, annotator, server, settings
):
    temporal = make_pair(category="temporal")
    spatial = make_pair(category="spatial", answer="left", distractors=["right"])
    release = make_release([(temporal, "val", False), (spatial, "test", False)])
    client = client_for(coordinator)
    bind_key(settings, "SUBTLEBENCH_MODEL_KEY_1", server.base_url)
    body = {
        "name": "tiny",
        "base_url": server.base_url,
        "model_id": "tiny-vlm",
        "api_key_env": "SUBTLEBENCH_MODEL_KEY_1",
        "test_connection": False,  # the key variable is the worker's, not set in this process
    }
    response = client.post("/api/models/create/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    endpoint_id = response.json()["id"]
    assert client.post("/api/models/create/", body, content_type="application/json").status_code == 409
    bad = {**body, "name": "other", "base_url": "file:///etc/passwd"}
    response = client.post("/api/models/create/", bad, content_type="application/json")
    assert response.status_code == 400 and "base_url" in response.json()["errors"]
    run = {"endpoint": endpoint_id, "source": "release", "release": release.pk, "split": "test"}
    response = client.post("/api/models/runs/create/", run, content_type="application/json")
    assert response.status_code == 202, response.content
    payload = response.json()
    assert payload["status"] == "queued" and payload["results_url"] is None
    assert Job.objects.get(pk=payload["job_id"]).kind == Job.Kind.MODEL_EVAL
    ModelEndpoint.objects.filter(pk=endpoint_id).update(api_key_env="")
    evaluation_run(evaluation_id=payload["id"])
    detail = client.get(f"/api/models/runs/{payload['id']}/").json()
    assert detail["status"] == "succeeded" and detail["summary"]["per_category"]["spatial"]["count"] == 1
    results = client.get(detail["results_url"]).json()
    assert [q["question_id"].split("_")[0] for q in results["questions"]] == ["spatial"]
    for retired in ("export", "filter", "study"):  # a run is on a release's split only
        response = client.post("/api/models/runs/create/", {**run, "source": retired}, content_type="application/json")
        assert response.status_code == 400 and "source" in response.json()["errors"]
    other = client_for(annotator)
    assert other.get("/api/models/").status_code == 403
    assert other.post("/api/models/runs/create/", run, content_type="application/json").status_code == 403
    assert other.get(f"/api/models/runs/{payload['id']}/results/").status_code == 403

"""Secrets are the operator's: a coordinator cannot make the worker send one of its variables (SECRET_KEY,
DATABASE_URL, ...) anywhere, nor reach loopback or private addresses the operator has not named, nor read an
internal service's answers or tell its ports apart from a run's errors. A stored key is encrypted and never shown.

The local model server (tests/model_server.py, loopback, port 0) counts every request it gets: the attacks below
must leave it at zero."""

from __future__ import annotations

import socket
import threading
from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.db import connection

from annotator.llm.endpoints import endpoint_create
from annotator.models import Job, ModelEndpoint, Release
from evaluation.runs.services import evaluation_run, evaluation_start
from subtlebench.errors import Invalid
from tests.factories import make_pair
from tests.model_server import ModelServer
from tests.modeleval_release_factories import make_release

SECRETS = {"SECRET_KEY": "sentinel-secret-key-3f9a1c", "DATABASE_URL": "postgresql://sentinel:pw-77e1@db/prod"}
PAGE = "/models/endpoints/new/"


@pytest.fixture
def server():
    server = ModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def secrets(monkeypatch):
    # The worker's real values are read from os.environ: known ones here, to look for them in what was sent.
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return SECRETS


def register_everywhere(client, base_url: str, **key) -> list[str]:
    """Register an endpoint through the page, the API and add_model; each one's refusal, in words."""
    fields = {"base_url": base_url, "model_id": "tiny-vlm", "concurrency": 1, "timeout_s": 5}
    refusals = []
    response = client.post(PAGE, {"name": "by-page", **fields, **key}, follow=True)
    assert response.redirect_chain == [(PAGE, 302)]
    refusals.append(response.content.decode())
    response = client.post("/api/models/create/", {"name": "by-api", **fields, **key}, content_type="application/json")
    assert response.status_code == 400, response.content
    refusals.append(response.content.decode())
    args = ["add_model", "by-command", "--base-url", base_url, "--model-id", "tiny-vlm"]
    if key:
        args += ["--api-key-env", key["api_key_env"]]
    with pytest.raises(CommandError) as refused:
        call_command(*args, stdout=StringIO())
    refusals.append(str(refused.value))
    assert not ModelEndpoint.objects.exists()
    return refusals


def run_on(endpoint: ModelEndpoint, coordinator) -> Job:
    release = make_release([(make_pair(category="temporal"), "test", False)], number=Release.objects.count() + 1)
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release)
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    job = evaluation.job
    job.refresh_from_db()
    return job


@pytest.mark.parametrize("variable", sorted(SECRETS))
def test_it_never_sends_a_variable_of_the_worker_named_by_a_coordinator(
    client_for, coordinator, server, secrets, variable
):
    # Loopback allowed (the test settings name 127.0.0.1): the variable alone is refused, by every entry point.
    for refusal in register_everywhere(client_for(coordinator), server.base_url, api_key_env=variable):
        assert "MODEL_API_KEY_ENV_PREFIX" in refusal
    # A row from before the prefix rule keeps its name, and a run refuses it before anything is sent.
    endpoint = ModelEndpoint.objects.create(
        name="legacy", base_url=server.base_url, model_id="tiny-vlm", api_key_env=variable
    )
    job = run_on(endpoint, coordinator)
    assert job.status == Job.Status.FAILED
    assert f"names the variable {variable}" in job.errors[0] and "Nothing was sent" in job.errors[0]
    assert secrets[variable] not in job.errors[0]
    assert server.requests == []
    page = client_for(coordinator).get("/models/").content.decode()
    assert f"${variable}" in page and "refused" in page


def test_it_refuses_loopback_and_private_hosts_unless_the_operator_names_them(
    client_for, coordinator, server, secrets, settings
):
    settings.MODEL_ENDPOINT_HOSTS = []  # the default: public hosts only
    for url in (server.base_url, "http://localhost:8000/v1", "http://10.0.0.5/v1", "http://169.254.169.254/v1"):
        for refusal in register_everywhere(client_for(coordinator), url):
            assert "loopback, private, link-local or reserved" in refusal, url
    # Registered while the operator allowed it, then taken off the list: refused at request time, nothing sent.
    endpoint = ModelEndpoint.objects.create(name="was-allowed", base_url=server.base_url, model_id="tiny-vlm")
    job = run_on(endpoint, coordinator)
    assert job.status == Job.Status.FAILED and "host is refused" in job.errors[0]
    assert server.requests == []


def test_a_name_that_resolves_to_loopback_after_registration_reaches_nothing(
    coordinator, server, settings, monkeypatch
):
    """DNS rebinding: public when registered, loopback when the worker connects."""
    settings.MODEL_ENDPOINT_HOSTS = []
    port = int(server.base_url.split(":")[2].split("/")[0])
    answers = iter(["93.184.215.14", "127.0.0.1", "127.0.0.1", "127.0.0.1"])

    def getaddrinfo(host, port_, *args, **kwargs):
        assert host == "models.example.org"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]

    monkeypatch.setattr("annotator.llm.hosts.socket.getaddrinfo", getaddrinfo)
    endpoint = endpoint_create(
        user=coordinator, name="rebind", base_url=f"http://models.example.org:{port}/v1", model_id="tiny-vlm"
    )
    job = run_on(endpoint, coordinator)
    assert job.status == Job.Status.FAILED and "host is refused" in job.errors[0]
    assert server.requests == []


def raw_port(greeting: bytes) -> tuple[int, threading.Thread]:
    """A TCP port on loopback that answers one connection with `greeting` (not HTTP) and closes it."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        with listener:
            peer, _ = listener.accept()
            with peer:
                peer.sendall(greeting)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


def test_run_errors_tell_a_closed_port_from_a_non_http_one_in_no_way(db, coordinator, settings):
    settings.MODEL_EVAL_PAUSE_MAX_SECONDS = 0  # down: fail at once instead of pausing
    closed = socket.create_server(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    ssh_port, thread = raw_port(b"SSH-2.0-OpenSSH_9.6 internal-banner\r\n")
    errors = []
    for name, port in (("closed", closed_port), ("ssh", ssh_port)):
        endpoint = endpoint_create(user=coordinator, name=name, base_url=f"http://127.0.0.1:{port}/v1", model_id="m")
        job = run_on(endpoint, coordinator)
        assert job.status == Job.Status.FAILED
        errors.append(job.errors[0].replace(f"Model {name} ", "Model X ").split("; it has been down")[0])
    thread.join(5)
    assert errors[0] == errors[1] == "Model X is down: could not reach the endpoint"


def test_an_internal_answer_body_is_never_stored(coordinator, server, settings):
    release = make_release([(make_pair(category="temporal", question="Which image is later? (fault)"), "test", False)])
    server.faults["Which image is later? (fault)"] = "500"
    settings.MODEL_EVAL_RETRIES = 0
    endpoint = endpoint_create(user=coordinator, name="tiny", base_url=server.base_url, model_id="tiny-vlm")
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release)
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    row = evaluation.results.get()
    assert row.failure == "server_error" and row.failure_message == "the endpoint answered HTTP 500"


def test_a_stored_key_is_encrypted_sent_to_its_endpoint_only_and_never_shown(client_for, coordinator, server, settings):
    key = "sk-stored-0a9b8c7d6e5f4a3b"
    settings.MODEL_API_KEY_ENCRYPTION_KEY = []
    client = client_for(coordinator)
    body = {"name": "tiny", "base_url": server.base_url, "model_id": "tiny-vlm", "api_key": key}
    response = client.post("/api/models/create/", body, content_type="application/json")
    assert response.status_code == 400 and "MODEL_API_KEY_ENCRYPTION_KEY" in response.content.decode()

    settings.MODEL_API_KEY_ENCRYPTION_KEY = [Fernet.generate_key().decode()]
    response = client.post("/api/models/create/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert key not in response.content.decode() and response.json()["has_stored_key"] is True
    with connection.cursor() as cursor:
        cursor.execute("SELECT t::text FROM annotator_modelendpoint AS t")
        (row,) = cursor.fetchone()
    assert key not in row
    for url in ("/models/", "/api/models/", PAGE):
        text = client.get(url).content.decode()
        assert key not in text, url
    assert "stored key" in client.get("/models/").content.decode()

    endpoint = ModelEndpoint.objects.get()
    job = run_on(endpoint, coordinator)
    assert job.status == Job.Status.SUCCEEDED, job.errors
    assert {seen.authorization for seen in server.requests} == {f"Bearer {key}"}

    # Rotation: a new key first, the old one still decrypts.
    settings.MODEL_API_KEY_ENCRYPTION_KEY = [Fernet.generate_key().decode(), *settings.MODEL_API_KEY_ENCRYPTION_KEY]
    assert run_on(endpoint, coordinator).status == Job.Status.SUCCEEDED
    # Replaced rather than rotated: a clear error, nothing sent.
    sent = len(server.requests)
    settings.MODEL_API_KEY_ENCRYPTION_KEY = [Fernet.generate_key().decode()]
    job = run_on(endpoint, coordinator)
    assert job.status == Job.Status.FAILED and "cannot be read" in job.errors[0]
    assert len(server.requests) == sent


def test_a_refused_form_never_keeps_the_key_in_the_session(client_for, coordinator, settings):
    settings.MODEL_API_KEY_ENCRYPTION_KEY = [Fernet.generate_key().decode()]
    client = client_for(coordinator)
    fields = {"name": "x", "base_url": "ftp://nowhere/v1", "model_id": "m", "concurrency": 1, "timeout_s": 5}
    response = client.post(PAGE, {**fields, "api_key": "sk-never-in-session-42"}, follow=True)
    assert "http:// or https://" in response.content.decode()
    assert "sk-never-in-session-42" not in response.content.decode()
    assert "sk-never-in-session-42" not in str(dict(client.session))


def test_a_key_and_a_variable_together_are_refused(db, coordinator, settings):
    settings.MODEL_API_KEY_ENCRYPTION_KEY = [Fernet.generate_key().decode()]
    with pytest.raises(Invalid, match="not both"):
        endpoint_create(
            user=coordinator,
            name="x",
            base_url="http://gpu/v1",
            model_id="m",
            api_key="sk-1",
            api_key_env="SUBTLEBENCH_MODEL_KEY_X",
        )

"""Keys are the operator's: a key variable goes only to the hosts the operator bound it to (MODEL_KEY_BINDINGS), and
a stored key only to the host it was given for. A coordinator tries every way to make a request carry a key to
another host: registering with another endpoint's variable or an unbound one (page, API, add_model), re-pointing an
endpoint with a key (profile page, API, admin, a model save, an update behind the model's back), then every kind of
request (run, drafting, judge, extraction, test connection).

Two loopback model servers on two ports are two hosts (a host:port binding tells them apart): `home`, the host the
operator bound the key to, and `elsewhere`, the coordinator's own. Each records the Authorization header it got."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django import forms
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from annotator.drafting import services as drafting
from annotator.llm.client import ChatClient, Failure, RequestFailed
from annotator.llm.endpoints import EndpointUnusable, endpoint_create, endpoint_test
from annotator.models import Job, ModelEndpoint
from annotator.picking import services as picking
from annotator.picking.services import VideoSource
from evaluation.models import ModelItemResult
from evaluation.runs.services import evaluation_run, evaluation_start
from subtlebench.errors import Unavailable
from subtlebench.keybindings import parse_key_bindings
from tests.factories import make_pair, make_video
from tests.model_server import ModelServer
from tests.modeleval_fixtures import bind_key
from tests.modeleval_release_factories import make_release

HOME_KEY = ("SUBTLEBENCH_MODEL_KEY_HOME", "sk-home-4b7d1e9a2c5f8a3e6d0b")
OTHER_KEY = ("SUBTLEBENCH_MODEL_KEY_OTHER", "sk-other-0c3e6a9d2f5b8e1a4c7d")  # bound to `elsewhere`
LOOSE_KEY = ("SUBTLEBENCH_MODEL_KEY_LOOSE", "sk-loose-7a1c4e8b2d6f9a3c5e0b")  # set, but bound to no host
STORED = "sk-stored-5e8a2c7f1b4d9e6a3c0f"
PAGE = "/models/endpoints/new/"


@pytest.fixture
def home():
    server = ModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def elsewhere():
    server = ModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def operator(settings, monkeypatch, home, elsewhere):
    """The operator's keys: HOME bound to `home`, OTHER to `elsewhere`, LOOSE to nothing; stored keys possible."""
    for name, value in (HOME_KEY, OTHER_KEY, LOOSE_KEY):
        monkeypatch.setenv(name, value)
    settings.MODEL_KEY_BINDINGS = {}
    bind_key(settings, HOME_KEY[0], home.base_url)
    bind_key(settings, OTHER_KEY[0], elsewhere.base_url)
    settings.MODEL_API_KEY_ENCRYPTION_KEY = [Fernet.generate_key().decode()]
    settings.MODEL_EVAL_PAUSE_MAX_SECONDS = 0  # a refused endpoint fails the run at once
    settings.MODEL_EVAL_RETRIES = 0
    yield
    # Whatever the test tried, each host got no key but its own.
    assert {seen.authorization for seen in home.requests} <= {"", f"Bearer {HOME_KEY[1]}", f"Bearer {STORED}"}
    assert {seen.authorization for seen in elsewhere.requests} <= {"", f"Bearer {OTHER_KEY[1]}"}


def port(server) -> int:
    return int(server.base_url.rsplit(":", 1)[1].split("/")[0])


def fields(server, name: str) -> dict:
    return {"name": name, "base_url": server.base_url, "model_id": "tiny-vlm", "concurrency": 1, "timeout_s": 5}


def register_everywhere(client, server, variable: str) -> list[str]:
    """Register an endpoint on `server` with the key variable through the page, the API and add_model (each testing
    the connection first); each one's refusal, in words."""
    refusals = []
    response = client.post(PAGE, {**fields(server, "by-page"), "api_key_env": variable, "test_connection": "on"})
    assert response.status_code == 302 and response.url == PAGE
    refusals.append(client.get(PAGE).content.decode())
    body = {**fields(server, "by-api"), "api_key_env": variable}
    response = client.post("/api/models/create/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    refusals.append(" ".join(response.json()["errors"]["api_key_env"]))
    args = ["add_model", "by-command", "--base-url", server.base_url, "--model-id", "tiny-vlm"]
    with pytest.raises(CommandError) as refused:
        call_command(*args, "--api-key-env", variable, stdout=StringIO())
    refusals.append(str(refused.value))
    assert not ModelEndpoint.objects.exists()
    return refusals


def run_on(endpoint: ModelEndpoint, coordinator, **fields) -> Job:
    pair = make_pair(category="temporal")
    release = make_release([(pair, "test", False)], number=ModelEndpoint.objects.count() + Job.objects.count() + 1)
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release, **fields)
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    job = evaluation.job
    job.refresh_from_db()
    return job


# --- Registering --------------------------------------------------------------------------------------------------


def test_another_endpoints_variable_or_an_unbound_one_is_refused_by_every_way_of_registering(
    client_for, coordinator, operator, home, elsewhere
):
    client = client_for(coordinator)
    # On the coordinator's own host, with the key the operator bound to `home`: refused naming the binding.
    for refusal in register_everywhere(client, elsewhere, HOME_KEY[0]):
        assert f"{HOME_KEY[0]} is bound to 127.0.0.1:{port(home)}" in refusal, refusal
        assert f"not to 127.0.0.1:{port(elsewhere)}" in refusal, refusal
    # A prefixed variable the operator bound to nothing: refused even on the home host.
    for refusal in register_everywhere(client, home, LOOSE_KEY[0]):
        assert "has not bound" in refusal and "MODEL_KEY_BINDINGS" in refusal, refusal
    assert home.requests == [] and elsewhere.requests == []

    # The page offers the operator's bound variables with their hosts, and no text box for a name.
    page = client.get(PAGE).content.decode()
    assert f'<option value="{HOME_KEY[0]}">{HOME_KEY[0]} (127.0.0.1:{port(home)})</option>' in page
    assert f'<option value="{OTHER_KEY[0]}">' in page and f'value="{LOOSE_KEY[0]}"' not in page
    assert '<select name="api_key_env"' in page and 'input type="text" name="api_key_env"' not in page

    # The bound variable on its host: registered after a test connection that carried its key.
    response = client.post(
        "/api/models/create/", {**fields(home, "home"), "api_key_env": HOME_KEY[0]}, "application/json"
    )
    assert response.status_code == 201, response.content
    assert {seen.authorization for seen in home.requests} == {f"Bearer {HOME_KEY[1]}"}


def test_a_binding_names_its_port_or_any_port_of_its_host(db, coordinator, operator, settings, home, elsewhere):
    settings.MODEL_KEY_BINDINGS = parse_key_bindings(f"{HOME_KEY[0]}=127.0.0.1", settings.MODEL_API_KEY_ENV_PREFIX)
    endpoint = endpoint_create(user=coordinator, api_key_env=HOME_KEY[0], test_connection=True, **fields(home, "h"))
    assert endpoint.api_key_env == HOME_KEY[0]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("SUBTLEBENCH_MODEL_KEY_A", "'SUBTLEBENCH_MODEL_KEY_A' is not VARIABLE=host[:port]"),
        ("SECRET_KEY=api.openai.com", "names SECRET_KEY, which is not MODEL_API_KEY_ENV_PREFIX"),
        ("SUBTLEBENCH_MODEL_KEY_A=https://api.openai.com/v1", "not a URL"),
        ("SUBTLEBENCH_MODEL_KEY_A=gw.example.org:70000", "the port '70000' is not a number from 1 to 65535"),
        ("SUBTLEBENCH_MODEL_KEY_A=::1", "write an IPv6 address in brackets"),
        ("SUBTLEBENCH_MODEL_KEY_A=a.org,SUBTLEBENCH_MODEL_KEY_B=b@d", "'SUBTLEBENCH_MODEL_KEY_B=b@d' has a bad host"),
    ],
)
def test_a_bad_binding_stops_the_start_naming_the_entry(value, message):
    with pytest.raises(ImproperlyConfigured, match="MODEL_KEY_BINDINGS: the entry") as refused:
        parse_key_bindings(value, "SUBTLEBENCH_MODEL_KEY_")
    assert message in str(refused.value)


def test_a_process_with_a_bad_binding_does_not_start():
    bad = "SUBTLEBENCH_MODEL_KEY_OPENAI=api.openai.com,SUBTLEBENCH_MODEL_KEY_GATEWAY=https://gw.example.org/v1"
    started = subprocess.run(
        [sys.executable, "-c", "import subtlebench.settings"],
        env={**os.environ, "MODEL_KEY_BINDINGS": bad},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode != 0
    last = started.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: MODEL_KEY_BINDINGS: the entry ")
    assert "'SUBTLEBENCH_MODEL_KEY_GATEWAY=https://gw.example.org/v1' has a bad host" in last


def test_bindings_read_as_the_operator_writes_them():
    text = "SUBTLEBENCH_MODEL_KEY_OPENAI=api.openai.com, SUBTLEBENCH_MODEL_KEY_GATEWAY=GW.example.org.:443"
    text += " SUBTLEBENCH_MODEL_KEY_GATEWAY=[::1]:8000"
    assert parse_key_bindings(text, "SUBTLEBENCH_MODEL_KEY_") == {
        "SUBTLEBENCH_MODEL_KEY_OPENAI": (("api.openai.com", None),),
        "SUBTLEBENCH_MODEL_KEY_GATEWAY": (("gw.example.org", 443), ("::1", 8000)),
    }


# --- Re-pointing an endpoint that has a key ---------------------------------------------------------------------


def with_stored_key(coordinator, home, name: str) -> ModelEndpoint:
    endpoint = endpoint_create(user=coordinator, api_key=STORED, **fields(home, name))
    assert endpoint.api_key_encrypted
    return endpoint


def admin_change(endpoint: ModelEndpoint, base_url: str) -> list[str]:
    """A superuser changes the endpoint's base URL in the admin (the change form as it stands, then posted)."""
    from django.test import Client

    client = Client()
    root = User.objects.filter(username="root").first() or User.objects.create_superuser("root", password="pw")
    client.force_login(root)
    model_admin = admin.site._registry[ModelEndpoint]
    request = RequestFactory().get("/")
    request.user = root
    form = model_admin.get_form(request, endpoint)(instance=endpoint)
    data = {}
    for bound in form:
        value, widget = bound.value(), bound.field.widget
        if isinstance(widget, forms.MultiWidget):
            data.update({f"{bound.html_name}_{i}": part for i, part in enumerate(widget.decompress(value))})
        elif isinstance(value, bool):
            if value:
                data[bound.html_name] = "on"
        else:
            data[bound.html_name] = "" if value is None else value
    data["base_url"] = base_url
    response = client.post(f"/admin/annotator/modelendpoint/{endpoint.pk}/change/", data, follow=True)
    assert response.status_code == 200
    return [str(message) for message in response.context["messages"]]


def test_a_stored_key_never_follows_its_endpoint_to_another_host(client_for, coordinator, operator, home, elsewhere):
    client = client_for(coordinator)
    # The profile page and the API edit the request profile only: a base URL sent along changes nothing.
    endpoint = with_stored_key(coordinator, home, "profiled")
    client.post(f"/models/endpoints/{endpoint.pk}/profile/", {"base_url": elsewhere.base_url})
    body = {"base_url": elsewhere.base_url, "request_preset": "compatible"}
    assert client.post(f"/api/models/{endpoint.pk}/profile/", body, "application/json").status_code == 200
    endpoint.refresh_from_db()
    assert endpoint.base_url == home.base_url and endpoint.api_key_encrypted

    # The admin: the host changes, the key is dropped, and the admin says so.
    endpoint = with_stored_key(coordinator, home, "by-admin")
    shown = admin_change(endpoint, elsewhere.base_url)
    endpoint.refresh_from_db()
    assert endpoint.base_url == elsewhere.base_url and endpoint.api_key_encrypted == ""
    assert any("stored API key of by-admin was dropped" in message for message in shown), shown
    # The admin keeps the host rules of every other path.
    other = with_stored_key(coordinator, home, "by-admin-private")
    admin_change(other, "http://10.0.0.5/v1")
    other.refresh_from_db()
    assert other.base_url == home.base_url and other.api_key_encrypted

    # A save from code, whole or of the base URL alone.
    saved = with_stored_key(coordinator, home, "saved")
    saved.base_url = elsewhere.base_url
    saved.save()
    only_url = with_stored_key(coordinator, home, "saved-url")
    only_url.base_url = elsewhere.base_url
    only_url.save(update_fields=["base_url"])
    for one in (saved, only_url):
        one.refresh_from_db()
        assert one.api_key_encrypted == ""
    # Another path on the same host keeps the key: it was given for the host.
    same_host = with_stored_key(coordinator, home, "same-host")
    same_host.base_url = home.base_url.removesuffix("/v1") + "/v1/"
    same_host.save()
    same_host.refresh_from_db()
    assert same_host.api_key_encrypted

    # Runs on the re-pointed endpoints reach `elsewhere` without any key.
    for one in (endpoint, saved, only_url):
        assert run_on(one, coordinator).status == Job.Status.SUCCEEDED
    assert elsewhere.requests and {seen.authorization for seen in elsewhere.requests} == {""}

    # Behind the model's back (an UPDATE): the key is sealed with its host, so it is refused and nothing is sent.
    sealed = with_stored_key(coordinator, home, "sealed")
    ModelEndpoint.objects.filter(pk=sealed.pk).update(base_url=elsewhere.base_url)
    sealed.refresh_from_db()
    before = len(elsewhere.requests)
    job = run_on(sealed, coordinator)
    assert job.status == Job.Status.FAILED
    assert f"was given for http://127.0.0.1:{port(home)}" in job.errors[0] and "Nothing was sent" in job.errors[0]
    assert len(elsewhere.requests) == before


def test_a_bound_variable_endpoint_moved_to_an_unbound_host_stops_until_fixed(
    client_for, coordinator, operator, home, elsewhere
):
    endpoint = endpoint_create(user=coordinator, api_key_env=HOME_KEY[0], **fields(home, "moved"))
    shown = admin_change(endpoint, elsewhere.base_url)
    assert any("will not be sent" in message and f"{HOME_KEY[0]} is bound to" in message for message in shown)
    endpoint.refresh_from_db()
    job = run_on(endpoint, coordinator)
    assert job.status == Job.Status.FAILED
    assert f"{HOME_KEY[0]} is bound to 127.0.0.1:{port(home)}" in job.errors[0] and "Nothing was sent" in job.errors[0]
    assert elsewhere.requests == []
    page = client_for(coordinator).get("/models/").content.decode()
    assert "refused" in page and f"not to 127.0.0.1:{port(elsewhere)}" in page
    # Pointed back at its bound host, it works again, with its key.
    shown = admin_change(endpoint, home.base_url)
    assert len(shown) == 1 and "was changed successfully" in shown[0], shown  # no warning left
    endpoint.refresh_from_db()
    assert run_on(endpoint, coordinator).status == Job.Status.SUCCEEDED
    assert {seen.authorization for seen in home.requests} == {f"Bearer {HOME_KEY[1]}"}


# --- Every kind of request ----------------------------------------------------------------------------------------


@pytest.fixture(params=["variable", "variable-unchecked", "stored"])
def moved(request, db, coordinator, operator, home, elsewhere, monkeypatch):
    """An endpoint registered on `home` with a key, then pointed at `elsewhere` behind every check of registration
    (an UPDATE). "variable-unchecked": the check of endpoint_key is switched off too, to show the client itself
    refuses to send a key to a host it is not bound to."""
    key = {"api_key": STORED} if request.param == "stored" else {"api_key_env": HOME_KEY[0]}
    endpoint = endpoint_create(user=coordinator, **fields(home, "moved"), **key)
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(base_url=elsewhere.base_url)
    endpoint.refresh_from_db()
    if request.param == "variable-unchecked":
        monkeypatch.setattr("annotator.llm.keys.binding_problem", lambda name, base_url: "")
    return endpoint


def test_no_kind_of_request_carries_the_key_to_the_host_it_was_moved_to(moved, coordinator, annotator, home, elsewhere):
    # A run of the moved endpoint.
    assert run_on(moved, coordinator).status == Job.Status.FAILED
    # Test connection.
    with pytest.raises(EndpointUnusable):
        endpoint_test(moved)
    # Drafting on the workbench.
    video = make_video(frames=4)
    picking.video_heartbeat(video=video, user=annotator)
    drafting.drafting_settings_update(user=coordinator, drafting=[moved.pk], default=moved.pk, background=[])
    with pytest.raises(Unavailable):
        drafting.model_draft_request(
            user=annotator, source=VideoSource(video), category="attribute", index_a=0, index_b=2
        )
    # The judge of a description run, and the extraction pass of a run, both of a model at `home`.
    model = endpoint_create(user=coordinator, **fields(home, "home-model"))
    pair = make_pair(category="temporal")
    release = make_release([(pair, "test", False)], number=50, captions={pair.pk: "the mug turned red"})
    home.reply = lambda seen: "The mug is red in the second image." if not seen.options else None
    described = evaluation_start(endpoint=model, user=coordinator, release=release, task="description", judge=moved)
    described = evaluation_run(evaluation_id=described.pk)
    assert not ModelItemResult.objects.filter(evaluation=described, is_correct__isnull=False).exists()
    home.reply = None
    unparsable = make_pair(category="temporal", question="Which one is later? (unreadable)")
    home.faults[unparsable.question] = "malformed"
    extracted = evaluation_start(
        endpoint=model,
        user=coordinator,
        release=make_release([(unparsable, "test", False)], number=51),
        extraction_endpoint=moved,
    )
    extracted = evaluation_run(evaluation_id=extracted.pk)
    row = extracted.results.get()
    assert row.extraction == ModelItemResult.Extraction.FAILED, row.extraction
    assert row.extraction_text
    # Not one request reached the host the key was moved to.
    assert elsewhere.requests == []


def test_the_client_refuses_a_key_for_a_host_it_is_not_bound_to(home, elsewhere):
    """However a client is built: its key goes only to the hosts given with it; a request elsewhere is not sent."""
    client = ChatClient(
        base_url=elsewhere.base_url,
        model_id="tiny-vlm",
        api_key=HOME_KEY[1],
        key_hosts=(("127.0.0.1", port(home)),),
    )
    with pytest.raises(RequestFailed) as refused:
        client.complete([{"role": "user", "content": "hi"}], {"max_tokens": 1})
    assert refused.value.kind == Failure.REFUSED
    assert f"bound to 127.0.0.1:{port(home)}, not to 127.0.0.1:{port(elsewhere)}" in refused.value.message
    assert HOME_KEY[1] not in refused.value.message
    client.close()
    assert elsewhere.requests == []

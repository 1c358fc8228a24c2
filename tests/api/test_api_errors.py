"""Errors that say what happened (issue 17): the API answers JSON, never HTML, also for unknown URLs, bugs and a
database that cannot be reached; pages keep HTML; /healthz names the dependency that is down."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from django.db import connection
from django.test import Client

from tests.conftest import refused_port

JSON = "application/json"


@contextmanager
def database_unreachable():
    """The app's database connection pointed at a port nothing listens on: a PostgreSQL that is down."""
    connection.close()
    saved = dict(connection.settings_dict)
    with refused_port() as port:
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(port))
        try:
            yield
        finally:
            connection.close()
            connection.settings_dict.update(HOST=saved["HOST"], PORT=saved["PORT"])


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "post", "put", "delete"])
def test_an_unknown_api_url_answers_the_json_404(client, coordinator, method):
    for caller in (client, Client()):
        response = getattr(caller, method)("/api/no-such-thing/")
        assert response.status_code == 404
        assert response["Content-Type"] == JSON
        assert response.json() == {
            "detail": "No API endpoint at /api/no-such-thing/. The endpoints are listed at /api/docs/.",
            "errors": {},
        }
        client.force_login(coordinator)


@pytest.mark.django_db
def test_an_api_url_without_its_slash_is_redirected_for_get_and_named_for_post(client_for, coordinator):
    client = client_for(coordinator)
    response = client.get("/api/jobs?kind=export")
    assert (response.status_code, response["Location"]) == (301, "/api/jobs/?kind=export")
    response = client.post("/api/exports/start", {}, content_type=JSON)
    assert response.status_code == 404
    assert response.json()["detail"] == (
        "No API endpoint at /api/exports/start: did you mean /api/exports/start/ (with the slash)?"
    )


@pytest.mark.django_db
def test_an_unknown_page_still_answers_html(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_a_bug_in_an_api_view_answers_the_json_500(coordinator, monkeypatch):
    import api.jobs

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(api.jobs, "page_response", broken)
    client = Client(raise_request_exception=False)
    client.force_login(coordinator)
    response = client.get("/api/jobs/")
    assert response.status_code == 500
    assert response["Content-Type"] == JSON
    assert response.json() == {"detail": "Internal server error: it was logged. Try again later.", "errors": {}}


@pytest.mark.django_db(transaction=True)
def test_with_the_database_down_the_api_answers_json_503_and_pages_an_html_503(coordinator):
    client = Client(raise_request_exception=False)
    client.force_login(coordinator)
    with database_unreachable():
        api = client.get("/api/jobs/")
        page = client.get("/jobs/")
        health = client.get("/healthz")
    assert api.status_code == 503
    assert api["Content-Type"] == JSON
    assert api["Retry-After"] == "30"
    assert api.json() == {
        "detail": "The database cannot be reached right now. Try again in a minute.",
        "errors": {},
    }
    assert page.status_code == 503
    assert page["Content-Type"].startswith("text/html")
    assert b"The database cannot be reached right now" in page.content
    assert health.status_code == 503
    # The session is in the database that is down: the caller gets no details, only which part is down.
    assert health.json() == {"status": "down", "parts": {"database": {"status": "down"}, "broker": {"status": "ok"}}}
    # Back up: everything answers again.
    assert client.get("/api/jobs/").status_code == 200
    assert client.get("/healthz").json()["status"] == "ok"


@pytest.mark.django_db
def test_healthz_names_the_broker_when_redis_is_down_and_is_ok_again_when_it_is_back(client, private_redis, settings):
    settings.CELERY_BROKER_URL = private_redis.url
    settings.HEALTHZ_TOKEN = "operator-token"
    ok = client.get("/healthz")
    assert (ok.status_code, ok.json()["status"]) == (200, "ok")

    private_redis.stop()
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "down", "parts": {"database": {"status": "ok"}, "broker": {"status": "down"}}}
    detailed = client.get("/healthz", HTTP_AUTHORIZATION="Bearer operator-token").json()["parts"]["broker"]
    assert detailed["detail"].startswith("unreachable (") and str(private_redis.port) in detailed["detail"]

    private_redis.start()
    assert client.get("/healthz").status_code == 200

"""The login backend (subtlebench/auth.py): the user of each request comes with its roles in one query; a session
that Django's ModelBackend logged in before stays logged in; a wrong password is one failure and one hash."""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.hashers import MD5PasswordHasher
from django.db import connection
from django.test.utils import CaptureQueriesContext

from subtlebench.roles import roles_of
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

PAGE = "/account/tokens/"  # any logged-in page


def request_queries(client) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/review/")
    assert response.status_code == 200
    return [query["sql"] for query in queries]


def test_a_request_reads_the_user_and_its_roles_in_one_query(client):
    client.force_login(make_user("rita", "reviewer", "annotator"))
    sql = request_queries(client)
    from_users = [query for query in sql if 'FROM "auth_user"' in query]
    assert len(from_users) == 1 and '"role_names"' in from_users[0]
    assert not [query for query in sql if query.startswith('SELECT "auth_group"."name"')]
    assert client.get(PAGE).wsgi_request.user.username == "rita"
    assert roles_of(client.get(PAGE).wsgi_request.user) == {"reviewer", "annotator"}


def test_a_user_without_roles_and_a_superuser(client):
    client.force_login(make_user("sam"))
    assert roles_of(client.get(PAGE).wsgi_request.user) == set()
    assert client.get("/review/").status_code == 403
    root = make_user("root")
    root.is_superuser = True
    root.save()
    client.force_login(root)
    assert roles_of(client.get(PAGE).wsgi_request.user) == {"annotator", "reviewer", "coordinator"}


def test_a_session_logged_in_by_model_backend_before_stays_logged_in(client):
    client.force_login(make_user("cora", "coordinator"), backend="django.contrib.auth.backends.ModelBackend")
    response = client.get("/review/")
    assert response.status_code == 200 and response.wsgi_request.user.username == "cora"


def test_an_inactive_user_is_logged_out(client):
    user = make_user("gone", "annotator")
    client.force_login(user)
    user.is_active = False
    user.save()
    assert not client.get(PAGE).wsgi_request.user.is_authenticated


def test_a_deleted_user_is_logged_out(client):
    user = make_user("gone", "annotator")
    client.force_login(user)
    user.delete()
    assert not client.get(PAGE).wsgi_request.user.is_authenticated


def test_a_wrong_password_is_one_failure_and_one_password_check(client, monkeypatch):
    make_user("alice", "annotator")
    checks = []
    verify = MD5PasswordHasher.verify
    monkeypatch.setattr(MD5PasswordHasher, "verify", lambda self, *args: checks.append(1) or verify(self, *args))
    response = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert response.status_code == 200 and not response.wsgi_request.user.is_authenticated
    assert len(checks) == 1
    assert AccessAttempt.objects.get(username="alice").failures_since_start == 1
    response = client.post("/accounts/login/", {"username": "alice", "password": "password"})
    assert response.status_code == 302 and len(checks) == 2
    assert client.get(PAGE).wsgi_request.user.username == "alice"


def test_an_api_token_reads_its_user_and_roles_in_one_query(client):
    from subtlebench.tokens import api_token_create

    _, key = api_token_create(user=make_user("cora", "coordinator"), name="script")
    annotator_key = api_token_create(user=make_user("alice", "annotator"), name="script")[1]
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/studies/", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200
    sql = [query["sql"] for query in queries]
    assert not [query for query in sql if query.startswith('SELECT "auth_group"."name"')]
    assert [query for query in sql if 'FROM "subtlebench_apitoken"' in query and "ARRAY_AGG" in query]
    assert client.get("/api/studies/", HTTP_AUTHORIZATION=f"Token {annotator_key}").status_code == 403

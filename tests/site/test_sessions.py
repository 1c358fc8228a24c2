"""The session engine (subtlebench/sessions.py): Django's database sessions, each request's read one written-out
query; a session that expired or was deleted is nobody's, and what a session holds comes back whole."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from subtlebench.sessions import SessionStore
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

PAGE = "/account/tokens/"  # any logged-in page


def test_the_engine_is_the_apps_own():
    assert settings.SESSION_ENGINE == "subtlebench.sessions"


def test_a_request_reads_its_session_in_one_query(client):
    client.force_login(make_user("alice", "annotator"))
    with CaptureQueriesContext(connection) as queries:
        response = client.get(PAGE)
    assert response.status_code == 200 and response.wsgi_request.user.username == "alice"
    reads = [query["sql"] for query in queries if 'FROM "django_session"' in query["sql"]]
    assert len(reads) == 1 and reads[0].startswith('SELECT "session_data"')


def test_what_a_session_holds_comes_back_whole():
    store = SessionStore()
    store["answers"] = {"question": "Which image is brighter?", "order": [2, 1], "note": "ünïcode"}
    store.save()
    assert SessionStore(store.session_key).load() == {
        "answers": {"question": "Which image is brighter?", "order": [2, 1], "note": "ünïcode"}
    }


def test_an_expired_session_is_nobodys(client):
    client.force_login(make_user("alice", "annotator"))
    key = client.cookies[settings.SESSION_COOKIE_NAME].value
    Session.objects.filter(session_key=key).update(expire_date=timezone.now() - timedelta(seconds=1))
    assert not client.get(PAGE).wsgi_request.user.is_authenticated
    store = SessionStore(key)
    assert store.load() == {} and store.session_key is None  # a new session, never the expired one's key


def test_a_deleted_session_is_nobodys(client):
    client.force_login(make_user("alice", "annotator"))
    Session.objects.all().delete()
    assert not client.get(PAGE).wsgi_request.user.is_authenticated


def test_a_logout_ends_the_session_for_good(client):
    client.force_login(make_user("alice", "annotator"))
    key = client.cookies[settings.SESSION_COOKIE_NAME].value
    client.post("/accounts/logout/")
    assert not Session.objects.filter(session_key=key).exists()
    assert SessionStore(key).load() == {}

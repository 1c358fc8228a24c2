"""The test client's login (tests/conftest.py, `one_session_per_force_login`): one session saved, not an empty one
first, and still Django's login: the user is logged in on the next request, the key is cycled, user_logged_in is
sent (last_login, axes' access log), and a second login on the same client replaces the first session."""

from __future__ import annotations

import pytest
from axes.models import AccessLog
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def logged_in_as(client) -> str:
    return client.get("/account/tokens/").context["user"].username


def test_a_login_on_a_new_client_saves_one_session_and_sends_user_logged_in():
    user = make_user("cora", "coordinator")
    client = Client()
    with CaptureQueriesContext(connection) as queries:
        client.force_login(user)
    inserts = [query["sql"] for query in queries if query["sql"].startswith('INSERT INTO "django_session"')]
    assert len(inserts) == 1
    assert not any(query["sql"].startswith('DELETE FROM "django_session"') for query in queries)
    [session] = Session.objects.all()
    assert client.cookies["sessionid"].value == session.session_key
    assert logged_in_as(client) == "cora"
    user.refresh_from_db()
    assert user.last_login is not None
    assert AccessLog.objects.filter(username="cora").count() == 1


def test_a_second_login_on_the_same_client_cycles_the_session():
    first, second = make_user("alice", "annotator"), make_user("rita", "reviewer")
    client = Client()
    client.force_login(first)
    old = client.cookies["sessionid"].value
    client.force_login(second)
    new = client.cookies["sessionid"].value
    assert new != old
    assert list(Session.objects.values_list("session_key", flat=True)) == [new]
    assert logged_in_as(client) == "rita"
    client.logout()
    assert not Session.objects.exists()
    assert client.get("/account/tokens/").status_code == 302  # to the login page

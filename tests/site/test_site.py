from __future__ import annotations

import os

import pytest
from django.core.exceptions import ImproperlyConfigured

from devtools.localservices import BASE_DIR
from subtlebench.settings import database_from_url
from tests import similarity_fixtures
from tests.worker_zygote import python_run

pytestmark = pytest.mark.django_db
no_dinov3 = similarity_fixtures.no_dinov3


def test_it_redirects_anonymous_users_to_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_it_serves_the_login_page(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert b'name="password"' in response.content


def test_it_shows_coordinator_tiles_to_coordinators_only(client_for, coordinator, annotator):
    assert b"Human baseline" in client_for(coordinator).get("/").content
    assert b"Human baseline" not in client_for(annotator).get("/").content


def test_it_creates_the_three_role_groups():
    from django.contrib.auth.models import Group

    assert set(Group.objects.values_list("name", flat=True)) >= {"annotator", "reviewer", "coordinator"}


@pytest.mark.django_db(transaction=True)
def test_the_role_groups_come_back_after_a_flush():
    """`manage.py flush` truncates every table, auth_group too, and resets the ids; post_migrate makes the role groups
    again. (The suite's flush after a transactional test resets no ids and keeps the role groups: the test below.)"""
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0)
    assert set(Group.objects.values_list("name", flat=True)) == {"annotator", "reviewer", "coordinator"}


@pytest.mark.django_db(transaction=True)
def test_the_suites_flush_keeps_the_role_groups_with_their_ids_and_deletes_other_groups():
    """A dump of a database flushed by an earlier test loads into a fresh clone of the template (tests/conftest.py)."""
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    roles = dict(Group.objects.values_list("name", "pk"))
    Group.objects.create(name="volunteers")
    call_command("flush", interactive=False, verbosity=0, reset_sequences=False)  # as pytest-django's after a test
    assert dict(Group.objects.values_list("name", "pk")) == roles
    assert set(roles) == {"annotator", "reviewer", "coordinator"}


def test_healthz_answers_ok(client):
    assert client.get("/healthz").json() == {
        "status": "ok",
        "parts": {"database": {"status": "ok"}, "broker": {"status": "ok"}},
    }


def test_media_needs_login_and_refuses_parent_paths(client, client_for, annotator, settings):
    (settings.MEDIA_ROOT / "frames").mkdir(parents=True)
    (settings.MEDIA_ROOT / "frames" / "a.jpg").write_bytes(b"jpeg")
    assert client.get("/media/frames/a.jpg").status_code == 302
    client = client_for(annotator)
    assert b"".join(client.get("/media/frames/a.jpg").streaming_content) == b"jpeg"
    assert client.get("/media/../settings.py").status_code == 404


def test_it_parses_database_urls_with_a_socket_host():
    db = database_from_url("postgresql://u:p%40ss@/bench?host=/run/pg")
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["NAME"]) == ("u", "p@ss", "/run/pg", "bench")


def test_it_rejects_a_non_postgres_database_url():
    with pytest.raises(ImproperlyConfigured, match="postgresql://"):
        database_from_url("mysql://x@y/z")


def test_a_wrong_role_gets_a_page_that_says_which_role_is_needed(client_for, stranger):
    response = client_for(stranger).get("/jobs/")
    assert response.status_code == 403
    body = response.content.decode()
    assert "Not allowed" in body and "This page needs the role" in body and "sam" in body


def test_seed_demo_gives_the_demo_users_their_roles_even_without_the_groups(db):
    from django.contrib.auth.models import Group, User

    from demo.management.commands.seed_demo import seed_demo_users

    Group.objects.all().delete()  # e.g. after `manage.py flush`
    seed_demo_users()
    seed_demo_users()
    assert set(User.objects.get(username="annotator1").groups.values_list("name", flat=True)) == {"annotator"}
    assert set(User.objects.get(username="reviewer").groups.values_list("name", flat=True)) == {"reviewer", "annotator"}
    assert User.objects.get(username="coordinator").check_password("demo")


def test_the_site_pages_refuse_wrong_methods(client, client_for, annotator):
    assert client_for(annotator).post("/").status_code == 405
    assert client.post("/healthz").status_code == 405
    assert client_for(annotator).post("/media/frames/a.jpg").status_code == 405


def test_a_user_without_a_role_sees_how_to_get_one(client_for, stranger):
    page = client_for(stranger).get("/").content.decode()
    assert "Your account has no role yet" in page
    assert "Pick pairs</h2>" not in page and "Human baseline" not in page


@pytest.mark.parametrize("name", ["DATABASE_URL", "CELERY_BROKER_URL"])
def test_a_missing_service_url_stops_the_start_and_says_how_to_get_one(name):
    """No silent default (the old fixed ports were another checkout's servers): the message names the variable and
    the command that starts this checkout's own."""
    env = {key: value for key, value in os.environ.items() if key != name}
    result = python_run(
        ["-c", "import django; django.setup()"],
        env={**env, "DJANGO_SETTINGS_MODULE": "subtlebench.settings"},
        timeout=60,
        cwd=BASE_DIR,
    )
    assert result.returncode != 0
    assert f"{name} is not set" in result.stderr
    assert "python -m devtools.localservices -- COMMAND" in result.stderr


# --- The model banners: for the roles that act on similarities, never on the login page --------------------------


def demo_model_active(tmp_path):
    from annotator.similarity.services import embedding_model_activate
    from demo.similarity import build_demo_model

    return embedding_model_activate(folder=build_demo_model(tmp_path / "demo"), device="cpu", image_size=224)


@pytest.mark.torch
def test_the_demo_model_banner_is_not_shown_to_anonymous_visitors_or_users_without_a_role(
    client, client_for, stranger, tmp_path
):
    demo_model_active(tmp_path)
    login = client.get("/accounts/login/")
    assert login.status_code == 200 and "untrained demo model" not in login.content.decode()
    assert "untrained demo model" not in client_for(stranger).get("/", follow=True).content.decode()


@pytest.mark.torch
def test_the_demo_model_banner_is_shown_to_every_role_that_sees_similarities(
    client_for, annotator, reviewer, coordinator, tmp_path
):
    demo_model_active(tmp_path)
    for user in (annotator, reviewer, coordinator):
        assert "similarity from an untrained demo model" in client_for(user).get("/").content.decode(), user


def test_the_no_model_banner_is_for_coordinators_only(no_dinov3, client, client_for, annotator, coordinator):
    from annotator.similarity.services import NO_ACTIVE_MODEL, embedding_model_active

    assert embedding_model_active(fresh=True) is None
    assert NO_ACTIVE_MODEL in client_for(coordinator).get("/").content.decode()
    assert NO_ACTIVE_MODEL not in client_for(annotator).get("/").content.decode()
    assert NO_ACTIVE_MODEL not in client.get("/accounts/login/").content.decode()

"""Abuse and owners (issue 13): login lockout, participant throttles, API tokens (list, revoke, expiry), media for
roles only, the schema behind a login, security headers, server paths kept from non-coordinators, jobs by kind."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from annotator.models import EmbeddingModel, Job, Video, VideoSkip
from subtlebench.models import ApiToken, token_digest
from subtlebench.tokens import api_token_create
from tests.factories import make_video

pytestmark = pytest.mark.django_db


def throttle_rates(settings, **rates):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], **rates},
    }


def session_user_id(client):
    return client.session.get("_auth_user_id")


# --- Lockout after failed logins (django-axes) -----------------------------------------------------------------


def test_it_locks_out_the_login_page_after_repeated_wrong_passwords(client, annotator, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
        assert response.status_code == 200
        assert "Wrong username or password." in response.content.decode()
    assert client.post("/accounts/login/", {"username": "alice", "password": "wrong"}).status_code == 429
    # The right password no longer helps: the lockout page says until when.
    response = client.post("/accounts/login/", {"username": "alice", "password": "password"})
    assert response.status_code == 429
    page = response.content.decode()
    assert "Too many failed logins" in page and "Try again after" in page and " UTC" in page
    assert int(response["Retry-After"]) == settings.AXES_COOLOFF_TIME.total_seconds()
    assert session_user_id(client) is None


def test_a_lockout_is_per_username_and_address(client, annotator, annotator2, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    other_address = client.post(
        "/accounts/login/", {"username": "alice", "password": "password"}, REMOTE_ADDR="10.1.2.3"
    )
    assert other_address.status_code == 302
    client.logout()
    other_user = client.post("/accounts/login/", {"username": "bob", "password": "password"})
    assert other_user.status_code == 302


def test_a_success_before_the_limit_resets_the_count(client, annotator, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert client.post("/accounts/login/", {"username": "alice", "password": "password"}).status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert client.post("/accounts/login/", {"username": "alice", "password": "password"}).status_code == 302


def test_it_locks_out_the_token_endpoint_with_the_api_error_body(client, annotator, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert client.post("/api/token/", {"username": "alice", "password": "wrong"}).status_code == 400
    client.post("/api/token/", {"username": "alice", "password": "wrong"})
    response = client.post("/api/token/", {"username": "alice", "password": "password"})
    assert response.status_code == 429
    body = response.json()
    assert body["errors"] == {} and "Try again after" in body["detail"]
    assert int(response["Retry-After"]) > 0
    assert not ApiToken.objects.filter(user=annotator).exists()
    # The page's login is locked out too: one count for both ways in.
    assert client.post("/accounts/login/", {"username": "alice", "password": "password"}).status_code == 429


# --- Throttles on the anonymous participant endpoints --------------------------------------------------------


def test_the_participant_api_is_throttled_per_address(client, settings):
    throttle_rates(settings, participant="3/min")
    for _ in range(3):
        assert client.get("/api/p/no-such-token/item/").status_code == 404
    response = client.get("/api/p/no-such-token/item/")
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert set(response.json()) == {"detail", "errors"}
    answer = client.post("/api/p/no-such-token/item/x/answer/", {"option": 1}, content_type="application/json")
    assert answer.status_code == 429
    # Another address has its own count.
    assert client.get("/api/p/no-such-token/item/", REMOTE_ADDR="10.9.9.9").status_code == 404


def test_joining_by_open_link_is_throttled_per_address(client, settings):
    throttle_rates(settings, participant_join="2/min")
    for _ in range(2):
        assert client.get("/p/open/no-such-study/").status_code == 404
    response = client.get("/p/open/no-such-study/")
    assert response.status_code == 429
    assert "try again in" in response.content.decode()
    assert int(response["Retry-After"]) > 0


def test_behind_a_proxy_the_throttle_counts_the_forwarded_client(client, settings):
    throttle_rates(settings, participant="1/min")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    assert client.get("/api/p/t/item/", HTTP_X_FORWARDED_FOR="203.0.113.1").status_code == 404
    assert client.get("/api/p/t/item/", HTTP_X_FORWARDED_FOR="203.0.113.2").status_code == 404
    # A client's own X-Forwarded-For entry in front of the proxy's changes nothing.
    assert client.get("/api/p/t/item/", HTTP_X_FORWARDED_FOR="1.1.1.1, 203.0.113.1").status_code == 429


# --- API tokens ----------------------------------------------------------------------------------------------


def test_the_token_endpoint_makes_a_new_token_with_an_expiry_storing_only_its_digest(client, annotator):
    response = client.post("/api/token/", {"username": "alice", "password": "password", "expires_in_days": 7})
    assert response.status_code == 200
    body = response.json()
    token = ApiToken.objects.get(pk=body["id"])
    assert token.digest == token_digest(body["token"]) and body["token"] not in (token.digest, token.prefix)
    assert timedelta(days=6, hours=23) < token.expires - timezone.now() <= timedelta(days=7)
    # Unasked, a token expires anyway: API_TOKEN_DEFAULT_DAYS (90) days from now.
    second = client.post("/api/token/", {"username": "alice", "password": "password"}).json()
    expires = ApiToken.objects.get(pk=second["id"]).expires - timezone.now()
    assert second["token"] != body["token"] and timedelta(days=89, hours=23) < expires <= timedelta(days=90)


def test_an_expired_or_revoked_token_is_refused_at_authentication(client, annotator):
    token, key = api_token_create(user=annotator, expires_in_days=1)
    auth = {"HTTP_AUTHORIZATION": f"Token {key}"}
    assert client.get("/api/videos/", **auth).status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires=timezone.now() - timedelta(seconds=1))
    response = client.get("/api/videos/", **auth)
    assert response.status_code == 401 and "expired" in response.json()["detail"]
    assert "make a new one" in response.json()["detail"]
    other, other_key = api_token_create(user=annotator)
    client.post(f"/api/tokens/{other.pk}/revoke/", HTTP_AUTHORIZATION=f"Token {other_key}")
    response = client.get("/api/videos/", HTTP_AUTHORIZATION=f"Token {other_key}")
    assert response.status_code in (401, 403) and "revoked" in response.json()["detail"]
    assert client.get("/api/videos/", HTTP_AUTHORIZATION="Token not-a-key").status_code in (401, 403)


def test_the_api_lists_and_revokes_only_the_owners_tokens(client, annotator, annotator2):
    mine, key = api_token_create(user=annotator, name="script")
    theirs, _ = api_token_create(user=annotator2, name="theirs")
    auth = {"HTTP_AUTHORIZATION": f"Token {key}"}
    listed = client.get("/api/tokens/", **auth).json()
    assert [(t["id"], t["name"], t["state"]) for t in listed] == [(mine.pk, "script", "active")]
    assert key not in str(listed)
    assert client.post(f"/api/tokens/{theirs.pk}/revoke/", **auth).status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked is None
    assert client.post("/api/tokens/", **auth).status_code == 405
    assert client.get("/api/tokens/").status_code in (401, 403)


def test_the_account_page_lists_makes_and_revokes_tokens(client_for, annotator, annotator2):
    client = client_for(annotator)
    theirs, _ = api_token_create(user=annotator2, name="bob's")
    made = client.post("/account/tokens/", {"name": "nightly export", "expires_in_days": "30"})
    # Post/Redirect/Get: the key is shown once, on the GET the post redirects to; a reload shows it no more.
    assert made.status_code == 302 and made["Location"] == "/account/tokens/"
    token = ApiToken.objects.get(user=annotator)
    page = client.get(made["Location"]).content.decode()
    assert "Copy it now" in page and token.prefix in page and "nightly export" in page
    assert f'It expires on <strong id="new-token-expires">{token.expires:%Y-%m-%d %H:%M} UTC' in page
    assert "Copy it now" not in client.get("/account/tokens/").content.decode()
    assert "bob's" not in page
    assert client.post(f"/account/tokens/{theirs.pk}/revoke/").status_code == 302
    theirs.refresh_from_db()
    assert theirs.revoked is None
    client.post(f"/account/tokens/{token.pk}/revoke/")
    token.refresh_from_db()
    assert token.revoked is not None
    assert "revoked" in client.get("/account/tokens/").content.decode()


def test_the_account_page_names_the_field_of_a_bad_expiry(client_for, annotator, settings):
    client = client_for(annotator)
    for days in ("soon", "0", str(settings.API_TOKEN_MAX_DAYS + 1)):
        response = client.post("/account/tokens/", {"name": "x", "expires_in_days": days})
        assert response.status_code == 302
        assert "expires_in_days" in client.get(response["Location"]).content.decode()
    assert not ApiToken.objects.exists()


def test_the_account_pages_need_a_login_and_the_right_method(client, client_for, annotator):
    assert client.get("/account/tokens/")["Location"].startswith("/accounts/login/")
    assert client.post("/account/tokens/1/revoke/")["Location"].startswith("/accounts/login/")
    assert client_for(annotator).get("/account/tokens/1/revoke/")["Location"] == "/account/tokens/"
    assert client_for(annotator).put("/account/tokens/1/revoke/").status_code == 405


# --- Media, schema, headers ----------------------------------------------------------------------------------


def test_media_are_served_to_roles_only(client, client_for, stranger, annotator):
    name = default_storage.save("frames/secret/000001.jpg", ContentFile(b"\xff\xd8\xff jpeg"))
    assert client.get(f"/media/{name}")["Location"].startswith("/accounts/login/")
    assert client_for(stranger).get(f"/media/{name}").status_code == 404
    client.logout()
    response = client_for(annotator).get(f"/media/{name}")
    assert response.status_code == 200 and b"".join(response.streaming_content).endswith(b"jpeg")


def test_the_schema_and_docs_need_a_login(client, client_for, annotator):
    assert client.get("/api/schema/").status_code in (401, 403)
    for url in ("/api/docs/", "/api/redoc/"):
        assert client.get(url)["Location"].startswith("/accounts/login/")
    _, key = api_token_create(user=annotator)
    assert client.get("/api/schema/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    logged_in = client_for(annotator)
    docs = logged_in.get("/api/docs/")
    assert docs.status_code == 200 and "<script>" not in docs.content.decode()
    script = logged_in.get("/api/docs/?script=")
    assert script.status_code == 200 and script["Content-Type"].startswith("application/javascript")


@pytest.mark.parametrize("url", ["/accounts/login/", "/api/token/", "/p/open/x/", "/healthz"])
def test_every_answer_carries_the_security_headers(client, url):
    response = client.get(url)
    policy = response["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert directives["script-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["object-src"] == "'none'"
    assert directives["style-src"] == "'self'"  # style sheets from files only; style="" attributes allowed
    assert directives["style-src-attr"] == "'unsafe-inline'"
    assert "unsafe-inline" not in directives["script-src"] and "unsafe-eval" not in policy
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"


def test_no_template_has_an_inline_script_or_event_handler():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "templates"
    offenders = []
    for path in root.rglob("*.html"):
        text = path.read_text()
        for match in re.finditer(r"<script(?P<attrs>[^>]*)>", text):
            attrs = match.group("attrs")
            if "src=" not in attrs and "application/json" not in attrs:
                offenders.append(f"{path.relative_to(root)}: inline <script>")
        if re.search(r"\son[a-z]+\s*=\s*[\"']", text):
            offenders.append(f"{path.relative_to(root)}: an on...= event handler")
    assert not offenders, offenders


# --- Server paths and jobs by kind ---------------------------------------------------------------------------


def test_server_paths_keep_only_their_last_part_for_non_coordinators(client_for, annotator, coordinator):
    Video.objects.create(
        yt8m_id="bad",
        source="/data/imports/batch7/bad.mp4",
        status="failed",
        error="/data/imports/batch7/bad.mp4: empty",
    )
    seen = client_for(annotator).get("/api/videos/?status=failed").json()["results"][0]
    assert (seen["source"], seen["error"]) == ("bad.mp4", "bad.mp4: empty")
    full = client_for(coordinator).get("/api/videos/?status=failed").json()["results"][0]
    assert full["source"] == "/data/imports/batch7/bad.mp4"


def test_the_models_folder_is_shown_to_coordinators_only(client_for, annotator, coordinator, active_embedding_model):
    folder = active_embedding_model.folder
    assert folder.startswith("/")
    video = make_video(frames=2)
    for user, shown in ((annotator, False), (coordinator, True)):
        client = client_for(user)
        page = client.get("/jobs/").content.decode()
        assert (folder in page) is shown
        assert "{#" not in page
        model = client.get(f"/api/videos/{video.pk}/embeddings/").json()["embedding_model"]
        assert (model["folder"] == folder) is shown
        assert model["folder"].endswith(folder.rstrip("/").rsplit("/", 1)[-1])
    assert EmbeddingModel.objects.get(pk=active_embedding_model.pk).folder == folder  # nothing was overwritten


def test_jobs_are_visible_to_the_roles_of_their_kind(client_for, annotator, reviewer, coordinator):
    export = Job.objects.create(
        kind=Job.Kind.EXPORT, title="Export", status="succeeded", result={"out": "/data/exports/v1", "items": 3}
    )
    imported = Job.objects.create(kind=Job.Kind.IMPORT, title="Import", errors=["/data/imports/a/x.mp4: empty"])
    run = Job.objects.create(kind=Job.Kind.SIMILARITY, title="Similarity", errors=["the run stopped: /models/d/w"])
    for user in (annotator, reviewer):
        client = client_for(user)
        for job in (export, imported):
            assert client.get(f"/api/jobs/{job.pk}/").status_code == 404
            assert client.get(f"/jobs/{job.pk}/").status_code == 404
        assert [j["id"] for j in client.get("/api/jobs/").json()["results"]] == [run.pk]
        assert client.get(f"/api/jobs/{run.pk}/").json()["errors"] == ["the run stopped: w"]
        assert "/models/d" not in client.get(f"/jobs/{run.pk}/").content.decode()
        assert "/data/" not in client.get("/jobs/").content.decode()
    client = client_for(coordinator)
    assert client.get(f"/api/jobs/{export.pk}/").json()["result"]["out"] == "/data/exports/v1"
    assert len(client.get("/api/jobs/").json()["results"]) == 3


# --- Video leases: owners ------------------------------------------------------------------------------------


def test_only_the_lease_holder_or_a_coordinator_releases_or_flags_a_video(
    client_for, annotator, annotator2, coordinator
):
    video = make_video(frames=3)
    assert client_for(annotator).post("/api/work/lease/").json()["video"]["id"] == video.pk
    intruder = client_for(annotator2)  # the test client, logged in as another annotator now
    refused = intruder.post(f"/api/videos/{video.pk}/release/", {"reason": "inappropriate"})
    assert refused.status_code == 403 and "lease holder" in refused.json()["detail"]
    video.refresh_from_db()
    assert video.lease_holder_id == annotator.pk and not VideoSkip.objects.exists()
    # The coordinator flags it out of everyone's queue, whoever holds it.
    flagged = client_for(coordinator).post(f"/api/videos/{video.pk}/release/", {"reason": "inappropriate"})
    assert flagged.status_code == 200
    video.refresh_from_db()
    assert video.lease_holder_id is None
    assert VideoSkip.objects.get().user == coordinator


def test_a_heartbeat_never_takes_a_flagged_or_given_back_video(client_for, annotator, annotator2):
    flagged, given_back = make_video(frames=3), make_video(frames=3)
    client = client_for(annotator)
    assert client.post(f"/api/videos/{flagged.pk}/heartbeat/").status_code == 200
    assert client.post(f"/api/videos/{flagged.pk}/release/", {"reason": "bad_video"}).status_code == 200
    assert client.post(f"/api/videos/{given_back.pk}/heartbeat/").status_code == 200
    assert client.post(f"/api/videos/{given_back.pk}/release/", {"reason": "done"}).status_code == 200
    for video in (flagged, given_back):
        response = client.post(f"/api/videos/{video.pk}/heartbeat/")
        assert response.status_code == 409 and "given back or flagged" in response.json()["detail"]
    other = client_for(annotator2)
    assert other.post(f"/api/videos/{flagged.pk}/heartbeat/").status_code == 409  # flagged: for everyone
    assert other.post(f"/api/videos/{given_back.pk}/heartbeat/").status_code == 200  # done: only for alice
    for video in Video.objects.filter(pk=flagged.pk):
        assert video.lease_holder_id is None


def test_the_migration_carries_over_the_tokens_of_drfs_old_table(client, annotator):
    from importlib import import_module

    from django.apps import apps
    from django.db import connection

    migration = import_module("subtlebench.migrations.0001_api_tokens")
    key = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"
    with connection.cursor() as cursor:  # DRF's authtoken table as an older deployment has it
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, user_id integer, created timestamptz)"
        )
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, %s, now())", [key, annotator.pk])
    with connection.schema_editor() as editor:
        migration.import_drf_tokens(apps, editor)
    assert client.get("/api/videos/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    assert ApiToken.objects.get().digest == token_digest(key)


def test_an_administrator_revokes_any_token_in_the_admin(client, annotator):
    from django.contrib.auth.models import User

    token, key = api_token_create(user=annotator)
    client.force_login(User.objects.create_superuser("root", password="password"))
    response = client.post(
        "/admin/subtlebench/apitoken/", {"action": "revoke", "_selected_action": [token.pk]}, follow=True
    )
    assert "1 token(s) revoked." in response.content.decode()
    assert key not in client.get(f"/admin/subtlebench/apitoken/{token.pk}/change/").content.decode()
    client.logout()
    assert client.get("/api/videos/", HTTP_AUTHORIZATION=f"Token {key}").status_code in (401, 403)

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection

from annotator.models import Job
from subtlebench.tokens import api_token_create

pytestmark = pytest.mark.django_db


def make_job(**fields) -> Job:
    defaults = {"kind": Job.Kind.IMPORT, "title": "Import 3 videos", "total": 4}
    return Job.objects.create(**{**defaults, **fields})


def test_it_redirects_anonymous_users_from_the_jobs_pages(client):
    job = make_job()
    for url in ("/jobs/", f"/jobs/{job.pk}/"):
        assert client.get(url)["Location"].startswith("/accounts/login/")


def test_it_refuses_users_without_a_role(client_for, stranger):
    job = make_job()
    client = client_for(stranger)
    assert client.get("/jobs/").status_code == 403
    assert client.get(f"/jobs/{job.pk}/").status_code == 403


def test_it_refuses_post_on_the_jobs_pages(client_for, annotator):
    job = make_job()
    client = client_for(annotator)
    assert client.post("/jobs/").status_code == 405
    assert client.post(f"/jobs/{job.pk}/").status_code == 405


def test_the_list_shows_progress_and_polls_only_while_a_job_is_active(client_for, coordinator):
    job = make_job(status=Job.Status.RUNNING, done=1)
    client = client_for(coordinator)
    page = client.get("/jobs/").content.decode()
    assert "Import 3 videos" in page
    assert "width: 25%" in page
    assert 'hx-trigger="every 1s"' in page
    job.finish(result={"videos": 3})
    page = client.get("/jobs/").content.decode()
    assert "width: 100%" in page
    assert 'hx-trigger="every 1s"' not in page


def test_an_htmx_poll_returns_only_the_rows(client_for, coordinator):
    make_job(status=Job.Status.RUNNING)
    response = client_for(coordinator).get("/jobs/", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.strip().startswith('<tbody id="job-rows"')
    assert "<html" not in body


def test_the_list_runs_a_bounded_number_of_queries(client_for, coordinator, django_assert_max_num_queries):
    for index in range(30):
        make_job(title=f"job {index}", created_by=coordinator)
    client = client_for(coordinator)
    with django_assert_max_num_queries(8):  # 6, plus beat's tick and the units waiting for the sweeper (one each)
        response = client.get("/jobs/")
    assert response.content.decode().count("<tr>") == 31


def test_the_list_filters_by_kind(client_for, coordinator):
    make_job(title="an import")
    make_job(kind=Job.Kind.EXPORT, title="an export")
    page = client_for(coordinator).get("/jobs/?kind=export").content.decode()
    assert "an export" in page and "an import" not in page


def test_the_detail_page_shows_errors_and_the_result(client_for, coordinator):
    job = make_job()
    job.start(total=2)
    job.advance(error="clip.mp4: not a video file (no video stream)")
    job.advance()
    job.finish(result={"frames": 120})
    page = client_for(coordinator).get(f"/jobs/{job.pk}/").content.decode()
    assert "clip.mp4: not a video file (no video stream)" in page
    assert "frames" in page and "120" in page
    assert "succeeded" in page
    assert 'hx-trigger="every 1s"' not in page


def test_the_detail_of_a_missing_job_is_404(client_for, annotator):
    assert client_for(annotator).get("/jobs/999999/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_concurrent_advances_lose_no_step_and_no_error():
    job = make_job(total=40)

    def work(number):
        for step in range(10):
            job_copy = Job.objects.get(pk=job.pk)
            job_copy.advance(error=f"worker {number} step {step}" if step == 0 else None)
        connection.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    job.refresh_from_db()
    assert job.done == 40
    assert sorted(job.errors) == [f"worker {n} step 0" for n in range(4)]


def test_the_api_lists_and_shows_jobs_with_token_auth(client, annotator):
    job = make_job(kind=Job.Kind.SIMILARITY, status=Job.Status.RUNNING, done=2)
    _, key = api_token_create(user=annotator)
    auth = {"HTTP_AUTHORIZATION": f"Token {key}"}
    listed = client.get("/api/jobs/?kind=similarity", **auth).json()
    assert listed["count"] == 1
    assert listed["results"][0]["percent"] == 50
    detail = client.get(f"/api/jobs/{job.pk}/", **auth).json()
    assert (detail["status"], detail["done"], detail["total"]) == ("running", 2, 4)


def test_the_api_refuses_anonymous_users_wrong_roles_and_wrong_methods(client, client_for, stranger, annotator):
    job = make_job()
    assert client.get("/api/jobs/").status_code in (401, 403)
    assert client.get(f"/api/jobs/{job.pk}/").status_code in (401, 403)
    assert client_for(stranger).get("/api/jobs/").status_code == 403
    assert client_for(annotator).post("/api/jobs/").status_code == 405


def test_the_api_token_endpoint_exchanges_a_password_for_a_token(client, annotator):
    response = client.post("/api/token/", {"username": "alice", "password": "password"})
    assert response.status_code == 200
    key = response.json()["token"]
    assert client.get("/api/jobs/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    assert client.post("/api/token/", {"username": "alice", "password": "nope"}).status_code == 400


def test_the_schema_and_docs_are_served_from_local_files(client_for, annotator):
    client = client_for(annotator)
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/jobs/" in schema.content
    docs = client.get("/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in docs
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", docs)  # nothing from another host (no CDN)

"""The /exports/ pages, the export API and the export job: permissions, starting, history, downloads."""

from __future__ import annotations

import io
import urllib.request
import zipfile

import pytest
from django.urls import reverse

from annotator.export.services import (
    MANIFEST,
    ExportOptions,
    export_run,
    export_start,
    export_zip_run,
    export_zip_start,
)
from annotator.jobs.services import UnitRef
from annotator.models import Job, Release, ReleasePublication
from tests.conftest import wait_until
from tests.export_fixtures import make_pair, tree_bytes
from tests.factories import unit_of_a_dead_run

pytestmark = pytest.mark.django_db

PAGES = ["/exports/", "/exports/history/"]
API = ["/api/exports/", "/api/exports/1/"]


@pytest.fixture(autouse=True)
def export_root(settings, tmp_path):
    settings.EXPORT_ROOT = tmp_path / "exports"
    return settings.EXPORT_ROOT


def finished_export(user, out: str, **options) -> Job:
    job = export_start(options=ExportOptions(out=out, reproducible=True, **options), user=user)
    return export_run(job_id=job.pk)


@pytest.mark.parametrize("url", [*PAGES, "/exports/1/download/", "/exports/1/zip/"])
def test_pages_send_anonymous_users_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.parametrize("url", [*PAGES, "/exports/1/download/", "/exports/1/zip/"])
def test_pages_refuse_other_roles(client_for, annotator, reviewer, url):
    assert client_for(annotator).get(url).status_code == 403
    assert client_for(reviewer).get(url).status_code == 403
    assert client_for(reviewer).post(url).status_code in (403, 405)


@pytest.mark.parametrize("url", [*PAGES, "/exports/1/download/", "/exports/1/zip/"])
def test_pages_refuse_wrong_methods(client_for, coordinator, url):
    assert client_for(coordinator).put(url).status_code == 405


@pytest.mark.parametrize("url", [*API, "/api/exports/start/"])
def test_api_refuses_anonymous_users_and_other_roles(client, client_for, annotator, url):
    assert client.get(url).status_code in (401, 403)
    assert client_for(annotator).get(url).status_code == 403


def test_api_refuses_wrong_methods(client_for, coordinator):
    api = client_for(coordinator)
    assert api.post("/api/exports/").status_code == 405
    assert api.get("/api/exports/start/").status_code == 405
    assert api.post("/api/exports/1/").status_code == 405


def test_a_coordinator_starts_an_export_job_that_writes_the_export(
    client_for, coordinator, export_root, django_capture_on_commit_callbacks
):
    make_pair()
    page = client_for(coordinator)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = page.post("/exports/", {"target": "v1", "val_fraction": "0", "seed": "0", "action": "start"})
    assert response.status_code == 302 and len(callbacks) == 1
    job = Job.objects.get(kind=Job.Kind.EXPORT)
    assert job.status == Job.Status.QUEUED and job.created_by == coordinator
    assert job.result["options"]["out"] == str(export_root / "v1")

    job = export_run(job_id=job.pk)

    assert job.status == Job.Status.SUCCEEDED and job.done == job.total == 1
    assert job.result["splits"] == {"test": 1, "val": 0} and (export_root / "v1" / MANIFEST).exists()
    assert export_run(job_id=job.pk).finished == job.finished  # a redelivered task changes nothing


def test_the_page_previews_counts_without_starting_a_job(client_for, coordinator):
    make_pair(category="temporal")
    make_pair(answer="x", distractors=["x"])
    response = client_for(coordinator).post(
        "/exports/", {"target": "v1", "val_fraction": "0", "seed": "0", "action": "preview"}, follow=True
    )
    html = response.content.decode()
    # Post/Redirect/Get: the preview is the page's GET with the form in the query (a reload asks nothing).
    [(address, status)] = response.redirect_chain
    assert status == 302 and address.startswith("/exports/?") and "action=preview" in address
    assert "csrfmiddlewaretoken" not in address
    assert response.status_code == 200 and "Preview: 1 items" in html and "1 skipped" in html
    assert "is among the distractors" in html
    assert not Job.objects.exists()


def test_the_page_refuses_a_target_that_is_a_path(client_for, coordinator):
    response = client_for(coordinator).post(
        "/exports/", {"target": "../etc", "val_fraction": "0.1", "seed": "0"}, follow=True
    )
    assert response.redirect_chain == [("/exports/", 302)]
    assert "must be a plain name" in response.content.decode() and not Job.objects.exists()


def test_an_export_job_lists_an_item_whose_image_is_gone_with_the_reason(coordinator, export_root):
    make_pair()
    pair = make_pair()
    pair.image_1.file.delete(save=False)
    job = finished_export(coordinator, str(export_root / "v1"))
    assert job.status == Job.Status.SUCCEEDED and job.result["items"] == 1
    [skipped] = job.result["skipped"]
    assert skipped["pair"] == pair.pk and "cannot be read from storage" in skipped["reason"]


def test_the_history_lists_exports_with_counts_links_and_a_bounded_query_count(
    client_for, coordinator, export_root, django_assert_max_num_queries
):
    make_pair()
    jobs = [finished_export(coordinator, str(export_root / f"v{n}"), val_fraction=0) for n in range(3)]
    page = client_for(coordinator)
    with django_assert_max_num_queries(8):
        html = page.get("/exports/").content.decode()
    for job in jobs:
        assert f'href="/jobs/{job.pk}/"' in html and reverse("export-download", args=[job.pk]) in html
    assert html.count('<td class="num">1</td>') == 3
    with django_assert_max_num_queries(6):
        assert page.get("/exports/history/").status_code == 200


def test_the_history_polls_only_while_an_export_runs(client_for, coordinator):
    page = client_for(coordinator)
    job = export_start(options=ExportOptions(out="x"), user=coordinator)
    assert 'hx-trigger="every 2s"' in page.get("/exports/history/").content.decode()
    Job.objects.filter(pk=job.pk).update(status=Job.Status.SUCCEEDED)
    assert 'hx-trigger="every 2s"' not in page.get("/exports/history/").content.decode()


def test_a_worker_job_builds_the_zip_once_and_the_page_serves_it_as_a_file(
    client_for, coordinator, export_root, django_assert_max_num_queries
):
    make_pair()
    job = finished_export(coordinator, str(export_root / "v1"))
    page = client_for(coordinator)
    html = page.get(f"/exports/{job.pk}/download/").content.decode()
    assert f'action="/exports/{job.pk}/zip/"' in html and "Build the zip" in html
    assert not (export_root / ".zips").exists()  # nothing is zipped inside a web request

    assert page.post(f"/exports/{job.pk}/zip/")["Location"] == f"/exports/{job.pk}/download/"
    assert page.post(f"/exports/{job.pk}/zip/").status_code == 302  # a second request joins the job building it
    zip_job = Job.objects.get(kind=Job.Kind.ZIP)
    assert zip_job.status == Job.Status.QUEUED and zip_job.result["export_job"] == job.pk
    building = page.get(f"/exports/{job.pk}/download/").content.decode()
    assert "A worker is building the zip" in building and 'hx-trigger="every 1s"' in building
    assert "?file=1" not in building

    zip_job = export_zip_run(job_id=zip_job.pk)
    assert zip_job.status == Job.Status.SUCCEEDED and zip_job.done == zip_job.total
    ready = page.get(f"/exports/{job.pk}/download/").content.decode()
    assert f'href="/exports/{job.pk}/download/?file=1"' in ready and "hx-trigger" not in ready
    response = page.get(f"/exports/{job.pk}/download/?file=1")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert 'filename="v1-' in response["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert {name: archive.read(name) for name in archive.namelist()} == tree_bytes(export_root / "v1")
    job.refresh_from_db()
    assert Job.PUBLIC_SINCE in job.result

    assert page.post(f"/exports/{job.pk}/zip/").status_code == 302
    assert Job.objects.filter(kind=Job.Kind.ZIP).count() == 1  # built once: the next downloads reuse it
    assert [p.name for p in (export_root / ".zips").iterdir()] == [f"{job.result['manifest_sha256']}.zip"]


def test_a_zip_job_replayed_after_its_zip_exists_builds_nothing_again(coordinator, export_root):
    make_pair()
    job = finished_export(coordinator, str(export_root / "v1"))
    first = export_zip_run(job_id=export_zip_start(job=job, user=coordinator).pk)
    built = export_root / ".zips" / f"{job.result['manifest_sha256']}.zip"
    stamp = built.stat().st_mtime_ns
    assert export_zip_start(job=job, user=coordinator) is None
    assert export_zip_run(job_id=first.pk).status == Job.Status.SUCCEEDED and built.stat().st_mtime_ns == stamp


def test_a_zip_unit_run_again_after_its_worker_died_counts_its_files_from_the_start(coordinator, export_root):
    make_pair()
    job = finished_export(coordinator, str(export_root / "v1"))
    zip_job = export_zip_start(job=job, user=coordinator)
    unit = unit_of_a_dead_run(zip_job, steps=2)
    zip_job = export_zip_run(job_id=zip_job.pk, unit=UnitRef(unit.pk, worker="celery@second"))
    assert zip_job.status == Job.Status.SUCCEEDED and zip_job.total > 2
    assert zip_job.done == zip_job.total


def test_a_replaced_export_can_no_longer_be_downloaded_and_its_page_says_why(client_for, coordinator, export_root):
    make_pair()
    old = finished_export(coordinator, str(export_root / "v1"))
    make_pair()
    new = finished_export(coordinator, str(export_root / "v1"), replace=True)
    response = client_for(coordinator).get(f"/exports/{old.pk}/download/")
    html = response.content.decode()
    assert response.status_code == 410 and "no longer holds this export" in html
    assert f"Replaced by export #{new.pk}" in html and "<h1>Export" in html and 'href="/exports/"' in html


def test_it_hands_out_a_presigned_url_for_an_s3_export(client_for, coordinator, s3_bucket):
    make_pair()
    job = finished_export(coordinator, f"s3://{s3_bucket}/bench")
    response = client_for(coordinator).get(f"/exports/{job.pk}/download/")
    assert response.status_code == 302 and "Signature" in response["Location"]
    with urllib.request.urlopen(response["Location"]) as download:
        archive = zipfile.ZipFile(io.BytesIO(download.read()))
    assert "data/test.jsonl" in archive.namelist() and MANIFEST in archive.namelist()


def test_with_media_in_s3_a_page_export_goes_to_the_bucket_and_is_public_only_once_downloaded(
    client_for, coordinator, s3_storage, export_root
):
    """A worker's disk is not the web's: the page's exports go where every host reads them."""
    make_pair()
    page = client_for(coordinator)
    page.post("/exports/", {"target": "bench", "val_fraction": "0", "seed": "0", "release": "on"})
    job = export_run(job_id=Job.objects.get(kind=Job.Kind.EXPORT).pk)
    assert job.status == Job.Status.SUCCEEDED, job.errors
    assert job.result["out"] == f"s3://{s3_storage}/exports/bench" and not export_root.exists()
    release = Release.objects.get(export_job=job)
    assert not release.publications.exists()  # the app's own storage, as EXPORT_ROOT is: nothing handed out yet
    response = page.get(f"/exports/{job.pk}/download/")
    assert response.status_code == 302 and "Signature" in response["Location"]
    assert release.publications.get().how == ReleasePublication.How.ZIP_DOWNLOAD

    elsewhere = finished_export(coordinator, f"s3://{s3_storage}/published", release=True)  # someone's prefix
    assert Release.objects.get(export_job=elsewhere).publications.get().how == ReleasePublication.How.S3_TARGET


def test_an_unfinished_export_has_no_download(client_for, coordinator):
    job = export_start(options=ExportOptions(out="x"), user=coordinator)
    assert client_for(coordinator).get(f"/exports/{job.pk}/download/").status_code == 404


def test_the_api_starts_lists_and_details_exports(client_for, coordinator, export_root):
    make_pair()
    api = client_for(coordinator)
    response = api.post(
        "/api/exports/start/", {"target": "api-v1", "val_fraction": 0, "categories": ["temporal"]}, "application/json"
    )
    assert response.status_code == 202
    job_id = response.json()["id"]
    assert response.json()["options"]["categories"] == ["temporal"]
    export_run(job_id=job_id)
    detail = api.get(f"/api/exports/{job_id}/").json()
    assert detail["status"] == "succeeded" and detail["result"]["items"] == 1
    assert detail["job_url"] == f"/jobs/{job_id}/" and detail["download_url"] == f"/exports/{job_id}/download/"
    assert [row["id"] for row in api.get("/api/exports/").json()["results"]] == [job_id]


def test_the_api_rejects_bad_options_with_a_message(client_for, coordinator):
    api = client_for(coordinator)
    response = api.post("/api/exports/start/", {"target": "/etc"}, "application/json")
    assert response.status_code == 400 and "plain name" in response.json()["detail"]
    response = api.post("/api/exports/start/", {"target": "x", "categories": ["colour"]}, "application/json")
    assert response.status_code == 400 and "categories" in response.json()["errors"]


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_export_job(client_for, coordinator, celery_worker_process, export_root):
    make_pair()
    celery_worker_process(EXPORT_ROOT=str(export_root))
    response = client_for(coordinator).post("/exports/", {"target": "e2e", "val_fraction": "0", "seed": "0"})
    assert response.status_code == 302
    job = Job.objects.get(kind=Job.Kind.EXPORT)
    wait_until(lambda: Job.objects.get(pk=job.pk).status == Job.Status.SUCCEEDED, 60, "the export job")
    assert (export_root / "e2e/data/test.jsonl").read_text().count("\n") == 1


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_coordinator_previews_and_starts_an_export_in_the_browser(page, coordinator, export_root):
    from tests.conftest import browser_login

    make_pair(category="viewpoint", answer="left", distractors=["right"])
    make_pair(answer="x", distractors=["x"])
    browser_login(page, "cora")
    page.goto("/exports/")
    page.fill("input[name=target]", "browser-v1")
    page.fill("input[name=val_fraction]", "0")
    page.click("button[value=preview]")
    preview = page.locator("#export-preview")
    assert "Preview: 1 items" in preview.inner_text() and "is among the distractors" in preview.inner_text()
    page.click("button[value=start]")
    page.wait_for_selector("#export-history .badge-queued")
    job = Job.objects.get(kind=Job.Kind.EXPORT)
    assert job.result["options"]["out"] == str(export_root / "browser-v1")
    assert page.locator("#export-history").get_attribute("hx-trigger") == "every 2s"


def test_the_job_counts_progress_while_it_streams_the_pairs(coordinator, export_root, monkeypatch):
    from annotator.export import services as export_module

    monkeypatch.setattr(export_module, "CHUNK", 2)  # fetch 2 rows at a time, report progress after each 2
    advances = []
    real_advance = Job.advance
    monkeypatch.setattr(
        Job, "advance", lambda job, steps=1, error=None: (advances.append(steps), real_advance(job, steps, error))
    )
    for _ in range(5):
        make_pair()
    job = finished_export(coordinator, str(export_root / "v1"), val_fraction=0)
    assert job.status == Job.Status.SUCCEEDED and job.total == job.done == 5 and job.result["items"] == 5
    assert advances == [2, 2, 1]


def test_the_preview_warns_before_an_export_that_would_leave_val_out(client_for, coordinator, export_root):
    from tests.export_fixtures import video_with_pairs

    video_with_pairs(2)  # one video: one group, which cannot be split
    page = client_for(coordinator)
    form = {"target": "v1", "val_fraction": "0.1", "seed": "0", "action": "preview"}
    html = page.post("/exports/", form, follow=True).content.decode()
    assert 'id="export-warnings"' in html
    assert "The val split has no item: data/val.jsonl and its config are left out" in html
    make_pair()  # a second group: val gets one
    html = page.post("/exports/", form, follow=True).content
    assert b'id="export-warnings"' not in html


def test_the_history_marks_a_split_that_was_left_out(client_for, coordinator, export_root):
    make_pair()
    finished_export(coordinator, str(export_root / "v1"), val_fraction=0)
    html = client_for(coordinator).get("/exports/history/").content.decode()
    assert 'title="no item: data/val.jsonl left out"' in html


def test_starting_an_export_over_an_earlier_one_asks_first_and_replaces_only_when_confirmed(
    client_for, coordinator, export_root, django_capture_on_commit_callbacks
):
    make_pair()
    old = finished_export(coordinator, str(export_root / "v1"))
    page = client_for(coordinator)
    form = {"target": "v1", "val_fraction": "0", "seed": "0"}

    response = page.post("/exports/", {**form, "action": "start"}, follow=True)
    html = response.content.decode()
    assert response.status_code == 200 and 'id="export-replace"' in html
    assert "action=preview" in response.redirect_chain[0][0]  # the preview, which asks first
    assert f"This target already holds an export</strong> (export #{old.pk} of" in html
    assert 'name="action" value="replace"' in html
    assert Job.objects.filter(kind=Job.Kind.EXPORT).count() == 1  # nothing started

    with django_capture_on_commit_callbacks(execute=True):
        assert page.post("/exports/", {**form, "action": "replace"}).status_code == 302
    new = Job.objects.filter(kind=Job.Kind.EXPORT).exclude(pk=old.pk).get()
    assert new.result["options"]["replace"] is True
    export_run(job_id=new.pk)

    old.refresh_from_db()
    assert old.result["replaced_by"] == new.pk
    history = page.get("/exports/history/").content.decode()
    assert reverse("export-download", args=[new.pk]) in history
    assert reverse("export-download", args=[old.pk]) not in history  # no dead link
    assert f"Replaced by export #{new.pk}" in history and ">replaced</span>" in history


def test_the_history_and_the_download_say_when_an_exports_folder_was_removed(client_for, coordinator, export_root):
    import shutil

    make_pair()
    job = finished_export(coordinator, str(export_root / "v1"))
    shutil.rmtree(export_root / "v1")
    page = client_for(coordinator)
    history = page.get("/exports/history/").content.decode()
    assert ">removed</span>" in history and "Removed: its folder no longer holds an export." in history
    assert reverse("export-download", args=[job.pk]) not in history
    response = page.get(f"/exports/{job.pk}/download/")
    assert response.status_code == 410 and f"Export #{job.pk} is no longer available" in response.content.decode()


def test_the_api_refuses_to_replace_an_export_unless_asked(client_for, coordinator, export_root):
    make_pair()
    old = finished_export(coordinator, str(export_root / "v1"))
    api = client_for(coordinator)
    response = api.post("/api/exports/start/", {"target": "v1"}, "application/json")
    assert response.status_code == 409 and "already holds an export" in response.json()["detail"]
    response = api.post("/api/exports/start/", {"target": "v1", "replace": True}, "application/json")
    assert response.status_code == 202
    export_run(job_id=response.json()["id"])
    assert api.get(f"/api/exports/{old.pk}/").json()["download_url"] is None


def test_the_preview_asks_about_replacing_an_earlier_export_at_once(client_for, coordinator, export_root):
    make_pair()
    finished_export(coordinator, str(export_root / "v1"))
    response = client_for(coordinator).post(
        "/exports/", {"target": "v1", "val_fraction": "0", "seed": "0", "action": "preview"}, follow=True
    )
    html = response.content.decode()
    assert "Preview: 1 items" in html and 'id="export-replace"' in html
    assert Job.objects.filter(kind=Job.Kind.EXPORT).count() == 1


def test_a_failed_zip_job_retried_zips_the_same_export(coordinator, export_root):
    from annotator.jobs.services import job_retry

    make_pair()
    job = finished_export(coordinator, str(export_root / "v1"))
    zip_job = export_zip_start(job=job, user=coordinator)
    Job.objects.filter(pk=zip_job.pk).update(status=Job.Status.FAILED)
    zip_job.refresh_from_db()
    again = export_zip_run(job_id=job_retry(job=zip_job, user=coordinator).pk)
    assert again.status == Job.Status.SUCCEEDED and again.result["export_job"] == job.pk
    assert (export_root / ".zips" / f"{job.result['manifest_sha256']}.zip").is_file()

"""Jobs in words (issue 26): what each kind did, with links, instead of its result's raw keys; "nothing to do" for a
similarity run that had none, never "0 / 0"; and what an active job that has not moved waits for."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotator.jobs.summary import job_summary, job_waiting
from annotator.models import Job, JobTask

pytestmark = pytest.mark.django_db

IMPORT_RESULT = {
    "source": "clips",
    "every": 1.0,
    "frames_per_video": None,
    "videos_ok": 3,
    "videos_skipped": 1,
    "videos_failed": 1,
    "frames": 42,
    "seconds": 12.4,
}


def finished(kind, result, **fields) -> Job:
    return Job.objects.create(kind=kind, title=f"{kind} job", status=Job.Status.SUCCEEDED, result=result, **fields)


def test_an_import_says_what_it_sampled_with_links_and_no_raw_keys(client_for, coordinator):
    job = finished(Job.Kind.IMPORT, IMPORT_RESULT, total=5, done=5)
    text = str(job_summary(job))
    assert text.startswith(
        "Sampled 3 videos from clips: 42 frames in 12 s, a frame every 1 s. 1 video had been sampled"
    )
    assert "1 video failed (the reasons are listed)." in text and "<a href='/videos/'>See the videos</a>" in text
    page = client_for(coordinator).get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="job-summary">Sampled 3 videos from clips' in page
    assert '<details class="card" id="job-details">' in page  # the raw keys are kept, folded away


def test_a_similarity_run_with_nothing_to_do_says_so_and_the_list_shows_no_zero_of_zero(client_for, coordinator):
    job = finished(Job.Kind.SIMILARITY, {"model": "demo-dinov3", "embedded": 0, "failed": 0, "pairs_scored": 0})
    assert str(job_summary(job)).startswith("Nothing to do: every image already had an embedding by model")
    page = client_for(coordinator).get("/jobs/").content.decode()
    assert "0 / 0" not in page and "Nothing to do" in page
    busy = finished(Job.Kind.SIMILARITY, {"model": "m", "embedded": 40, "failed": 2, "pairs_scored": 7}, total=3)
    assert (
        str(job_summary(busy))
        == "Embedded 40 images and scored 7 pairs; 2 images failed with model <span class='mono'>m</span>."
    )


def test_an_export_names_its_release_and_its_left_out_items():
    result = {
        "out": "/srv/bench",
        "items": 12,
        "splits": {"test": 10, "val": 2},
        "skipped_count": 3,
        "release": {"number": 2, "name": "v2", "title": ""},
    }
    text = str(job_summary(finished(Job.Kind.EXPORT, result)))
    assert text.startswith("Exported 12 items (10 test, 2 val); 3 left out (the reasons are listed below) to ")
    assert "<a href='/releases/v2/'>Release v2</a>" in text


def test_an_exports_summary_with_its_folder_is_shown_to_coordinators_only(client_for, reviewer, coordinator):
    result = {"out": "/srv/secret/bench", "items": 1, "splits": {"test": 1}}
    job = finished(Job.Kind.EXPORT, result, created_by=coordinator)
    assert "Exported 1 item (1 test) to <span class='mono'>/srv/secret/bench</span>" in (
        client_for(coordinator).get("/jobs/").content.decode()
    )
    assert client_for(reviewer).get(f"/jobs/{job.pk}/").status_code == 404
    assert "/srv/secret" not in client_for(reviewer).get("/jobs/").content.decode()


def test_a_queued_job_says_which_queue_it_waits_on_and_a_started_one_who_works_on_it():
    now = timezone.now()
    job = Job.objects.create(
        kind=Job.Kind.SIMILARITY, title="Embed", status=Job.Status.QUEUED, total=4, created=now - timedelta(seconds=75)
    )
    for _ in range(2):
        JobTask.objects.create(job=job, name="annotator.tasks.embed_images", status=JobTask.Status.QUEUED)
    assert job_waiting(job, now=now).startswith("Waiting 75 s for a worker on the similarity queue: no worker has")
    unit = job.tasks.order_by("pk").first()
    unit.status, unit.worker, unit.heartbeat = JobTask.Status.RUNNING, "gpu@host", now - timedelta(seconds=4)
    unit.save()
    job.status = Job.Status.RUNNING
    assert job_waiting(job, now=now) == (
        "1 unit under way on gpu@host (last heard from 4 s ago); 2 units in all. The first one takes longest: the "
        "worker loads what it needs (the model: about a minute on a CPU)."
    )
    job.done = 1  # it moves: the bar says the rest
    assert job_waiting(job, now=now) == ""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_jobs_pages_read_as_sentences(page, coordinator):
    import os

    from tests.conftest import browser_login

    finished(Job.Kind.IMPORT, IMPORT_RESULT, total=5, done=5)
    finished(Job.Kind.SIMILARITY, {"model": "demo-dinov3", "embedded": 0, "failed": 0, "pairs_scored": 0})
    queued = Job.objects.create(kind=Job.Kind.SIMILARITY, title="Embed 40 frames", status=Job.Status.QUEUED, total=40)
    JobTask.objects.create(job=queued, name="annotator.tasks.embed_images", status=JobTask.Status.QUEUED)
    browser_login(page, "cora")
    page.goto("/jobs/")
    rows = page.locator("#job-rows")
    assert "Waiting" in rows.inner_text() and "on the similarity queue" in rows.inner_text()
    assert "Nothing to do" in rows.inner_text() and "0 / 0" not in rows.inner_text()
    if os.getenv("SCREENSHOT_DIR"):
        page.screenshot(path=os.path.join(os.environ["SCREENSHOT_DIR"], "jobs-1440.png"))
    page.get_by_role("link", name="import job").click()
    assert page.locator("#job-summary").inner_text().startswith("Sampled 3 videos")
    assert not page.locator("#job-details dl").is_visible()  # the raw keys are folded away
    if os.getenv("SCREENSHOT_DIR"):
        page.screenshot(path=os.path.join(os.environ["SCREENSHOT_DIR"], "job-import-1440.png"))

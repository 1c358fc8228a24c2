"""API for videos and frames, and the end-to-end import through a real Celery worker."""

from __future__ import annotations

import pytest

from annotator.models import Job, Video
from tests.conftest import wait_until
from tests.factories import make_video
from tests.video_fixtures import *  # noqa: F403 (fixtures)
from tests.video_fixtures import queued_unit, run_queued

pytestmark = pytest.mark.django_db

READ_URLS = ["/api/videos/", "/api/videos/{id}/", "/api/videos/{id}/frames/"]


@pytest.mark.parametrize("url", [*READ_URLS, "/api/videos/import/"])
def test_it_refuses_anonymous_requests(client, url):
    video = make_video(frames=1)
    method = client.post if url.endswith("import/") else client.get
    assert method(url.format(id=video.pk)).status_code in (401, 403)


@pytest.mark.parametrize("url", READ_URLS)
def test_it_refuses_users_without_a_role(client_for, stranger, url):
    video = make_video(frames=1)
    assert client_for(stranger).get(url.format(id=video.pk)).status_code == 403


@pytest.mark.parametrize("role", ["annotator", "reviewer"])
def test_only_coordinators_may_import(client_for, request, role, h264_video):
    response = client_for(request.getfixturevalue(role)).post("/api/videos/import/", {"path": str(h264_video.parent)})
    assert response.status_code == 403
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "method, url",
    [
        ("post", "/api/videos/"),
        ("delete", "/api/videos/{id}/"),
        ("post", "/api/videos/{id}/frames/"),
        ("get", "/api/videos/import/"),
    ],
)
def test_it_refuses_the_wrong_method(client_for, coordinator, method, url):
    video = make_video(frames=1)
    assert getattr(client_for(coordinator), method)(url.format(id=video.pk)).status_code == 405


@pytest.mark.parametrize("role", ["annotator", "reviewer", "coordinator"])
def test_every_role_reads_videos_filtered_by_status(client_for, request, role):
    make_video(frames=1, yt8m_id="okvid")
    Video.objects.create(yt8m_id="badvid", source="/x.mp4", status="failed", error="x.mp4 is empty (0 bytes)")
    client = client_for(request.getfixturevalue(role))
    body = client.get("/api/videos/?status=failed").json()
    assert body["count"] == 1
    assert (body["results"][0]["yt8m_id"], body["results"][0]["error"]) == ("badvid", "x.mp4 is empty (0 bytes)")
    assert client.get("/api/videos/").json()["count"] == 2


def test_it_rejects_an_unknown_status_filter(client_for, annotator):
    response = client_for(annotator).get("/api/videos/?status=done")
    assert response.status_code == 400 and "Unknown status 'done'" in response.json()["errors"]["status"][0]


def test_it_returns_one_video(client_for, annotator):
    video = make_video(frames=2, yt8m_id="abc", fps=30.0)
    body = client_for(annotator).get(f"/api/videos/{video.pk}/").json()
    assert (body["yt8m_id"], body["fps"], body["frame_count"], body["status"]) == ("abc", 30.0, 2, "sampled")
    assert client_for(annotator).get("/api/videos/999999/").status_code == 404


def test_it_lists_frames_with_timestamps_and_image_urls(client_for, annotator):
    video = make_video(frames=3, every=0.5)
    body = client_for(annotator).get(f"/api/videos/{video.pk}/frames/").json()
    assert body["count"] == 3
    last = body["results"][2]
    assert (last["index"], last["timestamp"], last["width"], last["height"]) == (2, 1.0, 160, 120)
    frame = video.frames.get(index=2)
    assert last["image_url"] == f"http://testserver{frame.image.file.url}"
    assert last["thumbnail_url"] == f"http://testserver{frame.image.thumbnail.url}"


def test_a_coordinator_starts_an_import_and_gets_the_job_id(
    client_for, coordinator, h264_video, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_for(coordinator).post(
            "/api/videos/import/", {"path": str(h264_video.parent), "every": 4}, content_type="application/json"
        )
    assert response.status_code == 202
    job = Job.objects.get(pk=response.json()["job_id"])
    assert (job.kind, job.total, job.created_by) == ("import", 1, coordinator)
    assert response.json()["job_url"].endswith(f"/api/jobs/{job.pk}/")
    assert [queued_unit(callback).kwargs["source"] for callback in callbacks] == [str(h264_video.resolve())]
    run_queued(callbacks[0])
    assert Video.objects.get().frame_count == 3


def test_it_refuses_an_import_path_outside_the_import_roots(client_for, coordinator, tmp_path):
    response = client_for(coordinator).post(
        "/api/videos/import/", {"path": str(tmp_path / ".." / "x.csv")}, content_type="application/json"
    )
    assert response.status_code == 400
    assert "is outside the import folders" in response.json()["errors"]["path"][0]
    assert not Job.objects.exists()


@pytest.mark.e2e
def test_a_real_worker_samples_an_import_and_the_frames_appear_in_the_api(
    transactional_db, celery_worker_process, client_for, coordinator, annotator, h264_video
):
    celery_worker_process()
    response = client_for(coordinator).post(
        "/api/videos/import/", {"path": str(h264_video.parent), "every": 1}, content_type="application/json"
    )
    assert response.status_code == 202
    job_id = response.json()["job_id"]
    job = wait_until(
        lambda: Job.objects.filter(pk=job_id, status__in=["succeeded", "failed"]).first(), 90, "the import job"
    )
    assert (job.status, job.done, job.errors, job.result["frames"]) == ("succeeded", 1, [], 12)
    client = client_for(annotator)
    video = client.get("/api/videos/?status=sampled").json()["results"][0]
    assert (video["yt8m_id"], video["frame_count"], video["width"]) == ("clip", 12, 320)
    frames = client.get(f"/api/videos/{video['id']}/frames/").json()["results"]
    assert [frame["timestamp"] for frame in frames] == pytest.approx(list(range(12)), abs=1 / 25)
    image = client.get(frames[5]["image_url"].removeprefix("http://testserver"))
    assert image.status_code == 200 and b"".join(image.streaming_content)[:2] == b"\xff\xd8"  # a JPEG

"""Coordinator pages for videos: the list with filters and upload form, one video's frame grid."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotator.models import Job, Video
from tests.factories import make_video
from tests.video_fixtures import *  # noqa: F403 (fixtures)
from tests.video_fixtures import run_queued

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("method, url", [("get", "/videos/"), ("get", "/videos/{id}/"), ("post", "/videos/upload/")])
def test_it_sends_anonymous_users_to_login(client, method, url):
    video = make_video(frames=1)
    response = getattr(client, method)(url.format(id=video.pk))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("method, url", [("get", "/videos/"), ("get", "/videos/{id}/"), ("post", "/videos/upload/")])
@pytest.mark.parametrize("role", ["annotator", "reviewer", "stranger"])
def test_it_forbids_other_roles(client_for, request, role, method, url):
    video = make_video(frames=1)
    client = client_for(request.getfixturevalue(role))
    assert getattr(client, method)(url.format(id=video.pk)).status_code == 403


@pytest.mark.parametrize("method, url", [("post", "/videos/"), ("post", "/videos/{id}/"), ("put", "/videos/upload/")])
def test_it_refuses_the_wrong_method(client_for, coordinator, method, url):
    video = make_video(frames=1)
    assert getattr(client_for(coordinator), method)(url.format(id=video.pk)).status_code == 405


def test_a_get_of_the_upload_address_goes_to_the_upload_form(client_for, coordinator):
    assert client_for(coordinator).get("/videos/upload/")["Location"] == "/videos/"


def test_it_lists_videos_with_status_duration_frames_and_error(client_for, coordinator):
    make_video(frames=5, every=2.5, yt8m_id="okvid")  # 12.5 s
    Video.objects.create(yt8m_id="badvid", source="/x/bad.mp4", status="failed", error="bad: /x/bad.mp4 is empty")
    html = client_for(coordinator).get("/videos/").content.decode()
    assert "okvid" in html and "badvid" in html
    assert '<span class="badge badge-failed">failed</span>' in html
    assert "12.5 s" in html
    assert "bad: /x/bad.mp4 is empty" in html


def test_it_filters_the_list_by_status(client_for, coordinator):
    make_video(frames=1, yt8m_id="okvid")
    Video.objects.create(yt8m_id="badvid", source="/x/bad.mp4", status="failed", error="broken")
    html = client_for(coordinator).get("/videos/?status=failed").content.decode()
    assert "badvid" in html and "okvid" not in html
    assert re.search(r'class="button primary">Failed <span class="">1</span>', html)


def test_the_list_takes_a_bounded_number_of_queries(client_for, coordinator, django_assert_max_num_queries):
    Video.objects.bulk_create(Video(yt8m_id=f"v{i}", source=f"/v/{i}.mp4", frame_count=i) for i in range(60))
    client = client_for(coordinator)
    with django_assert_max_num_queries(8):
        response = client.get("/videos/")
    assert response.content.decode().count('href="/videos/') >= 60


def test_it_shows_a_video_with_its_frame_thumbnails_and_timestamps(client_for, coordinator):
    video = make_video(frames=4, every=2.5, labels=["Cooking", "Food"])
    html = client_for(coordinator).get(f"/videos/{video.pk}/").content.decode()
    assert "Cooking, Food" in html
    assert html.count('class="frame"') == 4
    assert "<b>#3</b> 7.50 s" in html
    thumbnail = video.frames.get(index=3).image.thumbnail.url
    assert f'src="{thumbnail}"' in html


def test_it_answers_404_for_an_unknown_video(client_for, coordinator):
    assert client_for(coordinator).get("/videos/999999/").status_code == 404


def test_it_uploads_videos_as_an_import_job_and_fails_an_oversized_one(
    client_for, coordinator, h264_video, settings, django_capture_on_commit_callbacks
):
    data = h264_video.read_bytes()
    settings.MAX_UPLOAD_BYTES = len(data)
    files = [
        SimpleUploadedFile("beach_walk.mp4", data, "video/mp4"),
        SimpleUploadedFile("huge.mp4", data + b"\0", "video/mp4"),
    ]
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_for(coordinator).post("/videos/upload/", {"files": files, "frames": 3, "domain": "natural"})
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.created_by == coordinator
    assert job.errors == [
        f"huge.mp4: the upload is {len(data) + 1} bytes, over the limit of {len(data)} bytes (MAX_UPLOAD_BYTES); "
        "it was not stored"
    ]
    huge = Video.objects.get(yt8m_id="huge")
    assert (huge.status, huge.error) == ("failed", job.errors[0])
    stored = list((settings.IMPORT_ROOTS[0] / "uploads").rglob("*.mp4"))
    assert [p.name for p in stored] == ["beach_walk.mp4"]
    assert len(callbacks) == 1
    run_queued(callbacks[0])
    video = Video.objects.get(yt8m_id="beach_walk")
    assert (video.status, video.frame_count, video.title) == ("sampled", 3, "beach_walk.mp4")
    job.refresh_from_db()
    assert (job.status, job.done, job.total) == ("succeeded", 2, 2)


def test_with_media_in_s3_an_upload_is_stored_in_the_bucket_where_any_worker_reads_it(
    client_for, coordinator, h264_video, settings, s3_storage, django_capture_on_commit_callbacks
):
    files = [SimpleUploadedFile("beach_walk.mp4", h264_video.read_bytes(), "video/mp4")]
    with django_capture_on_commit_callbacks() as callbacks:
        client_for(coordinator).post("/videos/upload/", {"files": files, "frames": 2, "domain": "natural"})
    assert not (settings.IMPORT_ROOTS[0] / "uploads").exists()
    video = Video.objects.get(yt8m_id="beach_walk")
    assert video.source.startswith(f"s3://{s3_storage}/media/uploads/") and video.source.endswith("/beach_walk.mp4")
    h264_video.unlink()  # the sampling reads the bucket's copy, not a file of this host
    run_queued(callbacks[0])
    video.refresh_from_db()
    assert (video.status, video.frame_count) == ("sampled", 2)


def test_it_shows_the_form_errors_when_the_upload_is_empty(client_for, coordinator):
    client = client_for(coordinator)
    refused = client.post("/videos/upload/", {"every": "1", "frames": "3"})
    assert refused.status_code == 302 and refused["Location"] == "/videos/"
    response = client.get(refused["Location"])
    assert "Choose one or more video files." in response.content.decode()
    assert "not both" in response.content.decode()
    assert not Job.objects.exists()


def test_one_empty_file_of_eight_is_named_on_the_job_and_the_rest_are_stored(client_for, coordinator, h264_video):
    data = h264_video.read_bytes()
    files = [SimpleUploadedFile(f"clip_{i}.mp4", data, "video/mp4") for i in range(7)]
    files.insert(3, SimpleUploadedFile("blank.mp4", b"", "video/mp4"))
    response = client_for(coordinator).post("/videos/upload/", {"files": files, "frames": 2, "domain": "natural"})
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.errors == ["blank.mp4: the file is empty (0 bytes); it was not stored"]
    assert Video.objects.filter(yt8m_id__startswith="clip_").count() == 7

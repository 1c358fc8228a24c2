"""Any frame of the source video at its exact time, without a browser: the decoder (one GOP from the keyframe before),
the frame-at-time endpoint (local media and S3 on the moto server, cached), the source served by range requests, and
a frame taken as A or B (a picked Frame at its pts, its embedding queued at once)."""

from __future__ import annotations

import io
import urllib.request

import pytest
from PIL import Image as PILImage

from annotator.models import Frame, JobTask, Video
from annotator.models.videos import PICKED_INDEX_BASE
from annotator.picking import services as picking
from annotator.videos import sampling
from annotator.videos.services import videos_import
from tests.video_fixtures import *  # noqa: F403 (fixtures)
from tests.video_fixtures import read_frame_number

pytestmark = pytest.mark.django_db

TIME_BASE = 12800  # PyAV's MP4 time base for the 25 fps test clip: one frame is 512 units


@pytest.fixture
def video(h264_video) -> Video:
    """The 12 s test clip (a keyframe every second) sampled every 2 s: frames at 0, 2, 4 … 10 s."""
    videos_import(source=str(h264_video.parent), every=2.0, sync=True)
    return Video.objects.get()


def frame_number(jpeg: bytes) -> int:
    return read_frame_number(PILImage.open(io.BytesIO(jpeg)))


def test_it_decodes_the_frame_on_screen_at_a_time_from_the_keyframe_before(h264_video):
    stats = sampling.FrameAtTimeStats()
    frame = sampling.frame_at_time(h264_video, 1.52, stats=stats)
    assert (frame.pts, frame.timestamp, frame_number(frame.jpeg)) == (38 * 512, 1.52, 38)
    assert (stats.keyframe_pts, stats.decoded) == (25 * 512, 14)  # the keyframe at 1 s, then frames 25 to 38
    # Between two frames' times, the one still on screen (the earlier): 1.55 s is within frame 38's 40 ms.
    assert frame_number(sampling.frame_at_time(h264_video, 1.55).jpeg) == 38


def test_the_endpoint_answers_the_frame_as_a_jpeg_and_decodes_a_time_once(client_for, annotator, video, monkeypatch):
    client = client_for(annotator)
    response = client.get(f"/work/videos/{video.pk}/frame-at/", {"t": "3.08"})
    assert response.status_code == 200 and response["Content-Type"] == "image/jpeg"
    assert (response["X-Frame-Pts"], response["X-Frame-Time"]) == (str(77 * 512), "3.080000")
    assert frame_number(response.content) == 77
    monkeypatch.setattr(sampling, "frame_at_time", lambda *a, **k: pytest.fail("decoded again, not from the cache"))
    again = client.get(f"/work/videos/{video.pk}/frame-at/", {"t": "3.08"})
    assert again.content == response.content


@pytest.mark.parametrize(
    ("t", "says"),
    [("soon", "Send the time as a number of seconds"), ("12.5", "lasts 12.000 s"), ("-1", "0 s or later")],
)
def test_a_bad_time_is_refused_saying_what_is_wrong(client_for, annotator, video, t, says):
    response = client_for(annotator).get(f"/work/videos/{video.pk}/frame-at/", {"t": t})
    assert response.status_code == 400 and says in response.json()["errors"]["t"][0]


def test_the_endpoint_reads_a_video_in_s3_by_range_requests(client_for, annotator, h264_video, s3_bucket):
    from subtlebench.storage import s3_client

    s3_client().upload_file(str(h264_video), s3_bucket, "clips/clip.mp4")
    video = Video.objects.create(
        yt8m_id="s3clip", source=f"s3://{s3_bucket}/clips/clip.mp4", duration=12.0, fps=25.0, status="sampled"
    )
    client = client_for(annotator)
    response = client.get(f"/work/videos/{video.pk}/frame-at/", {"t": "7.4"})
    assert response.status_code == 200 and frame_number(response.content) == 185
    assert response["X-Frame-Pts"] == str(185 * 512)
    # The player gets a signed URL of the object, which answers a byte range as a browser's <video> asks.
    source = client.get(f"/work/videos/{video.pk}/source/")
    assert source.status_code == 302 and "X-Amz-Signature=" in source["Location"]
    request = urllib.request.Request(source["Location"], headers={"Range": "bytes=0-15"})
    with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310 - the moto server on loopback
        assert reply.status == 206 and reply.read() == h264_video.read_bytes()[:16]
    # Taken as A or B, it is stored as any picked frame, decoded from the bucket.
    picking.video_heartbeat(video=video, user=annotator)
    taken = client.post(f"/work/videos/{video.pk}/pick-frame/", {"t": "7.41"})
    assert taken.status_code == 201 and taken.json()["pts"] == 185 * 512
    assert frame_number(Frame.objects.get(video=video).image.file.read()) == 185


def test_a_local_source_is_served_by_range_requests(client_for, reviewer, video, h264_video):
    client = client_for(reviewer)
    data = h264_video.read_bytes()
    part = client.get(f"/work/videos/{video.pk}/source/", HTTP_RANGE="bytes=100-199")
    assert part.status_code == 206 and part["Content-Range"] == f"bytes 100-199/{len(data)}"
    assert b"".join(part.streaming_content) == data[100:200]
    tail = client.get(f"/work/videos/{video.pk}/source/", HTTP_RANGE="bytes=-10")
    assert b"".join(tail.streaming_content) == data[-10:]
    whole = client.get(f"/work/videos/{video.pk}/source/")
    assert whole.status_code == 200 and whole["Accept-Ranges"] == "bytes"
    assert b"".join(whole.streaming_content) == data
    past = client.get(f"/work/videos/{video.pk}/source/", HTTP_RANGE=f"bytes={len(data)}-")
    assert past.status_code == 416 and past["Content-Range"] == f"bytes */{len(data)}"


def test_taking_a_frame_stores_it_at_its_exact_pts_and_queues_its_embedding(client_for, annotator, video):
    picking.video_heartbeat(video=video, user=annotator)
    client = client_for(annotator)
    response = client.post(f"/work/videos/{video.pk}/pick-frame/", {"t": "0.52"})
    assert response.status_code == 201
    frame = Frame.objects.get(picked=True)
    assert (frame.pts, frame.timestamp, frame.index) == (13 * 512, 0.52, PICKED_INDEX_BASE)
    assert response.json() | {"src": "", "th": ""} == {
        "i": PICKED_INDEX_BASE,
        "t": 0.52,
        "im": frame.image_id,
        "src": "",
        "th": "",
        "picked": True,
        "pts": 13 * 512,
        "created": True,
    }
    assert frame_number(frame.image.file.read()) == 13
    unit = JobTask.objects.get(name="annotator.tasks.embed_images")
    assert unit.kwargs["image_ids"] == [frame.image_id]
    # The same frame again (a time within it) is the frame taken before; a sampled frame's time is that frame.
    again = client.post(f"/work/videos/{video.pk}/pick-frame/", {"t": "0.53"})
    assert again.status_code == 200 and again.json()["i"] == frame.index and again.json()["created"] is False
    sampled = client.post(f"/work/videos/{video.pk}/pick-frame/", {"t": "2.0"})
    assert sampled.json()["i"] == 1 and "picked" not in sampled.json()
    assert Frame.objects.filter(picked=True).count() == 1 and video.frames.count() == 7
    # The strip lists it among the sampled frames, in time order, and the video still counts its sampled frames.
    rows = picking.VideoSource(video).frames()
    assert [row["t"] for row in rows] == [0.0, 0.52, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert Video.objects.get(pk=video.pk).frame_count == 6


def test_a_pair_of_a_picked_frame_is_submitted_like_any_other(annotator, video):
    picking.video_heartbeat(video=video, user=annotator)
    from annotator.videos.frame_at import video_frame_pick

    frame, _ = video_frame_pick(video=video, seconds=4.92, user=annotator)
    pair, created = picking.pair_submit(
        user=annotator,
        video=video,
        index_a=2,
        index_b=frame.index,
        category="temporal",
        question="Which image was taken later?",
        client_key="k" * 32,
    )
    assert created and {pair.image_1_id, pair.image_2_id} == {video.frames.get(index=2).image_id, frame.image_id}
    assert pair.answer in ("first image", "second image")
    assert pair.source_id.endswith(f"_{frame.index}") or f"_{frame.index}_" in pair.source_id


def test_taking_a_frame_needs_the_video_and_the_role(client, client_for, annotator, annotator2, reviewer, video):
    picking.video_heartbeat(video=video, user=annotator2)
    path = f"/work/videos/{video.pk}/pick-frame/"
    refused = client_for(annotator).post(path, {"t": "1"})
    assert refused.status_code == 409 and "You do not hold video" in refused.json()["detail"]
    assert client_for(reviewer).post(path, {"t": "1"}).status_code == 403
    assert client_for(annotator).get(path).status_code == 302  # a GET goes to the workbench with the form
    client.logout()
    assert client.post(path, {"t": "1"}).status_code == 302  # to the login
    assert client.get(f"/work/videos/{video.pk}/frame-at/", {"t": "1"}).status_code == 302
    assert client.get(f"/work/videos/{video.pk}/source/").status_code == 302
    assert not Frame.objects.filter(picked=True).exists()

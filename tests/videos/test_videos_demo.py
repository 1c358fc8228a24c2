"""The demo videos seed_demo generates: real files, sampled at once, and nothing duplicated on a re-run."""

from __future__ import annotations

import pytest

from annotator.models import Frame, Job, Video
from demo.videos import DEMO_VIDEOS, demo_videos_seed

pytestmark = pytest.mark.django_db


def test_it_generates_and_samples_the_demo_videos_once(settings):
    job = demo_videos_seed(size=(160, 96), seconds=2)
    assert (job.status, job.errors, job.result["videos_ok"]) == ("succeeded", [], len(DEMO_VIDEOS))
    videos = Video.objects.filter(yt8m_id__in=DEMO_VIDEOS)
    assert sorted(v.yt8m_id for v in videos) == sorted(DEMO_VIDEOS)
    assert all((v.status, v.frame_count, v.width, v.height) == ("sampled", 4, 160, 96) for v in videos)
    assert videos.get(yt8m_id="demo_pan_street").labels == ["Street", "City", "Camera pan"]
    demo_folder = settings.IMPORT_ROOTS[0] / "demo"
    assert sorted(p.name for p in demo_folder.glob("*.mp4")) == sorted(f"{name}.mp4" for name in DEMO_VIDEOS)
    frames = list(Frame.objects.values_list("pk", flat=True))
    assert demo_videos_seed(size=(160, 96), seconds=2) is None  # a re-run finds everything in place
    assert list(Frame.objects.values_list("pk", flat=True)) == frames
    assert Job.objects.filter(kind=Job.Kind.IMPORT).count() == 1 and Video.objects.count() == len(DEMO_VIDEOS)


def test_the_panning_video_moves_the_camera_between_frames():
    from demo.videos import panning_frames

    first, *_, last = panning_frames(size=(160, 96), seconds=1)
    assert (first != last).mean() > 0.5

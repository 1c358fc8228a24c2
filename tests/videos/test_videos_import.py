"""Video import and frame sampling: a real H.264 file encoded by the test, folders, manifests, S3, re-imports."""

from __future__ import annotations

import io
import shutil

import pytest
from django.core.management import CommandError, call_command
from PIL import Image as PILImage

from annotator.jobs.outages import STORAGE, outage_of
from annotator.jobs.services import UnitRef, job_task_failed
from annotator.models import Frame, Image, Job, JobTask, Video
from annotator.videos import sampling
from annotator.videos.services import video_sample, videos_import
from demo.videos import write_video
from subtlebench.storage import s3_client
from tests.cut_proxy import CutProxy
from tests.factories import make_pair
from tests.video_fixtures import *  # noqa: F403 (fixtures)
from tests.video_fixtures import frame_picture, read_frame_number, run_queued, write_h264

pytestmark = pytest.mark.django_db

FPS = 25
ONE_FRAME = 1 / FPS


def stored_files(settings) -> set[str]:
    root = settings.MEDIA_ROOT
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def frame_number(field_file) -> int:
    with field_file.open("rb") as handle:
        return read_frame_number(PILImage.open(io.BytesIO(handle.read())))


# --- The sampler on its own ---------------------------------------------------------------------------------


def test_it_samples_a_real_h264_mp4_at_the_expected_times(h264_video):
    info, frames = sampling.sample(h264_video, every=1.0, max_side=320, thumbnail_side=80)
    frames = list(frames)
    assert (info.width, info.height, info.fps) == (320, 240, 25.0)
    assert info.duration == pytest.approx(12.0, abs=ONE_FRAME)
    assert info.keyframe_interval == pytest.approx(1.0)
    assert len(frames) == 12
    for second, frame in enumerate(frames):
        assert frame.timestamp == pytest.approx(second, abs=ONE_FRAME)
        picture = PILImage.open(io.BytesIO(frame.jpeg))
        assert read_frame_number(picture) == second * FPS  # the exact frame, not a neighbour
        assert max(PILImage.open(io.BytesIO(frame.thumbnail)).size) == 80


def test_it_takes_the_first_frame_at_or_after_each_target(h264_video):
    info, frames = sampling.sample(h264_video, count=7)
    for frame in frames:
        target = info.duration * frame.index / 7
        assert target <= frame.timestamp < target + ONE_FRAME + 1e-9
        assert read_frame_number(PILImage.open(io.BytesIO(frame.jpeg))) == round(frame.timestamp * FPS)


def test_it_seeks_to_keyframes_when_the_step_is_longer_than_the_keyframe_interval(h264_video):
    stats = sampling.SamplingStats()
    _, frames = sampling.sample(h264_video, every=3.0, stats=stats)
    assert [round(f.timestamp, 2) for f in frames] == [0.0, 3.0, 6.0, 9.0]
    # Targets sit on keyframes (GOP 25 = 1 s): one seek and one decoded frame per target.
    assert (stats.seeks, stats.decoded) == (4, 4)


def test_it_decodes_on_within_a_keyframe_interval_and_seeks_past_the_next_keyframe(h264_video):
    stats = sampling.SamplingStats()
    _, frames = sampling.sample(h264_video, every=0.5, stats=stats)
    assert len(list(frames)) == 24
    # Each whole second is a keyframe after the last decoded frame: a seek there, then frames 1..13 of the second
    # (13 = 0.52 s, the first at or after 0.5 s) decoded on; never the 11 frames after them.
    assert stats.seeks == 12
    assert stats.decoded == 12 * 14 == sampling.required_decodes(h264_video, every=0.5)


def test_sampling_every_4_s_with_a_keyframe_every_4_s_decodes_about_the_minimum(tmp_path):
    path = write_h264(tmp_path / "gop4s.mp4", seconds=16, gop=100, size=(160, 120))
    stats = sampling.SamplingStats()
    _, frames = sampling.sample(path, every=4.0, stats=stats)
    assert [round(f.timestamp, 2) for f in frames] == [0.0, 4.0, 8.0, 12.0]
    minimum = sampling.required_decodes(path, every=4.0)
    assert minimum == 4  # every target is a keyframe
    assert stats.decoded <= 1.5 * minimum


def test_it_finds_the_exact_frames_in_a_video_with_b_frames_and_a_2_s_keyframe_interval(tmp_path):
    frames = (frame_picture(number, 320, 240) for number in range(300))
    path = write_video(tmp_path / "bframes.mp4", frames, fps=FPS, keyframe_every=50)  # veryfast: B-frames
    stats = sampling.SamplingStats()
    _, sampled = sampling.sample(path, every=3.0, stats=stats)
    numbers = [read_frame_number(PILImage.open(io.BytesIO(frame.jpeg))) for frame in sampled]
    assert numbers == [0, 75, 150, 225]
    assert stats.seeks == 4 and stats.decoded < 100  # from the keyframe before each target, not from the start


def test_it_caps_the_longest_side_of_stored_frames(h264_video):
    _, frames = sampling.sample(h264_video, count=1, max_side=100, thumbnail_side=40)
    frame = next(iter(frames))
    assert (frame.width, frame.height) == (100, 75)
    assert PILImage.open(io.BytesIO(frame.thumbnail)).size == (40, 30)


# --- Importing ----------------------------------------------------------------------------------------------


def test_it_imports_a_folder_in_process_and_prints_a_summary(h264_video, settings, capsys):
    settings.FRAME_MAX_SIDE = 160
    settings.THUMBNAIL_MAX_SIDE = 64
    call_command("import_videos", str(h264_video.parent), "--sync", "--every", "2", "--domain", "gaming")
    out = capsys.readouterr().out
    assert "1 video(s) sampled, 0 already sampled, 0 failed; 6 frames" in out
    video = Video.objects.get()
    assert (video.yt8m_id, video.status, video.domain, video.frame_count) == ("clip", "sampled", "gaming", 6)
    assert (video.width, video.height, video.fps, video.sample_every) == (320, 240, 25.0, 2.0)
    assert video.duration == pytest.approx(12.0, abs=ONE_FRAME)
    assert video.size_bytes == h264_video.stat().st_size
    assert video.source == str(h264_video.resolve())
    frames = list(video.frames.select_related("image"))
    assert [f.index for f in frames] == list(range(6))
    assert [f.timestamp for f in frames] == pytest.approx([0, 2, 4, 6, 8, 10], abs=ONE_FRAME)
    assert [f.pts for f in frames] == [round(f.timestamp * 12800) for f in frames]  # time base 1/12800
    assert [frame_number(f.image.file) for f in frames] == [0, 50, 100, 150, 200, 250]
    assert (frames[0].image.width, frames[0].image.height) == (160, 120)
    assert PILImage.open(frames[0].image.thumbnail.path).size == (64, 48)
    job = Job.objects.get(kind=Job.Kind.IMPORT)
    assert (job.kind, job.status, job.done, job.total, job.errors) == ("import", "succeeded", 1, 1, [])
    assert job.result["frames"] == 6


def test_it_queues_one_sampling_task_per_video_on_commit(h264_video, django_capture_on_commit_callbacks):
    shutil.copy(h264_video, h264_video.parent / "second.mp4")
    with django_capture_on_commit_callbacks() as callbacks:
        job = videos_import(source=str(h264_video.parent), count=3)
    assert len(callbacks) == 2
    assert Video.objects.filter(status="pending").count() == 2
    assert (job.status, job.done, job.total) == ("running", 0, 2)
    for callback in callbacks:  # run what the worker would run, in this process
        run_queued(callback)
    job.refresh_from_db()
    assert (job.status, job.done, job.result["videos_ok"], job.result["frames"]) == ("succeeded", 2, 2, 6)
    assert run_queued(callbacks[0]) == "taken"  # a redelivered task changes nothing
    assert Frame.objects.count() == 6
    job.refresh_from_db()
    assert (job.done, job.result["videos_ok"], job.result["frames"]) == (2, 2, 6)


def test_it_skips_a_video_already_sampled_the_same_way(h264_video, settings):
    call_command("import_videos", str(h264_video.parent), "--sync", "--frames", "4")
    frames_before = list(Frame.objects.values_list("pk", "image__file"))
    files_before = stored_files(settings)
    job = videos_import(source=str(h264_video.parent), count=4, sync=True, domain="gaming")
    assert job.result["videos_skipped"] == 1
    assert Video.objects.get().domain == "gaming"  # metadata is taken over, frames are not touched
    assert Video.objects.count() == 1
    assert list(Frame.objects.values_list("pk", "image__file")) == frames_before
    assert stored_files(settings) == files_before


def test_it_replaces_the_frames_when_resampled_with_other_parameters(
    h264_video, settings, django_capture_on_commit_callbacks
):
    call_command("import_videos", str(h264_video.parent), "--sync", "--frames", "4")
    old_files = stored_files(settings)
    with django_capture_on_commit_callbacks(execute=True):  # the old files are deleted once the swap commits
        job = videos_import(source=str(h264_video.parent), every=3.0, sync=True)
    assert job.result["videos_ok"] == 1
    video = Video.objects.get()
    assert (video.frame_count, video.sample_every, video.sample_count) == (4, 3.0, None)
    assert [f.timestamp for f in video.frames.all()] == pytest.approx([0, 3, 6, 9], abs=ONE_FRAME)
    assert Image.objects.count() == 4
    assert not old_files & stored_files(settings)  # the old frames' files are gone, the new ones stored
    assert len(stored_files(settings)) == 8


def test_it_refuses_to_resample_a_video_whose_frames_are_in_pairs(h264_video, settings):
    call_command("import_videos", str(h264_video.parent), "--sync", "--frames", "4")
    video = Video.objects.get()
    make_pair(video=video)
    frames_before = list(Frame.objects.values_list("pk", flat=True))
    job = videos_import(source=str(h264_video.parent), every=2.0, sync=True)
    assert job.status == "failed"
    assert job.errors[0] == (
        f"clip: {h264_video.resolve()} was not re-sampled: 1 pair(s) use its current frames, "
        "and new frames would orphan them"
    )
    assert list(Frame.objects.values_list("pk", flat=True)) == frames_before
    video.refresh_from_db()
    assert (video.status, video.sample_count) == ("sampled", 4)


def test_it_imports_a_manifest_with_relative_paths_and_labels(h264_video, tmp_path):
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("yt8m_id,path,labels\nAbC123,videos/clip.mp4,Cooking;Kitchen | Food\n")
    call_command("import_videos", str(manifest), "--sync", "--frames", "2")
    video = Video.objects.get()
    assert (video.yt8m_id, video.labels, video.frame_count) == ("AbC123", ["Cooking", "Kitchen", "Food"], 2)
    assert video.source == str(h264_video.resolve())


def test_it_imports_a_manifest_row_from_s3(h264_video, tmp_path, s3_bucket):
    s3_client().upload_file(str(h264_video), s3_bucket, "yt8m/xy99.mp4")
    manifest = tmp_path / "manifest.csv"
    manifest.write_text(f"yt8m_id,path,labels\nxy99,s3://{s3_bucket}/yt8m/xy99.mp4,Sports\n")
    job = videos_import(source=str(manifest), every=4.0, sync=True)
    assert (job.status, job.errors) == ("succeeded", [])
    video = Video.objects.get()
    assert (video.source, video.status, video.frame_count) == (f"s3://{s3_bucket}/yt8m/xy99.mp4", "sampled", 3)
    assert video.size_bytes == h264_video.stat().st_size
    assert frame_number(video.frames.last().image.file) == 8 * FPS


def test_an_s3_outage_while_sampling_an_s3_video_pauses_its_unit_and_it_resumes(
    h264_video, tmp_path, s3_bucket, s3_server, settings
):
    """S3 away during the download of an s3:// video: not "cannot be read from S3" and no failed video, but a unit
    paused with the reason, which samples the video once S3 answers again."""
    s3_client().upload_file(str(h264_video), s3_bucket, "yt8m/xy99.mp4")
    manifest = tmp_path / "manifest.csv"
    manifest.write_text(f"yt8m_id,path,labels\nxy99,s3://{s3_bucket}/yt8m/xy99.mp4,Sports\n")
    settings.S3_MAX_ATTEMPTS = 1
    proxy = CutProxy(int(s3_server.rsplit(":", 1)[1]))
    settings.S3_ENDPOINT_URL = proxy.url
    job = videos_import(source=str(manifest), every=4.0)
    unit = job.tasks.get()
    try:
        proxy.cut_now()
        with pytest.raises(Exception) as raised:
            video_sample(**unit.kwargs, unit=UnitRef(unit.pk, celery_id="first", worker="w1@host"))
        assert outage_of(raised.value) == STORAGE
        job.refresh_from_db()
        assert (job.status, job.errors, Video.objects.get().status) == ("running", [], "sampling")
        claim = JobTask.objects.get(pk=unit.pk).token
        assert job_task_failed(task_id=unit.pk, token=claim, error=raised.value) == "paused"  # as the task ends
        job = Job.objects.get(pk=job.pk)
        assert job.state == "paused" and "the S3 storage does not answer" in job.pause_reason

        proxy.restore()
        assert video_sample(**unit.kwargs, unit=UnitRef(unit.pk, celery_id="later", worker="w1@host")) == "ok"
    finally:
        proxy.close()
    job = Job.objects.get(pk=job.pk)
    assert (job.status, job.errors, Video.objects.get().frame_count) == ("succeeded", [], 3)


def test_it_refuses_a_source_outside_the_import_roots(tmp_path):
    with pytest.raises(CommandError, match=r"\.\./.* is outside the import folders"):
        call_command("import_videos", str(tmp_path / ".." / "elsewhere"), "--sync")
    assert not Job.objects.filter(kind=Job.Kind.IMPORT).exists()


def test_it_refuses_a_manifest_whose_header_lacks_a_column(tmp_path):
    manifest = tmp_path / "m.csv"
    manifest.write_text("yt8m_id,labels\nabc,x\n")
    with pytest.raises(CommandError, match=r"m\.csv, line 1: .* missing column path"):
        call_command("import_videos", str(manifest))
    assert not Job.objects.filter(kind=Job.Kind.IMPORT).exists() and not Video.objects.exists()


def test_it_refuses_every_and_frames_together(h264_video):
    with pytest.raises(CommandError, match="not allowed with argument"):
        call_command("import_videos", str(h264_video.parent), "--every", "1", "--frames", "3")


def test_frames_go_to_s3_storage_and_the_api_hands_out_signed_urls(h264_video, s3_storage, client_for, annotator):
    """Media in an S3 bucket (moto's server on loopback): frames and thumbnails are objects there."""
    call_command("import_videos", str(h264_video.parent), "--sync", "--every", "4")
    video = Video.objects.get()
    frames = list(video.frames.select_related("image").order_by("index"))
    assert len(frames) == 3
    keys = {obj["Key"] for obj in s3_client().list_objects_v2(Bucket=s3_storage)["Contents"]}
    for frame in frames:
        assert f"media/{frame.image.file.name}" in keys and f"media/{frame.image.thumbnail.name}" in keys
    assert [frame_number(f.image.file) for f in frames] == [0, 100, 200]  # read back through S3
    listed = client_for(annotator).get(f"/api/videos/{video.pk}/frames/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert rows[0]["image_url"].startswith("http://127.0.0.1:") and "X-Amz-Signature=" in rows[0]["image_url"]


def test_it_keeps_a_1080p_source_at_1920_px_and_makes_a_thumbnail_for_the_strip(tmp_path, settings):
    """The default FRAME_MAX_SIDE keeps a 1920×1080 frame whole (the viewers show it at 1:1); the strip's
    thumbnail is THUMBNAIL_MAX_SIDE on its long side."""
    assert settings.FRAME_MAX_SIDE == 1920
    frames = (frame_picture(number, 1920, 1080) for number in range(10))
    path = write_video(tmp_path / "videos" / "hd.mp4", frames, fps=5)
    job = videos_import(source=str(path.parent), count=2, sync=True)
    assert job.status == "succeeded", job.errors
    image = Frame.objects.filter(video__source=str(path)).order_by("index").first().image
    with image.file.open("rb") as stored:
        assert PILImage.open(stored).size == (1920, 1080)
    with image.thumbnail.open("rb") as stored:
        assert PILImage.open(stored).size == (240, 135)
    assert (image.width, image.height) == (1920, 1080)

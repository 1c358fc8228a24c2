"""`repair` after lost media (issue 25): a video whose frame files are gone is sampled again, and its files are
written back only when the new frames are the stored ones byte for byte; the pairs on them stay as they were."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from django.core.management import call_command

from annotator.models import Frame, Image, Job, Pair, Video
from tests.factories import make_pair
from tests.video_fixtures import *  # noqa: F403 (fixtures)
from tests.video_fixtures import write_h264

pytestmark = pytest.mark.django_db


@pytest.fixture
def used_video(h264_video, settings):
    """'clip' sampled into 4 frames, two pairs on them, and then every frame file lost from storage."""
    call_command("import_videos", str(h264_video.parent), "--sync", "--frames", "4")
    video = Video.objects.get()
    make_pair(video=video)
    make_pair(video=video, status=Pair.Status.SUBMITTED)
    return video


def rows(video) -> dict:
    return {
        "frames": list(Frame.objects.filter(video=video).order_by("index", "pk").values("pk", "index", "pts", "image")),
        "images": list(
            Image.objects.filter(frame__video=video).order_by("pk").values("pk", "file", "thumbnail", "sha256")
        ),
        "pairs": list(Pair.objects.order_by("pk").values("pk", "image_1", "image_2", "status")),
    }


def lose_media(settings) -> dict[str, bytes]:
    """Delete every stored frame file; returns what was there."""
    media = Path(settings.MEDIA_ROOT)
    files = {str(p.relative_to(media)): p.read_bytes() for p in (media / "frames").rglob("*") if p.is_file()}
    for name in files:
        (media / name).unlink()
    return files


def stored_files(settings) -> dict[str, bytes]:
    media = Path(settings.MEDIA_ROOT)
    return {str(p.relative_to(media)): p.read_bytes() for p in (media / "frames").rglob("*") if p.is_file()}


def test_repair_restores_lost_frames_verified_by_their_hashes_and_keeps_the_pairs(used_video, settings, capsys):
    before = rows(used_video)
    lost = lose_media(settings)

    call_command("repair", "--sync")

    assert "clip: 8 frame file(s) missing from storage" in capsys.readouterr().out
    used_video.refresh_from_db()
    assert (used_video.status, used_video.error, used_video.missing_files()) == ("sampled", "", [])
    assert rows(used_video) == before  # the same rows: the pairs point at the same images
    assert stored_files(settings) == lost  # every file back under its name, byte for byte
    for image in Image.objects.filter(frame__video=used_video):
        assert hashlib.sha256(Path(image.file.path).read_bytes()).hexdigest() == image.sha256
    job = Job.objects.filter(kind=Job.Kind.IMPORT).order_by("-pk").first()
    assert (job.status, job.result["videos_ok"], job.result["frames"], job.errors) == ("succeeded", 1, 4, [])


def test_repair_queues_again_the_embeddings_that_failed_while_the_files_were_gone(used_video, settings):
    from annotator.models import ImageEmbedding
    from annotator.similarity.services import current_fingerprint

    lose_media(settings)
    image = Image.objects.filter(frame__video=used_video).order_by("pk").first()
    ImageEmbedding.objects.create(image=image, fingerprint=current_fingerprint(), error="file not found")
    similarity_jobs = Job.objects.filter(kind=Job.Kind.SIMILARITY).count()

    call_command("repair", "--sync")

    assert not ImageEmbedding.objects.filter(image=image).exists()  # pending again
    assert Job.objects.filter(kind=Job.Kind.SIMILARITY).count() == similarity_jobs + 1


def test_repair_restores_only_the_files_that_are_gone(used_video, settings):
    before, files = rows(used_video), stored_files(settings)
    thumbnail = Image.objects.filter(frame__video=used_video).order_by("pk").last().thumbnail.name
    (Path(settings.MEDIA_ROOT) / thumbnail).unlink()

    call_command("repair", "--sync")

    used_video.refresh_from_db()
    assert used_video.status == "sampled" and rows(used_video) == before and stored_files(settings) == files


def test_repair_refuses_a_source_that_changed_and_changes_nothing(used_video, settings, h264_video):
    before = rows(used_video)
    lose_media(settings)
    write_h264(h264_video, seconds=10)  # another file at the same path

    call_command("repair", "--sync")

    used_video.refresh_from_db()
    assert used_video.status == "missing"  # never leased, and not failed: its rows are all there
    assert f"clip: {h264_video} is not the file its frames were sampled from: it has " in used_video.error
    assert "10.0 seconds (it was 12.0)" in used_video.error
    assert "2 pair(s) use its frames, so nothing was changed" in used_video.error
    assert rows(used_video) == before and stored_files(settings) == {}
    job = Job.objects.filter(kind=Job.Kind.IMPORT).order_by("-pk").first()
    assert job.errors[0] == used_video.error and job.result["videos_failed"] == 1


def test_repair_refuses_frames_that_come_out_different_and_names_them(used_video, settings):
    before = rows(used_video)
    lose_media(settings)
    settings.FRAME_JPEG_QUALITY = 80  # the same file and timestamps, other JPEG bytes

    call_command("repair", "--sync")

    used_video.refresh_from_db()
    assert used_video.status == "missing"
    assert "was sampled again and 4 of 4 frame(s) differ from the stored ones (frame 0 at pts " in used_video.error
    first = before["images"][0]["sha256"][:12]
    assert f"stored {first}…" in used_video.error
    assert rows(used_video) == before and stored_files(settings) == {}


def test_repair_samples_anew_a_video_no_pair_uses_when_its_source_changed(h264_video, settings):
    call_command("import_videos", str(h264_video.parent), "--sync", "--frames", "4")
    old_images = set(Image.objects.values_list("pk", flat=True))
    lose_media(settings)
    write_h264(h264_video, seconds=10)

    call_command("repair", "--sync")

    video = Video.objects.get()
    assert (video.status, video.frame_count, video.duration, video.missing_files()) == ("sampled", 4, 10.0, [])
    assert not old_images & set(Image.objects.values_list("pk", flat=True))


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_repair_through_a_real_worker_restores_the_files_and_keeps_the_pairs(
    h264_video, settings, celery_worker_process
):
    from annotator.videos.services import videos_repair
    from tests.conftest import wait_until

    call_command("import_videos", str(h264_video.parent), "--sync", "--frames", "4")
    video = Video.objects.get()
    make_pair(video=video)
    before, lost = rows(video), lose_media(settings)
    celery_worker_process()

    broken, job = videos_repair()  # queued on commit, sampled and verified by the worker

    assert [v.yt8m_id for v in broken] == ["clip"]
    wait_until(lambda: not Job.objects.get(pk=job.pk).is_active, 90, "the repair job to end")
    job.refresh_from_db()
    video.refresh_from_db()
    assert (job.status, job.result["videos_ok"], video.status) == ("succeeded", 1, "sampled")
    assert rows(video) == before and stored_files(settings) == lost


def test_repair_restores_a_video_an_older_repair_marked_failed_while_pairs_used_its_frames(used_video, settings):
    before = rows(used_video)
    lost = lose_media(settings)
    Video.objects.filter(pk=used_video.pk).update(
        status="failed", error="clip: was not re-sampled: 2 pair(s) use its current frames"
    )

    call_command("repair", "--sync")

    used_video.refresh_from_db()
    assert (used_video.status, used_video.error) == ("sampled", "")
    assert rows(used_video) == before and stored_files(settings) == lost


def test_repair_leaves_a_failed_video_without_frames_alone(settings):
    Video.objects.create(yt8m_id="broken", source="/nowhere.mp4", status="failed", error="not a video")

    call_command("repair", "--sync")

    assert Video.objects.get().status == "failed" and not Job.objects.exists()


@pytest.mark.parametrize("how", [{"count": 4}, {"every": 0.2}], ids=["seeking", "sequential"])
def test_sampling_one_file_twice_gives_the_same_pts_and_the_same_jpeg_bytes(h264_video, how):
    """What restoring relies on: decoding (threaded) and encoding are deterministic for one file and one build."""
    from annotator.videos import sampling

    def sampled():
        _, frames = sampling.sample(h264_video, **how)
        return [(f.index, f.pts, f.timestamp, hashlib.sha256(f.jpeg).digest(), f.thumbnail) for f in frames]

    first = sampled()
    assert len(first) == (4 if "count" in how else 60)
    assert sampled() == first

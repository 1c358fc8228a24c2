"""Bad input to a video import: each bad file or row fails alone, with a message naming it and the field,
while the rest of the import proceeds and nothing already stored changes."""

from __future__ import annotations

import os
import shutil

import pytest
from django.core.management import call_command

from annotator.models import Frame, Video
from annotator.videos.services import videos_import
from subtlebench.errors import Invalid
from tests.video_fixtures import *  # noqa: F403 (fixtures)
from tests.video_fixtures import write_h264

pytestmark = pytest.mark.django_db


@pytest.fixture
def existing(h264_video, settings, tmp_path):
    """A video sampled before the bad import ('clip'), and a snapshot of everything stored."""
    call_command("import_videos", str(h264_video.parent), "--sync", "--frames", "3")
    return snapshot(settings)


@pytest.fixture
def batch(tmp_path, h264_video):
    """A folder for the bad import, with one good video in it ('fine') that must still be sampled."""
    folder = tmp_path / "batch"
    folder.mkdir()
    shutil.copy(h264_video, folder / "fine.mp4")
    return folder


def snapshot(settings) -> dict:
    root = settings.MEDIA_ROOT
    return {
        "videos": list(Video.objects.order_by("pk").values()),
        "frames": list(Frame.objects.order_by("pk").values("pk", "video_id", "index", "pts", "image__file")),
        "files": {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()},
    }


def assert_nothing_else_changed(before: dict, settings, failed: str | None, message: str, job) -> None:
    """The job names the bad input; 'fine' was sampled; everything stored before is exactly as it was."""
    assert [error for error in job.errors if message in error], f"{message!r} not in {job.errors}"
    assert len(job.errors) == 1, job.errors
    assert (job.status, job.done, job.result["videos_ok"], job.result["videos_failed"]) == ("succeeded", 2, 1, 1)
    assert Video.objects.get(yt8m_id="fine").frame_count == 3
    after = snapshot(settings)
    old_ids = {video["id"] for video in before["videos"]}
    assert [v for v in after["videos"] if v["id"] in old_ids] == before["videos"]
    assert [f for f in after["frames"] if f["video_id"] in old_ids] == before["frames"]
    assert {name: data for name, data in after["files"].items() if name in before["files"]} == before["files"]
    new_files = set(after["files"]) - set(before["files"])
    assert all(name.startswith("frames/fine/") for name in new_files), new_files
    if failed:
        video = Video.objects.get(yt8m_id=failed)
        assert (video.status, video.frame_count) == ("failed", 0)
        assert message in video.error
        assert not video.frames.exists()


def manifest_import(batch, *rows: str):
    manifest = batch / "manifest.csv"
    manifest.write_text("yt8m_id,path,labels\nfine,fine.mp4,Good\n" + "".join(row + "\n" for row in rows))
    return videos_import(source=str(manifest), count=3, sync=True)


def test_it_fails_a_truncated_file_alone(existing, batch, settings, h264_master):
    data = h264_master.read_bytes()  # the index (moov) first: cutting keeps it
    (batch / "cut.mp4").write_bytes(data[: len(data) // 2])
    job = videos_import(source=str(batch), count=3, sync=True)
    message = f"cut: {batch / 'cut.mp4'} is truncated: its frames stop at"
    assert_nothing_else_changed(existing, settings, "cut", message, job)


def test_it_fails_a_truncated_file_that_lost_its_index(existing, batch, settings):
    data = write_h264(batch / "src.mp4").read_bytes()  # the index (moov) is at the end: cutting loses it
    (batch / "src.mp4").unlink()
    (batch / "cut.mp4").write_bytes(data[: len(data) // 2])
    job = videos_import(source=str(batch), count=3, sync=True)
    message = f"cut: {batch / 'cut.mp4'} cannot be read as a video (Invalid data found when processing input)"
    assert_nothing_else_changed(existing, settings, "cut", message, job)


def test_it_fails_a_corrupt_file_alone(existing, batch, h264_video, settings):
    data = bytearray(h264_video.read_bytes())
    start = data.find(b"mdat") + 4
    data[start:] = bytes(len(data) - start)  # the header is intact, the coded pictures are zeros
    (batch / "broken.mp4").write_bytes(data)
    job = videos_import(source=str(batch), count=3, sync=True)
    message = f"broken: {batch / 'broken.mp4'} is corrupt: decoding failed"
    assert_nothing_else_changed(existing, settings, "broken", message, job)


def test_it_fails_a_zero_length_file_alone(existing, batch, settings):
    (batch / "empty.mp4").write_bytes(b"")
    job = videos_import(source=str(batch), count=3, sync=True)
    assert_nothing_else_changed(existing, settings, "empty", f"empty: {batch / 'empty.mp4'} is empty (0 bytes)", job)


def test_it_fails_a_text_file_named_like_a_video(existing, batch, settings):
    (batch / "notes.mp4").write_text("this is not a video\n" * 50)
    job = videos_import(source=str(batch), count=3, sync=True)
    message = f"notes: {batch / 'notes.mp4'} cannot be read as a video"
    assert_nothing_else_changed(existing, settings, "notes", message, job)


def test_it_fails_an_audio_file_with_no_video_stream(existing, batch, settings):
    import av

    with av.open(str(batch / "sound.mp4"), "w") as container:
        stream = container.add_stream("aac", rate=8000)
        frame = av.AudioFrame(format="fltp", layout="mono", samples=1024)
        frame.rate = 8000
        for plane in frame.planes:
            plane.update(bytes(plane.buffer_size))
        for packet in [*stream.encode(frame), *stream.encode()]:
            container.mux(packet)
    job = videos_import(source=str(batch), count=3, sync=True)
    message = f"sound: {batch / 'sound.mp4'} has no video stream (not a video file)"
    assert_nothing_else_changed(existing, settings, "sound", message, job)


def test_it_fails_a_missing_path_naming_the_row(existing, batch, settings):
    job = manifest_import(batch, "gone,missing/gone.mp4,")
    assert_nothing_else_changed(
        existing, settings, "gone", "manifest.csv, line 3, field path: missing/gone.mp4 does not exist", job
    )


def test_it_refuses_a_parent_path_trick_outside_the_import_roots(existing, batch, settings, tmp_path):
    outside = tmp_path.parent / f"{tmp_path.name}-outside.mp4"
    shutil.copy(batch / "fine.mp4", outside)
    try:
        job = manifest_import(batch, f"sneaky,../../{outside.name},")
    finally:
        outside.unlink()
    message = f"manifest.csv, line 3, field path: ../../{outside.name} is outside the import folders"
    assert_nothing_else_changed(existing, settings, "sneaky", message, job)


def test_it_refuses_a_symlink_that_leads_outside_the_import_roots(existing, batch, settings, tmp_path):
    outside = tmp_path.parent / f"{tmp_path.name}-target.mp4"
    shutil.copy(batch / "fine.mp4", outside)
    os.symlink(outside, batch / "linked.mp4")
    try:
        job = videos_import(source=str(batch), count=3, sync=True)
    finally:
        outside.unlink()
    assert_nothing_else_changed(
        existing, settings, "linked", f"{batch / 'linked.mp4'} is outside the import folders (IMPORT_ROOTS", job
    )


def test_it_refuses_a_file_over_the_size_limit(existing, batch, settings):
    settings.MAX_UPLOAD_BYTES = (batch / "fine.mp4").stat().st_size  # 'fine' is just within it
    (batch / "big.mp4").write_bytes((batch / "fine.mp4").read_bytes() + b"\0")
    job = videos_import(source=str(batch), count=3, sync=True)
    message = f"big: {batch / 'big.mp4'} is {settings.MAX_UPLOAD_BYTES + 1} bytes, over the limit of"
    assert_nothing_else_changed(existing, settings, "big", message, job)


def test_it_fails_a_manifest_row_with_a_missing_column(existing, batch, settings):
    job = manifest_import(batch, "short-row")
    assert_nothing_else_changed(existing, settings, None, "manifest.csv, line 3: missing column path, labels", job)
    assert not Video.objects.filter(yt8m_id="short-row").exists()


def test_it_fails_a_manifest_row_with_an_empty_yt8m_id(existing, batch, settings):
    job = manifest_import(batch, " ,fine.mp4,Sports")
    assert_nothing_else_changed(existing, settings, None, "manifest.csv, line 3, field yt8m_id: empty", job)
    assert Video.objects.count() == 2


def test_it_fails_a_manifest_row_with_a_bad_s3_path(existing, batch, settings):
    job = manifest_import(batch, "cloud,s3://only-a-bucket,")
    message = "manifest.csv, line 3, field path: 's3://only-a-bucket' is not an s3://bucket/key URI of a file"
    assert_nothing_else_changed(existing, settings, "cloud", message, job)


def test_it_fails_a_manifest_row_repeating_a_yt8m_id(existing, batch, settings):
    job = manifest_import(batch, "fine,fine.mp4,Again")
    message = "manifest.csv, line 3, field yt8m_id: 'fine' already appears on line 2"
    assert_nothing_else_changed(existing, settings, None, message, job)


def test_it_fails_a_manifest_row_with_a_label_longer_than_its_column(existing, batch, settings):
    job = manifest_import(batch, f"labelled,fine.mp4,Sports;{'x' * 101}")
    message = f"manifest.csv, line 3, field labels: {'x' * 40!r}... is longer than 100 characters"
    assert_nothing_else_changed(existing, settings, "labelled", message, job)


def test_it_keeps_the_old_frames_when_a_resample_fails(existing, batch, settings):
    (batch / "bad.mp4").write_text("not a video")
    job = manifest_import(batch, "clip,bad.mp4,")  # 'clip' is the video sampled before, with 3 frames
    assert_nothing_else_changed(existing, settings, None, f"clip: {batch / 'bad.mp4'} cannot be read as a video", job)
    clip = Video.objects.get(yt8m_id="clip")
    assert (clip.status, clip.frame_count, clip.error) == ("sampled", 3, "")


def test_it_fails_an_s3_object_that_does_not_exist(existing, batch, settings, s3_bucket):
    job = manifest_import(batch, f"lost,s3://{s3_bucket}/nowhere.mp4,")
    message = f"lost: s3://{s3_bucket}/nowhere.mp4 does not exist in the bucket"
    assert_nothing_else_changed(existing, settings, "lost", message, job)


# --- Hostile paths and manifests (issue 25) ---------------------------------------------------------------------


def test_it_fails_a_symlink_loop_alone(existing, batch, settings):
    os.symlink("loop.mp4", batch / "loop.mp4")
    job = videos_import(source=str(batch), count=3, sync=True)
    assert_nothing_else_changed(existing, settings, "loop", f"{batch / 'loop.mp4'} cannot be resolved", job)


def test_it_refuses_a_manifest_path_through_a_folder_link_and_a_chain_that_lead_outside(
    existing, batch, settings, tmp_path
):
    settings.IMPORT_ROOTS = [batch.resolve(), (tmp_path / "media").resolve()]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(batch / "fine.mp4", elsewhere / "far.mp4")
    os.symlink(elsewhere, batch / "shelf")  # a folder link
    os.symlink("shelf/far.mp4", batch / "hop.mp4")  # a relative link to a path through it
    job = manifest_import(batch, "through,shelf/far.mp4,", "chained,hop.mp4,")
    roots = f"(IMPORT_ROOTS: {batch.resolve()}, {(tmp_path / 'media').resolve()})"
    leads = f"it leads to {(elsewhere / 'far.mp4').resolve()}"
    assert sorted(job.errors) == [
        f"manifest.csv, line 3, field path: shelf/far.mp4 is outside the import folders {roots}: {leads}",
        f"manifest.csv, line 4, field path: hop.mp4 is outside the import folders {roots}: {leads}",
    ]
    assert (job.result["videos_ok"], job.result["videos_failed"]) == (1, 2)
    assert not Frame.objects.filter(video__yt8m_id__in=["through", "chained"]).exists()


def test_it_fails_a_manifest_path_with_a_nul_byte_naming_the_row(existing, batch, settings):
    job = manifest_import(batch, "nul,fi\0ne.mp4,")
    assert_nothing_else_changed(existing, settings, None, "manifest.csv, line 3, field path: holds a NUL byte", job)
    assert not Video.objects.filter(yt8m_id="nul").exists()


def test_it_refuses_a_manifest_with_a_line_that_is_not_utf8_naming_the_line_and_byte(existing, batch, settings):
    manifest = batch / "manifest.csv"
    manifest.write_bytes(b"yt8m_id,path,labels\nfine,fine.mp4,Good\ncafe,fine.mp4,Caf\xe9\n")
    with pytest.raises(Invalid) as error:
        videos_import(source=str(manifest), count=3, sync=True)
    assert str(error.value) == (
        f"{manifest}, line 3: not UTF-8: byte 0xe9 at byte offset 17 of the line (offset 56 of the file)"
    )
    assert snapshot(settings) == existing


def test_it_reads_a_manifest_with_a_byte_order_mark_and_crlf_endings(existing, batch, settings):
    manifest = batch / "manifest.csv"
    manifest.write_bytes(b"\xef\xbb\xbfyt8m_id,path,labels\r\nfine,fine.mp4,Good\r\n")
    job = videos_import(source=str(manifest), count=3, sync=True)
    assert (job.status, job.result["videos_ok"], job.errors) == ("succeeded", 1, [])
    assert Video.objects.get(yt8m_id="fine").labels == ["Good"]

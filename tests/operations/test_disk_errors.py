"""Errors that say what happened (issue 17): a full disk, a read-only target or a file in the way of a folder gives
one line that says what failed and where, on the command line (no traceback) and on the job; nothing half-written
is left behind. Real conditions: a 16 KiB tmpfs that fills up, a read-only tmpfs."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotator.collections.services import collection_import
from annotator.export.services import ExportOptions, export_run, export_start, export_zip_run
from annotator.models import Collection, Image, Job, Pair, Video
from tests.export.test_import_pairs import small_dataset
from tests.export_fixtures import make_pair
from tests.video_fixtures import *  # noqa: F403 (fixtures)

pytestmark = pytest.mark.django_db


def export_pairs(count: int = 6) -> None:
    for _ in range(count):
        make_pair(similarity=0.9)


def test_an_export_to_a_full_disk_says_so_with_the_path_and_leaves_no_staging_folder(small_disk):
    export_pairs()
    out = small_disk / "bench"
    with pytest.raises(CommandError) as error:
        call_command("export_benchmark", "--out", str(out))
    message = str(error.value)
    assert message.startswith(f"Export to {out} failed: the disk is full")
    assert message.endswith("[ENOSPC]")
    assert str(small_disk) in message and "\n" not in message
    assert list(small_disk.iterdir()) == []  # the hidden staging folder went with the failure


def test_an_export_to_a_read_only_target_says_so_on_the_job_and_its_page(read_only_disk, coordinator, client_for):
    export_pairs(2)
    out = read_only_disk / "bench"
    job = export_start(options=ExportOptions(out=str(out)), user=coordinator)
    export_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    [line] = job.errors
    assert line.startswith(f"Export to {out} failed: the file system is read-only, at {read_only_disk}/.bench.tmp-")
    assert line.endswith("[EROFS]")
    page = client_for(coordinator).get(f"/jobs/{job.pk}/")
    assert page.status_code == 200 and line.encode() in page.content


def test_an_export_whose_folder_is_a_file_names_the_file(tmp_path):
    export_pairs(1)
    in_the_way = tmp_path / "exports"
    in_the_way.write_text("not a folder")
    with pytest.raises(CommandError) as error:
        call_command("export_benchmark", "--out", str(in_the_way / "bench"))
    assert str(error.value) == (
        f"Export to {in_the_way / 'bench'} failed: a file is in the way where a folder should be, at {in_the_way} "
        "[EEXIST]"
    )


def test_a_zip_job_that_fills_the_disk_says_so_and_leaves_no_partial_zip(
    tmp_path, small_disk, coordinator, client_for, settings
):
    export_pairs()
    job = export_start(options=ExportOptions(out=str(tmp_path / "bench")), user=coordinator)
    export_run(job_id=job.pk)
    settings.EXPORT_ROOT = small_disk  # where the zips are built
    page = client_for(coordinator)
    assert page.post(f"/exports/{job.pk}/zip/").status_code == 302
    zip_job = export_zip_run(job_id=Job.objects.get(kind=Job.Kind.ZIP).pk)
    message = f"The zip of {tmp_path / 'bench'} failed: the disk is full, writing under {small_disk / '.zips'} [ENOSPC]"
    assert zip_job.status == Job.Status.FAILED and zip_job.errors == [message]
    response = page.get(f"/exports/{job.pk}/download/")
    problem = re.search(r'<p id="download-problem" class="error">(.*?)</p>', response.content.decode())[1]
    assert problem == message and "Try again" in response.content.decode()
    assert list((small_disk / ".zips").iterdir()) == []


def test_importing_videos_onto_a_full_media_disk_fails_each_video_with_one_line(
    h264_video, small_disk, settings, capsys
):
    settings.MEDIA_ROOT = small_disk
    call_command("import_videos", str(h264_video.parent), "--sync", "--every", "1")
    captured = capsys.readouterr()
    assert "0 video(s) sampled, 0 already sampled, 1 failed" in captured.out
    lines = [line.strip() for line in captured.err.splitlines()]
    assert len(lines) == 2, captured.err  # seen once with a third line, under load: the message shows which
    line, summary = lines
    assert line == (
        f"clip: sampling {h264_video.resolve()} failed: the disk is full, writing under {small_disk} [ENOSPC]"
    )
    assert summary == "No video could be imported."
    assert Job.objects.get().errors == [line, summary]
    assert Video.objects.get().status == Video.Status.FAILED
    assert Image.objects.count() == 0
    # The frame cut short by the full disk went with the failure, not 7 hours later with the clean-up.
    assert [p for p in small_disk.rglob("*") if p.is_file()] == []


def test_importing_videos_into_a_read_only_media_folder_says_read_only(h264_video, read_only_disk, settings):
    settings.MEDIA_ROOT = read_only_disk
    call_command("import_videos", str(h264_video.parent), "--sync", "--frames", "2")
    line = Job.objects.get().errors[0]
    assert line == (
        f"clip: sampling {h264_video.resolve()} failed: the file system is read-only, at {read_only_disk}/frames "
        "[EROFS]"
    )


def test_importing_pairs_into_a_read_only_media_folder_imports_nothing_and_says_where(
    tmp_path, read_only_disk, settings, annotator
):
    folder = small_dataset(tmp_path / "in")
    settings.MEDIA_ROOT = read_only_disk
    errors = io.StringIO()  # the command's own error stream, not the process's
    with pytest.raises(CommandError) as error:  # its captions need an author
        call_command("import_pairs", str(folder), "--user", annotator.username, stderr=errors)
    assert str(error.value) == f"nothing imported: 1 problem(s) in {folder}"
    line = errors.getvalue().strip()
    assert line.startswith(f"Import of {folder.resolve()} failed: the file system is read-only, at {read_only_disk}")
    assert line.endswith("[EROFS]")
    assert Pair.objects.count() == 0 and Image.objects.count() == 0


def test_an_upload_onto_a_full_disk_fails_that_file_named_and_stores_no_partial_file(
    client_for, coordinator, h264_video, small_disk, settings
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.IMPORT_ROOTS = [small_disk]
    data = h264_video.read_bytes()
    assert len(data) > 16 * 1024
    response = client_for(coordinator).post(
        "/videos/upload/",
        {"files": [SimpleUploadedFile("beach.mp4", data, "video/mp4")], "frames": 3, "domain": "natural"},
    )
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    [folder] = (small_disk / "uploads").iterdir()
    assert job.errors[0] == f"beach.mp4: storing the upload failed: the disk is full, writing under {folder} [ENOSPC]"
    assert list(folder.iterdir()) == []
    assert Video.objects.get().status == Video.Status.FAILED


def test_an_s3_import_onto_a_full_scratch_disk_says_the_disk_is_full_not_that_s3_cannot_be_read(
    s3_bucket, small_disk, settings
):
    from subtlebench.storage import s3_client

    settings.SCRATCH_ROOT = small_disk
    s3_client().put_object(Bucket=s3_bucket, Key="sets/big/A/scene.png", Body=bytes(64 * 1024))  # over 16 KiB
    source = f"s3://{s3_bucket}/sets/big"
    job = collection_import(source=source, name="big", domain="aerial", sync=True)
    assert job.status == Job.Status.FAILED
    [line] = job.errors
    assert line.startswith(f"Import of {source} failed: the disk is full, writing under {small_disk}/collection-")
    assert line.endswith("/source [ENOSPC]")
    assert not Collection.objects.exists()
    assert [p for p in small_disk.rglob("*") if p.is_file()] == []  # the download cut short went with the failure

"""The clean-up knows every temporary path the app makes (issue 25): a command-line export or a zip job SIGKILLed
mid-write leaves its staging folder or zip part, which the clean-up removes once its owner is dead, and never while
the owner lives. The killed processes are real: they block on a named pipe where they read a file, so they are
killed mid-write at a known point, without timing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from django.utils import timezone

from annotator.cleanup.services import storage_clean_up
from annotator.export.services import ExportOptions, export_run, export_start, export_zip_start
from annotator.jobs.scratch import ledger, scratch_register
from annotator.models import Job, JobTask
from tests.conftest import database_url, wait_until
from tests.export_fixtures import make_pair, make_video

ROOT = Path(__file__).resolve().parent.parent.parent


def app_process(settings, *args: str) -> subprocess.Popen:
    """A process of the app on this test's database and folders."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "VAR_DIR": str(settings.VAR_DIR),
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "EXPORT_ROOT": str(settings.EXPORT_ROOT),
    }
    return subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def pipe_in_place_of(path: Path) -> None:
    """A named pipe where a file was: a process that opens it to read waits there until killed."""
    path.unlink()
    os.mkfifo(path)


def ledger_paths() -> list[str]:
    return sorted(json.loads(entry.read_text())["path"] for entry in ledger().glob("*.json"))


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_sigkilled_command_line_export_leaves_a_staging_folder_the_clean_up_removes(settings, tmp_path):
    make_pair()
    blocked = make_pair()
    pipe_in_place_of(Path(default_storage.path(blocked.image_1.file.name)))
    target = tmp_path / "elsewhere" / "bench"  # neither under EXPORT_ROOT nor any job's target
    target.parent.mkdir()
    process = app_process(settings, "manage.py", "export_benchmark", "--out", str(target))
    try:
        staging = wait_until(lambda: list(target.parent.glob(".bench.tmp-*")), 60, "the export's staging folder")[0]
        assert ledger_paths() == [str(staging)]
        assert storage_clean_up(grace_minutes=0)["temporary"] == []  # its process runs: in use
        assert staging.is_dir()
    finally:
        kill(process)

    removed = storage_clean_up(grace_minutes=0)

    assert removed["temporary"] == [str(staging)]
    assert list(target.parent.iterdir()) == [] and ledger_paths() == []


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_sigkilled_zip_job_leaves_a_part_the_clean_up_removes_once_its_heartbeat_is_stale(
    settings, tmp_path, coordinator
):
    settings.JOB_STALE_SECONDS = 3600
    make_pair()
    export = export_run(job_id=export_start(options=ExportOptions(out=str(tmp_path / "bench")), user=coordinator).pk)
    assert export.status == Job.Status.SUCCEEDED
    pipe_in_place_of(next((tmp_path / "bench" / "images").rglob("*.jpg")))
    zip_job = export_zip_start(job=export, user=coordinator)
    script = (
        "import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'subtlebench.settings'\n"
        "import django; django.setup()\n"
        "from annotator.export.services import export_zip_run\n"
        f"export_zip_run(job_id={zip_job.pk})\n"
    )
    process = app_process(settings, "-c", script)
    zips = Path(settings.EXPORT_ROOT) / ".zips"
    try:
        part = wait_until(lambda: list(zips.glob(".*.zip.part-*")), 60, "the zip's part file")[0]
        unit = JobTask.objects.get(job=zip_job)
        assert unit.status == JobTask.Status.RUNNING
        assert storage_clean_up(grace_minutes=0)["temporary"] == []  # its unit beats: in use
        assert part.exists()
    finally:
        kill(process)
    assert storage_clean_up(grace_minutes=0)["temporary"] == []  # the heartbeat is still fresh: not judged dead yet

    JobTask.objects.filter(pk=unit.pk).update(heartbeat=timezone.now() - timedelta(hours=2))
    removed = storage_clean_up(grace_minutes=0)

    assert removed["temporary"] == [str(part)]
    assert list(zips.iterdir()) == [] and ledger_paths() == []


@pytest.mark.django_db
def test_a_previous_export_moved_aside_by_a_swap_that_never_finished_is_put_back(tmp_path):
    out = tmp_path / "bench"
    aside = tmp_path / ".bench.old-0123abcd"
    (aside / "data").mkdir(parents=True)
    (aside / "data" / "test.jsonl").write_text("{}\n")
    entry = scratch_register(aside, owner=None, restore_to=out)
    record = json.loads(entry.file.read_text())
    entry.file.write_text(json.dumps({**record, "pid": 2**22 + 1}))  # a pid no process has: its owner is dead

    assert storage_clean_up(grace_minutes=0)["temporary"] == [str(aside)]

    assert (out / "data" / "test.jsonl").read_text() == "{}\n" and not aside.exists()


@pytest.mark.django_db
def test_the_grace_and_a_live_job_keep_a_temporary_path(tmp_path, coordinator):
    job = Job.objects.create(kind=Job.Kind.EXPORT, title="x", status=Job.Status.RUNNING, heartbeat=timezone.now())
    held, fresh = tmp_path / "held", tmp_path / "fresh"
    for path in (held, fresh):
        path.mkdir()
    scratch_register(held, owner=job.pk)
    entry = scratch_register(fresh, owner=None)
    record = json.loads(entry.file.read_text())
    entry.file.write_text(json.dumps({**record, "pid": 2**22 + 1}))

    assert storage_clean_up(grace_minutes=10)["temporary"] == []  # `fresh` was touched within the grace
    assert storage_clean_up(grace_minutes=0)["temporary"] == [str(fresh)]  # `held`: its job runs and beats
    Job.objects.filter(pk=job.pk).update(status=Job.Status.FAILED)
    assert storage_clean_up(grace_minutes=0)["temporary"] == [str(held)]


@pytest.mark.django_db
def test_the_frames_a_live_sampling_unit_is_writing_are_not_orphans_yet(settings):
    video = make_video(frames=0)
    job = Job.objects.create(kind=Job.Kind.IMPORT, title="import", status=Job.Status.RUNNING)
    unit = JobTask.objects.create(
        job=job,
        name="annotator.tasks.sample_video",
        kwargs={"job_id": job.pk, "video_id": video.pk},
        status=JobTask.Status.RUNNING,
        heartbeat=timezone.now(),
    )
    written = Path(settings.MEDIA_ROOT) / "frames" / video.yt8m_id / "0123abcd" / "000000.jpg"
    written.parent.mkdir(parents=True)
    written.write_bytes(b"jpeg")

    assert storage_clean_up(grace_minutes=0)["frame_files"] == []
    JobTask.objects.filter(pk=unit.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    assert storage_clean_up(grace_minutes=0)["frame_files"] == [f"frames/{video.yt8m_id}/0123abcd/000000.jpg"]

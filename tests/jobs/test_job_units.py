"""Jobs and their units in this process: run once, count once; idempotent creation; cancel and retry from the page
and the API; the clean-up's grace period; videos whose frame files went missing; the broker's visibility timeout."""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection, connections
from django.utils import timezone

from annotator.cleanup.services import storage_clean_up
from annotator.export.services import ExportOptions, export_run, export_start
from annotator.jobs.services import UnitRef, job_cancel, job_retry, job_task_claim, job_task_send, jobs_sweep
from annotator.models import Frame, Image, Job, JobCancelled, JobTask, Video
from annotator.similarity.tasks import embed_video_frames
from annotator.videos.services import videos_import
from annotator.videos.tasks import sample_video
from subtlebench.errors import Conflict, Forbidden
from tests.conftest import wait_until
from tests.export_fixtures import make_pair
from tests.video_fixtures import *  # noqa: F403 (fixtures)
from tests.video_fixtures import run_queued

pytestmark = pytest.mark.django_db


@pytest.fixture
def export_root(settings, tmp_path):
    settings.EXPORT_ROOT = tmp_path / "exports"
    return settings.EXPORT_ROOT


def stored_files(settings) -> set[str]:
    root = Path(settings.MEDIA_ROOT)
    return {str(p.relative_to(root)) for p in root.rglob("*.jpg")}


# --- Run once, count once --------------------------------------------------------------------------------------


def test_a_unit_delivered_twice_leaves_the_same_rows_and_progress(h264_video, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        job = videos_import(source=str(h264_video.parent), count=3)
    assert run_queued(callbacks[0]) == "ok"
    rows = list(Frame.objects.values_list("pk", "image__file"))
    job.refresh_from_db()
    before = (job.status, job.done, job.total, dict(job.result))
    assert run_queued(callbacks[0]) == "taken"
    job.refresh_from_db()
    assert (job.status, job.done, job.total, dict(job.result)) == before == ("succeeded", 1, 1, before[3])
    assert list(Frame.objects.values_list("pk", "image__file")) == rows


def test_a_second_worker_cannot_claim_a_running_unit_but_takes_over_a_stale_one(h264_video, settings):
    job = videos_import(source=str(h264_video.parent), count=3, sync=False)
    unit = job.tasks.get()
    first = job_task_claim(unit=UnitRef(unit.pk, celery_id="a", worker="w1"))
    assert first is not None
    assert job_task_claim(unit=UnitRef(unit.pk, celery_id="b", worker="w2")) is None  # compare-and-set
    JobTask.objects.filter(pk=unit.pk).update(
        heartbeat=timezone.now() - timedelta(seconds=settings.JOB_STALE_SECONDS + 1)
    )
    second = job_task_claim(unit=UnitRef(unit.pk, celery_id="b", worker="w2"))
    assert second is not None and second.token != first.token
    with pytest.raises(JobCancelled):  # the first worker, back from a pause, learns it lost the unit
        first.beat(force=True)
    assert not first.complete()  # and cannot count it


@pytest.mark.django_db(transaction=True)
def test_a_delivery_that_waited_on_a_claim_in_progress_does_not_claim_the_unit_again(h264_video):
    # Another worker's claim holds the unit's row (updated, not yet committed) while a second delivery arrives: the
    # second must wait for it and then see the unit running. (A compare-and-set whose condition joins the job is
    # checked against a snapshot from before the wait, and both deliveries won: a unit sampled twice.)
    job = videos_import(source=str(h264_video.parent), count=3, sync=False)
    unit = job.tasks.get()
    first = connections.create_connection("default")
    try:
        first.set_autocommit(False)
        with first.cursor() as cursor:
            cursor.execute(
                f"UPDATE {JobTask._meta.db_table} SET status = %s, token = %s, heartbeat = now(),"
                " attempts = attempts + 1 WHERE id = %s",
                [JobTask.Status.RUNNING, "first", unit.pk],
            )
        outcome = {}

        def deliver_again():
            try:
                outcome["run"] = job_task_claim(unit=UnitRef(unit.pk, celery_id="second", worker="w2"))
            finally:
                connection.close()

        second = threading.Thread(target=deliver_again)
        second.start()
        wait_until(lambda: waiting_on_a_lock(), 30, "the second delivery to wait for the first claim")
        first.commit()
        second.join(30)
    finally:
        first.close()
    assert outcome == {"run": None}
    assert JobTask.objects.values_list("token", "attempts").get(pk=unit.pk) == ("first", 1)


def test_a_message_sent_for_another_databases_unit_of_that_number_does_nothing(h264_video):
    """The broker keeps its queues when the database is restored from a backup or made anew (a reset, a test
    database): a message it still holds names a unit number that here is another unit. Delivered, it neither runs
    that unit with its own arguments nor ends it or its job (a stale embedding message once failed an import's
    embedding job with "Video 55 no longer exists"); the unit's own message still runs it."""
    job = videos_import(source=str(h264_video.parent), count=3, sync=False)
    unit = job.tasks.get()
    before = JobTask.objects.values_list("status", "attempts", "token", "worker").get(pk=unit.pk)
    job_before = (job.status, job.errors, job.done)
    for task, kwargs in (
        (embed_video_frames, {"job_id": job.pk, "video_id": unit.kwargs["video_id"] + 1000}),  # another task
        (sample_video, {**unit.kwargs, "job_id": job.pk + 1000}),  # this task, for another job
        (sample_video, {**unit.kwargs, "count": 5}),  # and with other arguments
    ):
        task.apply(kwargs={**kwargs, "unit_id": unit.pk})  # as a worker runs a message: with its request
    job.refresh_from_db()
    assert JobTask.objects.values_list("status", "attempts", "token", "worker").get(pk=unit.pk) == before
    assert (job.status, job.errors, job.done) == job_before == (job.status, [], 0)

    sample_video.apply(kwargs={**unit.kwargs, "unit_id": unit.pk})  # its own message
    job.refresh_from_db()
    assert (job.status, job.errors) == (Job.Status.SUCCEEDED, [])
    assert Frame.objects.filter(video_id=unit.kwargs["video_id"]).count() == 3


def waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


def test_an_import_is_not_finished_while_one_of_its_videos_is_still_sampling(
    h264_video, django_capture_on_commit_callbacks
):
    (h264_video.parent / "second.mp4").write_bytes(h264_video.read_bytes())
    with django_capture_on_commit_callbacks() as callbacks:
        job = videos_import(source=str(h264_video.parent), count=2)
    run_queued(callbacks[0])
    job.refresh_from_db()
    assert (job.status, job.done, job.total) == ("running", 1, 2)
    run_queued(callbacks[1])
    job.refresh_from_db()
    assert (job.status, job.done, job.total) == ("succeeded", 2, 2)


def test_an_export_runs_once_and_a_re_run_after_a_crash_counts_afresh(coordinator, export_root):
    make_pair()
    job = export_start(options=ExportOptions(out=str(export_root / "v1")), user=coordinator)
    unit = job.tasks.get()
    # A first worker claimed it and died after counting part of it; the sweeper requeued it.
    job_task_claim(unit=UnitRef(unit.pk, celery_id="dead", worker="w1"))
    Job.objects.filter(pk=job.pk).update(done=5, total=5)
    JobTask.objects.filter(pk=unit.pk).update(status="pending", token="")
    job = export_run(job_id=job.pk)
    assert (job.status, job.done, job.total) == ("succeeded", 1, 1)
    finished = job.finished
    assert export_run(job_id=job.pk).finished == finished  # a redelivery finds it done


def test_a_cancelled_export_stops_and_its_unit_never_runs(coordinator, export_root):
    make_pair()
    job = export_start(options=ExportOptions(out=str(export_root / "v1")), user=coordinator)
    job_cancel(job=job, user=coordinator)
    job = export_run(job_id=job.pk)
    assert job.status == "cancelled" and not (export_root / "v1").exists()
    assert job.tasks.get().status == "cancelled"


def test_a_cancelled_job_refuses_progress_and_keeps_its_status(coordinator):
    job = Job.objects.create(kind=Job.Kind.EXPORT, title="x", status=Job.Status.RUNNING, total=3)
    job_cancel(job=job, user=coordinator)
    with pytest.raises(JobCancelled):
        job.advance()
    assert job.finish(result={"late": True}) is False
    job.refresh_from_db()
    assert (job.status, job.done, job.result) == ("cancelled", 0, {})


def test_the_sweeper_sends_a_unit_the_broker_refused_and_finishes_a_job_whose_units_ended(coordinator):
    job = Job.objects.create(kind=Job.Kind.EXPORT, title="x", created_by=coordinator)
    refused = JobTask.objects.create(job=job, name="annotator.tasks.export_benchmark_task", kwargs={"job_id": job.pk})
    JobTask.objects.filter(pk=refused.pk).update(error="not queued: the broker refused it")
    assert jobs_sweep()["sent"] == 1  # the test broker is up
    refused.refresh_from_db()
    assert (refused.status, refused.sends) == ("queued", 1)
    JobTask.objects.filter(pk=refused.pk).update(status="failed", error="given up: its worker vanished")
    assert jobs_sweep()["finished"] == 1
    job.refresh_from_db()
    assert job.status == "failed" and job.errors == ["given up: its worker vanished"]


def test_a_send_counts_when_a_worker_claims_the_unit_before_the_sender_marks_it_queued(coordinator, monkeypatch):
    """A worker can take the message and claim the unit between the broker's answer and the sender's next statement
    (seen in a loaded run: a unit sent twice counted one send)."""
    from subtlebench.celery import app

    job = Job.objects.create(kind=Job.Kind.EXPORT, title="x", created_by=coordinator)
    unit = JobTask.objects.create(job=job, name="annotator.tasks.export_benchmark_task", kwargs={"job_id": job.pk})
    claimed = []

    def send_and_claim_at_once(name, *, task_id, **options):
        claimed.append((task_id, job_task_claim(unit=UnitRef(unit.pk, celery_id=task_id, worker="quick@worker"))))

    monkeypatch.setattr(app, "send_task", send_and_claim_at_once)
    assert job_task_send(task_id=unit.pk)
    [(message_id, run)] = claimed
    unit.refresh_from_db()
    assert run is not None and run.token == unit.token
    assert (unit.status, unit.sends, unit.worker, unit.celery_id) == ("running", 1, "quick@worker", message_id)


def test_every_task_ends_within_the_brokers_visibility_timeout(settings):
    from subtlebench.celery import app

    app.loader.import_default_modules()
    ours = {name: task for name, task in app.tasks.items() if name.startswith("annotator.tasks.")}
    assert {
        "annotator.tasks.sample_video",
        "annotator.tasks.export_benchmark_task",
        "annotator.tasks.sweep_jobs",
    } <= set(ours)
    timeout = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    for name, task in ours.items():
        assert task.time_limit and task.time_limit < timeout, name
    sample = ours["annotator.tasks.sample_video"]
    assert sample.max_retries >= 10 and sample.retry_backoff_max >= 60  # minutes of retries, not seconds


# --- Idempotent creation ----------------------------------------------------------------------------------------


def test_the_same_idempotency_key_makes_one_import_job(client_for, coordinator, h264_video):
    client = client_for(coordinator)
    body = {"path": str(h264_video.parent), "every": 4}
    first = client.post("/api/videos/import/", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k1")
    again = client.post("/api/videos/import/", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k1")
    assert first.status_code == again.status_code == 202
    assert first.json()["job_id"] == again.json()["job_id"]
    assert Job.objects.count() == 1 and JobTask.objects.count() == 1
    other = client.post("/api/videos/import/", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k2")
    assert other.json()["job_id"] != first.json()["job_id"]


def test_a_resubmitted_export_form_makes_one_export_job(client_for, coordinator, export_root):
    page = client_for(coordinator)
    form = page.get("/exports/").content.decode()
    key = form.split('name="idempotency_key" value="', 1)[1].split('"', 1)[0]
    assert len(key) == 32
    data = {"target": "v1", "val_fraction": "0", "seed": "0", "action": "start", "idempotency_key": key}
    assert page.post("/exports/", data).status_code == 302
    assert page.post("/exports/", data).status_code == 302
    assert Job.objects.filter(kind=Job.Kind.EXPORT).count() == 1
    api = page.post(
        "/api/exports/start/", {"target": "v2"}, content_type="application/json", HTTP_IDEMPOTENCY_KEY="same"
    )
    again = page.post(
        "/api/exports/start/", {"target": "v2"}, content_type="application/json", HTTP_IDEMPOTENCY_KEY="same"
    )
    assert api.json()["id"] == again.json()["id"]
    assert Job.objects.filter(kind=Job.Kind.EXPORT).count() == 2


# --- Cancel and retry ---------------------------------------------------------------------------------------------


def test_a_coordinator_cancels_a_running_import_and_its_pending_units_never_run(
    client_for, coordinator, h264_video, django_capture_on_commit_callbacks
):
    (h264_video.parent / "second.mp4").write_bytes(h264_video.read_bytes())
    with django_capture_on_commit_callbacks() as callbacks:
        job = videos_import(source=str(h264_video.parent), count=2)
    page = client_for(coordinator).get(f"/jobs/{job.pk}/").content.decode()
    assert f'action="/jobs/{job.pk}/cancel/"' in page
    response = client_for(coordinator).post(f"/jobs/{job.pk}/cancel/")
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.status == "cancelled" and "cancelled by cora" in job.errors[-1]
    assert [run_queued(callback) for callback in callbacks] == ["taken", "taken"]
    assert not Frame.objects.exists()
    assert set(job.tasks.values_list("status", flat=True)) == {"cancelled"}
    assert client_for(coordinator).post(f"/jobs/{job.pk}/cancel/").status_code == 302  # told, nothing changes


def test_cancel_stops_a_running_sampling_between_frames(h264_video, settings, coordinator):
    settings.JOB_HEARTBEAT_SECONDS = 0
    job = videos_import(source=str(h264_video.parent), every=0.5, sync=False)
    unit = job.tasks.get()
    Job.objects.filter(pk=job.pk).update(status="cancelled")  # as if a coordinator cancelled it mid-run
    run = job_task_claim(unit=UnitRef(unit.pk))
    assert run is None  # a cancelled job's unit is not started
    Job.objects.filter(pk=job.pk).update(status="running")
    JobTask.objects.filter(pk=unit.pk).update(status="queued")
    from annotator.videos import services

    original = services.sampling.sample

    def cancel_after_two(path, **options):
        info, frames = original(path, **options)

        def frames_then_cancel():
            for number, frame in enumerate(frames):
                if number == 2:
                    Job.objects.filter(pk=job.pk).update(status="cancelled")
                yield frame

        return info, frames_then_cancel()

    services.sampling.sample = cancel_after_two
    try:
        outcome = sample_video(**unit.kwargs, unit_id=unit.pk)
    finally:
        services.sampling.sample = original
    assert outcome == "cancelled"
    assert not Frame.objects.exists() and stored_files(settings) == set()  # nothing committed, no file left
    unit.refresh_from_db()
    assert unit.status == "cancelled"


def test_a_coordinator_retries_a_failed_import_as_a_new_job(coordinator, h264_video):
    job = videos_import(source=str(h264_video.parent), count=2, sync=False)
    JobTask.objects.filter(job=job).update(status="failed")
    Job.objects.filter(pk=job.pk).update(status="failed")
    job.refresh_from_db()
    again = job_retry(job=job, user=coordinator)
    assert again.pk != job.pk and again.result["retry_of"] == job.pk
    assert again.total == 1 and again.tasks.get().kwargs["job_id"] == again.pk
    with pytest.raises(Conflict):
        job_cancel(job=job, user=coordinator)  # a failed job is over


def test_the_cancel_and_retry_pages_refuse_anonymous_users_wrong_roles_and_get(
    client, client_for, annotator, coordinator
):
    job = Job.objects.create(kind=Job.Kind.IMPORT, title="x")
    urls = (f"/jobs/{job.pk}/cancel/", f"/jobs/{job.pk}/retry/")
    for url in urls:
        assert client.post(url)["Location"].startswith("/accounts/login/")
    for url in urls:
        assert client_for(annotator).post(url).status_code == 403
        assert client_for(annotator).get(url).status_code in (403, 405)
    page = client_for(annotator).get(f"/jobs/{job.pk}/").content.decode()
    assert "/cancel/" not in page  # only coordinators see the buttons
    for url in urls:  # a GET goes to the job's page with the buttons, and cancels or retries nothing
        assert client_for(coordinator).get(url)["Location"] == f"/jobs/{job.pk}/"
        assert client_for(coordinator).put(url).status_code == 405
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED
    with pytest.raises(Forbidden):
        job_cancel(job=job, user=annotator)


def test_the_api_cancels_and_retries_a_job(client_for, coordinator, annotator):
    job = Job.objects.create(kind=Job.Kind.EXPORT, title="x", status=Job.Status.RUNNING, result={"options": {}})
    JobTask.objects.create(job=job, name="annotator.tasks.export_benchmark_task", kwargs={"job_id": job.pk})
    assert client_for(annotator).post(f"/api/jobs/{job.pk}/cancel/").status_code == 403
    api = client_for(coordinator)
    assert api.get(f"/api/jobs/{job.pk}/cancel/").status_code == 405
    cancelled = api.post(f"/api/jobs/{job.pk}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert api.post(f"/api/jobs/{job.pk}/cancel/").status_code == 409
    retried = api.post(f"/api/jobs/{job.pk}/retry/")
    assert retried.status_code == 201 and retried.json()["status"] == "queued"
    assert Job.objects.get(pk=retried.json()["id"]).tasks.count() == 1
    assert api.post("/api/jobs/999999/retry/").status_code == 404


# --- Clean-up and missing files -----------------------------------------------------------------------------------


def age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_the_clean_up_removes_old_orphans_and_staging_folders_only(settings, h264_video, export_root):
    videos_import(source=str(h264_video.parent), count=2, sync=True)
    media = Path(settings.MEDIA_ROOT)
    kept = stored_files(settings)
    old_orphan = media / "frames" / "clip" / "deadbeef" / "000000.jpg"
    young_orphan = media / "frames" / "clip" / "cafebabe" / "000000.jpg"
    for path in (old_orphan, young_orphan):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"jpeg")
    age(old_orphan, 3600)
    for path in media.rglob("*.jpg"):
        if path != young_orphan:
            age(path, 3600)  # committed files are old too: age alone never removes a file
    export_root.mkdir(parents=True)
    stale = export_root / ".v1.tmp-0123abcd"
    (stale / "images").mkdir(parents=True)
    (stale / "images" / "a.jpg").write_bytes(b"x")
    for path in (stale / "images" / "a.jpg", stale / "images", stale):
        age(path, 3600)
    running = export_root / ".v2.tmp-89abcdef"
    running.mkdir()
    (export_root / "v3").mkdir()
    removed = storage_clean_up(grace_minutes=30)
    assert removed["frame_files"] == ["frames/clip/deadbeef/000000.jpg"]
    assert removed["staging_folders"] == [str(stale)]
    assert stored_files(settings) == kept | {"frames/clip/cafebabe/000000.jpg"}
    assert running.exists() and (export_root / "v3").exists()


def test_a_video_whose_frame_files_are_gone_is_marked_never_leased_and_re_sampled_by_import(
    settings, h264_video, annotator
):
    from annotator.picking.services import video_lease_next

    call_command("import_videos", str(h264_video.parent), "--sync", "--frames", "3")
    video = Video.objects.get()
    lost = Image.objects.filter(frame__video=video).first().file.name
    (Path(settings.MEDIA_ROOT) / lost).unlink()
    assert storage_clean_up()["videos_missing_files"] == ["clip"]
    video.refresh_from_db()
    assert video.status == "missing" and lost in video.error and "repair" in video.error
    assert video_lease_next(user=annotator) is None
    job = videos_import(source=str(h264_video.parent), count=3, sync=True)  # the same import again
    assert (job.result["videos_ok"], job.result["videos_skipped"]) == (1, 0)
    video.refresh_from_db()
    assert (video.status, video.frame_count) == ("sampled", 3) and video.missing_files() == []
    assert video_lease_next(user=annotator) == video


def test_a_video_that_lost_a_frame_file_is_never_handed_out_even_before_the_clean_up_finds_it(
    settings, h264_video, annotator, client_for
):
    from annotator.picking.services import video_lease_next

    call_command("import_videos", str(h264_video.parent), "--sync", "--frames", "3")
    video = Video.objects.get()
    lost = Image.objects.filter(frame__video=video).last().thumbnail.name
    (Path(settings.MEDIA_ROOT) / lost).unlink()
    # Opening its workbench directly does not take it either (the API's heartbeat takes a free video).
    assert client_for(annotator).post(f"/api/videos/{video.pk}/heartbeat/").status_code == 409
    assert video_lease_next(user=annotator) is None  # asking for work checks the files and marks it
    video.refresh_from_db()
    assert video.status == "missing" and lost in video.error and video.lease_holder_id is None


def test_repair_finds_and_re_samples_videos_with_missing_files(settings, h264_video, capsys):
    call_command("import_videos", str(h264_video.parent), "--sync", "--frames", "3")
    for path in (Path(settings.MEDIA_ROOT) / "frames").rglob("*_thumb.jpg"):
        path.unlink()
    call_command("repair", "--sync")
    out = capsys.readouterr().out
    assert "clip: 3 frame file(s) missing from storage" in out and "restoring or re-sampling in job" in out
    video = Video.objects.get()
    assert (video.status, video.frame_count, video.missing_files()) == ("sampled", 3, [])
    call_command("repair")
    assert "Every sampled video has all its frame files." in capsys.readouterr().out

"""Fault injection against an instance of its own, with a table of fault -> outcome (issue 17).

Starts, on loopback and under a temporary folder: an embedded PostgreSQL and Redis of its own (devtools.localservices
on free ports), gunicorn (DEBUG off), a Celery worker on `default` (prefork, one child), a similarity worker (solo,
a tiny random DINOv3 activated) and beat (the sweeper every 2 s). Then replays, one after another:

- Redis stopped between the commit and the queueing of follow-up work (an import sampled in its own process);
- a worker's pool child SIGKILLed during sampling; the worker's main process SIGKILLed mid-task (then restarted,
  as a supervisor would);
- Redis dropped mid-task, and started again;
- PostgreSQL restarted (pg_ctl restart) during a task;
- an export started through the API with Redis down, and retried with the same Idempotency-Key;
- every unit of an import delivered twice to two workers on one queue;
- Redis FLUSHALL with a unit queued (the sweeper finds its message gone and sends it again);
- Redis out of memory (participants keep joining and answering; /healthz names the broker);
- beat down (/healthz?deep=1 says so and reports the pending unit that waits; beat back, it is sent);
- a hostile folder given to import_pairs and validate_benchmark; a video's media lost, then `repair` (issue 25);
- exports (issue 25): S3 cut mid-upload during `--replace` (a moto server behind a cuttable TCP proxy), a
  corrupted frame, a command-line export SIGKILLed, a zip job's worker SIGKILLed (then the clean-up);
- a slow S3 (the proxy drips) under a collection import and an S3 export with a release, units judged gone after
  2 s of silence (each runs once); the media storage's S3 cut during a synthetic sweep, and the S3 of an s3://
  video while it is sampled (each pauses with the reason, and finishes once S3 is back) (issue 58);
- model runs against a fake model server (tests/model_server.py in a process of its own): killed mid-run and
  restarted (the run pauses, resumes, asks its failed items again: accuracy over answered items is the true one),
  answering 500 to everything (the run ends failed with the reason), trickling one byte every 2 s (each request
  ends at its deadline);
- `seed_demo` SIGKILLed while it embeds the demo frames, then run again (issue 26);
- the coordinator's daily pages (overview, assignment, invites CSV) with Redis stopped (issue 26);
- a release's export held at the step that makes its row (its files staged; another connection holds the number
  uncommitted), then its worker's pool child SIGKILLed, or PostgreSQL restarted: one release, the reserved number;
  two command-line exports at once to one empty S3 prefix: the second to finish fails and removes its upload;
- the web and a worker started on a DATABASE_URL whose port refuses (each refuses to start, naming the setting); the
  worker SIGKILLed mid-task and left down (/healthz?deep=1 names the unit it left running); an s3:// collection
  import whose scratch disk (a 64 KiB tmpfs) fills up (the job says the disk is full, naming the folder).

Each row checks the outcome: the job ends (succeeded or failed, never stuck), the frames and progress are right,
no committed file is lost, nothing is counted twice, no orphan is left after the clean-up. Everything it started is
stopped at the end, also on failure or after BENCH_TIMEOUT seconds (default 900). BENCH_KEEP=1 keeps the folder;
BENCH_ONLY=name,name runs only the faults of those function names.

    .venv/bin/python bench/faults.py
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TIMEOUT = float(os.getenv("BENCH_TIMEOUT", "900"))
BASE = Path(tempfile.mkdtemp(prefix="sb-faults-"))
if os.geteuid() == 0:
    BASE.chmod(0o755)  # the embedded PostgreSQL runs as a plain user below it


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


PG_PORT, REDIS_PORT, WEB_PORT = free_port(), free_port(), free_port()
ENV = {
    "DJANGO_SETTINGS_MODULE": "subtlebench.settings",
    "VAR_DIR": str(BASE / "var"),
    "LOCAL_PG_PORT": str(PG_PORT),
    "LOCAL_REDIS_PORT": str(REDIS_PORT),
    "DATABASE_URL": f"postgresql://postgres@127.0.0.1:{PG_PORT}/subtlebench",
    "CELERY_BROKER_URL": f"redis://127.0.0.1:{REDIS_PORT}/0",
    "DEBUG": "false",
    "SECRET_KEY": "bench-faults-not-a-secret",
    "ALLOWED_HOSTS": "127.0.0.1",
    "SECURE_COOKIES": "false",
    "MEDIA_ROOT": str(BASE / "media"),
    "IMPORT_ROOTS": str(BASE / "imports"),
    "EXPORT_ROOT": str(BASE / "exports"),
    "STATIC_ROOT": str(BASE / "static"),  # collected at start: the participant pages (DEBUG off) need the manifest
    # Faults show within seconds: frequent heartbeats, a unit stale after 10 s (an embedding chunk on a busy CPU
    # takes a few seconds between two beats), quick retries, a sweep every 2 s.
    "JOB_HEARTBEAT_SECONDS": "0.2",
    "JOB_STALE_SECONDS": "10",
    "JOB_SWEEP_SECONDS": "2",
    "JOB_MAX_ATTEMPTS": "5",
    "TASK_RETRY_BACKOFF_SECONDS": "1",
    "TASK_RETRY_BACKOFF_MAX_SECONDS": "3",
    "TASK_MAX_RETRIES": "30",
    "CLEANUP_MINUTES": "0",
    "SIMILARITY_CATCH_UP_MINUTES": "0",
    "DINOV3_DEVICE": "cpu",
    "DINOV3_BATCH_SIZE": "8",
    "LOG_LEVEL": "WARNING",
    # Beat ticks every second and is stale after 5 s; a queued unit is looked for in the broker after 5 s.
    "BEAT_TICK_SECONDS": "1",
    "BEAT_STALE_SECONDS": "5",
    "JOB_BROKER_CHECK_SECONDS": "5",
    "HEALTHZ_TOKEN": "bench-faults-healthz",
    # Model runs (issue 25): the fake model server on loopback is allowed; pauses of a second, a run down 15 s fails.
    "MODEL_ENDPOINT_HOSTS": "127.0.0.1",
    "MODEL_EVAL_PAUSE_SECONDS": "1",
    "MODEL_EVAL_PAUSE_MAX_SECONDS": "15",
    "MODEL_EVAL_BACKOFF_SECONDS": "0.05",
    "MODEL_EVAL_BACKOFF_MAX_SECONDS": "0.2",
    "MODEL_EVAL_RETRIES": "1",
}
os.environ.update(ENV)

from devtools import localservices  # noqa: E402 (reads the ports above)

TOKEN = ""
processes: dict[str, subprocess.Popen] = {}
started_services: list[str] = []
rows: list[tuple[str, str, str, float]] = []


def spawn(name: str, *args: str) -> subprocess.Popen:
    log = open(BASE / f"{name}.log", "a")
    process = subprocess.Popen(args, cwd=ROOT, env=os.environ.copy(), stdout=log, stderr=subprocess.STDOUT)
    processes[name] = process
    return process


def worker(name: str, queues: str = "default", pool: str = "prefork") -> subprocess.Popen:
    args = ["-m", "celery", "-A", "subtlebench", "worker", "-Q", queues, "--pool", pool, "--concurrency", "1"]
    args += ["--without-mingle", "--without-gossip", "--hostname", f"{name}@bench", "--loglevel", "INFO"]
    process = spawn(name, sys.executable, *args)
    wait(lambda: " ready." in (BASE / f"{name}.log").read_text(errors="replace"), 90, f"{name} to start")
    return process


def stop(name: str, sig=signal.SIGTERM) -> None:
    process = processes.pop(name, None)
    if process is None or process.poll() is not None:
        return
    process.send_signal(sig)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def children_of(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def wait(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception:  # the database or the broker is away on purpose: ask again
            reconnect()
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(f"timed out after {seconds:.0f} s waiting for {what}")


def reconnect() -> None:
    from django.db import connection

    connection.close()


# --- The instance -------------------------------------------------------------------------------------------------


def start_instance() -> None:
    started_services.extend(["postgres", "redis"])
    localservices.start_postgres()
    localservices.start_redis()
    manage("migrate", "--no-input")
    manage("collectstatic", "--no-input")
    import django

    django.setup()
    from django.contrib.auth.models import Group, User

    from annotator.similarity.embedder import build_random_model
    from annotator.similarity.services import embedding_model_activate
    from bench.synthetic_frames import TINY_CONFIG
    from subtlebench.tokens import api_token_create

    user = User.objects.create_user("cora", password="bench")
    user.groups.add(Group.objects.get(name="coordinator"))
    global TOKEN
    TOKEN = api_token_create(user=user, name="bench/faults.py")[1]
    model = BASE / "dinov3-tiny"
    build_random_model(model, seed=0, **TINY_CONFIG)
    embedding_model_activate(folder=model, device="cpu", image_size=224, activated_by="bench/faults.py")
    spawn(
        "gunicorn",
        sys.executable,
        "-m",
        "gunicorn",
        "subtlebench.wsgi:application",
        "--bind",
        f"127.0.0.1:{WEB_PORT}",
        "--workers",
        "2",
    )
    wait(lambda: localservices.port_open(WEB_PORT), 60, "gunicorn")
    worker("cpu")
    worker("gpu", queues="similarity", pool="solo")
    spawn("beat", sys.executable, "-m", "celery", "-A", "subtlebench", "beat", "-s", str(BASE / "beat-schedule"))
    # Beat checks the broker as it starts and refuses to start without it: the first fault must not stop Redis
    # before then, or no sweep would run for the rest of the bench.
    from subtlebench.models import Tick

    wait(lambda: Tick.age(Tick.BEAT) is not None, 90, "beat's first tick")


def stop_instance() -> None:
    for name in list(processes):
        stop(name)
    pidfile = localservices.var_dir() / "redis" / "redis.pid"
    redis_pid = int(pidfile.read_text().strip()) if pidfile.exists() else None
    localservices.stop(started_services)
    # Redis saves on SIGTERM and stays up if it cannot: wait for it before the folder goes, then make sure.
    deadline = time.monotonic() + 20
    while localservices.port_open(REDIS_PORT) and time.monotonic() < deadline:
        time.sleep(0.2)
    if redis_pid and localservices.port_open(REDIS_PORT):
        os.kill(redis_pid, signal.SIGKILL)


def manage(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done


def api(method: str, path: str, body: dict | None = None, key: str = "") -> tuple[int, dict]:
    headers = {"Authorization": f"Token {TOKEN}", "Content-Type": "application/json"}
    if key:
        headers["Idempotency-Key"] = key
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{WEB_PORT}{path}", data, headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


# --- Inputs and checks ----------------------------------------------------------------------------------------


def videos(folder: str, count: int, seconds: float = 12) -> Path:
    """`count` H.264 videos (640x360, 25 fps) in a folder of the import root."""
    from demo.videos import panning_frames, write_video

    target = BASE / "imports" / folder
    target.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        write_video(target / f"{folder}{number}.mp4", panning_frames((640, 360), seconds, 25, seed=number))
    return target


def import_job(folder: Path, every: float):
    status, body = api("POST", "/api/videos/import/", {"path": str(folder), "every": every})
    assert status == 202, (status, body)
    return job_row(body["job_id"])


def job_row(job_id: int):
    from annotator.models import Job

    return Job.objects.get(pk=job_id)


def ended(job):
    job.refresh_from_db()
    return job if not job.is_active else None


def frame_files() -> set[str]:
    root = BASE / "media"
    return {str(p.relative_to(root)) for p in (root / "frames").rglob("*.jpg")} if (root / "frames").exists() else set()


def referenced(video_ids: list[int] | None = None) -> set[str]:
    """The files the videos' frames reference (other rows' images, a model run's release, are not under frames/);
    only those of `video_ids` when given (a row before may have lost a video's files on purpose)."""
    from annotator.models import Image

    frames = Image.objects.filter(frame__isnull=False)
    if video_ids is not None:
        frames = frames.filter(frame__video_id__in=video_ids)
    return {n for pair in frames.values_list("file", "thumbnail") for n in pair if n}


def sampled_as_expected(job, frames_per_video: int) -> str:
    """'' when the import's videos have the right frames and its progress is right; else what is wrong."""
    from annotator.models import Video

    problems = []
    ids = [task.kwargs["video_id"] for task in job.tasks.all()]
    for video in Video.objects.filter(pk__in=ids):
        indices = list(video.frames.values_list("index", flat=True))
        if (video.status, indices) != ("sampled", list(range(frames_per_video))):
            problems.append(f"{video.yt8m_id}: {video.status}, {len(indices)} frames")
    if (job.done, job.total, job.result.get("videos_ok")) != (len(ids), len(ids), len(ids)):
        problems.append(f"progress {job.done}/{job.total}, videos_ok {job.result.get('videos_ok')}")
    missing = referenced(ids) - frame_files()
    if missing:
        problems.append(f"{len(missing)} committed frame files missing")
    return "; ".join(problems)


def embedded(job) -> str:
    """'' when every frame of the import's videos has its embedding; else how many lack one."""
    from annotator.models import Image, ImageEmbedding

    ids = [task.kwargs["video_id"] for task in job.tasks.all()]
    images = Image.objects.filter(frame__video_id__in=ids)
    done = ImageEmbedding.objects.filter(image__in=images, vector__isnull=False).count()
    return "" if done == images.count() else f"{images.count() - done} of {images.count()} frames not embedded"


def record(fault: str, started: float, outcome: str, problems: str) -> None:
    rows.append((fault, outcome, "FAIL: " + problems if problems else "ok", time.monotonic() - started))
    print(f"  {fault}: {outcome} ({'ok' if not problems else problems})", flush=True)


def jobs_after(job_id: int, kind: str):
    from annotator.models import Job

    return Job.objects.filter(pk__gt=job_id, kind=kind)


def embeddings_done(job) -> bool:
    return not embedded(job)


# --- The faults -------------------------------------------------------------------------------------------------


def redis_down_after_commit() -> None:
    started = time.monotonic()
    folder = videos("rdc", 1, seconds=6)
    localservices.stop(["redis"])
    wait(lambda: not localservices.port_open(REDIS_PORT), 30, "Redis to stop")
    sampled = subprocess.run(
        [sys.executable, "manage.py", "import_videos", str(folder), "--sync", "--every", "0.5"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    from annotator.models import Job, JobTask

    job = Job.objects.filter(kind=Job.Kind.IMPORT).order_by("-pk").first()
    pending = JobTask.objects.filter(job__kind="similarity", status="pending").exclude(error="").count()
    files_kept = referenced() <= frame_files() and bool(referenced())
    localservices.start_redis()
    wait(lambda: embeddings_done(job), 120, "the pending embedding to run once Redis is back")
    problems = sampled_as_expected(job, 12) or embedded(job)
    if sampled.returncode or not files_kept or pending != 1:
        problems += f" exit {sampled.returncode}, files kept {files_kept}, pending units {pending}"
    outcome = f"import {job.status}, 12 frames with their files; embedding pending ({pending}) then done by the sweeper"
    record("Redis stopped between the commit and the queueing", started, outcome, problems.strip())


def kill_pool_child() -> None:
    started = time.monotonic()
    before = set(frame_files())
    job = import_job(videos("kc", 1, seconds=16), every=0.04)
    wait(lambda: len(frame_files() - before) >= 40, 60, "sampling to write files")
    children = children_of(processes["cpu"].pid)
    for child in children:
        os.kill(child, signal.SIGKILL)
    wait(lambda: ended(job), 120, "the import after the child was killed")
    from annotator.cleanup.services import storage_clean_up

    orphans = len(storage_clean_up(grace_minutes=0)["frame_files"])
    problems = sampled_as_expected(job, 400) + ("; orphans left" if frame_files() != referenced() else "")
    unit = job.tasks.get()
    outcome = f"{job.status}, 400 frames, unit claimed {unit.attempts}x, {orphans} orphaned files removed"
    record(
        "worker pool child SIGKILLed during sampling",
        started,
        outcome,
        problems if job.status == "succeeded" else f"{job.status} {problems}",
    )


def kill_worker_main() -> None:
    started = time.monotonic()
    before = set(frame_files())
    job = import_job(videos("km", 1, seconds=16), every=0.04)
    wait(lambda: len(frame_files() - before) >= 40, 60, "sampling to write files")
    main = processes["cpu"]
    children = children_of(main.pid)
    main.send_signal(signal.SIGKILL)
    main.wait()
    for child in children:  # what a supervisor's process group kill does; the child is left alone otherwise
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    processes.pop("cpu")
    worker("cpu")  # the supervisor's restart
    wait(lambda: ended(job), 120, "the import after the worker was restarted")
    from annotator.cleanup.services import storage_clean_up

    orphans = len(storage_clean_up(grace_minutes=0)["frame_files"])
    unit = job.tasks.get()
    problems = sampled_as_expected(job, 400) + ("; orphans left" if frame_files() != referenced() else "")
    outcome = f"{job.status} after restart and sweep (unit claimed {unit.attempts}x), {orphans} orphaned files removed"
    record("worker main process SIGKILLed mid-task", started, outcome, problems)


def redis_dropped_mid_task() -> None:
    started = time.monotonic()
    before = set(frame_files())
    job = import_job(videos("rd", 1, seconds=16), every=0.04)
    wait(lambda: len(frame_files() - before) >= 40, 60, "sampling to write files")
    localservices.stop(["redis"])
    wait(lambda: not localservices.port_open(REDIS_PORT), 30, "Redis to stop")
    time.sleep(3)
    localservices.start_redis()
    survived = processes["cpu"].poll() is None
    if not survived:  # issue 17 item 5 (another change) keeps it alive; here the supervisor's restart
        processes.pop("cpu")
        worker("cpu")
    wait(lambda: ended(job), 120, "the import after Redis came back")
    wait(lambda: embeddings_done(job), 120, "its embedding")
    problems = sampled_as_expected(job, 400) or embedded(job)
    worker_note = "worker kept running" if survived else "worker died, restarted"
    record("Redis dropped mid-task", started, f"{job.status}, frames embedded; {worker_note}", problems)


def postgres_restarted_mid_task() -> None:
    started = time.monotonic()
    before = set(frame_files())
    job = import_job(videos("pg", 1, seconds=16), every=0.04)
    wait(lambda: len(frame_files() - before) >= 40, 60, "sampling to write files")
    pgdata = localservices.var_dir() / "postgres"
    log = localservices.var_dir() / "postgres.log"  # the server must not inherit a pipe this script waits on
    subprocess.run(
        [localservices.postgres_bin() / "pg_ctl", "-D", pgdata, "-l", log, "-m", "fast", "-w", "restart"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=120,
        **localservices.run_as_postgres_user(),
    )
    reconnect()
    wait(lambda: ended(job), 180, "the import after the PostgreSQL restart")
    problems = sampled_as_expected(job, 400)
    log = (BASE / "cpu.log").read_text(errors="replace")
    retried = "Retry in" in log
    record("PostgreSQL restarted during a task", started, f"{job.status}; task retried: {retried}", problems)


def export_with_redis_down() -> None:
    started = time.monotonic()
    localservices.stop(["redis"])
    wait(lambda: not localservices.port_open(REDIS_PORT), 30, "Redis to stop")
    first = api("POST", "/api/exports/start/", {"target": "bench"}, key="export-1")
    again = api("POST", "/api/exports/start/", {"target": "bench"}, key="export-1")
    localservices.start_redis()
    problems = ""
    if first[0] != 202 or again[0] != 202 or first[1].get("id") != again[1].get("id"):
        problems = f"answers {first[0]} {again[0]}, ids {first[1].get('id')} {again[1].get('id')}"
    job = job_row(first[1]["id"])
    wait(lambda: ended(job), 120, "the export once Redis was back")
    from annotator.models import Job

    exports = Job.objects.filter(kind="export").count()
    if job.status != "succeeded" or exports != 1:
        problems += f" export {job.status} {job.errors}, {exports} export jobs"
    outcome = f"202 twice, one job (key retried); {job.status} once Redis was back"
    record("export started with Redis down", started, outcome, problems.strip())


def delivered_twice_two_workers() -> None:
    started = time.monotonic()
    worker("cpu2")
    from annotator.jobs.services import job_task_send

    before = set(frame_files())
    job = import_job(videos("dt", 3, seconds=4), every=0.5)
    for unit in job.tasks.all():
        job_task_send(task_id=unit.pk)
    wait(lambda: ended(job), 120, "the import delivered twice")
    from annotator.models import Video

    claims = [task.attempts for task in job.tasks.all()]
    folders = [
        len(list((BASE / "media" / "frames" / v.yt8m_id).iterdir()))
        for v in Video.objects.filter(yt8m_id__startswith="dt")
    ]
    problems = sampled_as_expected(job, 8)
    if claims != [1, 1, 1] or folders != [1, 1, 1] or len(frame_files() - before) != 48:
        problems += f" claims {claims}, run folders {folders}"
    stop("cpu2")
    outcome = f"{job.status}, done {job.done}/{job.total}, each unit claimed once, one run folder per video"
    record("every unit delivered twice, two workers on one queue", started, outcome, problems.strip())


def healthz(deep: bool = False) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {ENV['HEALTHZ_TOKEN']}"} if deep else {}
    url = f"http://127.0.0.1:{WEB_PORT}/healthz" + ("?deep=1" if deep else "")
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def flushall_with_a_queued_unit() -> None:
    started = time.monotonic()
    stop("cpu")  # no worker on `default`: the unit's message waits in Redis
    job = import_job(videos("fa", 1, seconds=4), every=0.5)
    unit = job.tasks.get()
    wait(lambda: unit.refresh_from_db() or unit.status == "queued", 30, "the unit to be queued")
    redis_client().flushall()
    flushed = time.monotonic()
    worker("cpu")
    wait(lambda: ended(job), 120, "the import after FLUSHALL")
    recovered = time.monotonic() - flushed
    unit.refresh_from_db()
    problems = sampled_as_expected(job, 8)
    if (unit.sends, unit.attempts) != (2, 1) or "the broker lost it" not in unit.error:
        problems += f" unit sent {unit.sends}x, claimed {unit.attempts}x, error {unit.error!r}"
    outcome = f"{job.status} {recovered:.0f} s after FLUSHALL (worker start included): unit sent again by the sweep, "
    outcome += f"sent {unit.sends}x, run {unit.attempts}x"
    record("FLUSHALL with a queued unit", started, outcome, problems.strip())


def redis_client():
    import redis

    return redis.Redis.from_url(ENV["CELERY_BROKER_URL"])


def participant_flow(study) -> tuple[int, list[int]]:
    """Through gunicorn: the open link, consent, then every item (its images) answered through the participant
    API. The answers recorded and every status code that was not a success."""
    import re

    import requests

    from evaluation.studies import participation
    from tests.factories import DESKTOP_WINDOW

    base = f"http://127.0.0.1:{WEB_PORT}"
    browser = requests.Session()
    failures = []
    page = browser.get(f"{base}/p/open/{study.open_token}/", timeout=30)
    if page.status_code != 200:
        return 0, [page.status_code]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    form = {"agree": "yes", "PROLIFIC_PID": f"oom{time.monotonic_ns()}", "csrfmiddlewaretoken": token, **DESKTOP_WINDOW}
    joined = browser.post(f"{base}/p/open/{study.open_token}/consent/", form, allow_redirects=False, timeout=30)
    if joined.status_code != 302:
        return 0, [joined.status_code]
    participant = study.participants.order_by("-pk").first()
    while (practice := participation.participant_next_practice(participant=participant)) is not None:
        participation.assignment_answer(participant=participant, token=practice.token, position=1)
    recorded = 0
    for _ in range(20):
        item = browser.get(f"{base}/api/p/{participant.token}/item/", timeout=30)
        if item.status_code != 200:
            failures.append(item.status_code)
            break
        if item.json()["done"]:
            break
        for url in item.json()["images"]:
            image = browser.get(url, timeout=30)
            if image.status_code != 200:
                failures.append(image.status_code)
        path = f"{base}/api/p/{participant.token}/item/{item.json()['item']}/answer/"
        answer = browser.post(path, json={"option": 1}, timeout=30)
        if answer.status_code != 200:
            failures.append(answer.status_code)
            break
        recorded += answer.json()["recorded"]
    return recorded, failures


def redis_out_of_memory() -> None:
    started = time.monotonic()
    from evaluation.studies import services as studies
    from tests.factories import make_pair

    for _ in range(3):
        make_pair()
    study = studies.study_create(name=f"OOM {time.monotonic_ns()}", fraction=1, practice_count=0, open_cap=10)
    client = redis_client()
    client.mset({f"ballast:{number}": b"x" * 1000 for number in range(300)})
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", "1mb")
    try:
        refused = False
        try:
            client.set("bench-probe", "1")
        except Exception:  # redis.exceptions.OutOfMemoryError
            refused = True
        recorded, failures = participant_flow(study)
        plain, shallow = healthz()
        _, detailed = healthz(deep=True)
    finally:
        client.config_set("maxmemory", "0")
        client.delete(*[f"ballast:{number}" for number in range(300)])
    broker = detailed.get("parts", {}).get("broker", {})
    problems = []
    if not refused:
        problems.append("Redis took a write over maxmemory")
    if recorded != 3 or failures:
        problems.append(f"{recorded} answers recorded, failed answers {failures}")
    if plain != 503 or shallow.get("parts", {}).get("broker", {}).get("status") != "down":
        problems.append(f"/healthz {plain} {shallow}")
    down = [name for name, state in detailed.get("parts", {}).items() if state.get("status") == "down"]
    outcome = f"participant joined and answered {recorded}/3 (images served); /healthz {plain}, down: "
    outcome += f"{', '.join(down)}: {broker.get('detail', '')}"
    record("Redis out of memory (maxmemory 1mb, noeviction)", started, outcome, "; ".join(problems))


def beat_down() -> None:
    started = time.monotonic()
    stop("beat")
    localservices.stop(["redis"])
    wait(lambda: not localservices.port_open(REDIS_PORT), 30, "Redis to stop")
    status, body = api("POST", "/api/exports/start/", {"target": "bench-beat"})
    localservices.start_redis()
    problems = [] if status == 202 else [f"export answered {status} {body}"]
    job = job_row(body["id"])

    def reported():
        _, health = healthz(deep=True)
        parts = health.get("parts", {})
        if parts.get("beat", {}).get("status") == "degraded" and parts.get("jobs", {}).get("pending_waiting"):
            return parts

    parts = wait(reported, 60, "/healthz?deep=1 to report beat down and the pending unit")
    unit = job.tasks.get()
    waited = unit.status == "pending" and job.is_active
    spawn("beat", sys.executable, "-m", "celery", "-A", "subtlebench", "beat", "-s", str(BASE / "beat-schedule"))
    back = time.monotonic()
    wait(lambda: ended(job), 120, "the export once beat was back")
    if not waited or job.status != "succeeded":
        problems.append(f"unit {unit.status} while beat was down, export {job.status} {job.errors}")
    beat_age = parts["beat"]["last_tick_seconds_ago"]
    looks_down = "beat looks down" in parts["jobs"]["detail"]
    outcome = f"deep /healthz: beat degraded (last tick {beat_age:.0f} s ago), jobs degraded "
    outcome += f"({parts['jobs']['pending_waiting']} unit pending, 'beat looks down': {looks_down}); "
    outcome += f"export {job.status} {time.monotonic() - back:.0f} s after beat came back"
    if not looks_down:
        problems.append("the jobs part does not say beat looks down")
    record("beat down", started, outcome, "; ".join(problems))


# --- Issue 25 (Faults II), item 9: hostile import folders; item 10: repair after lost media ----------------------


def hostile_folder() -> tuple[Path, list[str]]:
    """A dataset folder under the import root with one hostile case per line, and the 'file:line' each must name."""
    import io

    from PIL import Image as PILImage

    from benchmark.records import build_record
    from tests.factories import jpeg_bytes

    root = BASE / "imports" / "hostile"
    (root / "images").mkdir(parents=True, exist_ok=True)
    outside = BASE / "outside.jpg"
    outside.write_bytes(jpeg_bytes(1))

    def item(n: int) -> bytes:
        for side in "ab":
            (root / f"images/{n}_{side}.jpg").write_bytes(jpeg_bytes(n + (side == "b")))
        question = "What was added to the shelf in the second image?"
        fields = dict(question=question, answer="a car", distractors=["a tree"])
        record = build_record(image_1=f"images/{n}_a.jpg", image_2=f"images/{n}_b.jpg", caption=None, **fields,
                              category="existence", domain="aerial", source="hostile", source_id=str(n))  # fmt: skip
        return json.dumps(record).encode()

    lines = [item(n) for n in range(1, 8)]
    lines[1] = item(2).replace(b"a car", b"a caf\xe9")  # line 2: Latin-1, not UTF-8
    lines[2] = b"[" * 200_000 + b"]" * 200_000  # line 3: 200k deep
    bomb = io.BytesIO()
    PILImage.new("1", (15000, 15000)).save(bomb, "PNG")
    (root / "images/4_a.jpg").write_bytes(bomb.getvalue())  # line 4: a 15000x15000 PNG of a few kB
    (root / "images/5_a.jpg").unlink()
    (root / "images/5_a.jpg").symlink_to(outside)  # line 5: a link out of IMPORT_ROOTS
    (root / "images/6_a.jpg").write_bytes(jpeg_bytes(6)[:300])  # line 6: cut short
    (root / "data").mkdir(exist_ok=True)
    (root / "data/test.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return root, [f"data/test.jsonl:{n}" for n in (2, 3, 4, 5, 6)]


def hostile_import_folder() -> None:
    started = time.monotonic()
    from annotator.models import Image, Pair

    root, expected = hostile_folder()
    counts = (Pair.objects.count(), Image.objects.count())
    problems = []
    runs = (("import_pairs", "--all-or-none"), ("validate_benchmark",), ("import_pairs",))
    for command in runs:
        done = subprocess.run(
            [sys.executable, "manage.py", *command, str(root)], cwd=ROOT, capture_output=True, text=True, timeout=300
        )
        printed = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("data/")]
        named = sorted({line.split(": ")[0] for line in printed})
        if done.returncode != 1 or "Traceback" in done.stderr or named != expected or len(printed) != len(expected):
            problems.append(f"{' '.join(command)}: exit {done.returncode}, named {named}, {done.stderr[-300:]!r}")
        if command == ("validate_benchmark",) and (Pair.objects.count(), Image.objects.count()) != counts:
            problems.append("import_pairs --all-or-none imported rows")
    # Without the switch, the two good records (lines 1 and 7) are imported, the five named ones left out.
    if (Pair.objects.count(), Image.objects.count()) != (counts[0] + 2, counts[1] + 4):
        problems.append("import_pairs did not import the two good records alone")
    outcome = (
        "import_pairs --all-or-none and validate_benchmark: exit 1, one line per case naming lines 2-6, no traceback, "
        "no row; import_pairs: the same lines, the 2 good records imported"
    )
    record("hostile import folder (non-UTF-8, 200k deep, 15000x15000 PNG, link out, cut short)", started, outcome,
           "; ".join(problems))  # fmt: skip


def lost_media_repair() -> None:
    started = time.monotonic()
    from django.utils import timezone

    from annotator.models import Frame, Image, Job, Pair, Video

    folder = videos("lm", 1, seconds=6)
    manage("import_videos", str(folder), "--sync", "--every", "1")
    video = Video.objects.get(yt8m_id="lm0")
    frames = list(video.frames.order_by("index", "pk"))
    now = timezone.now()
    Pair.objects.bulk_create(
        Pair(image_1=a.image, image_2=b.image, video=video, category="temporal", domain="natural", source="yt8m",
             source_id=f"lm0_{a.index}_{b.index}", question="Which image was taken later?", answer="second image",
             distractors=["first image"], status="accepted", submitted_at=now, decided_at=now)
        for a, b in zip(frames, frames[1:], strict=False)
    )  # fmt: skip

    def state() -> tuple:
        return (
            list(Frame.objects.filter(video=video).order_by("index", "pk").values_list("pk", "pts", "image_id")),
            list(Image.objects.filter(frame__video=video).order_by("pk").values_list("file", "thumbnail", "sha256")),
            list(Pair.objects.filter(video=video).order_by("pk").values_list("pk", "image_1_id", "image_2_id")),
        )

    before = state()
    shutil.rmtree(BASE / "media" / "frames" / "lm0")  # the media bucket lost this video's files
    last = Job.objects.order_by("-pk").first().pk
    manage("repair")  # queued: the real worker samples again and verifies
    job = wait(lambda: (j := jobs_after(last, "import").first()) and ended(j), 120, "the repair job")
    video.refresh_from_db()
    import hashlib

    media = BASE / "media"
    hashes_ok = all(hashlib.sha256((media / f).read_bytes()).hexdigest() == sha for f, _, sha in before[1])
    problems = []
    if (job.status, video.status, state(), hashes_ok) != ("succeeded", "sampled", before, True):
        problems.append(f"job {job.status} {job.errors}, video {video.status}, rows kept {state() == before}")
    if not all((media / name).is_file() for f, t, _ in before[1] for name in (f, t)):
        problems.append("files not all back")
    # Then the source is replaced by another file and the media lost again: refused, nothing changed.
    shutil.rmtree(media / "frames" / "lm0")
    from demo.videos import panning_frames, write_video

    write_video(folder / "lm0.mp4", panning_frames((640, 360), 5, 25, seed=99))
    last = job.pk
    manage("repair")
    refused = wait(lambda: (j := jobs_after(last, "import").first()) and ended(j), 120, "the second repair job")
    video.refresh_from_db()
    if video.status != "missing" or "nothing was changed" not in video.error or state() != before:
        problems.append(f"changed source: video {video.status} {video.error[:200]!r}, rows kept {state() == before}")
    if (media / "frames" / "lm0").exists() and any((media / "frames" / "lm0").rglob("*.jpg")):
        problems.append("changed source: files written")
    outcome = (
        f"{len(frames)} frames restored under their names, sha256 verified, {len(frames) - 1} pairs kept "
        f"({job.status}); source replaced: refused, video stays missing, nothing changed (job {refused.status})"
    )
    record("media lost, then repair (and again with the source replaced)", started, outcome, "; ".join(problems))


# --- Exports and clean-up (issue 25) ------------------------------------------------------------------------------


def sampled_video(name: str, seconds: float = 4, every: float = 0.5):
    """A video imported and sampled through the API (its frames carry the sha256 sampling recorded)."""
    from annotator.models import Video

    job = import_job(videos(name, 1, seconds=seconds), every=every)
    wait(lambda: ended(job), 120, f"the import of {name}")
    return Video.objects.get(yt8m_id=f"{name}0")


def accepted_pairs(video, count: int, start: int = 0, domain: str = "natural") -> list:
    """`count` accepted temporal pairs over consecutive frames of the video (frames 2n, 2n+1), scored above the bar."""
    from django.utils import timezone

    from annotator.models import Pair
    from annotator.similarity.services import current_fingerprint

    frames = list(video.frames.order_by("index"))
    now, pairs = timezone.now(), []
    for n in range(start, start + count):
        first, second = frames[2 * n], frames[2 * n + 1]
        pairs.append(
            Pair.objects.create(
                image_1=first.image,
                image_2=second.image,
                video=video,
                category="temporal",
                domain=domain,
                status=Pair.Status.ACCEPTED,
                question="Which image was taken later?",
                answer="second image",
                distractors=["first image"],
                source="yt8m",
                source_id=f"{video.yt8m_id}_{first.index}_{second.index}",
                similarity=0.95,
                similarity_model=current_fingerprint() or "",
                submitted_at=now,
                decided_at=now,
            )
        )
    return pairs


def command(*args: str, **env: str) -> subprocess.CompletedProcess:
    """manage.py with extra environment variables; the caller judges the exit status."""
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def ledger_entries() -> list[Path]:
    folder = BASE / "var" / "scratch" / "ledger"
    return sorted(folder.glob("*")) if folder.exists() else []


def s3_server():
    """moto in server mode on a free port: (server, the S3 settings a command needs for it, a boto3 client)."""
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    s3 = {"S3_ENDPOINT_URL": f"http://127.0.0.1:{port}", "S3_ACCESS_KEY_ID": "bench", "S3_SECRET_ACCESS_KEY": "bench"}
    client = boto3.client(
        "s3", endpoint_url=s3["S3_ENDPOINT_URL"], region_name="us-east-1",
        aws_access_key_id="bench", aws_secret_access_key="bench",
    )  # fmt: skip
    return server, s3, client


def s3_cut_during_replace() -> None:
    started = time.monotonic()
    from tests.cut_proxy import CutProxy

    server, s3, client = s3_server()
    port = int(s3["S3_ENDPOINT_URL"].rsplit(":", 1)[1])
    proxy = None
    try:
        client.create_bucket(Bucket="faults")
        video = sampled_video("s3c", seconds=6)
        accepted_pairs(video, 3)
        uri = "s3://faults/bench"
        first = command("export_benchmark", "--out", uri, **s3)
        assert first.returncode == 0, first.stderr[-500:]
        previous = json.loads(client.get_object(Bucket="faults", Key="bench/current.json")["Body"].read())["version"]
        accepted_pairs(video, 3, start=3)
        proxy = CutProxy(port, cut_after=4)  # four objects of the new version get through, then the line drops
        cut = command(
            "export_benchmark", "--out", uri, "--replace",
            **{**s3, "S3_ENDPOINT_URL": proxy.url, "S3_MAX_ATTEMPTS": "1"},
        )  # fmt: skip
        current = json.loads(client.get_object(Bucket="faults", Key="bench/current.json")["Body"].read())["version"]
        keys = [o["Key"] for o in client.list_objects_v2(Bucket="faults", Prefix="bench/versions/")["Contents"]]
        uploaded = len([key for key in keys if previous not in key])
        checked = command("validate_benchmark", uri, **s3)
        problems = []
        if cut.returncode == 0 or "failed after 4 attempts" not in cut.stderr:
            problems.append(f"the cut replace exited {cut.returncode}: {cut.stderr[-300:]}")
        if current != previous:
            problems.append(f"the pointer moved to {current}")
        if checked.returncode or "no violations" not in checked.stdout:
            problems.append(f"the previous export does not validate: {checked.stdout[-300:]} {checked.stderr[-300:]}")
        outcome = (
            f"replace failed after {uploaded} object(s) of the new version were uploaded; the previous version "
            f"stays current and validate_benchmark {uri} finds no violation"
        )
        record("S3 cut during --replace", started, outcome, "; ".join(problems))
    finally:
        if proxy is not None:
            proxy.close()
        server.stop()


@contextlib.contextmanager
def s3_behind_proxy(bucket: str, **proxy_options):
    """A moto S3 server on loopback with `bucket`, behind a CutProxy (tests/cut_proxy.py: it drips, or is cut and
    restored); this process's S3 settings point at the proxy while the block runs. Yields (proxy, the S3 settings
    for a worker, a client straight to the server)."""
    import logging

    import boto3
    from django.conf import settings
    from moto.server import ThreadedMotoServer

    from tests.cut_proxy import CutProxy

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    client = boto3.client(
        "s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
        aws_access_key_id="bench", aws_secret_access_key="bench",
    )  # fmt: skip
    client.create_bucket(Bucket=bucket)
    proxy = CutProxy(port, **proxy_options)
    env = {"S3_ENDPOINT_URL": proxy.url, "S3_ACCESS_KEY_ID": "bench", "S3_SECRET_ACCESS_KEY": "bench"}
    saved = {name: getattr(settings, name) for name in env}
    for name, value in env.items():
        setattr(settings, name, value)
    try:
        yield proxy, env, client
    finally:
        for name, value in saved.items():
            setattr(settings, name, value)
        proxy.close()
        server.stop()


@contextlib.contextmanager
def default_worker_with(env: dict[str, str]):
    """The `default` queue's worker replaced, while the block runs, by one started with these settings besides the
    instance's (its sweeps too: beat's sweep runs on a `default` worker)."""
    stop("cpu")
    saved = os.environ.copy()
    os.environ.update(env)
    try:
        worker("s3")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        yield
    finally:
        stop("s3")
        worker("cpu")


def noise_collection(client, bucket: str, prefix: str, pairs: int) -> None:
    """A change-detection collection (A/ and B/ of each scene) of random-pixel pictures, about 27 KB each."""
    import io
    import random

    from PIL import Image

    for scene in range(pairs):
        for side in ("A", "B"):
            buffer = io.BytesIO()
            pixels = random.Random(f"{scene}{side}").randbytes(96 * 96 * 3)
            Image.frombytes("RGB", (96, 96), pixels).save(buffer, "PNG")
            client.put_object(Bucket=bucket, Key=f"{prefix}/{side}/scene_{scene}.png", Body=buffer.getvalue())


def s3_slow_import_and_export() -> None:
    """An S3 at about 20 KB/s (a proxy that drips) under a collection import and an S3 export with a release, while
    the sweeper runs every 2 s and calls a unit silent for 2 s gone: each runs once and succeeds, one release."""
    started = time.monotonic()
    from django.contrib.auth.models import User

    from annotator.collections.services import collection_import
    from annotator.export.services import ExportOptions, export_start
    from annotator.models import Release

    cora = User.objects.get(username="cora")
    # Its own three pairs, the only ones of their domain: the rows before it leave accepted pairs of their own, which
    # an export of the whole benchmark through the drip would take minutes more to send.
    accepted_pairs(sampled_video("s3s", seconds=4), 3, domain="gaming")
    with s3_behind_proxy("slow", drip=(1024, 0.05)) as (proxy, env, client):
        noise_collection(client, "slow", "sets/noise", pairs=4)
        with default_worker_with({**env, "JOB_STALE_SECONDS": "2"}):
            imported = collection_import(
                source="s3://slow/sets/noise", name="noise_s3", domain="aerial", created_by=cora
            )
            wait(lambda: ended(imported), 240, "the slow import")
            options = ExportOptions(out="s3://slow/bench", release=True, val_fraction=0, domains=("gaming",))
            export = export_start(options=options, user=cora)
            wait(lambda: ended(export), 240, "the slow export")
    problems = []
    for job, what in ((imported, "import"), (export, "export")):
        unit = job.tasks.get()
        if job.status != "succeeded" or unit.attempts != 1 or unit.error:
            problems.append(f"the {what} {job.status} {job.errors}, claimed {unit.attempts} times: {unit.error}")
    releases = Release.objects.filter(export_job=export).count()
    if imported.result.get("images") != 8 or releases != 1:
        problems.append(f"{imported.result.get('images')} images imported, {releases} release(s)")
    outcome = (
        f"import of 8 pictures in {(imported.finished - imported.started).total_seconds():.0f} s and export with a "
        f"release in {(export.finished - export.started).total_seconds():.0f} s: each claimed once, succeeded, "
        f"{releases} release"
    )
    record("S3 slow during an import and an export", started, outcome, "; ".join(problems))


def s3_down_during_a_sweep() -> None:
    """The media storage (S3) stops answering while a synthetic sweep writes its images: the job pauses with the
    reason on its page and in the API, and finishes by itself once S3 is back."""
    started = time.monotonic()
    from django.contrib.auth.models import User

    from annotator.synthetic.services import sweep_create

    cora = User.objects.get(username="cora")
    with s3_behind_proxy("media") as (proxy, env, client):
        settings = {**env, "S3_BUCKET": "media", "S3_MAX_ATTEMPTS": "1", "JOB_PAUSE_SECONDS": "1"}
        with default_worker_with(settings):
            proxy.cut_now()
            sweep = sweep_create(
                user=cora,
                family="existence",
                axes=[{"factor": "object_count", "levels": [2, 3]}],
                items_per_cell=2,
                size=64,
                factors={"object_size": 12, "options": 3},  # two wrong answers: the smallest scene has two objects
            )
            job = wait(lambda: (row := job_row(sweep.job_id)).state == "paused" and row, 60, "the sweep to pause")
            _, shown = api("GET", f"/api/jobs/{job.pk}/")
            time.sleep(3)  # down a while: the units keep pausing, none is counted as a lost claim
            proxy.restore()
            job = wait(lambda: ended(job_row(sweep.job_id)), 120, "the sweep to finish")
    problems = []
    if "the S3 storage does not answer" not in (shown.get("pause_reason") or ""):
        problems.append(f"the API said {shown.get('pause_reason')!r} while it was paused")
    claims = sorted(job.tasks.values_list("attempts", flat=True))
    if job.status != "succeeded" or job.result.get("pairs") != 4 or claims != [1, 1]:
        problems.append(f"the sweep {job.status} {job.errors}, {job.result.get('pairs')} pairs, claims {claims}")
    outcome = (
        f"paused ({shown.get('pause_reason', '')[:60]}...), then {job.status} with {job.result.get('pairs')} pairs"
    )
    record("S3 down during a sweep", started, outcome, "; ".join(problems))


def s3_down_while_sampling_an_s3_video() -> None:
    """The S3 that holds an imported video stops answering while a worker samples it: the import pauses with the
    reason, no video fails, and the video is sampled by itself once S3 is back."""
    started = time.monotonic()
    from django.contrib.auth.models import User

    from annotator.models import Video
    from annotator.videos.services import videos_import

    clip = videos("sthree", 1, seconds=4) / "sthree0.mp4"
    with s3_behind_proxy("footage") as (proxy, env, client):
        client.upload_file(str(clip), "footage", "yt8m/sthree0.mp4")
        manifest = BASE / "imports" / "manifest-sthree.csv"
        manifest.write_text("yt8m_id,path,labels\nsthree0,s3://footage/yt8m/sthree0.mp4,Bench\n")
        with default_worker_with({**env, "S3_MAX_ATTEMPTS": "1", "JOB_PAUSE_SECONDS": "1"}):
            proxy.cut_now()
            job = videos_import(source=str(manifest), every=1.0, created_by=User.objects.get(username="cora"))
            paused = wait(lambda: (row := job_row(job.pk)).state == "paused" and row, 60, "the import to pause")
            reason = paused.pause_reason
            time.sleep(3)  # down a while: the unit keeps pausing
            proxy.restore()
            job = wait(lambda: ended(job_row(job.pk)), 120, "the import to finish")
    video = Video.objects.get(yt8m_id="sthree0")
    problems = []
    if "the S3 storage does not answer" not in (reason or ""):
        problems.append(f"paused for {reason!r}")
    if job.status != "succeeded" or job.errors or video.status != "sampled" or video.frame_count != 4:
        problems.append(f"the import {job.status} {job.errors}; the video {video.status} with {video.frame_count}")
    outcome = f"paused ({(reason or '')[:60]}...), then {job.status}: {video.frame_count} frames"
    record("S3 down while sampling an s3:// video", started, outcome, "; ".join(problems))


def corrupted_frame() -> None:
    started = time.monotonic()
    video = sampled_video("cf")
    pairs = accepted_pairs(video, 3)
    broken = pairs[1]
    path = BASE / "media" / broken.image_1.file.name
    original = path.read_bytes()
    path.write_bytes(original[: len(original) // 2])  # a frame truncated on disk
    try:
        out = BASE / "exports" / "corrupted"
        done = command("export_benchmark", "--out", str(out), "--val-fraction", "0")
        checked = command("validate_benchmark", str(out))
    finally:
        path.write_bytes(original)
    said = f"skipped pair {broken.pk}: image {broken.image_1_id} file '{broken.image_1.file.name}' is corrupt"
    exported = sum(1 for _ in open(out / "data" / "test.jsonl")) if (out / "data" / "test.jsonl").exists() else 0
    problems = []
    if done.returncode or said not in done.stdout:
        problems.append(f"exit {done.returncode}, no line for pair {broken.pk}: {done.stdout[-300:]}")
    if checked.returncode:
        problems.append(f"the export does not validate: {checked.stdout[-300:]}")
    # Every other pair of the instance (earlier rows') is exported too: the one broken item alone is left out.
    outcome = f"{exported} items exported, pair {broken.pk} skipped with its reason (sha256 mismatch, image, file)"
    record("a corrupted frame", started, outcome + "; the export validates", "; ".join(problems))


def pipe_in_place_of(path: Path) -> bytes:
    """A named pipe where a file was (a reader blocks there until killed); returns the file's bytes."""
    data = path.read_bytes()
    path.unlink()
    os.mkfifo(path)
    return data


def put_back(path: Path, data: bytes) -> None:
    path.unlink()
    path.write_bytes(data)


def kill_cli_export() -> None:
    started = time.monotonic()
    video = sampled_video("kx")
    [pair] = accepted_pairs(video, 1)
    image = BASE / "media" / pair.image_1.file.name
    data = pipe_in_place_of(image)
    target = BASE / "elsewhere" / "bench"  # not under EXPORT_ROOT, no job's target
    target.parent.mkdir(parents=True, exist_ok=True)
    process = spawn("cli-export", sys.executable, "manage.py", "export_benchmark", "--out", str(target))
    problems = []
    try:
        staging = wait(lambda: list(target.parent.glob(".bench.tmp-*")), 120, "the export's staging folder")[0]
        size = sum(p.stat().st_size for p in staging.rglob("*") if p.is_file())
        command("cleanup", "--grace-minutes", "0")
        if not staging.exists():
            problems.append("the clean-up removed the staging folder of a running export")
    finally:
        stop("cli-export", signal.SIGKILL)
        put_back(image, data)
    if process.returncode != -signal.SIGKILL:
        problems.append(f"the export ended by itself ({process.returncode})")
    cleaned = command("cleanup", "--grace-minutes", "0")
    left = list(target.parent.iterdir())
    if left or ledger_entries():
        problems.append(f"left: {left} {ledger_entries()}")
    outcome = f"staging ({size} bytes) kept while the export ran; after SIGKILL: {cleaned.stdout.splitlines()[0]}"
    record("SIGKILL of a CLI export", started, outcome, "; ".join(problems))


def kill_zip_job() -> None:
    started = time.monotonic()
    from django.contrib.auth.models import User

    from annotator.export.services import export_zip_start

    video = sampled_video("kz")
    accepted_pairs(video, 2)
    status, body = api("POST", "/api/exports/start/", {"target": "zipped", "replace": True})
    assert status == 202, (status, body)
    export = job_row(body["id"])
    wait(lambda: ended(export), 120, "the export to zip")
    image = next((BASE / "exports" / "zipped" / "images").rglob("*.jpg"))
    data = pipe_in_place_of(image)
    zips = BASE / "exports" / ".zips"
    job = export_zip_start(job=export, user=User.objects.get(username="cora"))
    try:
        part = wait(lambda: list(zips.glob(".*.zip.part-*")), 120, "the zip job's part file")[0]
        for child in children_of(processes["cpu"].pid):  # the pool child that runs the zip job
            os.kill(child, signal.SIGKILL)
    finally:
        put_back(image, data)  # the requeued unit finds the file again
    wait(lambda: ended(job), 180, "the zip job after its worker was killed")
    cleaned = command("cleanup", "--grace-minutes", "0")
    unit = job.tasks.get()
    left = sorted(p.name for p in zips.iterdir())
    problems = []
    if job.status != "succeeded" or left != [f"{export.result['manifest_sha256']}.zip"] or part.exists():
        problems.append(f"zip job {job.status} {job.errors}, .zips holds {left}")
    if ledger_entries():
        problems.append(f"ledger entries left: {ledger_entries()}")
    outcome = (
        f"zip job {job.status} after its pool child was killed (unit claims: {unit.attempts}); the killed run's part "
        f"removed by the clean-up ({cleaned.stdout.splitlines()[0]}); .zips holds only the zip"
    )
    record("SIGKILL of a zip job", started, outcome, "; ".join(problems))


# --- A release published whole or not at all; two exports at once (issue 58) ----------------------------------


class NumberHeldElsewhere:
    """Release `number` made in a transaction of another connection (a thread of this script), uncommitted until
    `let_go`: the worker's INSERT of that release waits for it, its files staged and its row not made."""

    def __init__(self, number: int):
        import threading

        self.number, self.held, self.done = number, threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self.hold, daemon=True)
        self.thread.start()
        if not self.held.wait(30):
            raise TimeoutError("the release number was not held")

    def hold(self) -> None:
        from django.db import DatabaseError, connection, transaction

        from tests.release_factories import make_release

        try:
            with transaction.atomic():
                make_release([], number=self.number)
                self.held.set()
                self.done.wait(300)
                transaction.set_rollback(True)
        except DatabaseError:
            pass  # a restart ended this connection: its transaction is rolled back already
        finally:
            connection.close()

    def let_go(self) -> None:
        self.done.set()
        self.thread.join(30)


def waiting_on_a_lock() -> list[int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
            "AND pid <> pg_backend_pid()"
        )
        return [pid for (pid,) in cursor.fetchall()]


def release_export_held_at_its_row(name: str):
    """An export job publishing a release through the API, held at the release's row: (job, number, hold)."""
    from annotator.releases.services import release_next_number

    accepted_pairs(sampled_video(name), 2)
    number = release_next_number()
    hold = NumberHeldElsewhere(number)
    status, body = api("POST", "/api/exports/start/", {"target": name, "release": True})
    assert status == 202, (status, body)
    job = job_row(body["id"])
    wait(waiting_on_a_lock, 120, "the export to wait at its release's row")
    return job, number, hold


def one_release_in_place(job, number: int, name: str) -> str:
    """'' when the job published exactly one release, with the reserved number, its files in place, no staging
    left, and the next number is the one after; else what is wrong."""
    import hashlib

    from annotator.models import Release
    from annotator.releases.services import release_next_number

    problems = []
    releases = list(Release.objects.filter(export_job=job))
    out = BASE / "exports" / name
    if job.status != "succeeded" or [r.number for r in releases] != [number]:
        problems.append(f"export {job.status} {job.errors}, releases {[r.name for r in releases]} (v{number} reserved)")
    elif hashlib.sha256((out / "manifest.sha256").read_bytes()).hexdigest() != releases[0].manifest_sha256:
        problems.append(f"{out} does not hold v{number}'s files")
    left = sorted(p.name for p in out.parent.glob(f".{name}.tmp-*"))
    if left:
        problems.append(f"staging left: {left}")
    if release_next_number() != number + 1:
        problems.append(f"the next release would be v{release_next_number()}")
    return "; ".join(problems)


def release_worker_killed_before_its_row() -> None:
    started = time.monotonic()
    job, number, hold = release_export_held_at_its_row("relkill")
    try:
        for child in children_of(processes["cpu"].pid):  # the pool child that waits at the release's INSERT
            os.kill(child, signal.SIGKILL)
    finally:
        hold.let_go()
    wait(lambda: ended(job), 180, "the export after its worker was killed")
    unit = job.tasks.get()
    outcome = f"export {job.status} (unit claimed {unit.attempts}x): one release v{number}, the reserved number"
    problems = one_release_in_place(job, number, "relkill")
    record("SIGKILL between a release's files and its row", started, outcome, problems)


def release_postgres_restarted_before_its_row() -> None:
    started = time.monotonic()
    job, number, hold = release_export_held_at_its_row("relpg")
    pgdata = localservices.var_dir() / "postgres"
    log = localservices.var_dir() / "postgres.log"
    try:
        subprocess.run(
            [localservices.postgres_bin() / "pg_ctl", "-D", pgdata, "-l", log, "-m", "fast", "-w", "restart"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
            timeout=120,
            **localservices.run_as_postgres_user(),
        )
    finally:
        hold.let_go()
    reconnect()
    wait(lambda: ended(job), 180, "the export after the PostgreSQL restart")
    outcome = f"export {job.status}: one release v{number}, the reserved number"
    record(
        "PostgreSQL restarted between a release's files and its row",
        started,
        outcome,
        one_release_in_place(job, number, "relpg"),
    )


def two_s3_exports_at_once() -> None:
    """Two command-line exports to one empty S3 prefix: the first is held mid-copy (a named pipe in place of one of
    its images, of a pair in a category the second leaves out), the second runs to its end, then the first goes
    on."""
    started = time.monotonic()
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    from annotator.models import Pair

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    s3 = {"S3_ENDPOINT_URL": f"http://127.0.0.1:{port}", "S3_ACCESS_KEY_ID": "bench", "S3_SECRET_ACCESS_KEY": "bench"}
    client = boto3.client(
        "s3", endpoint_url=s3["S3_ENDPOINT_URL"], region_name="us-east-1",
        aws_access_key_id="bench", aws_secret_access_key="bench",
    )  # fmt: skip
    image = data = None
    try:
        client.create_bucket(Bucket="twice")
        video = sampled_video("s3two", seconds=6)
        [held] = accepted_pairs(video, 1, start=2)
        Pair.objects.filter(pk=held.pk).update(category="state", question="In which image is the door open wider?")
        image = BASE / "media" / held.image_1.file.name
        data = pipe_in_place_of(image)
        uri = "s3://twice/bench"
        scratch = BASE / "var" / "scratch"
        before = set(scratch.glob("export-*"))
        with open(BASE / "s3-first.log", "w") as log:
            first = subprocess.Popen(
                [sys.executable, "manage.py", "export_benchmark", "--out", uri],
                cwd=ROOT, env={**os.environ, **s3}, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        wait(lambda: set(scratch.glob("export-*")) - before, 120, "the first export to write its files")
        second = command("export_benchmark", "--out", uri, "--category", "temporal", **s3)
        try:  # the first export, blocked on the pipe, reads the image now and goes on
            pipe = os.open(image, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            first.kill()  # it never opened the pipe: it did not wait where this row needs it
            raise
        os.set_blocking(pipe, True)
        with os.fdopen(pipe, "wb") as writer:
            writer.write(data)
        first.wait(timeout=120)
        said = (BASE / "s3-first.log").read_text(errors="replace")
        pointer = json.loads(client.get_object(Bucket="twice", Key="bench/current.json")["Body"].read())["version"]
        keys = [o["Key"] for o in client.list_objects_v2(Bucket="twice", Prefix="bench/versions/")["Contents"]]
        versions = {key.split("/")[2].removesuffix(".zip") for key in keys}
        problems = []
        if second.returncode != 0:
            problems.append(f"the second exited {second.returncode}: {second.stderr[-300:]}")
        if first.returncode == 0 or "already holds an export" not in said:
            problems.append(f"the first exited {first.returncode}: {said[-300:]}")
        if versions != {pointer}:
            problems.append(f"versions left: {sorted(versions)}, current {pointer}")
        outcome = "the second to finish failed ('already holds an export ... replace it explicitly'), upload removed"
        record("two S3 exports at once to one empty target", started, outcome, "; ".join(problems))
    finally:
        if image is not None and data is not None:
            put_back(image, data)
        server.stop()


# --- Model runs against a fake model server (issue 25) ---------------------------------------------------------


def model_server(mode: str = "", port: int = 0, latency: float = 0.0) -> tuple[subprocess.Popen, str]:
    """tests/model_server.py in a process of its own (killable as a real server is): (process, base URL). Run as a
    module: run as a script, tests/ would come first on its path, where tests/collections shadows the standard
    library's collections."""
    port = port or free_port()
    args = [sys.executable, "-m", "tests.model_server", "--port", str(port), "--latency", str(latency)]
    process = spawn("model-server", *args, *(["--mode", mode] if mode else []))
    wait(lambda: localservices.port_open(port), 30, "the model server")
    return process, f"http://127.0.0.1:{port}/v1"


def model_run(base_url: str, name: str, plan: dict, *, timeout_s: int = 10, concurrency: int = 2, test=True):
    """Register the server (testing the connection unless told not to) and queue a run on a release of `plan`."""
    from django.db.models import Max

    from annotator.llm.endpoints import endpoint_create
    from annotator.models import Release
    from evaluation.runs.services import evaluation_start
    from tests.modeleval_fixtures import make_plan_release

    number = (Release.objects.aggregate(Max("number"))["number__max"] or 0) + 1
    release, _ = make_plan_release(plan, number=number, source_prefix=f"{name}-")
    endpoint = endpoint_create(
        user=None,
        name=name,
        base_url=base_url,
        model_id="tiny-vlm",
        concurrency=concurrency,
        timeout_s=timeout_s,
        test_connection=test,
    )
    return evaluation_start(endpoint=endpoint, user=None, release=release)


def run_ended(evaluation):
    evaluation.refresh_from_db()
    evaluation.job.refresh_from_db()
    return evaluation if not evaluation.job.is_active else None


def model_server_killed_and_restarted() -> None:
    started = time.monotonic()
    process, url = model_server(latency=0.1)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    evaluation = model_run(url, "killed", {"temporal": (40, 0), "spatial": (40, 0)})
    wait(lambda: evaluation.results.filter(is_correct__isnull=False).count() >= 15, 120, "15 answers")
    process.kill()  # SIGKILL: no goodbye to the open connections
    process.wait()
    processes.pop("model-server", None)
    wait(
        lambda: evaluation.__class__.objects.filter(pk=evaluation.pk, paused_until__isnull=False).exists(),
        60,
        "a pause",
    )
    evaluation.refresh_from_db()
    reason = evaluation.pause_reason
    failed_while_down = evaluation.failed
    time.sleep(3)  # down a while (the outage itself, not a check)
    model_server(port=port, latency=0.1)
    wait(lambda: run_ended(evaluation), 180, "the run to end")
    stop("model-server")
    rows = evaluation.results.all()
    # The server answers the first option shown: the true accuracy is the share of items whose answer was shown A.
    true = rows.filter(correct_letter="A").count() / evaluation.items
    asked_again = rows.filter(asks__gte=2).count()
    problems = []
    if evaluation.job.status != "succeeded" or evaluation.answered != evaluation.items or evaluation.failed:
        problems.append(f"{evaluation.state}: {evaluation.answered} answered, {evaluation.failed} failed")
    if evaluation.accuracy != true:
        problems.append(f"accuracy {evaluation.accuracy} != true {true}")
    if not failed_while_down or asked_again < 1 or "requests in a row failed" not in reason and "down" not in reason:
        problems.append(f"failed while down {failed_while_down}, asked again {asked_again}, reason {reason!r}")
    outcome = (
        f"paused ({failed_while_down} failed while down), resumed: {evaluation.state}, "
        f"{evaluation.answered}/{evaluation.items} answered, accuracy {evaluation.accuracy:.3f} = true {true:.3f}, "
        f"{asked_again} failed items asked again"
    )
    record("model server killed mid-run and restarted", started, outcome, "; ".join(problems))


def model_server_answers_500() -> None:
    started = time.monotonic()
    _, url = model_server(mode="500")
    evaluation = model_run(url, "all-500", {"temporal": (4, 2)}, test=False)
    wait(lambda: run_ended(evaluation), 120, "the run to end")
    stop("model-server")
    errors = evaluation.job.errors
    problems = []
    if evaluation.job.status != "failed" or not errors or "HTTP 500" not in errors[0] or evaluation.answered:
        problems.append(f"{evaluation.state}, {evaluation.answered} answered, errors {errors}")
    outcome = f"paused, then {evaluation.state} after MODEL_EVAL_PAUSE_MAX_SECONDS: {errors[0][:110] if errors else ''}"
    record("model server answers 500 to everything", started, outcome, "; ".join(problems))


def model_server_trickles() -> None:
    started = time.monotonic()
    _, url = model_server(mode="trickle")  # one byte every 2 s: a ~300-byte answer in 10 minutes
    deadline = 3
    evaluation = model_run(url, "trickle", {"temporal": (4, 2)}, timeout_s=deadline, concurrency=4, test=False)
    wait(lambda: run_ended(evaluation), 180, "the run to end")
    stop("model-server")
    rows = list(evaluation.results.all())
    longest = max((row.latency_ms for row in rows), default=0) / 1000
    job = evaluation.job
    wall = (job.finished - job.started).total_seconds()
    from django.conf import settings

    tries = settings.MODEL_EVAL_ITEM_TRIES
    bound = tries * (deadline + 2) + 2 * settings.MODEL_EVAL_PAUSE_SECONDS + 10  # far below one trickled answer
    problems = []
    if job.status != "failed" or any(row.failure != "timeout" for row in rows) or not rows:
        problems.append(f"{evaluation.state}, failures {sorted({row.failure for row in rows})}")
    if longest > deadline + 2 or wall > bound:
        problems.append(f"longest request {longest:.1f} s (deadline {deadline} s), run {wall:.1f} s (bound {bound} s)")
    outcome = (
        f"{evaluation.state}: {len(rows)} items timed out, longest request {longest:.1f} s for a {deadline} s "
        f"deadline, run {wall:.1f} s ({tries} asks each)"
    )
    record("model server trickles one byte every 2 s", started, outcome, "; ".join(problems))


# --- Issue 26: the demo ------------------------------------------------------------------------------------------


def seed_demo_killed_mid_embedding() -> None:
    """`seed_demo` SIGKILLed while it embeds the demo's frames (in its own process: no unit for the sweeper), then
    run again: it ends the job the first one left running, embeds the rest, and makes every demo pair once."""
    started = time.monotonic()
    from annotator.models import Frame, ImageEmbedding, Job, Pair
    from annotator.similarity.services import current_fingerprint

    env = {**os.environ, "DEBUG": "true"}  # the demo app is installed only with DEBUG on
    command = [sys.executable, "manage.py", "seed_demo"]
    first = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    title = "Demo: embed all images, score all pairs"
    wait(lambda: first.poll() is not None or Job.objects.filter(title=title, status="running").exists(), 300, "embed")
    killed = first.poll() is None
    if killed:
        first.kill()
        first.wait()
    left = Job.objects.filter(title=title).order_by("pk").first()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    frames = Frame.objects.filter(video__yt8m_id__startswith="demo_")
    embedded = ImageEmbedding.objects.filter(
        image__frame__in=frames, fingerprint=current_fingerprint(), vector__isnull=False
    ).count()
    pairs = Pair.objects.filter(video__yt8m_id__startswith="demo_")
    stuck = Job.objects.filter(title__startswith="Demo", status__in=("queued", "running")).count()
    line = next((x for x in done.stdout.splitlines() if "pairs scored" in x), "")
    problems = []
    if done.returncode:
        problems.append(f"the second seed_demo failed: {done.stderr[-500:]}")
    if not killed:
        problems.append("seed_demo ended before it could be killed mid-embedding")
    if stuck or (left and left.pk and Job.objects.get(pk=left.pk).status in ("queued", "running")):
        problems.append(f"{stuck} demo job(s) still active")
    if embedded != frames.count() or frames.count() == 0:
        problems.append(f"{embedded} of {frames.count()} demo frames embedded")
    if pairs.count() != 18 or pairs.values("source_id").distinct().count() != 18:
        problems.append(f"{pairs.count()} demo pairs (18 expected, each once)")
    # The report counts every scored pair of the database (the rows before this one made some too), not the demo's.
    if f"{Pair.objects.exclude(similarity=None).count()} pairs scored" not in line:
        problems.append(f"the report is not the pairs' count: {line!r}")
    left_status = Job.objects.get(pk=left.pk).status if left else "none"
    outcome = (
        f"killed mid-embedding: {killed}; its job: {left_status}; re-run: {embedded}/{frames.count()} frames "
        f"embedded, {pairs.count()} pairs (each once), no demo job left active ({stuck}); report: {line[:90]}"
    )
    record("seed_demo killed mid-embedding, then run again", started, outcome, "; ".join(problems))


# --- Daily pages (issue 26) -------------------------------------------------------------------------------------


def browser_session(username: str):
    """A urllib opener logged in as `username` (a session made as Django's login makes it) that keeps cookies."""
    import http.cookiejar

    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore

    user = User.objects.get(username=username)
    session = SessionStore()
    session.update(
        {
            SESSION_KEY: str(user.pk),
            BACKEND_SESSION_KEY: "django.contrib.auth.backends.ModelBackend",
            HASH_SESSION_KEY: user.get_session_auth_hash(),
        }
    )
    session.create()
    jar = http.cookiejar.CookieJar()
    jar.set_cookie(
        http.cookiejar.Cookie(
            0,
            "sessionid",
            session.session_key,
            None,
            False,
            "127.0.0.1",
            False,
            False,
            "/",
            True,
            False,
            None,
            False,
            None,
            None,
            {},
        )
    )
    return urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar)), jar


def page_get(opener, path: str) -> tuple[int, str]:
    try:
        with opener.open(f"http://127.0.0.1:{WEB_PORT}{path}", timeout=30) as answer:
            return answer.status, answer.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


def page_post(opener, jar, path: str, fields: dict, referer: str) -> tuple[int, str]:
    token = next((cookie.value for cookie in jar if cookie.name == "csrftoken"), "")
    body = urllib.parse.urlencode({"csrfmiddlewaretoken": token, **fields}).encode()
    headers = {"Referer": f"http://127.0.0.1:{WEB_PORT}{referer}", "X-CSRFToken": token}
    request = urllib.request.Request(f"http://127.0.0.1:{WEB_PORT}{path}", body, headers, method="POST")
    try:
        with opener.open(request, timeout=30) as answer:  # follows the redirect to the page
            return answer.status, answer.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


def daily_pages_with_redis_down() -> None:
    """A coordinator's daily pages need no broker: with Redis stopped the overview shows its counts, a refused
    assignment comes back to its form with the reason (nothing written), a good one is written once, and the
    invites CSV downloads."""
    started = time.monotonic()
    from annotator.models import Video
    from evaluation.studies import services as studies
    from tests.factories import make_pair

    # The study draws its own three pairs, of a domain no other row uses: an earlier row's published release makes its
    # items public, and a sample holding any is refused (open book).
    for _ in range(3):
        make_pair(domain="medical")
    study = studies.study_create(
        name=f"Daily {time.monotonic_ns()}", fraction=1, practice_count=0, open_cap=5, domains=("medical",)
    )
    studies.study_invite(study=study, count=2)
    video = Video.objects.create(yt8m_id=f"daily{time.monotonic_ns()}", source="/nowhere.mp4", status="sampled")
    from django.contrib.auth.models import Group, User

    annotator = User.objects.create_user(f"ada{time.monotonic_ns()}", password="bench")
    annotator.groups.add(Group.objects.get_or_create(name="annotator")[0])
    opener, jar = browser_session("cora")
    localservices.stop(["redis"])
    wait(lambda: not localservices.port_open(REDIS_PORT), 30, "Redis to stop")
    try:
        overview, html = page_get(opener, "/overview/")
        refused, refused_html = page_post(
            opener, jar, "/overview/assign/", {"video": "no-such-id", "user": ""}, "/overview/"
        )
        unchanged = Video.objects.get(pk=video.pk).assigned_to_id is None
        done, _ = page_post(
            opener, jar, "/overview/assign/", {"video": video.yt8m_id, "user": annotator.pk}, "/overview/"
        )
        csv_status, csv_text = page_get(opener, f"/studies/{study.pk}/invites.csv")
    finally:
        localservices.start_redis()
    problems = []
    if overview != 200 or "Held now" not in html:
        problems.append(f"/overview/ {overview}")
    form = refused_html[refused_html.find('id="overview-assign"') :]
    if refused != 200 or "No video has the YouTube-8M id" not in form or not unchanged:
        problems.append(f"refused assignment {refused}, reason beside the form: {'No video has' in form}")
    if done != 200 or Video.objects.get(pk=video.pk).assigned_to_id != annotator.pk:
        problems.append(f"assignment {done}, assigned to {Video.objects.get(pk=video.pk).assigned_to_id}")
    links = csv_text.strip().splitlines()[1:]
    if csv_status != 200 or len(links) != 2:
        problems.append(f"invites.csv {csv_status}, {len(links)} links")
    outcome = f"overview {overview}; bad id refused beside the form, nothing written; good one assigned {done}; "
    outcome += f"invites.csv {len(links)} links"
    record("daily pages with Redis down", started, outcome, "; ".join(problems))


# --- Start checks, a unit left on a dead worker, a full scratch disk under an S3 import ----------------------------


def wrong_database_port() -> None:
    """The web (gunicorn, two workers) and a Celery worker started with a DATABASE_URL whose port refuses: each exits
    at once with one line naming the setting; neither says it is ready."""
    started = time.monotonic()
    with socket.socket() as refusing:  # bound and never listening: every connection is refused
        refusing.bind(("127.0.0.1", 0))
        port = refusing.getsockname()[1]
        env = {**os.environ, "DATABASE_URL": ENV["DATABASE_URL"].replace(f":{PG_PORT}/", f":{port}/")}
        web = [sys.executable, "-m", "gunicorn", "subtlebench.wsgi:application", "-b", f"127.0.0.1:{free_port()}"]
        celery = [sys.executable, "-m", "celery", "-A", "subtlebench", "worker", "-Q", "default", "--pool", "solo"]
        celery += ["--without-mingle", "--without-gossip", "--hostname", "wrongport@bench"]
        runs = {
            name: subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
            for name, command in (("web", [*web, "--workers", "2"]), ("worker", celery))
        }
    named = f"database at 127.0.0.1:{port}/subtlebench (DATABASE_URL): unreachable"
    problems = []
    for name, done in runs.items():
        output = done.stdout + done.stderr
        if done.returncode == 0 or f"refuses to start: {named}" not in output or " ready." in output:
            problems.append(f"{name} exited {done.returncode}: {output[-300:]!r}")
    # gunicorn halts with exit status 3, or 1 when its two workers fail at once (a HaltServer raised twice).
    if "Worker failed to boot" not in runs["web"].stderr:
        problems.append("gunicorn did not say that a worker failed to boot")
    outcome = f"gunicorn exited {runs['web'].returncode} (Worker failed to boot), the worker "
    outcome += f"{runs['worker'].returncode}, each with 'the web/the worker refuses to start: {named} (...)'"
    record("web and worker on a wrong DATABASE_URL port", started, outcome, "; ".join(problems))


def unit_left_on_a_dead_worker() -> None:
    """The `default` worker SIGKILLed mid-sampling and not restarted: /healthz?deep=1 names the unit it left running
    (its worker does not answer) before the sweeper's JOB_STALE_SECONDS; the worker back, the import succeeds."""
    started = time.monotonic()
    before = set(frame_files())
    job = import_job(videos("dw", 1, seconds=16), every=0.1)
    wait(lambda: len(frame_files() - before) >= 20, 60, "sampling to write files")
    unit = job.tasks.get()
    main = processes.pop("cpu")
    children = children_of(main.pid)
    main.send_signal(signal.SIGKILL)
    main.wait()
    for child in children:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    killed = time.monotonic()
    named = f"unit {unit.pk} of job {job.pk} on cpu@bench, silent since "

    def reported():
        _, health = healthz(deep=True)
        jobs = health.get("parts", {}).get("jobs", {})
        return jobs if named in jobs.get("detail", "") else None

    jobs = wait(reported, 60, "/healthz?deep=1 to name the unit left running")
    seen = time.monotonic() - killed
    worker("cpu")
    wait(lambda: ended(job), 120, "the import after the worker was restarted")
    problems = sampled_as_expected(job, 160)
    if jobs["status"] != "degraded" or not jobs["running_on_dead_workers"]:
        problems += f" jobs part {jobs}"
    outcome = f"deep /healthz: jobs degraded {seen:.0f} s after the kill ({jobs['running_on_dead_workers']} unit(s) "
    outcome += f"on a worker that looks dead, this one named); worker restarted: import {job.status}"
    record("a unit left running on a dead worker", started, outcome, problems.strip())


def s3_import_onto_a_full_scratch_disk() -> None:
    """An s3:// collection import whose scratch disk (SCRATCH_ROOT, a 64 KiB tmpfs) fills up during the download: the
    job fails with one line saying the disk is full and naming the folder, not that S3 cannot be read; nothing is
    imported and nothing stays on the disk."""
    started = time.monotonic()
    from annotator.models import Collection, Job

    disk = BASE / "full-scratch"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=755", "tmpfs", str(disk)], capture_output=True, text=True
    )
    if mounted.returncode:  # a mount needs root
        record("s3:// import onto a full scratch disk", started, f"not run: {mounted.stderr.strip()}", "")
        return
    server, s3, client = s3_server()
    try:
        client.create_bucket(Bucket="full")
        client.put_object(Bucket="full", Key="scenes/A/scene.png", Body=bytes(256 * 1024))
        done = command(
            "import_collection", "s3://full/scenes", "--name", "fullscratch", "--domain", "aerial",
            SCRATCH_ROOT=str(disk), **s3,
        )  # fmt: skip
        job = Job.objects.filter(kind=Job.Kind.IMPORT).order_by("-pk").first()
        left = [str(p) for p in disk.rglob("*") if p.is_file()]
    finally:
        server.stop()
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
    line = job.errors[0] if job is not None and job.errors else ""
    problems = []
    if done.returncode == 0 or job.status != "failed" or len(job.errors) != 1:
        problems.append(f"exit {done.returncode}, job {job.status}, errors {job.errors}")
    if not (line.startswith(f"Import of s3://full/scenes failed: the disk is full, writing under {disk}/") and
            line.endswith("[ENOSPC]")):  # fmt: skip
        problems.append(f"the line is {line!r}")
    if Collection.objects.filter(name="fullscratch").exists() or left:
        problems.append(f"a collection was made or files were left: {left}")
    record("s3:// import onto a full scratch disk", started, f"import failed: {line}", "; ".join(problems))


FAULTS = [
    redis_down_after_commit,
    kill_pool_child,
    kill_worker_main,
    redis_dropped_mid_task,
    postgres_restarted_mid_task,
    export_with_redis_down,
    delivered_twice_two_workers,
    flushall_with_a_queued_unit,
    redis_out_of_memory,
    beat_down,
    hostile_import_folder,  # issue 25
    lost_media_repair,  # issue 25
    s3_cut_during_replace,
    corrupted_frame,
    kill_cli_export,
    kill_zip_job,
    s3_slow_import_and_export,  # issue 58
    s3_down_during_a_sweep,  # issue 58
    s3_down_while_sampling_an_s3_video,
    model_server_killed_and_restarted,
    model_server_answers_500,
    model_server_trickles,
    seed_demo_killed_mid_embedding,  # issue 26
    daily_pages_with_redis_down,  # issue 26
    release_worker_killed_before_its_row,  # issue 58
    release_postgres_restarted_before_its_row,
    two_s3_exports_at_once,
    wrong_database_port,
    unit_left_on_a_dead_worker,
    s3_import_onto_a_full_scratch_disk,
]


def main() -> int:
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError(f"over BENCH_TIMEOUT={TIMEOUT:.0f} s")))
    signal.alarm(int(TIMEOUT))
    print(f"instance under {BASE}: PostgreSQL :{PG_PORT}, Redis :{REDIS_PORT}, gunicorn :{WEB_PORT}", flush=True)
    failed = False
    try:
        start_instance()
        only = {name for name in os.getenv("BENCH_ONLY", "").split(",") if name}
        for fault in FAULTS:
            if only and fault.__name__ not in only:
                continue
            started = time.monotonic()
            try:
                fault()
            except Exception as error:  # one fault's failure is a row of the table, the others still run
                failed = True
                record(fault.__name__.replace("_", " "), started, "did not end", f"{type(error).__name__}: {error}")
                reconnect()
    finally:
        signal.alarm(0)
        stop_instance()
        if os.getenv("BENCH_KEEP") != "1":
            shutil.rmtree(BASE, ignore_errors=True)
    print()
    print("| fault | outcome | verdict | seconds |")
    print("|---|---|---|---|")
    for fault, outcome, verdict, seconds in rows:
        print(f"| {fault} | {outcome} | {verdict} | {seconds:.1f} |")
    return 1 if failed or any(verdict != "ok" for _, _, verdict, _ in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

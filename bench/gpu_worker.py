"""GPU benchmark of the similarity path through Django: a real Celery similarity worker (`--pool solo`, CUDA, a
random DINOv3 ViT-L/16 at 224 in bf16) embeds the frames of sampled videos; its images/s, from the jobs' start
and finish times, is printed beside the end-to-end figure of `bench/gpu_similarity.sh` run in the same script.
Target: at least 90% of it.

Steps: start the embedded PostgreSQL and Redis (devtools.localservices, unless DATABASE_URL / CELERY_BROKER_URL
are set) and use a database of its own (the URL's name + "_gpu_bench"; created, migrated and flushed); write
the model with save_pretrained and activate it with `manage.py check_dinov3 --activate FOLDER --device cuda`;
generate H.264 videos (demo.videos' PyAV writer, the frames of bench/synthetic_frames.py) and import them with a
real CPU worker (queue `default`), which samples every frame to JPEG and queues one embedding job per video, as
in production; then start the similarity worker and wait for the jobs. The first job pays the model load and
`torch.compile` and is the warm-up: the figure counts the jobs after it, from the first one's start to the last
one's finish (Celery hand-offs between jobs, the storage of vectors and the job updates all inside).

Environment: BENCH_TINY=1 (a tiny model and a handful of frames on the CPU: a check that the script works),
BENCH_VIDEOS (measured videos, default 8), BENCH_FRAMES (frames per video, default 1024), BENCH_BATCH (256),
BENCH_THREADS (decode threads, CPU cores - 1), BENCH_DIR (/tmp/sb-gpu-worker-bench), BENCH_KEEP=1 (keep files).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.synthetic_frames import TINY_CONFIG, VIT_L16  # noqa: E402

TINY = os.getenv("BENCH_TINY") == "1"
DEVICE = "cpu" if TINY else "cuda"
VIDEOS = int(os.getenv("BENCH_VIDEOS", "2" if TINY else "8"))
FRAMES = int(os.getenv("BENCH_FRAMES", "24" if TINY else "1024"))
BATCH = int(os.getenv("BENCH_BATCH", "16" if TINY else "256"))
THREADS = int(os.getenv("BENCH_THREADS", str(max(1, (os.cpu_count() or 2) - 1))))
FOLDER = Path(os.getenv("BENCH_DIR", "/tmp/sb-gpu-worker-bench-tiny" if TINY else "/tmp/sb-gpu-worker-bench"))
FPS = 25
# A broker of its own when the embedded Redis is used: `make run` uses database 0 and `make test` database 1.
BENCH_REDIS_DB = 15


def say(text: str) -> None:
    print(text, flush=True)


# --- Services and database ---------------------------------------------------------------------------------


def bench_database_url(url: str) -> str:
    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    name = name if name.endswith("_gpu_bench") else f"{name}_gpu_bench"
    return urlunparse(parsed._replace(path=f"/{name}"))


def create_database(url: str) -> None:
    """CREATE DATABASE on the same server (through its maintenance database), unless it exists."""
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    with psycopg.connect(urlunparse(parsed._replace(path="/postgres")), autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            connection.execute(f'CREATE DATABASE "{name}"')


def start_services() -> list[str]:
    """The embedded services for whatever is not configured; this benchmark's own database and broker."""
    from devtools.localservices import ensure_started

    broker_given = bool(os.getenv("CELERY_BROKER_URL"))
    started = ensure_started()
    if not broker_given:
        broker = urlparse(os.environ["CELERY_BROKER_URL"])
        os.environ["CELERY_BROKER_URL"] = urlunparse(broker._replace(path=f"/{BENCH_REDIS_DB}"))
    os.environ["DATABASE_URL"] = bench_database_url(os.environ["DATABASE_URL"])
    create_database(os.environ["DATABASE_URL"])
    return started


def setup_django() -> None:
    media = FOLDER / "media"
    imports = FOLDER / "imports"
    media.mkdir(parents=True, exist_ok=True)
    imports.mkdir(parents=True, exist_ok=True)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="subtlebench.settings",
        MEDIA_ROOT=str(media),
        IMPORT_ROOTS=str(imports),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        # The beat schedule is not running here: no periodic catch-up job may mix with the measured ones.
        SIMILARITY_CATCH_UP_MINUTES="0",
    )
    os.environ.pop("DINOV3_MODEL_DIR", None)  # the worker reads the active row's folder
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    from subtlebench.celery import app

    with app.connection_for_write() as connection:
        for queue in ("default", "similarity"):
            connection.default_channel.queue_purge(queue)


# --- Processes ------------------------------------------------------------------------------------------------


def manage(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def start_worker(name: str, queue: str, *options: str, **env: str) -> tuple[subprocess.Popen, Path]:
    """A real `celery worker` process; returns once it says it is ready."""
    log = FOLDER / f"{name}.log"
    handle = open(log, "w")
    command = [sys.executable, "-m", "celery", "-A", "subtlebench", "worker", "-Q", queue, *options]
    command += ["--loglevel", "INFO", "--without-mingle", "--without-gossip", "--hostname", f"{name}@%h"]
    process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **env}, stdout=handle, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if " ready." in log.read_text(errors="replace"):
            return process, log
        if process.poll() is not None:
            break
        time.sleep(0.2)
    sys.exit(f"the {name} worker did not start:\n{log.read_text(errors='replace')[-3000:]}")


def stop_worker(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


def wait_for(jobs, seconds: float, what: str, log: Path) -> None:
    from annotator.models import Job

    deadline = time.monotonic() + seconds
    pending = [job.pk for job in jobs]
    while time.monotonic() < deadline:
        if not Job.objects.filter(pk__in=pending, status__in=[Job.Status.QUEUED, Job.Status.RUNNING]).exists():
            return
        time.sleep(0.5)
    sys.exit(f"timed out after {seconds:.0f} s waiting for {what}; worker log {log}:\n{log.read_text()[-3000:]}")


# --- The model and the videos --------------------------------------------------------------------------------


def build_model(folder: Path) -> None:
    """In a child process, so this one never holds the GPU: a random DINOv3 saved with save_pretrained."""
    config = TINY_CONFIG if TINY else VIT_L16
    code = (
        "import sys; from annotator.similarity.embedder import build_random_model;"
        f"build_random_model(sys.argv[1], seed=0, device={DEVICE!r}, **{config!r})"
    )
    subprocess.run([sys.executable, "-c", code, str(folder)], cwd=ROOT, check=True)


def write_one_video(job: tuple[Path, int, int]) -> Path:
    from bench.synthetic_frames import frame_pixels
    from demo.videos import write_video

    path, first, count = job
    if not path.exists():
        write_video(path, (frame_pixels(first + i) for i in range(count)), fps=FPS)
    return path


def write_videos(folder: Path) -> list[Path]:
    """The warm-up video and the measured ones, each FRAMES frames at 25 fps, written in parallel (once)."""
    folder.mkdir(parents=True, exist_ok=True)
    jobs = [(folder / f"bench{n:03d}.mp4", n * FRAMES, FRAMES) for n in range(VIDEOS + 1)]
    with ProcessPoolExecutor(min(len(jobs), os.cpu_count() or 1)) as pool:
        return list(pool.map(write_one_video, jobs))


def end_to_end_rate_of_gpu_similarity() -> float:
    """Run bench/gpu_similarity.sh (same batch, decode threads and images as the worker) and read its figure."""
    env = {**os.environ, "BENCH_BATCH": str(BATCH), "BENCH_THREADS": str(THREADS), "PYTHON": sys.executable}
    env.setdefault("BENCH_IMAGES", str(VIDEOS * FRAMES))
    env.pop("BENCH_DIR", None)
    done = subprocess.run(["bash", "bench/gpu_similarity.sh"], cwd=ROOT, env=env, capture_output=True, text=True)
    output = done.stdout + done.stderr
    say("".join(f"  | {line}\n" for line in output.strip().splitlines()).rstrip())
    match = re.search(r"end to end \(JPEG files -> vectors\):\s+([\d.]+) images/s", output)
    if done.returncode != 0 or not match:
        sys.exit("bench/gpu_similarity.sh gave no end-to-end figure")
    return float(match[1])


# --- The run --------------------------------------------------------------------------------------------------


def main() -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    started_services = start_services()
    workers: list[subprocess.Popen] = []
    try:
        setup_django()
        from annotator.models import Frame, ImageEmbedding, Job
        from annotator.similarity.services import embedding_model_active
        from annotator.videos.services import videos_import

        database = urlparse(os.environ["DATABASE_URL"]).path.lstrip("/")
        say(f"database {database}, broker {os.environ['CELERY_BROKER_URL']}")
        model_dir = FOLDER / ("dinov3-tiny" if TINY else "dinov3-vitl16")
        clock = time.perf_counter()
        if not (model_dir / "config.json").exists():
            build_model(model_dir)
        say(f"random DINOv3 {'(tiny)' if TINY else 'ViT-L/16'} in {model_dir}: {time.perf_counter() - clock:.1f} s")
        say(f"$ manage.py check_dinov3 --activate {model_dir} --device {DEVICE} --image-size 224")
        output = manage("check_dinov3", "--activate", str(model_dir), "--device", DEVICE, "--image-size", "224")
        say("".join(f"  | {line}\n" for line in output.strip().splitlines()).rstrip())
        model = embedding_model_active(fresh=True)

        clock = time.perf_counter()
        videos = write_videos(FOLDER / "imports" / "videos")
        say(f"{len(videos)} H.264 videos of {FRAMES} frames 640x360: {time.perf_counter() - clock:.1f} s")
        clock = time.perf_counter()
        sampler, sampler_log = start_worker("sampler", "default", "--concurrency", str(min(len(videos), THREADS)))
        workers.append(sampler)
        # Every frame (one every 1/25 s); each sampled video queues its embedding job, as in production.
        job = videos_import(source=str(videos[0].parent), every=1 / FPS, title="bench videos")
        wait_for([job], 1800, "the sampling", sampler_log)
        job.refresh_from_db()
        stop_worker(sampler)  # its CPUs are the similarity worker's decoders from now on
        frames = Frame.objects.count()
        if job.status != Job.Status.SUCCEEDED or frames != len(videos) * FRAMES:
            sys.exit(f"sampling: {job.status}, {frames} frames, errors {job.errors}")
        say(f"sampled {frames} frames through Django (a CPU worker): {time.perf_counter() - clock:.1f} s")

        embed_jobs = list(Job.objects.filter(kind=Job.Kind.SIMILARITY))
        if len(embed_jobs) != len(videos):
            sys.exit(f"{len(embed_jobs)} embedding jobs queued for {len(videos)} videos")
        worker, worker_log = start_worker(
            "similarity",
            "similarity",
            "--pool",
            "solo",
            DINOV3_DEVICE=DEVICE,
            DINOV3_BATCH_SIZE=str(BATCH),
            DINOV3_DECODE_THREADS=str(THREADS),
        )
        workers.append(worker)
        wait_for(embed_jobs, 3600, "the embedding jobs", worker_log)
        stop_worker(worker)

        jobs = list(Job.objects.filter(pk__in=[j.pk for j in embed_jobs]))
        failed = [(j.title, j.errors) for j in jobs if j.status != Job.Status.SUCCEEDED]
        stored = ImageEmbedding.objects.filter(fingerprint=model.fingerprint, vector__isnull=False).count()
        if failed or stored != frames:
            sys.exit(f"embedding: {stored} of {frames} frames stored under {model.fingerprint}; failed: {failed}")
        jobs.sort(key=lambda j: j.started)
        warm_up, measured = jobs[0], jobs[1:]
        images = sum(j.result["embedded"] for j in measured)
        window = (max(j.finished for j in measured) - min(j.started for j in measured)).total_seconds()
        worker_rate = images / window
        warm_seconds = (warm_up.finished - warm_up.started).total_seconds()
        say(f"worker: {stored} frames stored under '{model.fingerprint}'")
        say(f"warm-up job (model load and compile): {warm_up.result['embedded']} frames in {warm_seconds:.1f} s")

        say("$ bench/gpu_similarity.sh")
        reference = end_to_end_rate_of_gpu_similarity()
        ratio = worker_rate / reference
        say(f"Celery similarity worker (sampled frames -> stored vectors, {len(measured)} jobs, batch {BATCH}, "
            f"{THREADS} decode threads): {worker_rate:8.0f} images/s")  # fmt: skip
        say(f"bench/gpu_similarity.sh end to end (JPEG files -> vectors):               {reference:8.0f} images/s")
        verdict = "PASS" if ratio >= 0.9 else "BELOW TARGET"
        say(f"worker / gpu_similarity: {ratio:.0%} (target >= 90%): {verdict if not TINY else 'not measured (tiny)'}")
    finally:
        for process in workers:
            stop_worker(process)
        from devtools.localservices import stop

        stop(started_services)
        if os.getenv("BENCH_KEEP") != "1":
            shutil.rmtree(FOLDER, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Benchmark of a model evaluation run: 2,000 items against the local OpenAI-compatible server (tests/model_server.py,
in a process of its own) answering each request after 50 ms, with the endpoint's concurrency 16.

The run goes through the same code as `manage.py evaluate_model` (the evaluation job's service, in this process:
the protocol's messages with both images in base64, the HTTP client, the results stored in PostgreSQL as they
arrive). Prints items/s against the ideal concurrency / latency = 16 / 0.05 s = 320 items/s (target: at least 80%).
`--strategy` picks the prompting strategy (evaluation/runs/strategies.py): `concatenated` or `overlapped` make
images for every request (Pillow, in the run's threads), and the CPU time per item shows what that costs.

Beside the ideal it prints the ceilings the CPU sets: the server process's and this one's (each a Python process,
one core under the GIL: 1 / its CPU per item) and the machine's (its cores over the CPU per item of this process, the
server and the run's PostgreSQL backend together). `--items 900,45000` runs each size one after the other (each on a
release of its own, against a server started for it) and prints them side by side: CPU per item of the larger runs
over the first's (issue 56: a 45,000-item run within 10% of a 900-item run's, at concurrency 16 against a 5 ms
server: `--latency 0.005`). `--warmup N` first runs N items, not reported (the process's first run pays for its
imports); `--profile 45000` prints a cProfile of that run's threads.

Run: DATABASE_URL=postgresql://postgres@127.0.0.1:5432/sb_mlrun python bench/model_eval.py [--items 2000]
It uses its own database (the DATABASE_URL's name + "_bench"), which it makes afresh and migrates on every run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
CATEGORIES = ["attribute", "state", "emotion", "temporal", "spatial", "existence", "quantity", "quality",
              "viewpoint", "action"]  # fmt: skip
SERVER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.model_server import ModelServer
server = ModelServer(latency={latency})
server.keep_requests = False  # a long run's requests would fill the server's memory
server.start()
print(server.base_url, flush=True)
while True:
    time.sleep(3600)
"""


def bench_database_url() -> str:
    url = urlparse(os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/sb_mlrun"))
    name = url.path.lstrip("/")
    name = name if name.endswith("_bench") else f"{name}_bench"
    return urlunparse(url._replace(path=f"/{name}"))


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def recreate_database(url: str) -> None:
    """The database empty: an earlier run's release cannot be removed (releases are never deleted)."""
    import psycopg

    parts = urlparse(url)
    admin = urlunparse(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'drop database if exists "{parts.path[1:]}" with (force)')
        connection.execute(f'create database "{parts.path[1:]}"')


def write_release(items: int, size: tuple[int, int] = (160, 120), tag: str = "bench"):
    """A release of `items` accepted pairs over 50 distinct JPEG files in storage (160x120: about 3 KB each), 10
    categories, all in its test split; `tag` names its pairs and files apart from another run's in the database."""
    import io

    from django.core.files.base import ContentFile
    from django.db.models import Max
    from PIL import Image as Picture
    from PIL import ImageDraw

    from annotator.models import Image, Pair, Release
    from tests.modeleval_release_factories import make_release

    images = []
    for n in range(50):
        picture = Picture.new("RGB", size, (n * 5 % 256, 120, 200 - n * 3 % 200))
        ImageDraw.Draw(picture).rectangle([20 + n, 30, 70 + n, 80], fill=(200, 60, 40))
        buffer = io.BytesIO()
        picture.save(buffer, "JPEG", quality=88)
        image = Image(width=size[0], height=size[1], source="bench", original_name=f"{n}.jpg")
        image.file.save(f"images/bench/{tag}-{n}.jpg", ContentFile(buffer.getvalue()), save=False)
        image.save()
        images.append(image)
    pairs = Pair.objects.bulk_create(
        Pair(
            image_1=images[i % 50],
            image_2=images[(i + 1) % 50],
            category=CATEGORIES[i % len(CATEGORIES)],
            domain="natural",
            question=f"What differs in item {i}?",
            answer=f"change {i}",
            distractors=["another change", "no change", "a third change"],
            source="bench",
            source_id=f"{tag}-{i}",
            status=Pair.Status.ACCEPTED,
        )
        for i in range(items)
    )
    number = (Release.objects.aggregate(Max("number"))["number__max"] or 0) + 1
    return make_release([(pair, "test", False) for pair in pairs], number=number)


def measure_pages(evaluation) -> None:
    """CPU of the run page's poll (as while the run is active) and of the full page; peak Python memory of the
    results file's download, read as a client reads it."""
    import tracemalloc

    from django.contrib.auth.models import Group, User
    from django.test import Client

    from annotator.models import Job

    user = User.objects.create_user("bench-coordinator", password="x")
    user.groups.add(Group.objects.get_or_create(name="coordinator")[0])
    client = Client()
    client.force_login(user)
    url = f"/models/runs/{evaluation.pk}/"

    def cpu_of(**headers) -> float:
        spent = []
        for _ in range(5):
            started = time.process_time()
            response = client.get(url, headers=headers)
            assert response.status_code == 200, response.status_code
            spent.append(time.process_time() - started)
        return sorted(spent)[2]

    status = Job.objects.get(pk=evaluation.job_id).status
    Job.objects.filter(pk=evaluation.job_id).update(status=Job.Status.RUNNING)
    poll = cpu_of(**{"HX-Request": "true"})
    Job.objects.filter(pk=evaluation.job_id).update(status=status)
    page = cpu_of()
    tracemalloc.start()
    started = time.process_time()
    response = client.get(url + "results/")
    size = sum(len(chunk) for chunk in (response.streaming_content if response.streaming else [response.content]))
    spent = time.process_time() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(
        f"run page: the poll of an active run {1000 * poll:.1f} ms CPU (median of 5), the whole page {1000 * page:.1f} "
        f"ms; results download {size / 1e6:.1f} MB in {spent:.2f} CPU-s, peak Python memory {peak / 1e6:.1f} MB"
    )


def run_once(items: int, args, label: str) -> dict:
    """One run of `items` items against a server process of its own (started for this run, so its CPU is this run's):
    a release of that size, an endpoint, the run through the job's service. Returns its figures."""
    import cProfile
    import pstats

    from django.db import connection

    from annotator.llm.endpoints import endpoint_create
    from evaluation.runs.services import evaluation_run, evaluation_start

    server = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(root=str(ROOT), latency=args.latency)], stdout=subprocess.PIPE, text=True
    )
    try:
        base_url = server.stdout.readline().strip()
        width, height = (int(side) for side in args.size.split("x"))
        release = write_release(items, (width, height), tag=label)
        endpoint = endpoint_create(
            user=None,
            name=f"bench {label}",
            base_url=base_url,
            model_id="tiny-vlm",
            concurrency=args.concurrency,
        )
        evaluation = evaluation_start(
            endpoint=endpoint, user=None, release=release, split="test", send=False, strategy=args.strategy
        )
        with connection.cursor() as cursor:  # the run's database work is this connection's (the main thread's)
            cursor.execute("select pg_backend_pid()")
            (backend,) = cursor.fetchone()
        profiles = []
        if items in args.profile:
            # Every thread of the run (the loop's and the request threads): one profiler each, added up after.
            def profile_thread(*_):
                sys.setprofile(None)
                profiles.append(cProfile.Profile())
                profiles[-1].enable()

            threading.setprofile(profile_thread)
            profile_thread()
        server_started = process_cpu_seconds(server.pid)
        started, cpu_started = time.perf_counter(), time.process_time()
        database_started = process_cpu_seconds(backend)
        evaluation = evaluation_run(evaluation_id=evaluation.pk)
        if profiles:
            threading.setprofile(None)
            profiles[0].disable()
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        database_cpu = process_cpu_seconds(backend) - database_started
        server_cpu = process_cpu_seconds(server.pid) - server_started
        load = os.getloadavg()[0]
    finally:
        server.terminate()
        server.wait()
    job = evaluation.job
    job.refresh_from_db()
    stored = evaluation.results.count()
    if profiles:
        print(f"--- cProfile of the run's threads, {items} items, added up (top 40 by own time)")
        pstats.Stats(*profiles).sort_stats("tottime").print_stats(40)
    return {
        "evaluation": evaluation,
        "items": items,
        "stored": stored,
        "failed": evaluation.failed,
        "status": job.status,
        "wall": wall,
        "rate": stored / wall,
        "cpu": 1000 * cpu / stored,
        "database": 1000 * database_cpu / stored,
        "server": 1000 * server_cpu / stored,
        "load": load,
    }


def ceilings(figures: dict, args) -> dict:
    """The items/s each part allows on its own: the endpoint's concurrency / latency; the server process and this one,
    each one Python process (its threads share one core under the GIL): 1 / its CPU per item; the machine's cores /
    the CPU per item of the three processes together (this one, the server, the database backend)."""

    def per_second(ms_per_item: float, cores: int = 1) -> float:
        return 1000 * cores / ms_per_item if ms_per_item else float("inf")  # a tiny run can measure 0 ticks

    return {
        "latency": args.concurrency / args.latency,
        "server": per_second(figures["server"]),
        "worker": per_second(figures["cpu"]),
        "machine": per_second(figures["cpu"] + figures["server"] + figures["database"], os.cpu_count() or 1),
    }


def print_run(figures: dict, args) -> None:
    stored, items = figures["stored"], figures["items"]
    limits = ceilings(figures, args)
    ideal = min(limits["latency"], limits["server"])
    which = "concurrency / latency" if ideal == limits["latency"] else "the server process's CPU"
    print(f"=== {items} items: strategy {figures['evaluation'].strategy}, images {args.size}")
    print(f"items: {stored} of {items} stored ({figures['failed']} failed), job {figures['status']}")
    print(f"wall: {figures['wall']:.2f} s (includes the probe and reading the release)")
    print(
        f"throughput: {figures['rate']:.1f} items/s; ideal {args.concurrency} / {args.latency:g} s = "
        f"{limits['latency']:.0f} items/s"
    )
    print(
        f"ceilings: the server process {limits['server']:.0f} items/s (1 / its CPU per item), this process "
        f"{limits['worker']:.0f}, the machine's {os.cpu_count()} cores {limits['machine']:.0f} (all three processes)"
    )
    print(
        f"share of ideal: {100 * figures['rate'] / limits['latency']:.1f}% of {limits['latency']:.0f}; "
        f"{100 * figures['rate'] / ideal:.1f}% of {ideal:.0f} ({which}; target: at least 80% on a quiet machine)"
    )
    print(
        f"CPU: {figures['cpu']:.2f} ms per item in this process, {figures['server']:.2f} ms in the server's; "
        f"load average {figures['load']:.1f} on {os.cpu_count()} cores"
    )
    if args.pages:
        measure_pages(figures["evaluation"])
    print(
        f"CPU of the run's database connection (PostgreSQL backend): {figures['database']:.2f} ms per item; "
        f"run + database {figures['cpu'] + figures['database']:.2f} ms per item"
    )


def print_side_by_side(runs: list[dict], args) -> None:
    """The runs in one table, each beside the first (the anchor: `--items 900,45000` compares 45,000 with 900)."""
    anchor = runs[0]
    print(f"=== side by side: concurrency {args.concurrency}, server latency {args.latency:g} s")
    print(
        f"{'items':>8} {'items/s':>8} {'ideal':>6} {'% ideal':>7} {'server':>7} {'worker':>7} {'machine':>7} "
        f"{'CPU ms/item':>18} {'x anchor':>8} {'load':>5}"
    )
    for figures in runs:
        limits = ceilings(figures, args)
        total = figures["cpu"] + figures["database"]
        ratio = total / (anchor["cpu"] + anchor["database"])
        print(
            f"{figures['items']:>8} {figures['rate']:>8.1f} {limits['latency']:>6.0f} "
            f"{100 * figures['rate'] / limits['latency']:>6.1f}% {limits['server']:>7.0f} {limits['worker']:>7.0f} "
            f"{limits['machine']:>7.0f} {figures['cpu']:>5.2f} + {figures['database']:.2f} = {total:.2f} "
            f"{ratio:>8.3f} {figures['load']:>5.1f}"
        )
    print(
        "CPU ms/item: this process + the run's PostgreSQL backend; x anchor: that total over the first run's "
        "(target: at most 1.10); server / worker / machine: the ceilings in items/s (1 / the server process's CPU "
        "per item; 1 / this process's; the cores over the three processes' CPU per item)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--items",
        default="2000",
        help="items per run; several, comma-separated (900,45000), run one after the other and printed side by side",
    )
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--strategy", default="standard", help="standard, concatenated, overlapped, substract, ...")
    parser.add_argument("--size", default="160x120", help="the images' width x height")
    parser.add_argument("--pages", action="store_true", help="then measure the run page's poll and the download")
    parser.add_argument("--warmup", type=int, default=0, help="a run of this many items first, not reported")
    parser.add_argument(
        "--profile", default="", help="cProfile the threads of the runs of these sizes (comma-separated)"
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.items.split(",")]
    args.profile = {int(size) for size in args.profile.split(",") if size}

    url = bench_database_url()
    recreate_database(url)
    os.environ["DATABASE_URL"] = url
    os.environ["MODEL_ENDPOINT_HOSTS"] = "127.0.0.1"  # the local server: loopback, refused unless allowed by name
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if args.warmup:  # the process's first run pays for imports and first uses: not the anchor's to carry
        run_once(args.warmup, args, label="warm-up")
    runs = []
    for index, items in enumerate(sizes):
        runs.append(run_once(items, args, label=f"{index + 1}-{items}"))
        print_run(runs[-1], args)
    if len(runs) > 1:
        print_side_by_side(runs, args)


if __name__ == "__main__":
    main()

"""Benchmark of a model evaluation run: 2,000 items against the local OpenAI-compatible server (tests/model_server.py,
in a process of its own) answering each request after 50 ms, with the endpoint's concurrency 16.

The run goes through the same code as `manage.py evaluate_model` (the evaluation job's service, in this process:
the protocol's messages with both images in base64, the HTTP client, the results stored in PostgreSQL as they
arrive). Prints items/s against the ideal concurrency / latency = 16 / 0.05 s = 320 items/s (target: at least 80%).
`--strategy` picks the prompting strategy (evaluation/runs/strategies.py): `concatenated` or `overlapped` make
images for every request (Pillow, in the run's threads), and the CPU time per item shows what that costs.

Run: DATABASE_URL=postgresql://postgres@127.0.0.1:5432/sb_mlrun python bench/model_eval.py [--items 2000]
It uses its own database (the DATABASE_URL's name + "_bench"), which it creates and migrates.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
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
server = ModelServer(latency={latency}).start()
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


def create_database(url: str) -> None:
    import psycopg

    parts = urlparse(url)
    admin = urlunparse(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        if not connection.execute("select 1 from pg_database where datname = %s", [parts.path[1:]]).fetchone():
            connection.execute(f'create database "{parts.path[1:]}"')


def write_export(root: Path, items: int, size: tuple[int, int] = (160, 120)) -> None:
    """`items` records over 50 distinct JPEG files (160x120: about 3 KB each), 10 categories."""
    import io

    from PIL import Image, ImageDraw

    folder = root / "images" / "bench"
    folder.mkdir(parents=True)
    for n in range(50):
        picture = Image.new("RGB", size, (n * 5 % 256, 120, 200 - n * 3 % 200))
        ImageDraw.Draw(picture).rectangle([20 + n, 30, 70 + n, 80], fill=(200, 60, 40))
        buffer = io.BytesIO()
        picture.save(buffer, "JPEG", quality=88)
        (folder / f"{n}.jpg").write_bytes(buffer.getvalue())
    (root / "data").mkdir()
    with (root / "data" / "test.jsonl").open("w") as out:
        for i in range(items):
            category = CATEGORIES[i % len(CATEGORIES)]
            record = {
                "image_1": f"images/bench/{i % 50}.jpg",
                "image_2": f"images/bench/{(i + 1) % 50}.jpg",
                "question": f"What differs in item {i}?",
                "answer": f"change {i}",
                "distractors": ["another change", "no change", "a third change"],
                "has_caption": False,
                "caption": None,
                "category": category,
                "domain": "natural",
                "source": "bench",
                "source_id": str(i),
                "raw_folder": "bench",
                "generation_info": None,
            }
            out.write(json.dumps(record) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--strategy", default="standard", help="standard, concatenated, overlapped, substract, ...")
    parser.add_argument("--size", default="160x120", help="the images' width x height")
    args = parser.parse_args()

    url = bench_database_url()
    create_database(url)
    os.environ["DATABASE_URL"] = url
    os.environ["MODEL_ENDPOINT_HOSTS"] = "127.0.0.1"  # the local server: loopback, refused unless allowed by name
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from annotator.llm.endpoints import endpoint_create
    from annotator.models import ModelEndpoint
    from evaluation.models import ModelEvaluation
    from evaluation.runs.services import evaluation_run, evaluation_start

    server = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(root=str(ROOT), latency=args.latency)], stdout=subprocess.PIPE, text=True
    )
    try:
        base_url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as folder:
            width, height = (int(side) for side in args.size.split("x"))
            write_export(Path(folder), args.items, (width, height))
            for evaluation in ModelEvaluation.objects.filter(endpoint__name="bench"):
                evaluation.job.delete()
            ModelEndpoint.objects.filter(name="bench").delete()
            endpoint = endpoint_create(
                user=None, name="bench", base_url=base_url, model_id="tiny-vlm", concurrency=args.concurrency
            )
            evaluation = evaluation_start(
                endpoint=endpoint, user=None, source="export", export_dir=folder, send=False, strategy=args.strategy
            )
            started, cpu_started = time.perf_counter(), time.process_time()
            evaluation = evaluation_run(evaluation_id=evaluation.pk)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            server_cpu = process_cpu_seconds(server.pid)
    finally:
        server.terminate()
        server.wait()
    job = evaluation.job
    job.refresh_from_db()
    stored = evaluation.results.count()
    ideal = args.concurrency / args.latency
    rate = stored / wall
    print(f"strategy {evaluation.strategy}, images {args.size}")
    print(f"items: {stored} of {args.items} stored ({evaluation.failed} failed), job {job.status}")
    print(f"wall: {wall:.2f} s (includes the probe and reading the export)")
    print(f"throughput: {rate:.1f} items/s; ideal {args.concurrency} / {args.latency:g} s = {ideal:.0f} items/s")
    print(f"share of ideal: {100 * rate / ideal:.1f}% (target: at least 80%)")
    print(
        f"CPU: {1000 * cpu / stored:.2f} ms per item in this process, {1000 * server_cpu / stored:.2f} ms in the "
        f"server's; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()

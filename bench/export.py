"""Benchmark of `export_benchmark`: 13,000 accepted items over 26,000 generated JPEG frames, then 50,000 items.

Prints the export's wall time beside a plain `cp -r` of the same image files in the same run (medians of
interleaved rounds, each after a `sync`; CPU time too, which a busy disk disturbs less), and the peak
memory of the export: the RSS high-water mark (VmHWM) of a fresh process that does nothing but the export,
next to that process's RSS just before the export started (Django and its imports).

Run: DATABASE_URL=postgresql://postgres@127.0.0.1:5432/sb_export python bench/export.py
It uses its own database (the DATABASE_URL's name + "_bench"), which it creates, migrates and flushes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
CATEGORIES = ["attribute", "state", "emotion", "temporal", "spatial", "existence", "quantity", "quality",
              "viewpoint", "action"]  # fmt: skip
FRAMES_PER_VIDEO = 20


def bench_database_url() -> str:
    url = urlparse(os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/sb_export"))
    name = url.path.lstrip("/")
    name = name if name.endswith("_bench") else f"{name}_bench"
    return urlunparse(url._replace(path=f"/{name}"))


def status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    return 0


def rss_kb() -> int:
    return status_kb("VmRSS")


def peak_rss_kb() -> int:
    """This process's own RSS high-water mark. Not getrusage's ru_maxrss: Linux carries that across the fork and
    exec that started the process, so it reports the parent's peak (here the parent that built a DINOv3 with
    torch, about 380 MB) whenever the parent's is higher."""
    return status_kb("VmHWM")


def setup_django():
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")
    import django

    django.setup()


def child_export(out: str) -> None:
    """In a fresh process: run one export and print its wall time and memory as JSON."""
    setup_django()
    from annotator.export.services import ExportOptions, benchmark_export

    before = rss_kb()
    cpu_before = cpu_seconds(resource.RUSAGE_SELF)
    started = time.perf_counter()
    result = benchmark_export(options=ExportOptions(out=out, reproducible=True))
    wall = time.perf_counter() - started
    cpu = cpu_seconds(resource.RUSAGE_SELF) - cpu_before
    peak = peak_rss_kb()
    print(json.dumps({"wall": wall, "cpu": cpu, "items": result["items"], "images": result["images"],
                      "rss_before_kb": before, "rss_peak_kb": peak}))  # fmt: skip


def cpu_seconds(who) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def jpeg_variants(count: int):
    """`count` distinct small JPEGs: a few encoded frames, each made unique by a JPEG comment segment."""
    import io

    from PIL import Image, ImageDraw

    bases = []
    for n in range(50):
        picture = Image.new("RGB", (256, 144), (n * 5 % 256, 120, 200 - n * 3 % 200))
        draw = ImageDraw.Draw(picture)
        for x in range(0, 256, 8):
            draw.line([(x, 0), (x + n, 144)], fill=((x * 3 + n) % 256, (x * 7) % 256, (n * 11) % 256))
        draw.rectangle([40 + n, 30, 90 + n, 80], fill=(200, 60, 40))
        buffer = io.BytesIO()
        picture.save(buffer, "JPEG", quality=88)
        bases.append(buffer.getvalue())
    for i in range(count):
        base = bases[i % len(bases)]
        comment = f"frame {i}".encode()
        yield base[:2] + b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment + base[2:]


def generate(media: Path, videos: int) -> None:
    from django.utils import timezone

    from annotator.models import Frame, Image, Video

    now = timezone.now()
    Video.objects.bulk_create(
        Video(yt8m_id=f"b{v:05d}", source=f"/videos/b{v:05d}.mp4", status="sampled", frame_count=FRAMES_PER_VIDEO,
              domain="gaming" if v % 4 == 0 else "natural", created=now)
        for v in range(videos)
    )  # fmt: skip
    video_ids = list(Video.objects.order_by("yt8m_id").values_list("pk", flat=True))
    images, frames = [], []
    data = jpeg_variants(videos * FRAMES_PER_VIDEO)
    for v, video_id in enumerate(video_ids):
        folder = media / "frames" / f"b{v:05d}"
        folder.mkdir(parents=True)
        for index in range(FRAMES_PER_VIDEO):
            name = f"frames/b{v:05d}/{index:06d}.jpg"
            (media / name).write_bytes(next(data))
            images.append(Image(file=name, width=256, height=144, source="yt8m", original_name=name, created=now))
            frames.append((video_id, index))
        if len(images) >= 5000 or v == len(video_ids) - 1:
            created = Image.objects.bulk_create(images)
            Frame.objects.bulk_create(
                Frame(video_id=vid, index=i, timestamp=float(i), pts=i * 1000, image=image)
                for (vid, i), image in zip(frames, created, strict=True)
            )
            images, frames = [], []


def add_pairs(total: int) -> None:
    """Accepted pairs up to `total`: frame pairs (i, j) of every video in a fixed order, categories in turn."""
    import itertools

    from django.utils import timezone

    from annotator.models import Frame, Pair
    from annotator.similarity.services import current_fingerprint

    # Scored under the current model, as the export requires (a similarity from another model is stale).
    fingerprint = current_fingerprint()
    now = timezone.now()
    existing = Pair.objects.count()
    videos: dict[int, tuple] = {}
    for video_id, yt8m_id, domain, image_id in Frame.objects.order_by("video_id", "index").values_list(
        "video_id", "video__yt8m_id", "video__domain", "image_id"
    ):
        videos.setdefault(video_id, (yt8m_id, domain, []))[2].append(image_id)
    # Neighbouring frames first (every frame used once: 13,000 pairs over 26,000 frames), then other frames.
    combos = [(i, i + 1) for i in range(0, FRAMES_PER_VIDEO, 2)]
    combos += [(i, j) for i in range(FRAMES_PER_VIDEO) for j in range(i + 1, FRAMES_PER_VIDEO) if (i, j) not in combos]
    sequence = ((combo, video) for combo in combos for video in videos.items())
    batch = []
    for n, ((i, j), (video_id, (yt8m_id, domain, image_ids))) in enumerate(
        itertools.islice(sequence, existing, total), start=existing
    ):
        batch.append(Pair(
            image_1_id=image_ids[i], image_2_id=image_ids[j], video_id=video_id,
            category=CATEGORIES[n % len(CATEGORIES)], domain=domain, source="yt8m", source_id=f"{yt8m_id}_{i}_{j}",
            question="Which image was taken later?", answer="second image", distractors=["first image"],
            similarity=0.9, similarity_model=fingerprint, status="accepted", submitted_at=now, decided_at=now,
        ))  # fmt: skip
        if len(batch) == 5000:
            Pair.objects.bulk_create(batch)
            batch = []
    Pair.objects.bulk_create(batch)


def activate_a_model(folder: Path) -> None:
    """The pairs are scored under the active embedding model (a row): the tiny demo model, built here."""
    from annotator.similarity.services import embedding_model_activate
    from demo.similarity import build_demo_model

    embedding_model_activate(folder=build_demo_model(folder), device="cpu", image_size=224, activated_by="bench")


def run_child(out: Path, env: dict, expected_items: int) -> dict:
    output = subprocess.run(
        [sys.executable, __file__, "--child", str(out)], env=env, check=True, capture_output=True, text=True
    )
    result = json.loads(output.stdout.strip().splitlines()[-1])
    if result["items"] != expected_items:
        sys.exit(f"the export wrote {result['items']} items, not {expected_items}: the figures would mean nothing")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=13_000)
    parser.add_argument("--frames", type=int, default=26_000)
    parser.add_argument("--large", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3, help="Copy/export rounds (medians are reported).")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_export(args.child)
        return

    var = Path(tempfile.mkdtemp(prefix="export-bench-"))
    database_url = bench_database_url()
    name = urlparse(database_url).path.lstrip("/")
    env = {**os.environ, "DATABASE_URL": database_url, "MEDIA_ROOT": str(var / "media"), "VAR_DIR": str(var)}
    os.environ.update(env)
    url = urlparse(database_url)
    subprocess.run(["createdb", "-h", url.hostname, "-p", str(url.port or 5432), "-U", url.username or "postgres",
                    name], capture_output=True)  # fmt: skip
    setup_django()
    from django.core.management import call_command

    try:
        call_command("migrate", verbosity=0)
        call_command("flush", interactive=False, verbosity=0)
        activate_a_model(var / "dinov3")
        started = time.perf_counter()
        generate(var / "media", args.frames // FRAMES_PER_VIDEO)
        add_pairs(args.items)
        print(f"generated {args.frames} frames and {args.items} accepted pairs in {time.perf_counter() - started:.1f}s")

        # Copy and export take turns, each after a `sync`, so neither pays for the other's dirty pages; the
        # medians of a few rounds damp the noise of a shared machine.
        copies, exports = [], []
        for round_ in range(args.rounds):
            subprocess.run(["sync"], check=True)
            cpu_before, started = cpu_seconds(resource.RUSAGE_CHILDREN), time.perf_counter()
            subprocess.run(["cp", "-r", str(var / "media" / "frames"), str(var / "cp-copy")], check=True)
            copies.append(
                {"wall": time.perf_counter() - started, "cpu": cpu_seconds(resource.RUSAGE_CHILDREN) - cpu_before}
            )
            shutil.rmtree(var / "cp-copy")
            subprocess.run(["sync"], check=True)
            exports.append(run_child(var / f"out-{round_}", env, args.items))
            shutil.rmtree(var / f"out-{round_}")
        subprocess.run(["sync"], check=True)
        add_pairs(args.large)
        large = run_child(var / "out-large", env, args.large)

        def median(runs, key):
            return statistics.median(run[key] for run in runs)

        copy, small = median(copies, "wall"), median(exports, "wall")
        for n, (c, e) in enumerate(zip(copies, exports, strict=True), start=1):
            print(
                f"round {n}: cp -r {c['wall']:6.2f} s (cpu {c['cpu']:.2f} s)"
                f"   export {e['wall']:6.2f} s (cpu {e['cpu']:.2f} s, peak RSS {e['rss_peak_kb'] / 1024:.1f} MB)"
            )
        print(f"plain cp -r of {args.frames} frames (median):  {copy:6.2f} s")
        print(f"export of {args.items} items, {exports[0]['images']} images (median): {small:6.2f} s")
        print(f"export / cp -r: {small / copy:.2f}x wall (target <= 1.5x), "
              f"{median(exports, 'cpu') / median(copies, 'cpu'):.2f}x cpu")  # fmt: skip
        small_peak = max(run["rss_peak_kb"] for run in exports)
        for label, peak, before in (
            (args.items, small_peak, exports[0]["rss_before_kb"]),
            (args.large, large["rss_peak_kb"], large["rss_before_kb"]),
        ):
            print(
                f"peak RSS at {label} items: {peak / 1024:6.1f} MB"
                f" (process RSS before the export {before / 1024:.1f} MB)"
            )
        print(f"export of {args.large} items: {large['wall']:.2f} s")
        print(
            f"peak RSS {args.large} vs {args.items}: {large['rss_peak_kb'] / small_peak - 1:+.1%} (target within 20%)"
        )
    finally:
        shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Load test of the video queue: concurrent API clients lease, heartbeat and submit against gunicorn.

Builds its own database (default `sb_picking_bench`: 2,000 sampled videos, 100,000 frames, rows only), starts
`gunicorn subtlebench.wsgi -w 4`, runs the clients for a fixed time, and prints p50/p99 per operation beside
`/healthz` measured in the same run, the error count and the double-lease count. Stops by itself.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/anything python bench/lease_load.py [--seconds 30]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import requests

BASE_DIR = Path(__file__).resolve().parent.parent
CATEGORIES = ["temporal", "quality", "state", "action", "viewpoint"]


def bench_database_url(name: str) -> str:
    parsed = urlparse(os.getenv("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"))
    return urlunparse(parsed._replace(path=f"/{name}"))


def bench_environment(url: str, prefix: str, *, allowed_hosts: str = "127.0.0.1", static: bool = False) -> dict:
    """The settings a bench's gunicorn and its own process run with, set in this process's variables too: the
    database `url`, DEBUG off, a secret of its own, and a media folder (with `static`, a static folder to collect
    into: DEBUG off serves the hashed files) in temporary folders named after `prefix`. Returns the environment for
    the subprocesses."""
    values = {
        "DATABASE_URL": url,
        "DEBUG": "False",
        "SECRET_KEY": "bench-" + uuid.uuid4().hex,
        "ALLOWED_HOSTS": allowed_hosts,
        "SECURE_COOKIES": "False",
        "LOG_LEVEL": "WARNING",
        "MEDIA_ROOT": tempfile.mkdtemp(prefix=f"{prefix}-media-"),
    }
    if static:
        values["STATIC_ROOT"] = tempfile.mkdtemp(prefix=f"{prefix}-static-")
    os.environ.update(values)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")
    return dict(os.environ)


def recreate_database(url: str) -> None:
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = urlunparse(parsed._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def seed(videos: int, frames_per_video: int, clients: int) -> list[str]:
    """Videos, images and frames (bulk rows, empty frame files), annotators with API tokens. Returns the tokens."""
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import Group, User

    from annotator.models import Frame, Image, Video
    from subtlebench.tokens import api_token_create

    created = Video.objects.bulk_create(
        Video(yt8m_id=f"bench{v:05d}", source=f"/v/{v}.mp4", status=Video.Status.SAMPLED, frame_count=frames_per_video)
        for v in range(videos)
    )
    for video in created:
        folder = Path(settings.MEDIA_ROOT) / "frames" / video.yt8m_id
        folder.mkdir(parents=True)
        for i in range(frames_per_video):
            (folder / f"{i:06d}.jpg").touch()
    batch = 100
    for start in range(0, len(created), batch):
        chunk = created[start : start + batch]
        images = Image.objects.bulk_create(
            Image(file=f"frames/{video.yt8m_id}/{i:06d}.jpg", width=640, height=360, source="yt8m")
            for video in chunk
            for i in range(frames_per_video)
        )
        Frame.objects.bulk_create(
            Frame(video=video, index=i, timestamp=i * 1.0, pts=i * 1000, image=images[n * frames_per_video + i])
            for n, video in enumerate(chunk)
            for i in range(frames_per_video)
        )
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # fresh planner statistics, as a long-running database would have
    group = Group.objects.get(name="annotator")
    tokens = []
    for c in range(clients):
        user = User.objects.create_user(f"bench{c:02d}", password="x")
        user.groups.add(group)
        tokens.append(api_token_create(user=user)[1])
    return tokens


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(env: dict, workers: int) -> tuple[subprocess.Popen, str | None]:
    """`gunicorn subtlebench.wsgi` on a free loopback port; its base URL once /healthz answers (None if it never
    does within 30 s: stop it with `stop_gunicorn` either way)."""
    port = free_port()
    gunicorn = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "subtlebench.wsgi", "-w", str(workers), "-b", f"127.0.0.1:{port}"],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if requests.get(base + "/healthz", timeout=1).status_code == 200:
                return gunicorn, base
        except requests.RequestException:
            time.sleep(0.1)
    return gunicorn, None


def stop_gunicorn(gunicorn: subprocess.Popen) -> None:
    gunicorn.terminate()
    try:
        gunicorn.wait(timeout=20)
    except subprocess.TimeoutExpired:
        gunicorn.kill()


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.times: dict[str, list[float]] = {}
        self.errors: list[str] = []
        self.duplicates = 0
        self.double_leases = 0
        self.holders: dict[int, str] = {}
        self.submitted: set[int] = set()

    def add(self, name: str, seconds: float) -> None:
        with self.lock:
            self.times.setdefault(name, []).append(seconds)

    def error(self, text: str) -> None:
        with self.lock:
            self.errors.append(text)


def client(base: str, token: str, name: str, deadline: float, rec: Recorder) -> None:
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    rng = random.Random(name)

    def call(op: str, method: str, path: str, ok=(200,), **kwargs):
        start = time.perf_counter()
        try:
            response = session.request(method, base + path, timeout=30, **kwargs)
        except requests.RequestException as error:
            rec.error(f"{op}: {error}")
            return None
        rec.add(op, time.perf_counter() - start)
        if response.status_code not in ok:
            return response
        return response

    while time.monotonic() < deadline:
        response = call("lease", "POST", "/api/work/lease/")
        if response is None or response.status_code != 200:
            rec.error(f"lease: {response.status_code if response is not None else 'no answer'}")
            continue
        video = response.json()["video"]
        if video is None:
            break
        vid = video["id"]
        with rec.lock:
            if vid in rec.holders:
                rec.double_leases += 1
            rec.holders[vid] = name
        response = call("heartbeat", "POST", f"/api/videos/{vid}/heartbeat/")
        if response is None or response.status_code != 200:
            rec.error(f"heartbeat: {getattr(response, 'status_code', None)}")
        for _ in range(2):
            a, b = rng.sample(range(video["frame_count"]), 2)
            category = rng.choice(CATEGORIES)
            body = {
                "video": vid,
                "index_a": a,
                "index_b": b,
                "category": category,
                "question": "Which image was taken later?" if category == "temporal" else "What changed?",
                "answer": "left" if category == "viewpoint" else "it moved",
                "distractors": ["right"] if category == "viewpoint" else ["it stayed"],
                "answer_frame": rng.choice("ab"),
                "client_key": uuid.uuid4().hex,
            }
            response = call("submit", "POST", "/api/pairs/submit/", ok=(201,), json=body)
            if response is None:
                continue
            if response.status_code == 201:
                with rec.lock:
                    rec.submitted.add(response.json()["id"])
            elif response.status_code == 400 and "already exists" in response.text:
                rec.duplicates += 1  # two clients picked the same frames in one category: a correct refusal
            else:
                rec.error(f"submit: {response.status_code} {response.text[:200]}")
        response = call("healthz", "GET", "/healthz")
        if response is None or response.status_code != 200:
            rec.error("healthz")
        with rec.lock:
            rec.holders.pop(vid, None)  # before the release, so a re-lease after it is never a false alarm
        response = call("release", "POST", f"/api/videos/{vid}/release/", json={"reason": "done"})
        if response is None or response.status_code != 200:
            rec.error(f"release: {getattr(response, 'status_code', None)}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--videos", type=int, default=2000)
    parser.add_argument("--frames-per-video", type=int, default=50)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--database", default="sb_picking_bench")
    args = parser.parse_args()

    url = bench_database_url(args.database)
    # Leasing checks that a video's frame files are there: the seed writes empty ones in the bench's media folder.
    env = bench_environment(url, "lease-load")
    sys.path.insert(0, str(BASE_DIR))

    started = time.monotonic()
    recreate_database(url)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=BASE_DIR, env=env, check=True)
    tokens = seed(args.videos, args.frames_per_video, args.clients)
    print(
        f"seeded {args.videos} videos, {args.videos * args.frames_per_video} frames, {args.clients} annotators "
        f"in {time.monotonic() - started:.1f}s"
    )

    gunicorn, base = start_gunicorn(env, args.workers)
    try:
        if base is None:
            print("gunicorn did not start", file=sys.stderr)
            return 1
        rec = Recorder()
        deadline = time.monotonic() + args.seconds
        threads = [
            threading.Thread(target=client, args=(base, token, f"c{i}", deadline, rec), daemon=True)
            for i, token in enumerate(tokens)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(args.seconds + 60)
    finally:
        stop_gunicorn(gunicorn)
        shutil.rmtree(env["MEDIA_ROOT"], ignore_errors=True)

    from annotator.models import Pair

    stored = Pair.objects.filter(pk__in=rec.submitted).count()
    healthz_p99 = percentile(rec.times.get("healthz", []), 0.99)
    print(f"\n{args.clients} clients, {args.seconds:.0f}s, gunicorn -w {args.workers}, PostgreSQL")
    print(f"{'operation':<10} {'count':>7} {'p50 ms':>8} {'p99 ms':>8} {'p99 / healthz p99':>18}")
    for op in ("lease", "heartbeat", "submit", "release", "healthz"):
        values = rec.times.get(op, [])
        p50, p99 = percentile(values, 0.5) * 1000, percentile(values, 0.99) * 1000
        print(f"{op:<10} {len(values):>7} {p50:>8.1f} {p99:>8.1f} {p99 / 1000 / healthz_p99:>18.2f}")
    print(f"mean healthz {statistics.mean(rec.times.get('healthz', [0])) * 1000:.1f} ms")
    print(f"errors: {len(rec.errors)}  double leases: {rec.double_leases}  duplicate-frame refusals: {rec.duplicates}")
    print(f"pairs created: {len(rec.submitted)} (stored: {stored})")
    for text in rec.errors[:10]:
        print("  error:", text)
    return 1 if rec.errors or rec.double_leases else 0


if __name__ == "__main__":
    sys.exit(main())

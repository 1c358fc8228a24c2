"""Data manager bench: the pairs table under load, and a bulk accept of 10,000 pairs through a real worker.

Builds its own database (default `sb_dmbench`): 100,000 pairs, 5,000 videos and 20,000 captions (bulk rows, no
image files), starts `gunicorn subtlebench.wsgi`, and runs 8 concurrent clients that each alternate the pairs table
filtered on three columns plus a full-text search (random words, random sorts and pages) with `/healthz`, the trivial
endpoint, in the same run. Prints p50/p99 of both and their ratio (target: p99 at most 3x the trivial one's), the
SQL queries of one table page (target: at most 10), then starts `celery worker` and runs a bulk accept of the
10,000 pairs the filter `status=submitted&category=state` matches, printing its throughput (items/s).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/anything CELERY_BROKER_URL=redis://127.0.0.1:6379/5 \
        python bench/data_manager.py [--seconds 30] [--clients 8]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import requests

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.lease_load import (  # noqa: E402
    bench_database_url,
    bench_environment,
    percentile,
    recreate_database,
    start_gunicorn,
    stop_gunicorn,
)
from benchmark.taxonomy import DOMAINS as TAXONOMY_DOMAINS  # noqa: E402

WORDS = (
    "cup mug apple door window car person dog cat tree lamp chair table bottle phone book road sky cloud boat "
    "bridge screen player sword house wall light shadow hand face bag box shelf plate ball bike sign flag"
).split()
OTHER_CATEGORIES = ["temporal", "viewpoint", "action", "quality", "attribute", "spatial", "existence", "quantity"]
STATUSES = ["submitted", "accepted", "rejected"]
DOMAINS = list(TAXONOMY_DOMAINS)
FINGERPRINT = "bench-dinov3"
BULK_PAIRS = 10_000


def question(rng: random.Random) -> str:
    return f"What changed about the {rng.choice(WORDS)} near the {rng.choice(WORDS)}?"


def seed(*, pairs: int, videos: int, captions: int, seed_value: int = 7) -> None:
    """Rows only, in bulk: users, videos with two frames each, pairs (the first BULK_PAIRS submitted `state`
    pairs, the rest never both), reviews of the decided ones, captions of accepted ones, an active model row."""
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.utils import timezone

    from annotator.models import Caption, EmbeddingModel, Frame, Image, Pair, Review, Video

    rng = random.Random(seed_value)
    EmbeddingModel.objects.create(
        fingerprint=FINGERPRINT, dim=8, layers=1, dtype="fp32", image_size=224, folder="/bench", active=True
    )
    annotator, reviewer, coordinator = (Group.objects.get(name=n) for n in ("annotator", "reviewer", "coordinator"))
    people = []
    for n in range(20):
        user = User.objects.create_user(f"annotator{n:02d}", password="bench")
        user.groups.add(annotator)
        people.append(user)
    reviewers = []
    for n in range(3):
        user = User.objects.create_user(f"reviewer{n}", password="bench")
        user.groups.add(reviewer)
        reviewers.append(user)
    boss = User.objects.create_user("coordinator", password="bench")
    boss.groups.add(coordinator, reviewer)

    created = Video.objects.bulk_create(
        (
            Video(
                yt8m_id=f"dm{v:05d}",
                title=f"{rng.choice(WORDS)} video {v}",
                source=f"/v/{v}.mp4",
                status=Video.Status.SAMPLED,
                frame_count=2,
                domain=DOMAINS[v % 2],
            )
            for v in range(videos)
        ),
        batch_size=2000,
    )
    images = Image.objects.bulk_create(
        (
            Image(
                file=f"frames/{video.yt8m_id}/{i:06d}.jpg",
                thumbnail=f"thumbs/{video.yt8m_id}/{i:06d}.jpg",
                width=640,
                height=360,
                source="yt8m",
            )
            for video in created
            for i in range(2)
        ),
        batch_size=5000,
    )
    Frame.objects.bulk_create(
        (
            Frame(video=video, index=i, timestamp=float(i), pts=i * 1000, image=images[2 * n + i])
            for n, video in enumerate(created)
            for i in range(2)
        ),
        batch_size=5000,
    )
    now = timezone.now()
    rows = []
    bulk = min(BULK_PAIRS, pairs // 2)  # at most half: a small run still has decided pairs to caption
    for p in range(pairs):
        if p < bulk:
            status, category = "submitted", "state"
        else:
            status = rng.choice(STATUSES)
            category = rng.choice(OTHER_CATEGORIES if status == "submitted" else [*OTHER_CATEGORIES, "state"])
        v = rng.randrange(videos)
        # 1% below the similarity bar: the bulk accept refuses them and says why.
        similarity = rng.uniform(0.5, 0.79) if rng.random() < 0.01 else rng.uniform(0.8, 1.0)
        rows.append(
            Pair(
                image_1=images[2 * v],
                image_2=images[2 * v + 1],
                video=created[v],
                category=category,
                domain=created[v].domain,
                source="yt8m",
                source_id=f"dm{p}",
                question=question(rng),
                answer="it moved",
                distractors=["it stayed"],
                similarity=similarity,
                similarity_model=FINGERPRINT,
                status=status,
                author=people[p % len(people)],
                created=now - timedelta(minutes=p),
                submitted_at=now,
                decided_at=now if status != "submitted" else None,
            )
        )
    made = Pair.objects.bulk_create(rows, batch_size=5000)
    decided = [pair for pair in made if pair.status != "submitted"]
    Review.objects.bulk_create(
        (
            Review(
                pair=pair,
                reviewer=reviewers[pair.pk % 3],
                decision="accept" if pair.status == "accepted" else "reject",
                reason="" if pair.status == "accepted" else "not subtle",
            )
            for pair in decided
        ),
        batch_size=5000,
    )
    accepted = [pair for pair in decided if pair.status == "accepted"]
    Caption.objects.bulk_create(
        (
            Caption(
                pair=accepted[n % len(accepted)],
                author=people[n % len(people)],
                status="accepted",
                text=f"The {rng.choice(WORDS)} moved closer to the {rng.choice(WORDS)} in the second image.",
            )
            for n in range(captions)
        ),
        batch_size=5000,
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def table_url(rng: random.Random) -> str:
    status = rng.choice(STATUSES)
    category = rng.choice([*OTHER_CATEGORIES, "state"])
    domain = rng.choice(DOMAINS)
    sort = rng.choice(["-id", "similarity", "-created", "question", "-reviewer"])
    page = rng.choice([1, 1, 1, 2, 3])
    words = rng.choice(WORDS)
    return f"/tables/pairs/?status={status}&category={category}&domain={domain}&q={words}&sort={sort}&page={page}"


def login(base: str) -> requests.Session:
    session = requests.Session()
    session.get(base + "/accounts/login/", timeout=30)
    token = session.cookies.get("csrftoken")
    response = session.post(
        base + "/accounts/login/",
        data={"username": "coordinator", "password": "bench", "csrfmiddlewaretoken": token},
        headers={"Referer": base + "/accounts/login/"},
        timeout=30,
    )
    response.raise_for_status()
    if "sessionid" not in session.cookies:
        raise RuntimeError("the bench coordinator could not log in")
    return session


def client(base: str, session, name: str, label: str, page, deadline: float, times: dict, errors: list, lock) -> None:
    rng = random.Random(name)
    while time.monotonic() < deadline:
        for op, path in ((label, page(rng)), ("healthz", "/healthz")):
            start = time.perf_counter()
            try:
                response = session.get(base + path, timeout=30)
            except requests.RequestException as error:
                with lock:
                    errors.append(f"{op}: {error}")
                continue
            elapsed = time.perf_counter() - start
            with lock:
                times.setdefault(op, []).append(elapsed)
                if response.status_code != 200:
                    errors.append(f"{op}: {response.status_code} {path}")


def beside_healthz(base: str, sessions: list, *, label: str, page, seconds: float, workers: int) -> None:
    """Each session a client that alternates `label` (the path page(rng) gives) with `/healthz` for `seconds`; prints
    the p50 and p99 of both and the ratio of the p99s (target: at most 3)."""
    times: dict[str, list[float]] = {}
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    threads = [
        threading.Thread(
            target=client, args=(base, session, f"c{i}", label, page, deadline, times, errors, lock), daemon=True
        )
        for i, session in enumerate(sessions)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 60)
    print(f"{len(sessions)} clients, {seconds:.0f} s, gunicorn -w {workers}:")
    for op in (label, "healthz"):
        values = times.get(op, [])
        print(
            f"  {op:12s} n={len(values):5d}  p50={percentile(values, 0.5) * 1000:7.1f} ms  "
            f"p99={percentile(values, 0.99) * 1000:7.1f} ms"
        )
    print(f"  errors: {len(errors)} {errors[:3]}")
    if times.get(label) and times.get("healthz"):
        ratio = percentile(times[label], 0.99) / percentile(times["healthz"], 0.99)
        print(f"  p99 ratio {label} / healthz: {ratio:.2f} (target <= 3)")


def queries_per_page() -> tuple[int, int]:
    """The SQL queries of one pairs-table page (filtered on three columns and searched), and its rows."""
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    browser = Client(SERVER_NAME="127.0.0.1")
    browser.force_login(User.objects.get(username="coordinator"))
    url = "/tables/pairs/?status=accepted&category=temporal&domain=natural&q=cup&sort=-similarity"
    browser.get(url)
    with CaptureQueriesContext(connection) as queries:
        response = browser.get(url)
    assert response.status_code == 200, response.status_code
    return len(queries), response.content.decode().count('name="ids"')


def run_bulk(base: str, env: dict) -> None:
    from django.contrib.auth.models import User

    from annotator.models import Job
    from subtlebench.tokens import api_token_create

    _, key = api_token_create(user=User.objects.get(username="coordinator"), name="bench")
    log = open(Path(tempfile.gettempdir()) / f"dm-bench-worker-{uuid.uuid4().hex[:6]}.log", "w+")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "subtlebench",
            "worker",
            "-Q",
            "default",
            "--pool",
            "prefork",
            "--concurrency",
            "2",
            "--loglevel",
            "WARNING",
            "--without-mingle",
            "--without-gossip",
            "--hostname",
            f"dmbench{uuid.uuid4().hex[:6]}@%h",
        ],
        cwd=BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        time.sleep(3)
        started = time.monotonic()
        response = requests.post(
            base + "/api/pairs/bulk/",
            json={"filter": {"status": "submitted", "category": "state"}, "action": "accept"},
            headers={"Authorization": f"Token {key}"},
            timeout=120,
        )
        assert response.status_code == 202, response.text
        job_id = response.json()["id"]
        answered = time.monotonic() - started
        while True:
            job = Job.objects.get(pk=job_id)
            if not job.is_active:
                break
            if time.monotonic() - started > 900:
                print(f"bulk job {job_id} still {job.status} after 900 s: {job.done}/{job.total}")
                return
            time.sleep(0.5)
        elapsed = time.monotonic() - started
        print(
            f"bulk accept: {job.total} pairs, job {job.status} in {elapsed:.1f} s (the API answered 202 in "
            f"{answered * 1000:.0f} ms): {job.total / elapsed:.0f} items/s; accepted {job.result.get('ok')}, "
            f"refused {job.result.get('refused')} (below the similarity bar), e.g. {job.errors[:1]}"
        )
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
        log.close()


def landing_query_times(repeat: int = 5) -> None:
    """The pairs table's first page (the landing page: no filter, `-id`) and its newest-first sort, as PostgreSQL
    runs them (EXPLAIN ANALYZE, the median of `repeat`): ordered as the table orders them, and with NULLS LAST on the
    non-null column as the table ordered them before (which keeps PostgreSQL off the index)."""
    from django.db import connection
    from django.db.models import F

    from annotator.datamanager.tables import PAGE_SIZE, PAIRS

    for sort, column in (("-id", "pk"), ("-created", "created")):
        state = PAIRS.parse({"sort": sort})
        unordered = PAIRS.queryset(state, ordered=False)
        for label, rows in (
            ("NULLS LAST", unordered.order_by(F(column).desc(nulls_last=True), "-pk")),
            ("as the table orders", PAIRS.queryset(state)),
        ):
            sql, params = rows[:PAGE_SIZE].query.sql_with_params()
            spent = []
            for _ in range(repeat):
                with connection.cursor() as cursor:
                    cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
                    spent.append(cursor.fetchone()[0][0]["Execution Time"])
            print(f"pairs table, sort {sort}, {label}: {sorted(spent)[repeat // 2]:.1f} ms (query, median of {repeat})")


def seeded_world(url: str, env: dict, *, reuse: bool, pairs: int, videos: int, captions: int) -> None:
    """The static files collected for gunicorn, then the database at `url` made afresh (migrated, `seed`) or, with
    `reuse`, the one a previous run seeded; Django set up in this process either way."""
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=BASE_DIR, env=env, check=True
    )
    if reuse:
        import django

        django.setup()
        return
    started = time.monotonic()
    recreate_database(url)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=BASE_DIR, env=env, check=True)
    seed(pairs=pairs, videos=videos, captions=captions)
    print(
        f"seeded {pairs} pairs, {videos} videos, {captions} captions in {time.monotonic() - started:.1f} s "
        "(with the migrations)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--videos", type=int, default=5_000)
    parser.add_argument("--captions", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--database", default="sb_dmbench")
    parser.add_argument("--reuse", action="store_true", help="keep the database a previous run seeded")
    parser.add_argument("--landing-only", action="store_true", help="only the landing page's query, then stop")
    args = parser.parse_args()

    url = bench_database_url(args.database)
    env = bench_environment(url, "dm-bench", static=True)

    seeded_world(url, env, reuse=args.reuse, pairs=args.pairs, videos=args.videos, captions=args.captions)
    landing_query_times()
    if args.landing_only:
        return 0
    queries, rows = queries_per_page()
    print(f"SQL queries per pairs-table page (3 filters + search, {rows} rows): {queries} (target <= 10)")

    gunicorn, base = start_gunicorn(env, args.workers)
    try:
        if base is None:
            print("gunicorn did not start", file=sys.stderr)
            return 1
        sessions = [login(base) for _ in range(args.clients)]  # before the clock starts
        beside_healthz(base, sessions, label="pairs table", page=table_url, seconds=args.seconds, workers=args.workers)
        run_bulk(base, env)
    finally:
        stop_gunicorn(gunicorn)
    return 0


if __name__ == "__main__":
    sys.exit(main())

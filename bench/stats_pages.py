"""Team analytics (/stats/) and the overview (/overview/) at 100,000 pairs, beside the code they replaced; the pairs
table's landing page beside `/healthz` under concurrent clients.

Builds the data manager bench's world (bench/data_manager.py `seed`: 100,000 pairs, 5,000 videos, 20,000 captions,
every pair submitted and decided today, so the 14-day window of /stats/ holds all of them: its worst case), then:

1. the figures of /stats/ (`team_figures` and `drafting_figures`) and of /overview/ (`overview_figures`) as the app
   computes them now and as the anchor computed them (the same functions read from git at ANCHOR, the commit before
   they were grouped: one GROUP BY per page part in place of a query per figure), the median wall time and the
   process's CPU of `--repeat` calls each, the SQL queries of one call, and whether both give the same figures;
2. both pages whole through the test client (wall, CPU, queries);
3. gunicorn and `--clients` concurrent clients that alternate the pairs table's landing page (`/tables/pairs/`: no
   filter, the default sort) with `/healthz`: p50/p99 of both and the ratio of the p99s (target: at most 3).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/anything python bench/stats_pages.py [--pairs 100000]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.data_manager import beside_healthz, login, seeded_world  # noqa: E402
from bench.lease_load import (  # noqa: E402
    bench_database_url,
    bench_environment,
    start_gunicorn,
    stop_gunicorn,
)

# The last commit whose /stats/ and /overview/ figures were one query per figure over every pair: the anchor.
ANCHOR = "10cd26e"


def anchor_module(path: str, name: str):
    """The module at `path` as it was at ANCHOR (git show), loaded under another name: the old functions, run on the
    same database in the same process as the new ones."""
    source = subprocess.run(
        ["git", "show", f"{ANCHOR}:{path}"], cwd=BASE_DIR, check=True, capture_output=True, text=True
    ).stdout
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{ANCHOR}:{path}", "exec"), module.__dict__)
    return module


def comparable(figures):
    """The figures with the order of the active times left out (a median's input; the anchor's order was the
    database's), and the team settings row as its values."""
    if isinstance(figures, dict):
        return {key: sorted(value) if key == "active_ms" else comparable(value) for key, value in figures.items()}
    if isinstance(figures, list | tuple):
        return [comparable(value) for value in figures]
    if hasattr(figures, "_meta"):
        return (figures._meta.label, figures.pk)
    return figures


def measure(function, repeat: int) -> tuple[float, float, int, object]:
    """Median wall and CPU (this process) seconds of `repeat` calls, the SQL queries of one, and its result."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    walls, cpus = [], []
    with CaptureQueriesContext(connection) as queries:
        result = function()
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), len(queries), result


def figures_side_by_side(repeat: int) -> bool:
    from annotator.picking import services as picking
    from annotator.stats import figures
    from annotator.stats.drafting import drafting_figures

    old_figures = anchor_module("annotator/stats/figures.py", "anchor_stats_figures")
    old_drafting = anchor_module("annotator/stats/drafting.py", "anchor_stats_drafting")
    old_picking = anchor_module("annotator/picking/services.py", "anchor_picking_services")
    same = True
    print(f"figures, median of {repeat} calls (wall; CPU of this process), queries of one call:")
    for label, new, old in (
        (
            "/stats/ team_figures(14 days)",
            lambda: figures.team_figures(days=14),
            lambda: old_figures.team_figures(days=14),
        ),
        ("/stats/ drafting_figures", drafting_figures, old_drafting.drafting_figures),
        ("/overview/ overview_figures", picking.overview_figures, old_picking.overview_figures),
    ):
        before = measure(old, repeat)
        after = measure(new, repeat)
        identical = comparable(before[3]) == comparable(after[3])
        same = same and identical
        print(
            f"  {label:32s} anchor {before[0] * 1000:7.1f} ms wall {before[1] * 1000:6.1f} ms CPU {before[2]:2d} q"
            f"  | now {after[0] * 1000:7.1f} ms wall {after[1] * 1000:6.1f} ms CPU {after[2]:2d} q"
            f"  | x{before[0] / after[0]:.1f} wall, same figures: {'yes' if identical else 'NO'}"
        )
    return same


def pages(repeat: int) -> None:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    browser = Client(SERVER_NAME="127.0.0.1")
    browser.force_login(User.objects.get(username="coordinator"))
    print(f"pages through the test client, median of {repeat}:")
    for url in ("/stats/", "/overview/", "/tables/pairs/"):
        browser.get(url)
        queries: list[str] = []

        def counted(execute, sql, params, many, context, queries=queries):
            queries.append(sql)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(counted):
            assert browser.get(url).status_code == 200, url
        walls, cpus = [], []
        for _ in range(repeat):
            wall, cpu = time.perf_counter(), time.process_time()
            browser.get(url)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        print(
            f"  {url:16s} {statistics.median(walls) * 1000:7.1f} ms wall {statistics.median(cpus) * 1000:6.1f} ms CPU"
            f" {len(queries):2d} queries"
        )


def under_load(env: dict, *, workers: int, clients: int, seconds: float) -> None:
    gunicorn, base = start_gunicorn(env, workers)
    try:
        if base is None:
            print("gunicorn did not start", file=sys.stderr)
            return
        sessions = [login(base) for _ in range(clients)]
        for session in sessions:  # warm every worker's connection and templates before the clock starts
            session.get(base + "/tables/pairs/", timeout=30)
        beside_healthz(
            base, sessions, label="landing page", page=lambda rng: "/tables/pairs/", seconds=seconds, workers=workers
        )
    finally:
        stop_gunicorn(gunicorn)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--videos", type=int, default=5_000)
    parser.add_argument("--captions", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--database", default="sb_statsbench")
    parser.add_argument("--reuse", action="store_true", help="keep the database a previous run seeded")
    args = parser.parse_args()

    url = bench_database_url(args.database)
    env = bench_environment(url, "stats-bench", allowed_hosts="127.0.0.1,testserver", static=True)
    seeded_world(url, env, reuse=args.reuse, pairs=args.pairs, videos=args.videos, captions=args.captions)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")  # what autovacuum leaves a table in: visibility map set, statistics fresh
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    same = figures_side_by_side(args.repeat)
    pages(args.repeat)
    under_load(env, workers=args.workers, clients=args.clients, seconds=args.seconds)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

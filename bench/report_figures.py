"""The release report's figures at scale, each beside its anchor in one run.

1. No Django: `micro_mean` of N items, and the whole report (humans on 10% of the items, two models) from integer
   sums against the item-by-item Fraction report they replaced (tests/benchmark/test_integer_sums.py's anchor), both
   results compared (they must be identical).
2. With a database (DATABASE_URL set; its own database, the URL's name + "_report", made afresh): the same world
   stored as a release, a study and two runs, and the report page as a coordinator gets it: the first view after a
   human answer was given (the humans' row and both gap rows summed again; the model rows kept), the first view with
   nothing kept (every row summed again, as after the cache was emptied), a repeat view and a download, each the
   least of three, in CPU seconds of this process (the database's own work is not in it: the view's wall time is
   printed too), beside the anchor: the old reading of every answer and the item-by-item report. The page's report
   is compared with the anchor's. With --profile, the first view's cProfile in CPU seconds (the 15 costliest
   functions by their own time, the project's 25 by cumulative time).

Statistics: by default the whole database is ANALYZEd after the load (as autovacuum keeps a live database); with
--no-analyze, only what the app's paths ANALYZE after their bulk writes (a release's items, a run's results:
subtlebench.planner), as right after a run ends; with --no-app-analyze as well, nothing (the planner blind: before).

Run: python bench/report_figures.py [--items 50000] [--no-database] [--profile] [--no-analyze] [--no-app-analyze]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from fractions import Fraction
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmark import intervals  # noqa: E402
from benchmark import report as reports  # noqa: E402
from benchmark.intervals import Scored  # noqa: E402
from benchmark.taxonomy import CATEGORIES, DOMAINS  # noqa: E402
from tests.benchmark.test_integer_sums import fraction_micro_mean, item_by_item_report  # noqa: E402


def cpu(function, *args, repeat: int = 3, **kwargs):
    best, result = None, None
    for _ in range(repeat):
        started = time.process_time()
        result = function(*args, **kwargs)
        spent = time.process_time() - started
        best = spent if best is None else min(best, spent)
    return best, result


def world(n: int):
    """N items (about two a video), humans on every tenth with 2 or 3 raters, two models on every item."""
    rng = random.Random(0)
    clusters = [f"video{rng.randrange(n // 2)}" for _ in range(n)]
    items = [(f"i{i}", rng.choice(CATEGORIES), rng.choice(DOMAINS), clusters[i]) for i in range(n)]
    humans = []
    for i in range(0, n, 10):  # a study of 10% of the items, two or three raters each
        for rater in range(rng.randint(2, 3)):
            humans.append((f"i{i}", f"r{rng.randrange(200)}-{rater}", rng.random() < 0.9))
    models = {label: [(f"i{i}", rng.random() < p) for i in range(n)] for label, p in (("a", 0.7), ("b", 0.6))}
    return items, humans, models


def bench_database_url() -> str:
    url = urlparse(os.environ["DATABASE_URL"])
    return urlunparse(url._replace(path=f"/{url.path.lstrip('/')}_report"))


def recreate_database(url: str) -> None:
    import psycopg

    parts = urlparse(url)
    with psycopg.connect(urlunparse(parts._replace(path="/postgres")), autocommit=True) as connection:
        connection.execute(f'drop database if exists "{parts.path[1:]}" with (force)')
        connection.execute(f'create database "{parts.path[1:]}"')


def store(items, humans, models, *, app_analyze: bool = True):
    """The world as a release (all items in its test split), a study with its participants' answers, two finished
    runs of one model under two strategies; returns the release and the runs. With `app_analyze`, the release's
    items and each run's results ANALYZEd once written, as the app's paths do (subtlebench.planner)."""
    from django.utils import timezone

    from annotator.models import Job, Pair, Release, ReleaseItem
    from evaluation.models import Assignment, ModelEvaluation, ModelItemResult, Participant, Study, StudyItem
    from subtlebench.planner import analyze_on_commit
    from tests.factories import make_pair
    from tests.model_fixtures import make_endpoint

    pair, now = make_pair(), timezone.now()
    release = Release.objects.create(number=1, manifest_sha256="0" * 64, content_sha256="1" * 64, card="# card\n")
    ReleaseItem.objects.bulk_create(
        (
            ReleaseItem(release=release, item_id=item_id, split="test", position=n, line="{}", provenance="{}",
                        category=category, domain=domain, cluster=cluster, image_1=pair.image_1,
                        image_2=pair.image_2, image_1_sha256="a" * 64, image_2_sha256="b" * 64, pair=pair)
            for n, (item_id, category, domain, cluster) in enumerate(items, 1)
        ),
        batch_size=5000,
    )  # fmt: skip
    if app_analyze:
        analyze_on_commit(ReleaseItem)  # as a release's making does
    row_of = dict(release.items.values_list("item_id", "pk"))
    study = Study.objects.create(name="Humans", release=release, raters_per_item=3, practice_count=0)
    answered = sorted({item_id for item_id, _, _ in humans})
    fields = {f.attname: getattr(pair, f.attname) for f in Pair._meta.concrete_fields if f.attname != "id"}
    pairs = Pair.objects.bulk_create(  # a study holds a pair once
        (Pair(**fields | {"source_id": f"{pair.source_id}-{n}"}) for n in range(len(answered))), batch_size=5000
    )
    study_items = StudyItem.objects.bulk_create(
        (
            StudyItem(study=study, pair=study_pair, release_item_id=row_of[item_id], category="state",
                      domain="natural", position=n)
            for n, (item_id, study_pair) in enumerate(zip(answered, pairs, strict=True), 1)
        ),
        batch_size=5000,
    )  # fmt: skip
    study_item = {item_id: item for item_id, item in zip(answered, study_items, strict=True)}
    raters = sorted({rater for _, rater, _ in humans})
    made = Participant.objects.bulk_create(Participant(study=study) for _ in raters)
    participants = dict(zip(raters, made, strict=True))
    Assignment.objects.bulk_create(
        (
            Assignment(participant=participants[rater], item=study_item[item_id], sequence=n, permutation=[0, 1],
                       served_at=now, lease_expires=now, answered_at=now, chosen=0, correct=correct)
            for n, (item_id, rater, correct) in enumerate(humans, 1)
        ),
        batch_size=5000,
    )  # fmt: skip
    model, runs = make_endpoint("gpt-x"), []
    for strategy, label in (("standard", "a"), ("grid", "b")):
        job = Job.objects.create(kind=Job.Kind.MODEL_EVAL, title="Evaluate gpt-x", status=Job.Status.SUCCEEDED)
        run = ModelEvaluation.objects.create(endpoint=model, job=job, source=ModelEvaluation.Source.RELEASE,
                                             release=release, split="test", strategy=strategy)  # fmt: skip
        ModelItemResult.objects.bulk_create(
            (
                ModelItemResult(evaluation=run, release_item_id=row_of[item_id], question_id=item_id,
                                category="state", domain="natural", correct_letter="A",
                                predicted_letter="A" if correct else "B", is_correct=correct)
                for item_id, correct in models[label]
            ),
            batch_size=5000,
        )  # fmt: skip
        if app_analyze:
            analyze_on_commit(ModelItemResult)  # as a run's end does
        runs.append(run)
    return release, runs


def views(n: int, *, profile: bool = False, analyze: bool = True, app_analyze: bool = True) -> None:
    """The report page at n items: the first view after an answer was given, a repeat view, a download; the anchor."""
    url = bench_database_url()
    recreate_database(url)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.cache import cache
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from evaluation.models import Assignment
    from evaluation.results.release_report import release_report_of
    from evaluation.results.report import _split_items
    from evaluation.runs.selectors import model_answers_on_release, report_runs
    from evaluation.studies.release_answers import human_answers_on_release
    from subtlebench.roles import COORDINATOR

    call_command("migrate", verbosity=0)
    items, humans, models = world(n)
    started = time.perf_counter()
    release, runs = store(items, humans, models, app_analyze=app_analyze)
    print(f"stored {n} items, {len(humans)} human answers, 2 runs in {time.perf_counter() - started:.0f} s")
    # Statistics, as autovacuum keeps them on a live database: right after the bulk load the tables have none, and
    # the planner joins 50,000 results as if they were a handful (the first view took 75 s of database time here).
    if analyze:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    user = User.objects.create_user("coordinator")
    user.groups.add(Group.objects.get_or_create(name=COORDINATOR)[0])
    client = Client()
    client.force_login(user)
    page = f"/releases/{release.name}/report/test/"

    def view(path: str = page) -> tuple[float, float]:
        cpu, wall = time.process_time(), time.perf_counter()
        response = client.get(path)
        assert response.status_code == 200, response.status_code
        return time.process_time() - cpu, time.perf_counter() - wall

    def answer_again() -> None:  # an answer given again: the humans' stamp moves, so every row is summed anew
        last = Assignment.objects.order_by("-pk").first()
        Assignment.objects.filter(pk=last.pk).delete()
        last.pk = None
        last.save()

    def least(before) -> tuple[float, float]:  # the least CPU of three views, each after before()
        spent = []
        for _ in range(3):
            before()
            spent.append(view())
        return min(spent)

    very_first, very_first_wall = view()  # the first request of the process (imports, templates), every row summed
    print(f"statistics: {'the whole database ANALYZEd' if analyze else 'no ANALYZE of the whole database'}, "
          f"{'the app ANALYZEs its bulk writes' if app_analyze else 'none of the app either'}; the very first view "
          f"(every row summed right after the load; the process's imports too) {very_first:.3f} CPU-s "
          f"({very_first_wall:.2f} s wall)")  # fmt: skip
    first, first_wall = least(answer_again)
    cold, cold_wall = least(cache.clear)
    repeat, repeat_wall = least(lambda: None)
    if profile:
        import cProfile
        import pstats

        answer_again()
        profiler = cProfile.Profile(time.process_time)  # CPU seconds of this process, as the figures
        profiler.runcall(view)
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(15)
        stats.sort_stats("cumulative").print_stats(r"/(benchmark|evaluation|annotator|subtlebench)/", 25)
    download = min(view(f"{page}{release.name}-test-report.csv")[0] for _ in range(3))

    def anchor():
        shown = report_runs(release, "test")
        answers = model_answers_on_release(release, shown)
        split_items, _ = _split_items(release, "test")
        return item_by_item_report(
            release=release.name,
            release_hash=release.content_sha256,
            split="test",
            items=split_items,
            humans=human_answers_on_release(release),
            models=answers,
        )

    old, expected = cpu(anchor, repeat=1)
    identical = release_report_of(release, split="test") == expected
    print(f"the report page at {n} items (humans on {len(humans)} answers, 2 runs): first view after an answer "
          f"{first:.3f} CPU-s ({first_wall:.2f} s wall), first view with nothing kept {cold:.3f} CPU-s "
          f"({cold_wall:.2f} s wall), repeat view {repeat:.3f} CPU-s ({repeat_wall:.2f} s wall), "
          f"a download {download:.3f} CPU-s; anchor (every answer read, the report item by item) {old:.2f} CPU-s; "
          f"identical figures: {identical}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=50000)
    parser.add_argument("--no-database", action="store_true", help="the figures without Django only")
    parser.add_argument("--profile", action="store_true", help="print the first view's cProfile")
    parser.add_argument(
        "--no-analyze",
        action="store_true",
        help="no ANALYZE of the whole database after the load: the planner has only what the app's paths ANALYZE",
    )
    parser.add_argument(
        "--no-app-analyze",
        action="store_true",
        help="nor the ANALYZE the app's paths run after their bulk writes (release items, run results)",
    )
    args = parser.parse_args()
    n = args.items
    items, humans, models = world(n)
    rng = random.Random(1)
    scored = [Scored(Fraction(rng.randint(0, 1)), cluster, category) for _, category, _, cluster in items]
    old, old_mean = cpu(fraction_micro_mean, scored)
    new, new_mean = cpu(intervals.micro_mean, scored)
    print(f"micro_mean of {n} items: Fraction sums {1000 * old:.1f} ms CPU, integer sums {1000 * new:.1f} ms CPU; "
          f"identical: {old_mean == new_mean}")  # fmt: skip
    arguments = {"release": "v1", "release_hash": "h", "split": "test", "items": items, "humans": humans}
    new, integer = cpu(reports.compute_report, **arguments, models=models, repeat=1)
    old, fraction = cpu(item_by_item_report, **arguments, models=models, repeat=1)
    print(f"the report of {n} items from plain data (humans on {len(humans)} answers, 2 models): item by item "
          f"{old:.2f} CPU-s, integer sums {new:.2f} CPU-s; identical figures: {integer == fraction}")  # fmt: skip
    if not args.no_database and os.environ.get("DATABASE_URL"):
        views(n, profile=args.profile, analyze=not args.no_analyze, app_analyze=not args.no_app_analyze)
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

"""The release report of one release's split, from its frozen items and the answers given on them: the glue between
the database and benchmark.report (which computes it) and benchmark.figure. It reads only the release's items, never
the live pairs, so a correction made after the release changes nothing here."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Max

from annotator.models import Release, ReleaseItem
from benchmark.figure import gap_svg
from benchmark.intervals import Sums
from benchmark.records import SPLITS
from benchmark.report import (
    HUMANS,
    OVERALL,
    Report,
    RowSums,
    checked_items,
    compute_report,
    report_csv,
    report_json,
    report_latex,
    report_markdown,
    report_of_rows,
    row_of,
    row_sums,
    scores_of_humans,
    scores_of_model,
    scores_paired,
)
from benchmark.strategy_table import (
    StrategyTable,
    compute_strategy_table,
    strategy_table_csv,
    strategy_table_latex,
    strategy_table_markdown,
    strategy_table_of_rows,
)
from evaluation.models import Assignment, ModelItemResult, StudyItem
from evaluation.results.raster import gap_png
from evaluation.runs.naming import run_names

# Each file of the report: its name after the release and split, how it is written, its content type.
REPORT_FILES = (
    ("report.csv", report_csv, "text/csv; charset=utf-8"),
    ("report.json", report_json, "application/json; charset=utf-8"),
    ("report.md", report_markdown, "text/markdown; charset=utf-8"),
    ("report.tex", report_latex, "application/x-tex; charset=utf-8"),
    ("gaps.svg", gap_svg, "image/svg+xml"),
    ("gaps.png", gap_png, "image/png"),
)
FIGURE_WRITERS = (gap_svg, gap_png)


def _item_of(entry) -> str | None:
    return entry[0] if isinstance(entry, tuple | list) and entry else None


def release_report(
    release: Release,
    *,
    human_answers: Iterable,
    model_answers: Mapping[str, Iterable],
    split: str = "test",
    humans_label: str = HUMANS,
) -> Report:
    """The report of humans and models on `release`'s `split`.

    human_answers: [(item_id, rater_key, is_correct)] (evaluation.studies.release_answers.human_answers_on_release);
    model_answers: {label: [(item_id, is_correct)]} (evaluation.runs.selectors.model_answers_on_release).
    Answers on the release's items of the other split are left out (a model run may cover both splits); an answer
    on an id the release does not hold, or a second answer, is refused with benchmark.report.ReportInputError.
    """
    items, on_split = _split_items(release, split)
    return compute_report(
        release=release.name,
        release_hash=release.content_sha256,
        split=split,
        items=items,
        humans=on_split(human_answers),
        models={label: on_split(answers) for label, answers in model_answers.items()},
        humans_label=humans_label,
    )


REPORT_CACHE_SECONDS = 7 * 24 * 3600  # a key names what the figures stand on: a stale one is never read, only aged out


def answers_stamp(release: Release, runs) -> tuple[tuple, dict[int, tuple]]:
    """What a release's report stands on, besides the release (frozen) and the runs: the latest human answer on it
    (the highest id, the number and the last time) and, per run, its latest result (the highest id and the number),
    in two queries. Any answer given, replaced or taken back moves it."""
    humans = Assignment.objects.filter(
        item__study__release=release,
        item__kind=StudyItem.Kind.SCORED,
        item__release_item__release=release,
        answered_at__isnull=False,
    ).aggregate(last=Max("pk"), n=Count("pk"), at=Max("answered_at"))
    models = (
        ModelItemResult.objects.filter(evaluation__in=[run.pk for run in runs])
        .order_by()
        .values("evaluation_id")
        .annotate(last=Max("pk"), n=Count("pk"))
        .values_list("evaluation_id", "last", "n")
    )
    return (humans["last"], humans["n"], str(humans["at"])), {run: (last, n) for run, last, n in models}


def _kept(stamp: tuple, compute: Callable):
    """compute(), kept in the cache under `stamp` (what it stands on)."""
    key = "release-report:" + hashlib.sha256(repr(stamp).encode()).hexdigest()
    value = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value, REPORT_CACHE_SECONDS)
    return value


# The sums of a model's row (benchmark.intervals.Sums over (category, domain) and the counts per scope), in one
# query: per (cluster, category, domain) the run's right answers and answers; then the products of every two cells
# of a cluster added up per pair of strata (each cluster's cells as arrays, unnested twice: the work is the sum of
# the squared number of cells per cluster, whatever plan a join of the cells with themselves would get; such a join
# was planned as a nested loop: minutes at 50,000 items), and the sums, counts and clusters per stratum, category,
# domain and overall. A model's answer is 0 or 1: the denominator is 1 and each item is one answer.
MODEL_ROW_SQL = """
WITH cells AS MATERIALIZED (
    SELECT item.cluster, item.category, item.domain,
           SUM(CASE WHEN result.is_correct THEN 1 ELSE 0 END) AS s, COUNT(*) AS n
    FROM {results} result JOIN {items} item ON item.id = result.release_item_id
    WHERE result.evaluation_id = %(run)s AND item.release_id = %(release)s AND item.split = %(split)s
      AND result.is_correct IS NOT NULL
    GROUP BY item.cluster, item.category, item.domain
), clusters AS (
    SELECT array_agg(category) AS categories, array_agg(domain) AS domains, array_agg(s) AS s, array_agg(n) AS n
    FROM cells
    GROUP BY cluster
)
SELECT 'product', a.category, a.domain, b.category, b.domain, SUM(a.s * b.s), SUM(a.s * b.n), SUM(a.n * b.n)
FROM clusters,
     unnest(clusters.categories, clusters.domains, clusters.s, clusters.n) AS a(category, domain, s, n),
     unnest(clusters.categories, clusters.domains, clusters.s, clusters.n) AS b(category, domain, s, n)
GROUP BY a.category, a.domain, b.category, b.domain
UNION ALL
SELECT 'sum', category, domain, GROUPING(category)::text, GROUPING(domain)::text, SUM(s), SUM(n),
       COUNT(DISTINCT cluster)
FROM cells
GROUP BY GROUPING SETS ((category, domain), (category), (domain), ())
"""


def model_row_sums(release: Release, split: str, run) -> RowSums:
    """The sums of `run`'s row of the report on `release`'s `split`, summed by the database (MODEL_ROW_SQL): the same
    RowSums as benchmark.report.row_sums of the run's answers (a failed request is no answer), without reading
    them one by one."""
    sql = MODEL_ROW_SQL.format(results=ModelItemResult._meta.db_table, items=ReleaseItem._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(sql, {"run": run.pk, "release": release.pk, "split": split})
        rows = cursor.fetchall()
    strata, products, clusters, answers = {}, {}, {}, {}
    for kind, category, domain, third, fourth, first, second, third_sum in rows:
        if kind == "product":
            products[(category, domain), (third, fourth)] = (int(first), int(second), int(third_sum))
        elif (third, fourth) == ("0", "0"):
            strata[(category, domain)] = (int(first), int(second))
        else:
            scope = {("0", "1"): ("category", category), ("1", "0"): ("domain", domain), ("1", "1"): OVERALL}
            clusters[scope[third, fourth]] = int(third_sum)
            answers[scope[third, fourth]] = int(second)
    if not strata:
        return RowSums(None, {}, {}, None)
    return RowSums(Sums(1, strata, products, clusters[OVERALL]), clusters, answers, None)


@dataclass(frozen=True)
class ReleaseRows:
    """The sums of a release report's rows on one split: the items, the humans' row, and per run its model row and
    its gap row (humans minus the run), keyed by the run's id."""

    items: int
    humans: RowSums
    runs: dict[int, tuple[RowSums, RowSums]]


def _human_side(release: Release, split: str, human_answers: Iterable) -> tuple[int, RowSums, dict, dict]:
    """The split's number of items, the humans' row sums, their item scores and the items they answered (read from
    the release by the ids answered only): what every gap row needs."""
    answers = list(human_answers)
    ids = {item_id for item_id in map(_item_of, answers) if isinstance(item_id, str)}
    rows = release.items.filter(item_id__in=ids).values_list("item_id", "split", "category", "domain", "cluster")
    split_of = {}
    answered = []
    for item_id, item_split, category, domain, cluster in rows:
        split_of[item_id] = item_split
        if item_split == split:
            answered.append((item_id, category, domain, cluster))
    # An id the release does not hold stays in, for benchmark.report to refuse by name.
    on_split = [entry for entry in answers if split_of.get(_item_of(entry), split) == split]
    items = checked_items(answered)
    scores = scores_of_humans(on_split, items, f"release {release.name} ({split})")
    return release.items.filter(split=split).count(), row_sums(scores, items, raters=True), scores, items


def release_rows(release: Release, *, runs, human_answers: Callable[[], Iterable], split: str = "test") -> ReleaseRows:
    """The row sums of the humans and `runs` on `release`'s `split`, each kept in the cache under what it stands on
    (the release, the split, the latest human answer and, for a run, its latest result): the page, every download
    and the strategy table read them, and a new answer recomputes only the rows it moves. The humans' answers are
    read by `human_answers` on a miss only; a run's model row is summed by the database (`model_row_sums`), its gap
    row from its answers on the items the humans answered."""
    humans_stamp, run_stamps = answers_stamp(release, runs)
    base = (release.pk, str(release.created), release.content_sha256, split, humans_stamp)
    side = None

    def human_side():
        nonlocal side
        if side is None:
            side = _human_side(release, split, human_answers())
        return side

    count, humans = _kept(("humans", *base), lambda: human_side()[:2])
    kept = {}
    for run in runs:
        stamp = ("run", *base, run.pk, run_stamps.get(run.pk))
        kept[run.pk] = _kept(stamp, lambda run=run: _run_rows(release, split, run, *human_side()[2:]))
    return ReleaseRows(count, humans, kept)


def _run_rows(release: Release, split: str, run, human_scores: dict, items: dict) -> tuple[RowSums, RowSums]:
    answers = ModelItemResult.objects.filter(
        evaluation=run,
        release_item__release=release,
        release_item__split=split,
        release_item__item_id__in=list(items),
        is_correct__isnull=False,
    ).values_list("release_item__item_id", "is_correct")
    scored = scores_of_model(f"run {run.pk}", answers, items, f"release {release.name} ({split})")
    return model_row_sums(release, split, run), row_sums(scores_paired(human_scores, scored), items, raters=True)


def release_report_kept(
    release: Release,
    *,
    runs,
    human_answers: Callable[[], Iterable],
    split: str = "test",
    humans_label: str = HUMANS,
) -> Report:
    """The report of the humans and `runs` on `release`'s `split` from their rows' sums (`release_rows`, kept in
    the cache), each run named as model_answers_on_release names it. Its figures are benchmark.report's
    (`report_of_rows`, as `release_report` of the same answers: tests/evaluation/results/test_report_sums.py)."""
    rows = release_rows(release, runs=runs, human_answers=human_answers, split=split)
    names = run_names(runs)
    return report_of_rows(
        release=release.name,
        release_hash=release.content_sha256,
        split=split,
        items=rows.items,
        humans=rows.humans,
        models={names[run.pk]: rows.runs[run.pk] for run in runs},
        humans_label=humans_label,
    )


def _split_items(release: Release, split: str):
    """The split's items as benchmark.report takes them, and a filter that keeps the answers on them."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    rows = list(
        release.items.order_by("split", "position", "pk").values_list(
            "item_id", "split", "category", "domain", "cluster"
        )
    )
    split_of = {item_id: item_split for item_id, item_split, *_ in rows}

    def on_split(entries: Iterable) -> list:
        # An id the release does not hold stays in, for compute_report to refuse by name.
        return [entry for entry in entries if split_of.get(_item_of(entry), split) == split]

    items = [
        (item_id, category, domain, cluster)
        for item_id, item_split, category, domain, cluster in rows
        if item_split == split
    ]
    return items, on_split


def release_strategy_table(
    release: Release,
    *,
    model: str,
    human_answers: Iterable,
    strategies: Mapping[str, tuple[str, Iterable]],
    split: str = "test",
    humans_label: str = HUMANS,
) -> StrategyTable:
    """One model's strategies on `release`'s `split` beside the humans (benchmark.strategy_table): strategies is
    {strategy: (run name, [(item_id, is_correct)])}."""
    items, on_split = _split_items(release, split)
    return compute_strategy_table(
        release=release.name,
        release_hash=release.content_sha256,
        split=split,
        model=model,
        items=items,
        humans=on_split(human_answers),
        strategies={strategy: (run, on_split(answers)) for strategy, (run, answers) in strategies.items()},
        humans_label=humans_label,
    )


def release_strategy_table_kept(
    release: Release,
    *,
    model: str,
    human_answers: Callable[[], Iterable],
    strategies: Mapping[str, tuple[str, object]],
    split: str = "test",
    humans_label: str = HUMANS,
) -> StrategyTable:
    """`release_strategy_table` from the rows' sums the report keeps (`release_rows`): strategies is {strategy: (run
    name, run)}; each strategy's row is the run's model row, labelled by the strategy."""
    runs = [run for _, run in strategies.values()]
    rows = release_rows(release, runs=runs, human_answers=human_answers, split=split)
    return strategy_table_of_rows(
        release=release.name,
        release_hash=release.content_sha256,
        split=split,
        model=model,
        items=rows.items,
        humans=row_of(humans_label, "humans", rows.humans),
        strategies={
            strategy: (name, row_of(strategy, "model", rows.runs[run.pk][0]))
            for strategy, (name, run) in strategies.items()
        },
    )


STRATEGY_FILES = (
    ("csv", strategy_table_csv, "text/csv; charset=utf-8"),
    ("md", strategy_table_markdown, "text/markdown; charset=utf-8"),
    ("tex", strategy_table_latex, "application/x-tex; charset=utf-8"),
)


def strategy_file_names(release: Release, split: str, endpoint_id: int) -> list[str]:
    return [f"{release.name}-{split}-strategies-{endpoint_id}.{ext}" for ext, _, _ in STRATEGY_FILES]


def release_report_files(report: Report, *, figure: Report | None = None) -> list[tuple[str, bytes, str]]:
    """The report's downloads, (file name, bytes, content type): CSV, JSON, Markdown, LaTeX, the SVG and PNG figure
    (of `figure`, the tables' report by default); named like `v1-test-report.csv`. The same report always gives the
    same bytes."""
    prefix = f"{report.release}-{report.split}"
    drawn = report if figure is None else figure
    return [
        (f"{prefix}-{name}", write(drawn if write in FIGURE_WRITERS else report), content_type)
        for name, write, content_type in REPORT_FILES
    ]


def release_report_file_names(report: Report) -> list[str]:
    return [f"{report.release}-{report.split}-{name}" for name, _, _ in REPORT_FILES]


def release_report_file(report: Report, file_name: str, *, figure: Report | None = None) -> tuple[bytes, str] | None:
    """One download, (bytes, content type), written alone; None when the report has no file of that name. `figure`:
    the report the figure draws (the tables' by default)."""
    prefix = f"{report.release}-{report.split}-"
    for name, write, content_type in REPORT_FILES:
        if file_name == prefix + name:
            return write(figure if figure is not None and write in FIGURE_WRITERS else report), content_type
    return None


def strategy_table_file(table: StrategyTable, extension: str) -> tuple[bytes, str] | None:
    for ext, write, content_type in STRATEGY_FILES:
        if ext == extension:
            return write(table), content_type
    return None

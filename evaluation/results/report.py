"""The release report of one release's split, from its frozen items and the answers given on them: the glue between
the database and benchmark.report (which computes it) and benchmark.figure. It reads only the release's items, never
the live pairs, so a correction made after the release changes nothing here."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from django.core.cache import cache
from django.db import connection
from django.db.models import Count, F, Max

from annotator.models import Release, ReleaseItem
from benchmark.figure import gap_svg
from benchmark.intervals import Sums
from benchmark.records import SPLITS
from benchmark.report import (
    HUMANS,
    OVERALL,
    Report,
    ReportInputError,
    RowSums,
    compute_report,
    report_csv,
    report_json,
    report_latex,
    report_markdown,
    report_of_rows,
    row_of,
)
from benchmark.strategy_table import (
    StrategyTable,
    strategy_table_csv,
    strategy_table_latex,
    strategy_table_markdown,
    strategy_table_of_rows,
)
from evaluation.models import ModelItemResult
from evaluation.results.raster import gap_png
from evaluation.runs.naming import run_names
from evaluation.studies.release_answers import release_answers

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
    humans = release_answers(release).aggregate(last=Max("pk"), n=Count("pk"), at=Max("answered_at"))
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


# The sums of a row of the report (benchmark.intervals.Sums over (category, domain) and the counts per scope), in one
# query. `scored` gives each item of the row: its score as s / r (integers, r > 0), its answers and whether a rater
# answered it twice; the scores are brought to one denominator D (the least common multiple of the r, found by a
# recursive query); per (cluster, category, domain) their sum over D, items and answers; then the products of every
# two cells of a cluster added up per pair of strata (each cluster's cells as arrays, unnested twice: the work is the
# sum of the squared number of cells per cluster, whatever plan a join of the cells with themselves would get; such a
# join was planned as a nested loop: minutes at 50,000 items), the sums, counts, clusters and answers per stratum,
# category, domain and overall, and the distinct raters per category, domain and overall from `raters`.
ROW_SQL = """
WITH RECURSIVE scored AS MATERIALIZED (
{scored}
), found AS (
    SELECT r, ROW_NUMBER() OVER (ORDER BY r) AS place FROM (SELECT DISTINCT r FROM scored) AS denominators
), common (place, d) AS (
    SELECT 0::bigint, 1::numeric
    UNION ALL
    SELECT found.place, lcm(common.d, found.r::numeric) FROM common JOIN found ON found.place = common.place + 1
), denominator AS (
    SELECT d FROM common ORDER BY place DESC LIMIT 1
), cells AS MATERIALIZED (
    SELECT scored.cluster, scored.category, scored.domain, SUM(div(scored.s * denominator.d, scored.r)) AS s,
           COUNT(*) AS n, SUM(scored.answers) AS answers
    FROM scored CROSS JOIN denominator
    GROUP BY scored.cluster, scored.category, scored.domain
), clusters AS (
    SELECT array_agg(category) AS categories, array_agg(domain) AS domains, array_agg(s) AS s, array_agg(n) AS n
    FROM cells
    GROUP BY cluster
)
SELECT 'product', a.category, a.domain, b.category, b.domain, SUM(a.s * b.s), SUM(a.s * b.n), SUM(a.n * b.n), NULL
FROM clusters,
     unnest(clusters.categories, clusters.domains, clusters.s, clusters.n) AS a(category, domain, s, n),
     unnest(clusters.categories, clusters.domains, clusters.s, clusters.n) AS b(category, domain, s, n)
GROUP BY a.category, a.domain, b.category, b.domain
UNION ALL
SELECT 'sum', category, domain, GROUPING(category)::text, GROUPING(domain)::text, SUM(s), SUM(n),
       COUNT(DISTINCT cluster), SUM(answers)
FROM cells
GROUP BY GROUPING SETS ((category, domain), (category), (domain), ())
UNION ALL
SELECT 'raters', category, domain, GROUPING(category)::text, GROUPING(domain)::text, COUNT(DISTINCT rater), NULL,
       NULL, NULL
FROM ({raters}) AS answered
GROUP BY GROUPING SETS ((category), (domain), ())
UNION ALL
SELECT 'denominator', NULL, NULL, NULL, NULL, d, (SELECT COUNT(*) FROM scored WHERE twice), NULL, NULL
FROM denominator
"""

# A model's answers on the split: 0 or 1 (a failed request is no answer), one answer each. Parameters: the run, the
# release, the split.
MODEL_ITEMS_SQL = """
    SELECT item.id, item.cluster, item.category, item.domain, CASE WHEN result.is_correct THEN 1 ELSE 0 END AS s,
           1 AS r, 1 AS answers, false AS twice
    FROM {results} result JOIN {items} item ON item.id = result.release_item_id
    WHERE result.evaluation_id = %s AND item.release_id = %s AND item.split = %s AND result.is_correct IS NOT NULL
"""

# The humans' score of an item is the share of its raters who answered it right (benchmark.report.human_item_score):
# s right answers of r raters (a rater is its order seed, as its rater key is; `twice` flags a rater who answered
# the item twice, which benchmark.report refuses). {answers} is `_human_answers`'s query, one row per answer.
HUMAN_ITEMS_SQL = """
    SELECT answer.release_item AS id, answer.cluster, answer.category, answer.domain,
           SUM(CASE WHEN answer.correct THEN 1 ELSE 0 END) AS s, COUNT(DISTINCT answer.rater) AS r,
           COUNT(*) AS answers, COUNT(*) <> COUNT(DISTINCT answer.rater) AS twice
    FROM ({answers}) AS answer
    GROUP BY answer.release_item, answer.cluster, answer.category, answer.domain
"""

HUMAN_RATERS_SQL = "SELECT answer.category, answer.domain, answer.rater FROM ({answers}) AS answer"

# The humans' raters on the items the run answered, for its gap row (a failed request is no answer). Parameter: the
# run, after the answers' own.
GAP_RATERS_SQL = """
    SELECT answer.category, answer.domain, answer.rater FROM ({answers}) AS answer
    WHERE answer.release_item IN (
        SELECT release_item_id FROM {results} WHERE evaluation_id = %s AND is_correct IS NOT NULL
    )
"""

# A gap's item score, the humans' minus the model's, on the items both answered: (s - m r) / r, with the humans'
# answers and one more. Parameter: the run, after the humans' own.
GAP_ITEMS_SQL = """
    SELECT humans.id, humans.cluster, humans.category, humans.domain,
           humans.s - CASE WHEN result.is_correct THEN humans.r ELSE 0 END AS s, humans.r,
           humans.answers + 1 AS answers, humans.twice
    FROM ({humans}) AS humans JOIN {results} result ON result.release_item_id = humans.id
    WHERE result.evaluation_id = %s AND result.is_correct IS NOT NULL
"""

NO_RATERS_SQL = "SELECT NULL::text AS category, NULL::text AS domain, NULL::text AS rater WHERE false"


def _tables() -> dict[str, str]:
    return {"results": ModelItemResult._meta.db_table, "items": ReleaseItem._meta.db_table}


def _row_sums(scored: tuple[str, list], raters: tuple[str, list] | None, where: str) -> RowSums:
    """The RowSums that ROW_SQL gives for the items of `scored` (and the raters of `raters`; None: a model's row,
    which counts none), each an SQL query and its parameters (positional, in the order of the text)."""
    scored_sql, scored_parameters = scored
    raters_sql, raters_parameters = raters or (NO_RATERS_SQL, [])
    sql = ROW_SQL.format(scored=scored_sql, raters=raters_sql)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*scored_parameters, *raters_parameters])
        rows = cursor.fetchall()
    strata, products, clusters, answers, who = {}, {}, {}, {}, {}
    denominator, twice = 1, 0
    for kind, category, domain, third, fourth, first, second, third_sum, fourth_sum in rows:
        if kind == "product":
            products[(category, domain), (third, fourth)] = (int(first), int(second), int(third_sum))
        elif kind == "denominator":
            denominator, twice = int(first), int(second)
        elif (third, fourth) == ("0", "0"):
            strata[(category, domain)] = (int(first), int(second))
        else:
            scope = {("0", "1"): ("category", category), ("1", "0"): ("domain", domain), ("1", "1"): OVERALL}[
                third, fourth
            ]
            if kind == "raters":
                who[scope] = int(first)
            elif second is not None:  # no item: the overall sums of nothing
                clusters[scope] = int(third_sum)
                answers[scope] = int(fourth_sum)
    if twice:
        raise ReportInputError(f"{where}: a rater answered an item twice ({twice} items)")
    if not strata:
        return RowSums(None, {}, {}, None if raters is None else {})
    raters_of = None if raters is None else {scope: who[scope] for scope in clusters}
    return RowSums(Sums(denominator, strata, products, clusters[OVERALL]), clusters, answers, raters_of)


def _human_answers(release: Release, split: str) -> tuple[str, list]:
    """The SQL of the human answers that count on `release`'s `split` (evaluation.studies.release_answers.
    release_answers, compiled by Django: the rule is written once) and its parameters, one row per answer: the
    release item's id, cluster, category and domain, whether it is right, and the rater (its order seed, as its
    rater key is)."""
    answers = (
        release_answers(release, split)
        .order_by()
        .values(
            "correct",
            release_item=F("item__release_item_id"),
            cluster=F("item__release_item__cluster"),
            category=F("item__release_item__category"),
            domain=F("item__release_item__domain"),
            rater=F("participant__order_seed"),
        )
    )
    sql, parameters = answers.query.get_compiler(using=answers.db).as_sql()
    return sql, list(parameters)


def human_row_sums(release: Release, split: str) -> RowSums:
    """The sums of the humans' row of the report on `release`'s `split`, summed by the database (ROW_SQL): the same
    RowSums as benchmark.report.row_sums of human_answers_on_release's answers, each item scoring the mean of its
    raters (benchmark.report.human_item_score), without reading them one by one."""
    answers, parameters = _human_answers(release, split)
    scored = (HUMAN_ITEMS_SQL.format(answers=answers), parameters)
    raters = (HUMAN_RATERS_SQL.format(answers=answers), parameters)
    return _row_sums(scored, raters, f"humans on release {release.name} ({split})")


def model_row_sums(release: Release, split: str, run) -> RowSums:
    """The sums of `run`'s row of the report on `release`'s `split`, summed by the database (ROW_SQL): the same
    RowSums as benchmark.report.row_sums of the run's answers (a failed request is no answer), without reading
    them one by one."""
    scored = (MODEL_ITEMS_SQL.format(**_tables()), [run.pk, release.pk, split])
    return _row_sums(scored, None, f"run {run.pk} on release {release.name} ({split})")


def gap_row_sums(release: Release, split: str, run) -> RowSums:
    """The sums of the gap row of `run` (humans minus the run, on the items both answered: benchmark.report.
    scores_paired) on `release`'s `split`, summed by the database (ROW_SQL) from a join of the run's answers with
    the humans' items."""
    tables = _tables()
    answers, parameters = _human_answers(release, split)
    humans = HUMAN_ITEMS_SQL.format(answers=answers)
    scored = (GAP_ITEMS_SQL.format(humans=humans, **tables), [*parameters, run.pk])
    raters = (GAP_RATERS_SQL.format(answers=answers, **tables), [*parameters, run.pk])
    return _row_sums(scored, raters, f"humans - run {run.pk} on release {release.name} ({split})")


@dataclass(frozen=True)
class ReleaseRows:
    """The sums of a release report's rows on one split: the items, the humans' row, and per run its model row and
    its gap row (humans minus the run), keyed by the run's id."""

    items: int
    humans: RowSums
    runs: dict[int, tuple[RowSums, RowSums]]


def release_rows(release: Release, *, runs, split: str = "test") -> ReleaseRows:
    """The row sums of the humans and `runs` on `release`'s `split`, each summed by the database (ROW_SQL) and kept
    in the cache under what it stands on (the release, the split, and the latest human answer for the humans' row,
    the run's latest result for its model row, both for its gap row): the page, every download and the strategy
    table read them, and a new answer recomputes only the rows it moves."""
    humans_stamp, run_stamps = answers_stamp(release, runs)
    base = (release.pk, str(release.created), release.content_sha256, split)

    def humans():
        return release.items.filter(split=split).count(), human_row_sums(release, split)

    count, human_row = _kept(("humans", *base, humans_stamp), humans)
    kept = {}
    for run in runs:
        stamp = (run.pk, run_stamps.get(run.pk))
        model = _kept(("model", *base, *stamp), lambda run=run: model_row_sums(release, split, run))
        gap = _kept(("gap", *base, humans_stamp, *stamp), lambda run=run: gap_row_sums(release, split, run))
        kept[run.pk] = (model, gap)
    return ReleaseRows(count, human_row, kept)


def release_report_kept(
    release: Release,
    *,
    runs,
    split: str = "test",
    humans_label: str = HUMANS,
) -> Report:
    """The report of the humans and `runs` on `release`'s `split` from their rows' sums (`release_rows`, kept in
    the cache), each run named as model_answers_on_release names it. Its figures are benchmark.report's
    (`report_of_rows`, as `release_report` of the same answers: tests/evaluation/results/test_report_sums.py)."""
    rows = release_rows(release, runs=runs, split=split)
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


def release_strategy_table_kept(
    release: Release,
    *,
    model: str,
    strategies: Mapping[str, tuple[str, object]],
    split: str = "test",
    humans_label: str = HUMANS,
) -> StrategyTable:
    """One model's strategies on `release`'s `split` beside the humans (benchmark.strategy_table), from the rows' sums
    the report keeps (`release_rows`): strategies is {strategy: (run name, run)}; each strategy's row is the run's
    model row, labelled by the strategy."""
    runs = [run for _, run in strategies.values()]
    rows = release_rows(release, runs=runs, split=split)
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

"""The release report of one release's split, from its frozen items and the answers given on them: the glue between
the database and benchmark.report (which computes it) and benchmark.figure. It reads only the release's items, never
the live pairs, so a correction made after the release changes nothing here."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping

from django.core.cache import cache
from django.db.models import Count, Max

from annotator.models import Release
from benchmark.figure import gap_svg
from benchmark.records import SPLITS
from benchmark.report import HUMANS, Report, compute_report, report_csv, report_json, report_latex, report_markdown
from benchmark.strategy_table import (
    StrategyTable,
    compute_strategy_table,
    strategy_table_csv,
    strategy_table_latex,
    strategy_table_markdown,
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


def answers_stamp(release: Release, runs) -> tuple:
    """What a release's report stands on, besides the release (frozen) and the runs: the latest human answer on it
    and the latest result of each run (the highest id, the number and the last time), in two queries. Any answer
    given, replaced or taken back moves it."""
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
    return (humans["last"], humans["n"], str(humans["at"]), tuple(sorted(models)))


def release_report_kept(
    release: Release,
    *,
    runs,
    human_answers: Callable[[], Iterable],
    model_answers: Callable[[], Mapping[str, Iterable]],
    split: str = "test",
    humans_label: str = HUMANS,
) -> Report:
    """`release_report` of the humans and `runs` (their answers read by the two callables, on a miss only), kept in
    the cache under the release, the runs, their names and `answers_stamp`: the page and every download of the same
    report read one computation, and a new answer (human or model) makes a new key. The figures are
    `release_report`'s, the same function."""
    names = run_names(runs)  # as model_answers_on_release labels them
    shown = tuple((run.pk, names[run.pk]) for run in runs)
    stamp = (release.pk, str(release.created), release.content_sha256, split, humans_label, shown)
    stamp += answers_stamp(release, runs)
    key = "release-report:" + hashlib.sha256(repr(stamp).encode()).hexdigest()
    report = cache.get(key)
    if report is None:
        report = release_report(
            release,
            human_answers=human_answers(),
            model_answers=model_answers(),
            split=split,
            humans_label=humans_label,
        )
        cache.set(key, report, REPORT_CACHE_SECONDS)
    return report


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

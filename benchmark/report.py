"""The release report, as the paper prints it: humans and each model per category, per domain and overall (micro and
macro), each with a cluster-robust 95% interval (benchmark.intervals), the n behind it, and the human-model gap on the
same items; written as CSV, JSON, Markdown and LaTeX whose bytes depend on the input only (figure: benchmark.figure).

Input is plain data, so the report is the same whichever database or process gives it:
- items: (item_id, category, domain, cluster) for each item of the release's split;
- humans: (item_id, rater_key, is_correct) for each answer of the study (or studies) on that split;
- models: {label: [(item_id, is_correct)]}, at most one answer per item and model.

Humans: an item answered by several raters scores the mean of its raters (2 of 3 right: 2/3), and the items, not the
answers, are the units of the mean. So each item weighs the same, as it does for a model (the human number estimates
the same quantity, accuracy on an item of the benchmark, whatever the study's rater assignment gave some items more
answers), the gap pairs one human score with one model score per item, and the raters' disagreement on an item is in
that item's score, hence in the variance. Treating each answer as an observation would weigh items by their number of
raters; clustering by the item's cluster still holds either way, and here it is the item's cluster that groups.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from benchmark.apportion import exact, round_half_up
from benchmark.intervals import (
    METHOD,
    Mean,
    Scored,
    Sums,
    accuracy_interval,
    difference_interval,
    macro_of,
    micro_of,
    sums_of,
    sums_of_cells,
)
from benchmark.taxonomy import ABBREVIATIONS, CATEGORIES, DOMAINS

HUMANS = "Humans"
DECIMALS = 6  # of a proportion, in the CSV and the JSON
MICRO = "micro"
MACRO = "macro"


class ReportInputError(ValueError):
    """The report's input does not hold together (an unknown item, a second answer, an unknown category, ...)."""


@dataclass(frozen=True)
class Cell:
    """One figure of the report: an accuracy (0..1) or a gap (-1..1), its 95% interval (None with fewer than two
    clusters), and what stands behind it: items, clusters, answers and, for humans, raters."""

    estimate: Fraction
    low: float | None
    high: float | None
    items: int
    clusters: int
    answers: int
    raters: int | None = None


@dataclass(frozen=True)
class Row:
    """Humans, one model, or the gap between humans and one model: a cell per category (taxonomy order), per domain,
    and overall; None where there is no item."""

    label: str
    kind: str  # "humans", "model" or "gap"
    categories: dict[str, Cell | None]
    domains: dict[str, Cell | None]
    micro: Cell | None
    macro: Cell | None

    def cells(self) -> list[tuple[str, str, Cell | None]]:
        """(scope, key, cell) in the report's order: categories, domains, then micro and macro."""
        return [
            *(("category", key, cell) for key, cell in self.categories.items()),
            *(("domain", key, cell) for key, cell in self.domains.items()),
            ("overall", MICRO, self.micro),
            ("overall", MACRO, self.macro),
        ]


@dataclass(frozen=True)
class Report:
    release: str
    release_hash: str
    split: str
    items: int
    humans: Row
    models: tuple[Row, ...]  # sorted by label
    gaps: tuple[Row, ...]  # humans minus each model, paired on the items both answered, in the order of `models`
    method: str = METHOD

    def rows(self) -> list[Row]:
        return [self.humans, *self.models, *self.gaps]


# --- Computation -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    category: str
    domain: str
    cluster: str


def checked_items(items: Iterable) -> dict[str, Item]:
    found: dict[str, Item] = {}
    for place, entry in enumerate(items, 1):
        try:
            item_id, category, domain, cluster = entry
        except (TypeError, ValueError):
            raise ReportInputError(
                f"items, entry {place}: expected (item_id, category, domain, cluster), got {entry!r}"
            )
        where = f"items, entry {place} ({item_id!r})"
        if not isinstance(item_id, str) or not item_id:
            raise ReportInputError(f"items, entry {place}: the item id must be a non-empty text, got {item_id!r}")
        if item_id in found:
            raise ReportInputError(f"{where}: the item id appears twice")
        if category not in CATEGORIES:
            raise ReportInputError(f"{where}: unknown category {category!r} (one of {', '.join(CATEGORIES)})")
        if domain not in DOMAINS:
            raise ReportInputError(f"{where}: unknown domain {domain!r} (one of {', '.join(DOMAINS)})")
        if not isinstance(cluster, str) or not cluster:
            raise ReportInputError(f"{where}: the cluster must be a non-empty text, got {cluster!r}")
        found[item_id] = Item(category, domain, cluster)
    return found


def _outcome(value, where: str) -> bool:
    if isinstance(value, bool) or value in (0, 1):
        return bool(value)
    raise ReportInputError(f"{where}: is_correct must be true or false, got {value!r}")


def scores_of_humans(humans: Iterable, items: Mapping[str, Item], where_release: str):
    """{item_id: (score, answers, raters)} from the answers, each item scoring the mean of its raters."""
    by_item: dict[str, dict[str, bool]] = {}
    for place, entry in enumerate(humans, 1):
        try:
            item_id, rater, correct = entry
        except (TypeError, ValueError):
            raise ReportInputError(f"humans, answer {place}: expected (item_id, rater_key, is_correct), got {entry!r}")
        where = f"humans, answer {place} (item {item_id!r}, rater {rater!r})"
        if item_id not in items:
            raise ReportInputError(f"{where}: no such item in {where_release}")
        raters = by_item.setdefault(item_id, {})
        if str(rater) in raters:
            raise ReportInputError(f"{where}: this rater already answered this item")
        raters[str(rater)] = _outcome(correct, where)
    return {
        item_id: (human_item_score(raters.values()), len(raters), frozenset(raters))
        for item_id, raters in by_item.items()
    }


def human_item_score(marks: Iterable[bool]) -> Fraction:
    """The humans' score of one item: the share of its raters who answered it right (2 of 3 right: 2/3; a 1-1 tie:
    1/2). The one rule of human accuracy: every page, download and API answer takes an item's human score from
    here, and a figure is the mean of these scores over its items (see the module's docstring)."""
    marks = [bool(mark) for mark in marks]
    if not marks:
        raise ValueError("an item without answers has no human score")
    return Fraction(sum(marks), len(marks))


def scores_of_model(label, answers: Iterable, items: Mapping[str, Item], where_release: str):
    if not isinstance(label, str) or not label:
        raise ReportInputError(f"models: a model's label must be a non-empty text, got {label!r}")
    scores: dict[str, tuple[Fraction, int, frozenset]] = {}
    for place, entry in enumerate(answers, 1):
        try:
            item_id, correct = entry
        except (TypeError, ValueError):
            raise ReportInputError(f"model {label!r}, answer {place}: expected (item_id, is_correct), got {entry!r}")
        where = f"model {label!r}, answer {place} (item {item_id!r})"
        if item_id not in items:
            raise ReportInputError(f"{where}: no such item in {where_release}")
        if item_id in scores:
            raise ReportInputError(f"{where}: a second answer for this item")
        scores[item_id] = (Fraction(int(_outcome(correct, where))), 1, frozenset())
    return scores


def scores_paired(humans: Mapping, model: Mapping) -> dict[str, tuple[Fraction, int, frozenset]]:
    """The gap's item scores: on the items both the humans and the model answered, d_i = human score - model score,
    with the humans' answers and one more, and the humans' raters."""
    return {
        item_id: (humans[item_id][0] - score, humans[item_id][1] + 1, humans[item_id][2])
        for item_id, (score, _, _) in model.items()
        if item_id in humans
    }


OVERALL = ("overall", "")


@dataclass(frozen=True)
class RowSums:
    """What one row of the report stands on, in integer sums (benchmark.intervals.Sums over the strata (category,
    domain)), and per scope, ("category", c), ("domain", d) or OVERALL, the counts the sums cannot give: clusters,
    answers and, for humans and gaps, raters (None for a model). A scope without an item is absent."""

    sums: Sums | None
    clusters: dict[tuple[str, str], int]
    answers: dict[tuple[str, str], int]
    raters: dict[tuple[str, str], int] | None


def _scopes(category: str, domain: str) -> tuple[tuple[str, str], ...]:
    return (("category", category), ("domain", domain), OVERALL)


def row_sums(scores: Mapping, items: Mapping[str, Item], *, raters: bool) -> RowSums:
    """The sums of a row's item scores {item_id: (score, answers, raters)}, item by item: the report's rows from
    plain data (the database sums a model's row itself, evaluation.results.report, to the same RowSums)."""
    denominator = math.lcm(*{score.denominator for score, _, _ in scores.values()})
    cells: dict[str, dict[tuple[str, str], list[int]]] = {}  # cluster: {(category, domain): [sum, count]}
    answers: dict[tuple[str, str], int] = {}
    who: dict[tuple[str, str], set] = {}
    for item_id, (score, count, keys) in scores.items():
        item = items[item_id]
        cell = cells.setdefault(item.cluster, {}).setdefault((item.category, item.domain), [0, 0])
        cell[0] += score.numerator * (denominator // score.denominator)
        cell[1] += 1
        for scope in _scopes(item.category, item.domain):
            answers[scope] = answers.get(scope, 0) + count
            if raters:
                who.setdefault(scope, set()).update(keys)
    clusters: dict[tuple[str, str], int] = {}
    for per_stratum in cells.values():
        for scope in {scope for category, domain in per_stratum for scope in _scopes(category, domain)}:
            clusters[scope] = clusters.get(scope, 0) + 1
    return RowSums(
        sums_of_cells(denominator, cells) if cells else None,
        clusters,
        answers,
        {scope: len(keys) for scope, keys in who.items()} if raters else None,
    )


def _cell(mean: Mean | None, *, answers: int, raters: int | None, gap: bool) -> Cell | None:
    """A figure from its mean: an accuracy (Wilson at the effective size) or, for a gap, a difference."""
    if mean is None:
        return None
    bounds = difference_interval(mean) if gap else accuracy_interval(mean, answers=answers)
    low, high = bounds if bounds is not None else (None, None)
    return Cell(mean.estimate, low, high, mean.items, mean.clusters, answers, raters)


def row_of(label: str, kind: str, row: RowSums) -> Row:
    """A row of the report from its sums: a cell per category and domain (the micro mean of its items), the micro
    and the macro mean (over categories). The one definition of every figure of the report, whoever summed."""

    def cell(scope: tuple[str, str], sums: Sums | None, *, macro: bool = False) -> Cell | None:
        if sums is None:
            return None
        mean = macro_of(sums.merged(lambda stratum: stratum[0])) if macro else micro_of(sums)
        who = None if row.raters is None else row.raters[scope]
        return _cell(mean, answers=row.answers[scope], raters=who, gap=kind == "gap")

    parts = {}
    if row.sums is not None:  # the sums of each category's and each domain's strata
        parts = row.sums.parts(lambda stratum: ("category", stratum[0]), row.clusters)
        parts.update(row.sums.parts(lambda stratum: ("domain", stratum[1]), row.clusters))
    return Row(
        label=label,
        kind=kind,
        categories={c: cell(("category", c), parts.get(("category", c))) for c in CATEGORIES},
        domains={d: cell(("domain", d), parts.get(("domain", d))) for d in DOMAINS},
        micro=cell(OVERALL, row.sums),
        macro=cell(OVERALL, row.sums, macro=True),
    )


def score_cell(entries: Iterable, *, gap: bool = False, macro: bool = False, raters: bool = False) -> Cell | None:
    """One figure of item scores given directly, computed as the report computes its cells: entries are
    (item_key, score, answers, rater_keys, category, cluster); an accuracy (Wilson at the effective size) or, with
    `gap`, a difference (scores in [-1, 1]); `macro`: the mean of the categories' means. None for no entry."""
    entries = list(entries)
    if len({str(entry[0]) for entry in entries}) != len(entries):
        raise ReportInputError("score_cell: an item appears twice")
    sums = sums_of(Scored(Fraction(score), str(cluster), category) for _, score, _, _, category, cluster in entries)
    mean = macro_of(sums) if macro else micro_of(sums)
    who = len(frozenset().union(*(frozenset(keys) for _, _, _, keys, _, _ in entries))) if raters else None
    return _cell(mean, answers=sum(entry[2] for entry in entries), raters=who, gap=gap)


def report_of_rows(
    *,
    release: str,
    release_hash: str,
    split: str,
    items: int,
    humans: RowSums,
    models: Mapping[str, tuple[RowSums, RowSums]],
    humans_label: str = HUMANS,
) -> Report:
    """The report from its rows' sums: the humans' and, per model label, the model's and its gap's (humans minus
    the model, on the items both answered). `compute_report` ends here, and so does the report the database sums
    (evaluation.results.report): one definition of the figures."""
    labels = sorted(models)
    return Report(
        release=release,
        release_hash=release_hash,
        split=split,
        items=items,
        humans=row_of(humans_label, "humans", humans),
        models=tuple(row_of(label, "model", models[label][0]) for label in labels),
        gaps=tuple(row_of(f"{HUMANS} - {label}", "gap", models[label][1]) for label in labels),
    )


def compute_report(
    *,
    release: str,
    release_hash: str,
    split: str,
    items: Iterable,
    humans: Iterable,
    models: Mapping[str, Iterable],
    humans_label: str = HUMANS,
) -> Report:
    """The report of humans and models on the items of one release's split (see the module's docstring).

    `humans_label` names the humans' row in every table and file: "Humans (open book)" for a baseline some of whose
    items were public, so no copy of the figures loses that.

    Every answer must name an item of `items`: an unknown id, a rater answering an item twice or a model answering
    it twice raises ReportInputError saying which answer. A gap counts only the items both humans and the model
    answered (d_i = human score - model score), so the two sides are compared on the same items."""
    checked = checked_items(items)
    where_release = f"release {release} ({split})"
    humans_scored = scores_of_humans(humans, checked, where_release)
    models_scored = {
        label: scores_of_model(label, answers, checked, where_release) for label, answers in models.items()
    }
    return report_of_rows(
        release=release,
        release_hash=release_hash,
        split=split,
        items=len(checked),
        humans=row_sums(humans_scored, checked, raters=True),
        models={
            label: (
                row_sums(scored, checked, raters=False),
                row_sums(scores_paired(humans_scored, scored), checked, raters=True),
            )
            for label, scored in models_scored.items()
        },
        humans_label=humans_label,
    )


# --- Numbers as text ---------------------------------------------------------------------------------------------


def decimal(value, places: int = DECIMALS) -> str:
    """A number with exactly `places` decimals, halves rounded up (benchmark.apportion.round_half_up)."""
    scaled = round_half_up(exact(value) * 10**places)
    sign = "-" if scaled < 0 else ""
    whole, part = divmod(abs(scaled), 10**places)
    return f"{sign}{whole}.{part:0{places}d}" if places else f"{sign}{whole}"


def percent(value) -> str:
    """A proportion as a percentage with one decimal: 0.955 -> '95.5'."""
    return decimal(exact(value) * 100, 1)


def _number(value) -> float | None:
    return None if value is None else float(decimal(value))


def _nullable(value) -> str:
    return "" if value is None else decimal(value)


# --- CSV and JSON ------------------------------------------------------------------------------------------------

CSV_FIELDS = (
    "release",
    "release_hash",
    "split",
    "row",
    "kind",
    "scope",
    "key",
    "estimate",
    "low",
    "high",
    "items",
    "clusters",
    "answers",
    "raters",
)


def report_csv(report: Report) -> bytes:
    """One line per row and figure (empty cells left out), proportions with six decimals."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for row in report.rows():
        for scope, key, cell in row.cells():
            if cell is None:
                continue
            writer.writerow(
                [
                    report.release,
                    report.release_hash,
                    report.split,
                    row.label,
                    row.kind,
                    scope,
                    key,
                    decimal(cell.estimate),
                    _nullable(cell.low),
                    _nullable(cell.high),
                    cell.items,
                    cell.clusters,
                    cell.answers,
                    "" if cell.raters is None else cell.raters,
                ]
            )
    return out.getvalue().encode()


def _cell_document(cell: Cell | None) -> dict | None:
    if cell is None:
        return None
    return {
        "estimate": _number(cell.estimate),
        "exact": f"{cell.estimate.numerator}/{cell.estimate.denominator}",
        "low": _number(cell.low),
        "high": _number(cell.high),
        "items": cell.items,
        "clusters": cell.clusters,
        "answers": cell.answers,
        "raters": cell.raters,
    }


def _row_document(row: Row) -> dict:
    return {
        "label": row.label,
        "kind": row.kind,
        "categories": {key: _cell_document(cell) for key, cell in row.categories.items()},
        "domains": {key: _cell_document(cell) for key, cell in row.domains.items()},
        MICRO: _cell_document(row.micro),
        MACRO: _cell_document(row.macro),
    }


def report_document(report: Report) -> dict:
    return {
        "release": report.release,
        "release_hash": report.release_hash,
        "split": report.split,
        "items": report.items,
        "method": report.method,
        "categories": list(CATEGORIES),
        "domains": list(DOMAINS),
        "humans": _row_document(report.humans),
        "models": [_row_document(row) for row in report.models],
        "gaps": [_row_document(row) for row in report.gaps],
    }


def report_json(report: Report) -> bytes:
    """The report as JSON: sorted keys, two-space indent, proportions rounded to six decimals (and the exact
    fraction of each estimate), a final newline."""
    return (json.dumps(report_document(report), sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()


# --- Markdown and LaTeX ------------------------------------------------------------------------------------------


def _columns(row: Row) -> list[Cell | None]:
    return [*row.categories.values(), row.micro, row.macro]


HEADINGS = [*(ABBREVIATIONS[category] for category in CATEGORIES), "Micro", "Macro"]


def _figure(cell: Cell | None, *, signed: bool, interval: str) -> str:
    if cell is None:
        return "–"
    value = percent(cell.estimate)
    if signed and not value.startswith("-"):
        value = f"+{value}"
    if cell.low is None:
        return value
    return value + interval.format(low=percent(cell.low), high=percent(cell.high))


def _markdown_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _markdown_table(rows: list[Row], *, signed: bool, headings: list[str], columns) -> list[str]:
    lines = ["| | " + " | ".join(headings) + " |", "|---|" + "---:|" * len(headings)]
    for row in rows:
        figures = [_figure(cell, signed=signed, interval=" [{low}, {high}]") for cell in columns(row)]
        lines.append(f"| {_markdown_text(row.label)} | " + " | ".join(figures) + " |")
    return lines


def _counts_line(row: Row) -> str:
    cell = row.micro
    if cell is None:
        return f"- {_markdown_text(row.label)}: no item answered"
    raters = "" if cell.raters is None else f", {cell.raters} raters"
    return (
        f"- {_markdown_text(row.label)}: {cell.items} items in {cell.clusters} clusters, {cell.answers} answers{raters}"
    )


def report_markdown(report: Report) -> bytes:
    """The paper's table: accuracy in % (one decimal) with its 95% interval, per category (AT ... AC), micro and
    macro; then the gaps in points, the domains, and the counts behind each row."""
    accuracy_rows = [report.humans, *report.models]
    lines = [
        f"# Release {_markdown_text(report.release)}, split {_markdown_text(report.split)}",
        "",
        f"Release hash `{report.release_hash}`, {report.items} items. Accuracy in %, [95% interval]. {report.method}",
        "",
        "## Accuracy per category",
        "",
        *_markdown_table(accuracy_rows, signed=False, headings=HEADINGS, columns=_columns),
        "",
        "## Human-model gap (points, on the items both answered)",
        "",
        *_markdown_table(list(report.gaps), signed=True, headings=HEADINGS, columns=_columns),
        "",
        "## Accuracy per domain",
        "",
        *_markdown_table(
            accuracy_rows,
            signed=False,
            headings=list(DOMAINS),
            columns=lambda row: list(row.domains.values()),
        ),
        "",
        "## Counts",
        "",
        *(_counts_line(row) for row in report.rows()),
        "",
    ]
    return "\n".join(lines).encode()


LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    """Text safe in a LaTeX table cell: every special character as its command."""
    return "".join(LATEX_SPECIAL.get(char, char) for char in text.replace("\n", " "))


def _latex_figure(cell: Cell | None, *, signed: bool) -> str:
    text = _figure(cell, signed=signed, interval=r" {{\scriptsize[{low}, {high}]}}")
    return "--" if cell is None else text.replace("-", "$-$").replace("+", "$+$")


def report_latex(report: Report) -> bytes:
    """A booktabs tabular: humans and models per category, micro and macro, then the gaps; accuracy in %."""
    width = len(HEADINGS)
    lines = [
        f"% Release {latex_escape(report.release)}, split {latex_escape(report.split)}, "
        f"hash {latex_escape(report.release_hash)}",
        f"% {latex_escape(report.method)}",
        r"\begin{tabular}{l" + "c" * width + "}",
        r"\toprule",
        " & ".join(["", *HEADINGS]) + r" \\",
        r"\midrule",
    ]
    for row in [report.humans, *report.models]:
        lines.append(" & ".join([latex_escape(row.label), *(_latex_figure(c, signed=False) for c in _columns(row))]))
        lines[-1] += r" \\"
    if report.gaps:
        lines.append(r"\midrule")
        lines.append(rf"\multicolumn{{{width + 1}}}{{l}}{{Human-model gap (points, paired items)}} \\")
        for row in report.gaps:
            figures = [_latex_figure(cell, signed=True) for cell in _columns(row)]
            lines.append(" & ".join([latex_escape(row.label), *figures]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines).encode()

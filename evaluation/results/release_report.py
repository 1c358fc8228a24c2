"""The release report: humans and every model on one release's split, as the paper prints it, with intervals that
count items sharing a video or a source image as one cluster (benchmark.report), and its downloads.

It reads both answer stores: the human answers (evaluation.studies.release_answers) and the model answers
(evaluation.runs). Both are read through the release's own items, never the live pairs.
"""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from annotator.models import Pair, Release
from benchmark.figure import gap_svg
from benchmark.records import SPLITS
from benchmark.report import MACRO, MICRO, Cell, Report, percent
from benchmark.taxonomy import ABBREVIATIONS, CATEGORIES, DOMAINS
from evaluation.models import StudyItem
from evaluation.results.judge_check import release_judge_agreement
from evaluation.results.report import release_report, release_report_file, release_report_file_names
from evaluation.runs.description import accuracy_table
from evaluation.runs.services import model_answers_on_release
from evaluation.studies.release_answers import human_answers_on_release
from subtlebench.roles import COORDINATOR, role_required
from subtlebench.spreadsheet_csv import csv_download


def release_report_of(release: Release, *, split: str = "test") -> Report:
    """The report of `release`'s `split` from every answer stored on its items, humans' and models'."""
    return release_report(
        release,
        human_answers=human_answers_on_release(release),
        model_answers=model_answers_on_release(release),
        split=split,
    )


def public_humans_note(release: Release, split: str) -> str:
    """What the report says beside the human accuracy when some item people answered is already public ("" when
    none is): those answers may have been looked up by the images' pixels (evaluation.studies.served_images)."""
    studied = release.items.filter(
        split=split, study_items__kind=StudyItem.Kind.SCORED, study_items__assignments__answered_at__isnull=False
    ).values("pk")
    items = release.items.filter(pk__in=studied)
    public = items.filter(pair__in=Pair.objects.already_public()).count()
    if not public:
        return ""
    return (
        f"{public} of the {items.count()} items people answered are already public (imported from an existing "
        "dataset, or in an export whose files were downloaded or written out): their answers may have been found by "
        "a search on the images' pixels."
    )


def load_release(number: int, split: str) -> Release:
    if split not in SPLITS:
        raise Http404(f"no split {split!r}: {', '.join(SPLITS)}")
    return get_object_or_404(Release, number=number)


def cell_text(cell: Cell | None, *, signed: bool = False) -> dict:
    """What a table cell shows: the figure in %, its interval, and what stands behind it (the tooltip)."""
    if cell is None:
        return {"value": "—", "interval": "", "title": "no item"}
    value = percent(cell.estimate)
    if signed and not value.startswith("-"):
        value = f"+{value}"
    interval = "" if cell.low is None else f"{percent(cell.low)}–{percent(cell.high)}"
    behind = f"{cell.items} items in {cell.clusters} clusters, {cell.answers} answers"
    if cell.raters is not None:
        behind += f", {cell.raters} raters"
    return {"value": value, "interval": interval, "title": behind}


def table_rows(rows, *, signed: bool = False) -> list[dict]:
    return [
        {
            "label": row.label,
            "categories": [cell_text(row.categories.get(c), signed=signed) for c in CATEGORIES],
            "micro": cell_text(row.micro, signed=signed),
            "macro": cell_text(row.macro, signed=signed),
            "domains": [cell_text(row.domains.get(d), signed=signed) for d in DOMAINS],
            "n": row.micro.items if row.micro else 0,
            "raters": row.micro.raters if row.micro else None,
        }
        for row in rows
    ]


def description_runs_section(release: Release, split: str) -> list[dict]:
    """The description task on the release's split: each description run's judged accuracy with its interval, and
    its judge's agreement with people (Cohen's kappa, evaluation.results.judge_check)."""
    rows = []
    for row in release_judge_agreement(release):
        run = row["run"]
        if run.split != split:
            continue
        overall = accuracy_table(run)["overall"]
        rows.append({**row, "accuracy": overall})
    return rows


@role_required(COORDINATOR)
@require_GET
def release_report_page(request, number: int, split: str = "test"):
    release = load_release(number, split)
    report = release_report_of(release, split=split)
    context = {
        "release": release,
        "report": report,
        "split": split,
        "splits": SPLITS,
        "categories": [(ABBREVIATIONS[c], c) for c in CATEGORIES],
        "domains": list(DOMAINS),
        "rows": table_rows([report.humans, *report.models]),
        "gaps": table_rows(report.gaps, signed=True),
        "figure": gap_svg(report).decode() if report.gaps else "",
        "files": release_report_file_names(report),
        "overall": (MICRO, MACRO),
        "public_humans": public_humans_note(release, split),
        "description_runs": description_runs_section(release, split),
    }
    return render(request, "evaluation/release_report.html", context)


@role_required(COORDINATOR)
@require_GET
def release_report_download(request, number: int, split: str, file_name: str):
    release = load_release(number, split)
    written = release_report_file(release_report_of(release, split=split), file_name)
    if written is None:
        raise Http404(f"no report file {file_name!r}")
    content, content_type = written
    if content_type.startswith("text/csv"):
        return csv_download(content, file_name)
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{file_name}"'
    return response

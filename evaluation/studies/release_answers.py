"""The human answers on a release's items, for the release report: every study drawn from the release, scored items
only, answered, each named by the release's own item id and an opaque rater key."""

from __future__ import annotations

from annotator.models import Release
from evaluation.models import Assignment, StudyItem


def human_answers_on_release(release: Release) -> list[tuple[str, str, bool]]:
    """(item id, rater key, is correct) for every answered scored item of the studies on `release`, sorted.

    As the study report counts them: practice items and attention checks left out, too-fast answers kept (the
    report shows their number beside the accuracy, it does not drop them). Scored against the released record
    (an Assignment's `correct` is its choice of the record's answer), so correcting a pair later changes nothing.
    """
    answered = Assignment.objects.filter(
        item__study__release=release,
        item__kind=StudyItem.Kind.SCORED,
        item__release_item__release=release,
        answered_at__isnull=False,
    ).select_related("participant", "item__release_item")
    rows = [(a.item.release_item.item_id, a.participant.rater_key, bool(a.correct)) for a in answered.iterator()]
    return sorted(rows)


def release_studies_section(release: Release) -> list[dict]:
    """The release page's "studies on this release" and its report (annotator.releases.services.release_links)."""
    from django.urls import reverse

    from evaluation.models import Study

    studies = Study.objects.filter(release=release).order_by("created", "pk")
    rows = [
        {
            "label": study.name,
            "url": reverse("study-detail", args=[study.pk]),
            "detail": f"{study.baseline_label} · {study.items.scored().count()} scored items",
        }
        for study in studies
    ]
    report = [
        {
            "label": f"Report of {release.name}, {split} split",
            "url": reverse("release-report-split", args=[release.number, split]),
            "detail": "humans and every model, per category and domain, with clustered intervals; CSV, JSON, Markdown,"
            " LaTeX, SVG and PNG",
        }
        for split in ("test", "val")
    ]
    return [
        {
            "id": "release-studies",
            "title": "Studies on this release",
            "rows": rows,
            "empty": "No study is drawn from this release yet.",
        },
        {"id": "release-report-links", "title": "Report", "rows": report, "empty": ""},
    ]

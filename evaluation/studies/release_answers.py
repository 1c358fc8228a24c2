"""The human answers on a release's items, for the release report: every study drawn from the release, scored items
only, answered, each named by the release's own item id and an opaque rater key."""

from __future__ import annotations

from django.db.models import OuterRef, QuerySet

from annotator.models import Release
from annotator.models.pairs import public_since_of
from evaluation.models import Assignment, Study, StudyItem
from evaluation.models.studies import rater_key_of
from evaluation.studies.reports import public_answers


def release_answers(release: Release, split: str | None = None) -> QuerySet[Assignment]:
    """The human answers that count on `release` (on its `split` when one is given): the one definition, which the
    item-by-item answers below, the report's sums in the database (evaluation.results.report, from this queryset's
    SQL), its cache stamp and the public baseline all read.

    As the study report counts them: every study drawn from the release, scored items only (practice items and
    attention checks left out), on the release's own items, answered; too-fast answers kept (the report shows their
    number beside the accuracy, it does not drop them)."""
    answers = Assignment.objects.filter(
        item__study__release=release,
        item__kind=StudyItem.Kind.SCORED,
        item__release_item__release=release,
        answered_at__isnull=False,
    )
    return answers if split is None else answers.filter(item__release_item__split=split)


def human_answers_on_release(release: Release) -> list[tuple[str, str, bool]]:
    """(item id, rater key, is correct) for every answer of `release_answers(release)`, sorted.

    Scored against the released record (an Assignment's `correct` is its choice of the record's answer), so
    correcting a pair later changes nothing.
    """
    answered = release_answers(release).values_list("item__release_item__item_id", "participant__order_seed", "correct")
    return sorted((item_id, rater_key_of(seed), bool(correct)) for item_id, seed, correct in answered)


def release_public_answers(release: Release, split: str) -> dict:
    """What is public of the human baseline on `release`'s `split` (evaluation.studies.reports.public_answers): the
    items people answered that a published release holds, since when, the answers given before and after each became
    public, and "open book" when a study that answered was drawn knowingly on public items."""
    answered = release_answers(release, split)
    items = release.items.filter(pk__in=answered.values("item__release_item")).annotate(
        public_since=public_since_of(OuterRef("pair_id"))
    )
    since_of = dict(items.values_list("pk", "public_since"))
    public = [pk for pk, since in since_of.items() if since is not None]  # only their answers count
    answers = (
        list(answered.filter(item__release_item__in=public).values_list("item__release_item", "answered_at", "correct"))
        if public
        else []
    )
    open_book = Study.objects.filter(pk__in=answered.values("item__study"), open_book=True).exists()
    return public_answers(since_of, answers, of=len(since_of), open_book=open_book)


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
            "url": reverse("release-report-split", args=[release.name, split]),
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

"""The human answers on a synthetic sweep's pairs, one series per study (annotator.synthetic.services draws them on
the same axes as the models'): scored items only, answered, each rater's answer with an opaque rater key."""

from __future__ import annotations

from django.urls import reverse

from annotator.models import Sweep
from annotator.synthetic.services import Series
from evaluation.models import Assignment, Study, StudyItem


def human_series_on_sweep(sweep: Sweep) -> list[Series]:
    answered = (
        Assignment.objects.filter(
            item__pair__sweep_item__sweep=sweep, item__kind=StudyItem.Kind.SCORED, answered_at__isnull=False
        )
        .select_related("participant", "item")
        .order_by("item__study_id", "item__pair_id", "pk")
    )
    series: dict[int, Series] = {}
    for assignment in answered.iterator(chunk_size=2000):
        study_id = assignment.item.study_id
        if study_id not in series:
            study = Study.objects.get(pk=study_id)
            series[study_id] = Series(
                label=f"Humans: {study.name} (study {study_id})",
                kind="humans",
                answers=[],
                url=reverse("study-detail", args=[study_id]),
            )
        series[study_id].answers.append(
            (assignment.item.pair_id, assignment.participant.rater_key, bool(assignment.correct))
        )
    return list(series.values())

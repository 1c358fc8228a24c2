"""The everyday actions (rename, archive, delete: subtlebench/lifecycle.py) on human-baseline studies. An archived
study admits no new participant (evaluation/studies/participation.py); its answers and results stay."""

from __future__ import annotations

from django.urls import reverse

from evaluation.models import Study, StudyItem
from subtlebench.lifecycle import Managed

STUDIES = Managed(
    noun="study",
    model=Study,
    name_field="name",
    url_name="study-manage",
    list_page="study-list",
    page=lambda study: reverse("study-detail", args=[study.pk]),
    archived_means="it admits no new participant; its answers and results stay.",
    # The drawn sample goes with it; participants (invited or not) and their answers are dependents.
    part_models=(StudyItem,),
)

"""A study's pool can be one split of the benchmark export: the same split export_benchmark writes."""

from __future__ import annotations

import pytest

from annotator.export.services import ExportOptions, plan_export
from annotator.models import Category
from evaluation import studies
from evaluation.models import StudyItem
from tests.factories import make_pair

pytestmark = pytest.mark.django_db


def make_pool():
    pairs = []
    for index in range(24):
        category = (Category.TEMPORAL, Category.VIEWPOINT, Category.QUALITY)[index % 3]
        pairs.append(make_pair(category=category))  # each pair on its own video: 24 groups
    return pairs


@pytest.mark.parametrize("split", ["val", "test"])
def test_a_study_on_one_split_samples_only_that_splits_pairs(split):
    make_pool()
    plan = plan_export(ExportOptions(out="", val_fraction=0.25, seed=3))
    expected = {pk for pk in plan.included if plan.split_of(pk) == split}
    assert 0 < len(expected) < 24
    study = studies.study_create(
        name="split study", fraction=1.0, split=split, split_val_fraction=0.25, split_seed=3, practice_count=0
    )
    sampled = set(study.items.filter(kind=StudyItem.Kind.SCORED).values_list("pair_id", flat=True))
    assert sampled == expected
    assert (study.split, study.split_val_fraction, study.split_seed, study.pool_size) == (split, 0.25, 3, len(expected))


def test_without_a_split_the_pool_is_every_accepted_pair():
    make_pool()
    study = studies.study_create(name="all", fraction=1.0, practice_count=0)
    assert study.items.filter(kind=StudyItem.Kind.SCORED).count() == 24


def test_an_unknown_split_is_refused():
    make_pool()
    with pytest.raises(studies.StudyError, match="split: must be test, val or empty"):
        studies.study_create(name="x", split="train")


def test_the_api_and_the_summary_carry_the_split(client_for, coordinator):
    make_pool()
    client = client_for(coordinator)
    response = client.post(
        "/api/studies/create/",
        {"name": "val only", "fraction": 1.0, "split": "val", "split_val_fraction": 0.25, "practice_count": 0},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["split"] == "val"
    summary = client.get(f"/studies/{response.json()['id']}/summary.json").json()
    assert summary["study"]["filters"]["split"] == "val"

"""A study's pool is one split of a release: the split the release wrote, never the export planner run again."""

from __future__ import annotations

import pytest

from annotator.models import Category
from evaluation.models import StudyItem
from evaluation.studies import services as studies
from tests.factories import make_pair
from tests.release_factories import make_release

pytestmark = pytest.mark.django_db


def make_pool():
    pairs = []
    for index in range(24):
        category = (Category.TEMPORAL, Category.VIEWPOINT, Category.QUALITY)[index % 3]
        pairs.append(make_pair(category=category))  # each pair on its own video: 24 groups
    val = {pair.pk for pair in pairs[::4]}
    return make_release(pairs, split_of=lambda pair: "val" if pair.pk in val else "test")


@pytest.mark.parametrize("split", ["val", "test"])
def test_a_study_on_one_split_samples_only_that_splits_items(split):
    release = make_pool()
    expected = set(release.items.filter(split=split).values_list("pair_id", flat=True))
    assert 0 < len(expected) < 24
    study = studies.study_create(name="split study", release=release, fraction=1.0, split=split, practice_count=0)
    sampled = set(study.items.filter(kind=StudyItem.Kind.SCORED).values_list("pair_id", flat=True))
    assert sampled == expected
    assert (study.split, study.pool_size) == (split, len(expected))


def test_the_split_is_the_releases_test_split_unless_told():
    release = make_pool()
    study = studies.study_create(name="default", release=release, fraction=1.0, practice_count=0)
    assert study.split == "test" and study.items.scored().count() == 18


def test_an_unknown_split_is_refused():
    release = make_pool()
    with pytest.raises(studies.StudyError, match="split: must be test or val"):
        studies.study_create(name="x", release=release, split="train")


def test_the_api_and_the_summary_carry_the_split(client_for, coordinator):
    make_pool()
    client = client_for(coordinator)
    response = client.post(
        "/api/studies/create/",
        {"name": "val only", "fraction": 1.0, "split": "val", "practice_count": 0},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    assert (response.json()["split"], response.json()["release"]) == ("val", 1)
    summary = client.get(f"/studies/{response.json()['id']}/summary.json").json()
    assert summary["study"]["filters"]["split"] == "val"
    assert summary["study"]["release"] == {
        "number": 1,
        "name": "v1",
        "split": "val",
        "manifest_sha256": summary["study"]["release"]["manifest_sha256"],
    }
    assert summary["study"]["baseline"] == "Humans on release v1 (val)"

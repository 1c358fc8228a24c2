"""Paired comparisons on a release's items (evaluation.results.compare): two runs, or the humans' study answers and a
run, side by side with McNemar's test and the paired difference; the compare page shows them."""

from __future__ import annotations

import pytest

from annotator.llm.endpoints import endpoint_create
from annotator.models import Category
from benchmark.paired import binomial_two_sided
from evaluation.results.compare import paired_compare, run_side, side_of
from evaluation.runs.naming import run_name
from evaluation.runs.services import evaluation_run, evaluation_start
from evaluation.studies import participation
from evaluation.studies import services as studies
from tests.factories import make_pair
from tests.model_server import ModelServer
from tests.modeleval_release_factories import make_release

pytestmark = pytest.mark.django_db


def second_image(question: str, options: list[str]) -> str:
    return "second image"  # every item's answer here: always right


def first_shown(question: str, options: list[str]) -> str:
    return options[0]  # right only where the seed's shuffle put the answer first


@pytest.fixture
def release():
    pairs = [make_pair(category=Category.TEMPORAL if i % 2 else Category.QUANTITY) for i in range(12)]
    return make_release([(pair, "test", False) for pair in pairs])


def run_with(policy, coordinator, release, name):
    server = ModelServer(policy=policy).start()
    try:
        endpoint = endpoint_create(user=coordinator, name=name, base_url=server.base_url, model_id="tiny-vlm")
        evaluation = evaluation_start(endpoint=endpoint, user=coordinator, source="release", release=release, seed=5)
        return evaluation_run(evaluation_id=evaluation.pk)
    finally:
        server.stop()


def test_two_runs_are_compared_on_the_same_items_with_mcnemar_and_the_paired_difference(coordinator, release):
    right = run_with(second_image, coordinator, release, "always")
    biased = run_with(first_shown, coordinator, release, "biased")
    wrong = set(biased.results.filter(is_correct=False).values_list("release_item_id", flat=True))
    assert 0 < len(wrong) < 12  # the shuffle put the answer first for some items, not all
    paired = paired_compare(run_side(right, "test"), run_side(biased, "test"))
    overall = paired["overall"]
    # Every item the biased run got wrong the other got right: all discordant items are "A only".
    assert (overall["n"], overall["a_only"], overall["b_only"]) == (12, len(wrong), 0)
    assert overall["method"] == "exact binomial" and overall["statistic"] == 0.0
    assert overall["p_value"] == float(binomial_two_sided(0, len(wrong)))  # 2 / 2^k
    assert overall["difference"] == pytest.approx(len(wrong) / 12)
    assert overall["low"] < overall["difference"] <= overall["high"]
    # Per category, the same counts split.
    assert sum(row["a_only"] for row in paired["categories"]) == len(wrong)
    assert {row["name"] for row in paired["categories"]} == {"temporal", "quantity"}


def test_the_humans_study_answers_stand_as_one_side(coordinator, release):
    study = studies.study_create(name="S", release=release, fraction=1, practice_count=0)
    participant = studies.participant_create(study=study)
    participation.participant_answer_all(participant=participant, accuracy=1, seed=1)
    biased = run_with(first_shown, coordinator, release, "biased")
    humans = side_of(release, "humans", "test")
    assert len(humans) == study.items.scored().count() and all(score == 1 for score, _, _, _ in humans.values())
    paired = paired_compare(humans, run_side(biased, "test"))
    wrong = biased.results.filter(is_correct=False, release_item_id__in=list(humans)).count()
    assert (paired["overall"]["a_only"], paired["overall"]["b_only"]) == (wrong, 0)


def test_the_compare_page_shows_the_paired_table_and_refuses_one_side(client_for, coordinator, release):
    right = run_with(second_image, coordinator, release, "always")
    biased = run_with(first_shown, coordinator, release, "biased")
    client = client_for(coordinator)
    page = client.get("/models/compare/", {"release": release.pk, "a": right.pk, "b": biased.pk})
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="compare-paired"' in html and "exact binomial" in html
    assert f"A: {run_name(right)} · B: {run_name(biased)}" in html
    refused = client.get("/models/compare/", {"release": release.pk, "a": right.pk})
    assert refused.status_code == 400 and "two different sides" in refused.content.decode()
    same = client.get("/models/compare/", {"release": release.pk, "a": right.pk, "b": right.pk})
    assert same.status_code == 400

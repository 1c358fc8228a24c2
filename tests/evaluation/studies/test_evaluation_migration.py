"""Studies made before releases survive migration 0007: a study built on the previous schema is still there after
it, drawn from its pairs, "before releases", and still takes answers."""

from __future__ import annotations

import pytest

from annotator.models import Category
from evaluation.models import Study
from evaluation.studies import participation
from evaluation.studies import services as studies
from tests.database_template import latest_migrations, migrate
from tests.factories import make_pair

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("evaluation", "0006_total_default_orders")]


def test_a_study_built_on_the_previous_schema_is_kept_and_shown_before_releases():
    pairs = [make_pair(category=Category.STATE, question="In which image is the apple peeled more?") for _ in range(3)]
    old = migrate(BEFORE)
    try:
        OldStudy, OldItem = old.get_model("evaluation", "Study"), old.get_model("evaluation", "StudyItem")
        study = OldStudy.objects.create(name="Old study", fraction=1, split="", pool_size=3)
        for position, pair in enumerate(pairs, start=1):
            OldItem.objects.create(
                study=study, pair_id=pair.pk, kind="scored", category=pair.category, domain=pair.domain,
                position=position,
            )  # fmt: skip
    finally:
        migrate(latest_migrations())
    study = Study.objects.get(name="Old study")
    assert study.release is None and study.baseline_label == "Humans on the accepted pairs (before releases)"
    items = list(study.items.scored().order_by("position"))
    assert [item.pair_id for item in items] == [pair.pk for pair in pairs]
    assert all(item.release_item is None and item.presented().question == item.pair.question for item in items)

    participant = studies.participant_create(study=study)
    participation.participant_answer_all(participant=participant, accuracy=1, seed=0)
    assert participant.assignments.filter(correct=True).count() == 3

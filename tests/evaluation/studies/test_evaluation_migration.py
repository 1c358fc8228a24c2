"""Studies made before releases survive migration 0007: a study built on the previous schema is still there after
it, drawn from its pairs, "before releases", and still takes answers.

The previous schema is a database of its own at that state (`database_at`, cloned from a template built forward),
not the test's database migrated back: unapplying the dozens of migrations since took Django three times the CPU of
applying them (about 21 CPU-s for this test against 6)."""

from __future__ import annotations

import pytest

from evaluation.models import Study
from evaluation.studies import participation
from evaluation.studies import services as studies
from tests.database_template import database_at, latest_migrations, migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("evaluation", "0006_total_default_orders")]
QUESTION = "In which image is the apple peeled more?"


def test_a_study_built_on_the_previous_schema_is_kept_and_shown_before_releases():
    with database_at(BEFORE):
        old = migrate(BEFORE)
        Image, Pair = old.get_model("annotator", "Image"), old.get_model("annotator", "Pair")
        OldStudy, OldItem = old.get_model("evaluation", "Study"), old.get_model("evaluation", "StudyItem")
        pairs = []
        for n in range(3):
            first, second = (Image.objects.create(file=f"images/{n}{side}.jpg", width=8, height=8) for side in "ab")
            pairs.append(
                Pair.objects.create(
                    image_1=first,
                    image_2=second,
                    category="state",
                    domain="natural",
                    question=QUESTION,
                    answer="first image",
                    status="accepted",
                )  # fmt: skip
            )
        study = OldStudy.objects.create(name="Old study", fraction=1, split="", pool_size=3)
        for position, pair in enumerate(pairs, start=1):
            OldItem.objects.create(
                study=study, pair_id=pair.pk, kind="scored", category=pair.category, domain=pair.domain,
                position=position,
            )  # fmt: skip

        migrate(latest_migrations())
        study = Study.objects.get(name="Old study")
        assert study.release is None and study.baseline_label == "Humans on the accepted pairs (before releases)"
        items = list(study.items.scored().order_by("position"))
        assert [item.pair_id for item in items] == [pair.pk for pair in pairs]
        assert all(item.release_item is None and item.presented().question == QUESTION for item in items)

        participant = studies.participant_create(study=study)
        participation.participant_answer_all(participant=participant, accuracy=1, seed=0)
        assert participant.assignments.filter(correct=True).count() == 3

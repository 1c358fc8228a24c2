"""A populated database from before each session had its own completion code (evaluation 0015) migrates forward:
every finished session gets a code of its own, and a flag when it went faster than the minimum per answer, by the
rule new sessions follow; a session not finished gets neither."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.database_template import database_at, migrate

BEFORE = [("annotator", "0035_endpoint_key_help"), ("evaluation", "0015_retire_runs_before_releases")]
AFTER = [("annotator", "0035_endpoint_key_help"), ("evaluation", "0016_one_person_one_place")]


@pytest.mark.django_db(transaction=True)
def test_finished_sessions_get_their_own_code_and_the_too_fast_flag(settings):
    settings.STUDY_SESSION_MIN_SECONDS_PER_ITEM = 3
    with database_at(BEFORE):
        old = migrate(BEFORE)
        Image, Pair = (old.get_model("annotator", name) for name in ("Image", "Pair"))
        Study, StudyItem, Participant, Assignment = (
            old.get_model("evaluation", name) for name in ("Study", "StudyItem", "Participant", "Assignment")
        )
        study = Study.objects.create(name="Old", seed=1, fraction=1.0)
        items = []
        for n in range(2):
            first, second = (Image.objects.create(file=f"images/{n}{side}.jpg", width=8, height=8) for side in "ab")
            pair = Pair.objects.create(
                image_1=first, image_2=second, category="temporal", question="Which is later?", answer="second image"
            )
            items.append(StudyItem.objects.create(study=study, pair=pair, category="temporal", domain="natural"))
        now = timezone.now()
        # Two answers each: a session that took 4 s (under 2 x 3 s) and one that took 60 s; one never finished.
        sessions = {}
        for name, took, finished in (("fast", 4, True), ("slow", 60, True), ("open", 60, False)):
            sessions[name] = Participant.objects.create(
                study=study,
                consented_at=now - timedelta(seconds=took),
                finished_at=now if finished else None,
            )
            for sequence, item in enumerate(items, 1):
                Assignment.objects.create(
                    participant=sessions[name],
                    item=item,
                    sequence=sequence,
                    permutation=[0, 1],
                    lease_expires=now,
                    answered_at=now,
                    chosen=0,
                    correct=True,
                )

        new = migrate(AFTER)
        Participant = new.get_model("evaluation", "Participant")
        fast, slow, unfinished = (Participant.objects.get(pk=sessions[n].pk) for n in ("fast", "slow", "open"))
        assert (fast.too_fast, slow.too_fast, unfinished.too_fast) == (True, False, False)
        assert len(fast.completion_code) == 12 and len(slow.completion_code) == 12
        assert fast.completion_code != slow.completion_code and unfinished.completion_code == ""

"""The invites page counts as usable only the links the study has places for: four links to a study that admits
two participants are two usable links, and two that would find nothing left."""

from __future__ import annotations

import pytest

from evaluation.studies import services as studies
from evaluation.studies.views import study_admits
from tests.evaluation.studies.test_evaluation_integrity import make_pool

pytestmark = pytest.mark.django_db


def test_links_past_the_places_the_study_admits_are_not_usable(client_for, coordinator):
    make_pool(6)
    study = studies.study_create(name="S", fraction=0.5, practice_count=1, invites=4, items_per_participant=0)
    admits = study_admits(study)
    assert 0 < admits < 4, "a study that admits fewer participants than its links"
    page = client_for(coordinator).get(f"/studies/{study.pk}/invites/").content.decode()
    assert f"{admits} of 4 links can still be used: the study admits {admits} participant" in page
    assert page.count("no · no place left") == 4 - admits

from __future__ import annotations

import pytest

from annotator.models import Pair
from tests.factories import make_pair

pytestmark = pytest.mark.django_db


def test_it_reports_each_similarity_status(settings):
    settings.SIMILARITY_THRESHOLD = 0.8
    assert make_pair(similarity=None).similarity_status == "pending"
    assert make_pair(similarity=0.85).similarity_status == "pass"
    assert make_pair(similarity=0.8).similarity_status == "pass"
    assert make_pair(similarity=0.5).similarity_status == "fail"
    assert make_pair(similarity=0.5, similarity_override_reason="verified by hand").similarity_status == "override"


def test_it_explains_why_a_pair_cannot_be_accepted():
    assert "not computed" in make_pair(similarity=None).similarity_problem()
    assert "below the threshold" in make_pair(similarity=0.3).similarity_problem()
    assert make_pair(similarity=0.9).similarity_problem() is None


def test_exportable_pairs_are_accepted_and_pass_the_rule_or_carry_an_override():
    passing = make_pair(similarity=0.9)
    overridden = make_pair(similarity=0.4, similarity_override_reason="close-up, verified")
    make_pair(similarity=0.4)
    make_pair(similarity=None)
    make_pair(similarity=0.95, status=Pair.Status.SUBMITTED)
    assert set(Pair.objects.exportable()) == {passing, overridden}

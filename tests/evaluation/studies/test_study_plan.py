"""How many participants a new study's settings admit, shown before anyone is invited (issue 26): the form's live
summary, the warning when the invite links outnumber them, and the same numbers as the draw itself."""

from __future__ import annotations

import pytest

from annotator.models import Category, Domain
from evaluation.models import Study
from evaluation.studies import services as studies
from tests.factories import make_pair
from tests.release_factories import make_release

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("items", "raters", "each", "admitted"),
    [
        (10, 1, 0, 1),  # every item each: one person takes all
        (10, 3, 0, 3),
        (10, 1, 4, 3),  # 4 + 4 + 2
        (10, 2, 5, 4),
        (10, 1, 50, 1),  # more than there are: every item, once
        (0, 2, 5, 0),
    ],
)
def test_participants_admitted_are_the_places_over_the_items_each(items, raters, each, admitted):
    assert studies.participants_admitted(items=items, raters_per_item=raters, items_per_participant=each) == admitted


def release_of(count: int):
    categories = [Category.TEMPORAL, Category.STATE, Category.ACTION]
    return make_release([make_pair(category=categories[i % 3], domain=Domain.NATURAL) for i in range(count)])


@pytest.mark.parametrize(("fraction", "seed"), [(0.1, 0), (0.25, 3), (0.5, 7), (1.0, 1)])
def test_the_plan_draws_as_many_items_as_the_study_then_does(fraction, seed):
    release = release_of(13)
    plan = studies.study_plan(release=release, fraction=fraction, seed=seed, raters_per_item=2, items_per_participant=3)
    study = studies.study_create(
        name="S",
        release=release,
        fraction=fraction,
        seed=seed,
        practice_count=0,
        raters_per_item=2,
        items_per_participant=3,
    )
    drawn = study.items.scored().count()
    assert (plan["pool"], plan["items"]) == (13, drawn)
    assert plan["admitted"] == -(-drawn * 2 // min(3, drawn))


def test_the_form_summary_says_how_many_can_take_part_and_warns_about_dead_links(client_for, coordinator):
    release_of(12)
    client = client_for(coordinator)
    settings = {
        "release": "1",
        "split": "test",
        "fraction": "0.5",
        "seed": "0",
        "raters_per_item": "1",
        "items_per_participant": "0",
        "invites": "5",
    }
    page = client.get("/studies/plan/", settings).content.decode()
    assert '<strong id="plan-admitted">1</strong> participant can take part' in page
    assert "5 invite links, but these settings admit 1 participant: 4 links would find nothing left." in page
    fine = client.get("/studies/plan/", settings | {"items_per_participant": "2", "invites": "3"}).content.decode()
    assert '<strong id="plan-admitted">3</strong> participants can take part' in fine
    assert "plan-warning" not in fine
    assert "once the settings are valid" in client.get("/studies/plan/", settings | {"fraction": "2"}).content.decode()


def test_creating_a_study_that_admits_fewer_than_its_invites_says_so(client_for, coordinator):
    release_of(12)
    form = {
        "name": "Too many links",
        "release": "1",
        "split": "test",
        "fraction": "0.5",
        "seed": "0",
        "raters_per_item": "1",
        "practice_count": "0",
        "items_per_participant": "0",
        "invites": "5",
        "open_cap": "0",
    }
    response = client_for(coordinator).post("/studies/create/", form, follow=True)
    study = Study.objects.get(name="Too many links")
    assert study.participants.count() == 5
    assert "5 invite links, but the study admits 1 participant: 4 links will find nothing left." in (
        response.content.decode()
    )


def test_the_new_study_defaults_admit_phones_and_invite_no_more_than_they_admit(client_for, coordinator):
    release_of(6)
    page = client_for(coordinator).get("/studies/").content.decode()
    assert 'name="min_viewport_width" value="360"' in page
    assert 'name="invites" value="1"' in page and 'name="items_per_participant" value="0"' in page
    assert 'name="raters_per_item" value="1"' in page

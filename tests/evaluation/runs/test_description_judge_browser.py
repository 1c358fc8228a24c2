"""The pages of issue 28 in a real Chromium at 1440x900: a description run's page with its judge and intervals, the
start form's task and judge, the judge checked by a person, the release report's description section and the paired
comparison; screenshots for the record (SCREENSHOT_DIR)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotator.llm.endpoints import endpoint_create
from evaluation.runs.services import evaluation_run, evaluation_start
from tests.conftest import browser_login
from tests.evaluation.runs.test_description_judge import world  # noqa: F401 (the fixture)
from tests.evaluation.runs.test_modeleval_browser import shot
from tests.model_server import ModelServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def first_shown(question: str, options: list[str]) -> str:
    return options[0]


def test_a_description_run_its_judge_check_the_report_and_a_paired_comparison(page, world, coordinator):  # noqa: F811
    release = world["release"]
    model = endpoint_create(user=coordinator, name="describer", base_url=world["model"].base_url, model_id="tiny-vlm")
    judge = endpoint_create(user=coordinator, name="judge", base_url=world["judge"].base_url, model_id="tiny-judge")
    described = evaluation_start(
        endpoint=model, user=coordinator, source="release", release=release, task="description", judge=judge
    )
    evaluation_run(evaluation_id=described.pk)
    biased = ModelServer(policy=first_shown).start()
    try:
        plain = endpoint_create(user=coordinator, name="biased", base_url=biased.base_url, model_id="tiny-vlm")
        runs = [
            evaluation_run(
                evaluation_id=evaluation_start(
                    endpoint=plain, user=coordinator, source="release", release=release, circular=circular
                ).pk
            )
            for circular in (False, True)
        ]
    finally:
        biased.stop()
    browser_login(page, "cora")

    page.goto("/models/runs/new/")
    page.get_by_label("description (judged against captions)").check()
    page.locator("#run-judge summary").click()
    expect(page.locator("textarea[name=judge_user]")).to_have_value(
        "Reference (the person's caption):\n{caption}\n\nDescription to grade:\n{description}\n\n"
        "Does the description match the reference?"
    )
    shot(page, "run-new-description")

    page.goto(f"/models/runs/{described.pk}/")
    expect(page.locator("#run-task")).to_contain_text("description")
    expect(page.locator("#run-judge")).to_contain_text("judge")
    expect(page.locator("#run-intervals")).to_contain_text("all answered items")
    shot(page, "run-description")

    page.goto(f"/models/runs/{runs[1].pk}/")
    expect(page.locator("#run-task")).to_contain_text("circular")
    shot(page, "run-circular")

    page.goto(f"/models/runs/{described.pk}/")
    page.get_by_role("link", name="check the judge").click()
    expect(page.locator("#judge-check-progress")).to_contain_text("you judged 0 of")
    shot(page, "judge-check")
    page.get_by_role("button", name="Matches").click()
    expect(page.locator("#judge-check-progress")).to_contain_text("you judged 1 of")

    page.goto(f"/releases/v{release.number}/report/")
    expect(page.locator("#report-descriptions")).to_contain_text("describer")
    shot(page, "release-report-descriptions")

    page.goto(f"/models/compare/?release={release.pk}&a={runs[0].pk}&b={runs[1].pk}")
    expect(page.locator("#compare-paired")).to_contain_text("all categories")
    shot(page, "compare-paired")

"""The release report in a browser: the runs chosen by their checkboxes, one model's strategy table chosen by its
select, and a run's label saved on its page."""

from __future__ import annotations

import os

import pytest

from evaluation.runs.naming import run_name
from evaluation.runs.strategies import STRATEGIES
from tests.conftest import browser_login
from tests.evaluation.results.test_run_names import TEST_ITEMS, humans, make_release_run, release, right  # noqa: F401
from tests.model_fixtures import make_endpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
# Set EVALUATION_SCREENSHOTS=/tmp/somewhere to keep a screenshot of the report for a look.
SHOTS = os.environ.get("EVALUATION_SCREENSHOTS", "")


def test_the_coordinator_picks_the_runs_and_the_model_of_the_strategy_table(page, release, humans, coordinator):  # noqa: F811
    model, other = make_endpoint("gpt-4o"), make_endpoint("claude")
    runs = {
        strategy: make_release_run(
            release, model, strategy=strategy, answers={i: right(s, n) for n, i in enumerate(TEST_ITEMS)}
        )
        for s, strategy in enumerate(STRATEGIES)
    }
    make_release_run(release, other, strategy="grid", answers={i: right(4, n) for n, i in enumerate(TEST_ITEMS)})
    browser_login(page, coordinator.username)
    page.goto("/releases/v1/report/")
    assert page.locator("#report-figure-note").inner_text().startswith("The figure draws the humans and the 5 best")
    strategies = page.locator("#report-strategies tbody tr td:first-child")
    assert strategies.all_inner_texts() == ["grid", "Humans"]  # the first model by name: claude, one strategy
    page.select_option("#report-strategies select[name=model]", str(model.pk))
    page.click("#report-strategies button[type=submit]")
    page.wait_for_url(f"**model={model.pk}**")
    assert page.locator("#report-strategies tbody tr td:first-child").all_inner_texts() == [*STRATEGIES, "Humans"]
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, "release-report-strategies.png"), full_page=False)
        page.locator("#report-strategies").screenshot(path=os.path.join(SHOTS, "release-report-strategies-table.png"))
    grid = runs["grid"]
    page.locator("#report-runs input[type=checkbox]").evaluate_all("boxes => boxes.forEach(b => b.checked = false)")
    page.check(f"#report-runs input[value='{grid.pk}']")
    page.click("#report-runs button[type=submit]")
    page.wait_for_url(f"**runs={grid.pk}**")
    names = page.locator("#report-accuracy tbody tr td:first-child").all_inner_texts()
    assert names == ["Humans", run_name(grid)]
    page.goto(f"/models/runs/{grid.pk}/")
    page.fill("#run-label-form input[name=label]", "paper grid")
    page.click("#run-label-form button[type=submit]")
    page.wait_for_selector("text=Label saved.")
    assert page.locator("#run-name").inner_text().startswith("paper grid — gpt-4o · grid")

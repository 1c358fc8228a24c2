"""The models-beside-humans pages in real Chromium: the compare page, the per-item view, the study dashboard's model
rows, the review page's k of n and the overview's per-category model success."""

from __future__ import annotations

import json
import os
import random
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotator.models import Category, Domain
from evaluation.models import Assignment
from evaluation.studies import services as studies
from subtlebench.roles import COORDINATOR, REVIEWER
from tests.conftest import browser_login, make_user
from tests.factories import make_pair
from tests.model_fixtures import import_into_study, make_endpoint, make_run, record

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set SCREENSHOT_DIR=/tmp/somewhere to keep a screenshot of each page for a look.
SCREENSHOTS = os.getenv("SCREENSHOT_DIR", "")

CATEGORIES = [Category.TEMPORAL, Category.VIEWPOINT, Category.STATE, Category.ACTION, Category.QUALITY]


def shot(page, name: str) -> None:
    if SCREENSHOTS:
        page.screenshot(path=os.path.join(SCREENSHOTS, f"{name}-1440.png"), full_page=True)


def build_world():
    rng = random.Random(4)
    pairs = [
        make_pair(
            category=CATEGORIES[i % len(CATEGORIES)], domain=[Domain.NATURAL, Domain.GAMING][i % 2 if i % 3 else 0]
        )
        for i in range(40)
    ]
    study = studies.study_create(name="Baseline v1", fraction=1, practice_count=0)
    people = [studies.participant_create(study=study) for _ in range(2)]
    now = timezone.now()
    for n, item in enumerate(study.items.scored()):
        for person in people:
            correct = rng.random() < 0.93
            Assignment.objects.create(
                participant=person,
                item=item,
                sequence=n + 1,
                permutation=[0, 1],
                lease_expires=now + timedelta(hours=1),
                answered_at=now,
                chosen=0 if correct else 1,
                correct=correct,
            )
    skill = {"qwen2.5-vl-7b": 0.62, "internvl3-8b": 0.71}
    for name, p in skill.items():
        run = make_run(make_endpoint(name), study_id=study.pk)
        for pair in pairs:
            record(run, pair, None if rng.random() < 0.05 else rng.random() < p)
    entries = [{"question_id": item.question_id, "is_correct": rng.random() < 0.78} for item in study.items.scored()]
    import_into_study(study, name="gpt-4o", content=json.dumps(entries).encode())
    return study, pairs


def test_the_model_pages_show_models_beside_the_humans(page, live_server):
    study, pairs = build_world()
    make_user("lead", COORDINATOR, REVIEWER)
    browser_login(page, "lead")

    page.goto(f"/studies/models/?study={study.pk}")
    expect(page.locator(".model-beside")).to_have_count(3)
    expect(page.locator(".model-beside h3").first).to_contain_text("internvl3-8b")
    shot(page, "models-compare")

    page.goto(f"/studies/models/misses/?study={study.pk}")
    expect(page.locator("#misses tbody tr").first).to_be_visible()
    shot(page, "models-misses")
    first = page.locator("#misses tbody tr a").first
    pair_id = first.inner_text()
    first.click()
    expect(page).to_have_url(f"{live_server.url}/review/pairs/{pair_id}/")
    expect(page.locator("#model-score")).to_contain_text("correct")
    shot(page, "review-k-of-n")

    page.goto(f"/studies/{study.pk}/")
    expect(page.locator("#paper-table")).to_contain_text("gpt-4o · standard · multiple choice (imported)")
    expect(page.locator("#paper-table")).to_contain_text("qwen2.5-vl-7b")
    page.locator("#models-beside").scroll_into_view_if_needed()
    shot(page, "study-dashboard")
    if SCREENSHOTS:
        page.locator("#models-beside").screenshot(path=os.path.join(SCREENSHOTS, "study-model-rows-1440.png"))

    page.goto("/overview/")
    temporal = page.locator("#per-category tr", has_text="temporal")
    expect(temporal.locator(".models-correct")).to_contain_text("%")
    shot(page, "picking-overview")

    page.goto("/exports/")
    expect(page.locator("#id_max_model_accuracy")).to_be_visible()
    page.fill("#id_max_model_accuracy", "0.5")
    page.click("button[value=preview]")
    expect(page.locator("#export-preview")).to_be_visible()
    shot(page, "exports-model-filter")

"""The workbench's suggestions on the demo data: subtle pairs and pairs under the rule, each with its reason, and
the numbers labelled as the demo model's."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from annotator.models import Video
from annotator.picking import services as picking
from demo.similarity import seed_demo_similarity
from demo.videos import demo_videos_seed
from tests import similarity_fixtures
from tests.conftest import browser_login
from tests.demo_fixtures import cached_demo_videos
from tests.disk_cache import cache_root

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
no_dinov3 = similarity_fixtures.no_dinov3

# Set SCREENSHOT_DIR to keep screenshots of the pages these tests open (the lead looks at them).
SHOTS = Path(os.environ["SCREENSHOT_DIR"]) if os.environ.get("SCREENSHOT_DIR") else None


def test_the_demo_workbench_suggests_pairs_over_the_rule_and_shows_pairs_under_it_with_why(
    no_dinov3, page, annotator, tmp_path, request, tmp_path_factory
):
    # The demo's own videos, as seed_demo makes them (their files from the pytest cache), and its seeded demo model.
    cached_demo_videos(cache_root(request, tmp_path_factory, "demo"), Path(settings.IMPORT_ROOTS[0]) / "demo")
    assert demo_videos_seed() is not None  # imported and sampled here, not found done
    seed_demo_similarity(folder=tmp_path / "demo-model")
    video = Video.objects.get(yt8m_id="demo_evening_light")
    picking.video_heartbeat(video=video, user=annotator)
    browser_login(page, annotator.username)
    page.goto(f"/work/videos/{video.pk}/")

    expect(page.locator("#suggestions-demo")).to_be_visible()
    expect(page.locator("#suggestions-demo")).to_contain_text("not DINOv3")
    subtle = page.locator("#suggestions li:not(.muted)")
    under = page.locator("#suggestions-under li")
    expect(subtle.first).to_contain_text(": subtle (at least 0.8, under the near-duplicate ceiling 0.995)")
    expect(under).to_have_count(5)
    expect(under.first).to_contain_text("< 0.8: the frames differ too much to count as a subtle pair")
    expect(page.locator("#suggestions-counts")).to_have_text(
        re.compile(r"^[1-9]\d* subtle · [1-9]\d* under the threshold · \d+ near-duplicate$")
    )
    # A pair under the rule can be loaded to look at, and the similarity badge fails it.
    under.first.locator("button").click()
    expect(page.locator("#similarity")).to_have_class(re.compile(r"badge-fail"))
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("#suggestions").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "demo-workbench-suggestions.png"), full_page=True)

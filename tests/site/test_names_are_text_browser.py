"""Names are text, in a real Chromium: markup planted in every field that comes from outside (an imported image's
file name, a collection, a sweep's title, an endpoint's name, a run's label, a model's reply, a caption, a question,
a study's name) shows on the pages that print it as the literal text it is; no element is made from it and no page
is sent elsewhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from annotator.collections.services import collection_import
from annotator.models import Caption, Collection, Pair, PairCandidate, Release, ReleaseItem, Sweep
from annotator.synthetic.services import sweep_create
from evaluation.studies import services as studies
from tests.collection_fixtures import picture
from tests.conftest import browser_login
from tests.evaluation.results.test_run_names import make_release_run
from tests.factories import make_pair
from tests.model_fixtures import make_endpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set SCREENSHOT_DIR=/tmp/somewhere to keep a screenshot of each page for a look.
SHOTS = Path(os.environ["SCREENSHOT_DIR"]) if os.environ.get("SCREENSHOT_DIR") else None

MARK = '<img src=x onerror=alert(1)><meta http-equiv="refresh" content="0;url=http://example.invalid/">'
# A file name cannot hold a slash: the same markup, its refresh aimed at a host all the same.
FILE_MARK = '<img src=x onerror=alert(1)><meta http-equiv="refresh" content="0;url=http:example.invalid">'
# A collection's name is a slug wherever it is given; planted in the row all the same, as short as the column allows.
SHORT_MARK = "<img src=x onerror=alert(1)>"


class Planted:
    """Watches one page for what the planted markup would do if it were parsed: an image asking for `x`, a request
    to example.invalid, a dialog, a navigation away from the page visited."""

    def __init__(self, page):
        self.page = page
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        page.on("request", self.on_request)
        page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))

    def on_request(self, request):
        url = request.url
        if "example.invalid" in url or url.rstrip("/").rsplit("/", 1)[-1] == "x":
            self.requests.append(url)

    def visit(self, path: str, *texts: str, name: str) -> None:
        response = self.page.goto(path)
        assert response.status == 200, f"{path} answered {response.status}"
        self.page.wait_for_load_state("networkidle")
        self.page.wait_for_timeout(300)  # a refresh of 0 s would have left by now
        self.check(path, *texts)
        if SHOTS is not None:
            SHOTS.mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(SHOTS / f"names-{name}.png"), full_page=True)

    def check(self, path: str, *texts: str) -> None:
        assert self.page.url.startswith(self.page.context.base_url) and path.split("?")[0] in self.page.url, (
            f"{path}: the page went to {self.page.url}"
        )
        shown = self.page.evaluate("document.body.textContent")
        for text in texts:
            assert text in shown, f"{path}: {text!r} is not on the page as text"
        made = self.page.evaluate(
            """() => ({
                meta: document.querySelectorAll("meta[http-equiv]").length,
                img: [...document.images].filter((img) => img.getAttribute("src") === "x").length,
                onerror: document.querySelectorAll("[onerror]").length,
            })"""
        )
        assert made == {"meta": 0, "img": 0, "onerror": 0}, f"{path}: elements made from the markup: {made}"
        assert not self.requests and not self.dialogs, f"{path}: {self.requests} {self.dialogs}"


@pytest.fixture
def planted(tmp_path, annotator, reviewer, coordinator):
    """Markup in every outside-facing field the pages below print."""
    folder = tmp_path / "levir"
    picture(folder / f"A/{FILE_MARK}.png", 60)
    picture(folder / f"B/{FILE_MARK}.png", 62, spot=(10, 4, 19, 11))
    job = collection_import(source=str(folder), name="planted", domain="aerial", created_by=coordinator, sync=True)
    assert job.status == "succeeded", job.errors
    candidate = PairCandidate.objects.get()
    Collection.objects.filter(name="planted").update(name=SHORT_MARK)

    question = make_pair(status=Pair.Status.SUBMITTED, question=MARK, author=annotator)
    accepted = make_pair(question=MARK)
    Caption.objects.create(pair=accepted, author=annotator, text=MARK, status=Caption.Status.SUBMITTED)

    sweep = sweep_create(
        user=coordinator, family="quantity", axes=[{"factor": "object_size", "levels": [10, 20]}],
        items_per_cell=1, size=96, title=MARK, send=False,
    )  # fmt: skip
    Sweep.objects.filter(pk=sweep.pk).update(title=MARK)  # as a title from outside would be stored

    release = Release.objects.create(number=1, manifest_sha256="0" * 64, content_sha256="1" * 64, card="# card\n")
    ReleaseItem.objects.create(
        release=release, item_id="temporal_planted_1", split="test", position=1, line="{}", provenance="{}",
        category=accepted.category, domain=accepted.domain, cluster="yt8m:planted", pair=accepted,
        image_1=accepted.image_1, image_2=accepted.image_2, image_1_sha256="a" * 64, image_2_sha256="b" * 64,
    )  # fmt: skip
    endpoint = make_endpoint(MARK)
    run = make_release_run(release, endpoint, label=MARK, answers={"temporal_planted_1": False})
    run.results.update(response_text=MARK)

    study = studies.study_create(name=MARK, fraction=0.5, practice_count=0, open_cap=5)
    return {"candidate": candidate, "pair": question, "sweep": sweep, "run": run, "study": study}


def test_markup_planted_in_every_outside_field_shows_as_text_on_every_page(browser_pages, planted):
    annotator = browser_pages.new_page()
    browser_login(annotator, "alice")
    watch = Planted(annotator)
    # The workbench: the compare viewer's labels and the filmstrip's titles are the imported files' names.
    watch.visit(f"/work/candidates/{planted['candidate'].pk}/", f"A/{FILE_MARK}.png", f"B/{FILE_MARK}.png",
                name="workbench")  # fmt: skip
    for key in ("f", "ArrowRight", "a", "ArrowLeft", "b"):  # flick to B, set A and B anew: every label drawn again
        annotator.keyboard.press(key)
    annotator.wait_for_timeout(200)
    watch.check("/work/candidates/", f"{FILE_MARK}.png")

    reviewer = browser_pages.new_page()
    browser_login(reviewer, "rita")
    watch = Planted(reviewer)
    watch.visit(f"/review/pairs/{planted['pair'].pk}/", MARK, name="review")
    watch.visit("/captions/review/", MARK, name="captions-review")

    coordinator = browser_pages.new_page()
    browser_login(coordinator, "cora")
    watch = Planted(coordinator)
    run, sweep, study = planted["run"], planted["sweep"], planted["study"]
    for path, texts, name in (
        ("/collections/", [SHORT_MARK], "collections"),
        ("/tables/pairs/", [MARK[:60]], "pairs-table"),  # the question cut to 70 characters
        ("/synthetic/", [MARK], "sweeps"),
        (f"/synthetic/{sweep.pk}/", [MARK], "sweep"),
        ("/models/", [MARK], "models"),
        (f"/models/runs/{run.pk}/", [MARK], "run"),
        ("/models/compare/", [MARK], "compare"),
        ("/releases/v1/report/", [MARK], "release-report"),
        ("/studies/", [MARK], "studies"),
        (f"/studies/{study.pk}/", [MARK], "study"),
    ):
        watch.visit(path, *texts, name=name)

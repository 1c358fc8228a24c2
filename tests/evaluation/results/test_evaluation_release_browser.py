"""A participant in real Chromium sees a release's swapped binary items in the released image order, and answering
as the released record says is scored correct."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from PIL import Image as PILImage

from annotator.models import Category, Frame
from evaluation.models import Assignment, StudyItem
from evaluation.studies import services as studies
from tests.conftest import browser_login
from tests.factories import make_image, make_pair, make_video
from tests.release_factories import make_release

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set EVALUATION_SCREENSHOTS=/tmp/somewhere to keep screenshots of the pages for a look.
SHOTS = os.getenv("EVALUATION_SCREENSHOTS", "")


def shot(page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, f"release-study-{name}.png"), full_page=True)


def file_bytes(image) -> bytes:
    with image.file.open("rb") as handle:
        return handle.read()


def grey_pixels(data: bytes, size: tuple[int, int]) -> np.ndarray:
    with PILImage.open(io.BytesIO(data)) as picture:
        return np.asarray(picture.convert("L").resize(size), dtype=np.float64)


def which_image(served: bytes, images) -> int:
    """The index of the stored image whose pixels the served bytes show: participants get every image encoded again
    for them (evaluation/studies/served_images.py), never the stored bytes, so images are told apart by their pixels."""
    size = (images[0].width, images[0].height)
    distances = [np.abs(grey_pixels(served, size) - grey_pixels(file_bytes(image), size)).mean() for image in images]
    return distances.index(min(distances))


def far_apart_video():
    """A video of two frames whose square lies 40 pixels apart: unmistakable after a participant's re-encoding."""
    video = make_video(frames=0)
    for index, shift in enumerate((0, 40)):
        image = make_image(shift=shift, name=f"frames/{video.yt8m_id}/{index:06d}.jpg")
        Frame.objects.create(video=video, index=index, timestamp=index, pts=index * 1000, image=image)
    return video


def take_part(page, study, width: int) -> int:
    """Consent, then answer every item as its released record says; returns the items that were swapped."""
    participant = studies.participant_create(study=study)
    page.goto(f"/p/{participant.token}/")
    page.check("input[name=agree]")
    with page.expect_navigation():
        page.click("#start")
    swapped_seen = 0
    for number in range(study.items.scored().count()):
        page.wait_for_selector("#answer-form")
        current = Assignment.objects.select_related("item__release_item", "item__pair").get(
            participant=participant, answered_at__isnull=True, item__kind=StudyItem.Kind.SCORED
        )
        released, pair = current.item.release_item, current.item.pair
        shown = [page.request.get(src).body() for src in page.locator(".p-images img").evaluate_all(
            "images => images.map(image => image.src)"
        )]  # fmt: skip
        assert [which_image(data, [released.image_1, released.image_2]) for data in shown] == [0, 1]
        assert not {*shown} & {file_bytes(released.image_1), file_bytes(released.image_2)}  # never the stored bytes
        if released.swapped:
            swapped_seen += 1
            assert which_image(shown[0], [pair.image_1, pair.image_2]) == 1
            assert current.item.presented().answer != pair.answer  # the answer flipped with the images
        if number == 0:
            shot(page, f"item-{width}")
        answer = released.record["answer"]
        with page.expect_navigation():
            page.locator("button.p-option", has_text=answer).click()
    page.wait_for_selector("#completion-code")
    answers = Assignment.objects.filter(participant=participant, item__kind=StudyItem.Kind.SCORED)
    assert answers.count() == study.items.scored().count() and all(a.correct for a in answers)
    return swapped_seen


@pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)])
def test_a_participant_sees_the_released_image_order_and_the_released_answer_scores(
    browser_pages, coordinator, width, height
):
    question = "In which image is the apple peeled more?"
    pairs = [make_pair(category=Category.STATE, question=question, video=far_apart_video()) for _ in range(4)]
    release = make_release(pairs, swapped={pairs[0].pk, pairs[2].pk})
    study = studies.study_create(
        name="On release v1", release=release, fraction=1, practice_count=0, min_viewport_width=360
    )
    page = browser_pages.new_page(viewport={"width": width, "height": height})
    assert take_part(page, study, width) == 2

    if width == 1440:
        coordinator_page = browser_pages.new_page()
        browser_login(coordinator_page, "cora")
        coordinator_page.goto(f"/studies/{study.pk}/")
        assert coordinator_page.inner_text("#baseline") == "Humans on release v1 (test)"
        assert "100.0%" in coordinator_page.inner_text("#acc-micro")
        shot(coordinator_page, "dashboard")
        coordinator_page.goto("/studies/")
        shot(coordinator_page, "list")

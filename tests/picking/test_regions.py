"""Difference regions on pairs: submitted from the workbench's frames A/B (landing on the right image when the app
swaps them), checked against the image sizes with errors that name the region and field, required per category
by the coordinator, kept in drafts, corrected in review (recorded in the review's changes)."""

from __future__ import annotations

import pytest

from annotator.models import Pair, Review, TeamSettings
from annotator.picking import services as picking
from tests.factories import make_pair, make_video

pytestmark = pytest.mark.django_db

BOX_A = {"frame": "a", "x": 10, "y": 20, "w": 30, "h": 40}
BOX_B = {"frame": "b", "x": 100, "y": 60, "w": 50, "h": 50, "label": "the lamp"}


def body(video, **fields):
    values = {
        "video": video.pk,
        "index_a": 0,
        "index_b": 3,
        "category": "quality",
        "question": "Which image of the harbour is sharper?",
        "answer_frame": "b",
        "client_key": fields.pop("key", "k" * 32),
        "regions": [BOX_A, BOX_B],
    }
    values.update(fields)
    return values


def submit(client, video, **fields):
    return client.post("/api/pairs/submit/", body(video, **fields), content_type="application/json")


def image_of(video, index):
    return video.frames.get(index=index).image_id


@pytest.mark.parametrize("answer_frame", ["a", "b"])
def test_a_box_on_frame_a_lands_on_the_image_that_shows_frame_a(client_for, annotator, answer_frame):
    video = make_video(frames=5)
    picking.video_lease_next(user=annotator)
    response = submit(client_for(annotator), video, answer_frame=answer_frame)
    assert response.status_code == 201, response.json()
    pair = Pair.objects.get()
    on_a = 1 if pair.image_1_id == image_of(video, 0) else 2
    other = pair.image_2_id if on_a == 1 else pair.image_1_id
    assert other == image_of(video, 3)
    assert pair.regions == [
        {"image": on_a, "x": 10, "y": 20, "w": 30, "h": 40},
        {"image": 3 - on_a, "x": 100, "y": 60, "w": 50, "h": 50, "label": "the lamp"},
    ]
    assert response.json()["regions"] == pair.regions


def test_answer_balancing_swaps_some_pairs_and_their_regions_follow(client_for, annotator):
    """Two binary pairs in a row get the answer in both positions: one of them is swapped."""
    video = make_video(frames=6)
    picking.video_lease_next(user=annotator)
    client = client_for(annotator)
    for key, (a, b) in (("p" * 32, (0, 3)), ("q" * 32, (1, 4)), ("r" * 32, (2, 5))):
        assert submit(client, video, key=key, index_a=a, index_b=b).status_code == 201
    pairs = list(Pair.objects.order_by("pk"))
    assert {pair.swapped for pair in pairs} == {True, False}
    for pair in pairs:
        frame_a = image_of(video, int(pair.source_id.split("_")[1 if not pair.swapped else 2]))
        box_a = next(region for region in pair.regions if region["w"] == 30)
        assert (pair.image_1_id if box_a["image"] == 1 else pair.image_2_id) == frame_a


def test_a_box_outside_its_image_is_refused_naming_the_region(client_for, annotator):
    video = make_video(frames=5)  # frames of 160×120
    picking.video_lease_next(user=annotator)
    outside = {"frame": "b", "x": 150, "y": 0, "w": 20, "h": 10}
    response = submit(client_for(annotator), video, regions=[BOX_A, outside])
    assert response.status_code == 400
    message = response.json()["errors"]["regions"][0]
    assert message.startswith("region 2: the box (150, 0, 20×10) runs outside image")
    assert "(160×120)" in message
    assert not Pair.objects.exists()


@pytest.mark.parametrize(
    ("region", "message"),
    [
        ({"frame": "a", "x": "left", "y": 0, "w": 5, "h": 5}, "region 2: x: A valid integer is required."),
        ({"frame": "c", "x": 0, "y": 0, "w": 5, "h": 5}, 'region 2: frame: "c" is not a valid choice.'),
        (
            {"frame": "a", "x": 0, "y": 0, "w": 0, "h": 5},
            "region 2: w: Ensure this value is greater than or equal to 1.",
        ),
        ({"frame": "a", "x": 0, "y": 0, "w": 5}, "region 2: h: This field is required."),
    ],
)
def test_a_malformed_region_is_refused_naming_the_region_and_field(client_for, annotator, region, message):
    video = make_video(frames=5)
    picking.video_lease_next(user=annotator)
    response = submit(client_for(annotator), video, regions=[BOX_A, region])
    assert response.status_code == 400
    assert response.json()["errors"]["regions"] == [message]
    assert not Pair.objects.exists()


def test_a_category_the_coordinator_marks_needs_a_region(client_for, annotator, coordinator):
    video = make_video(frames=5)
    picking.video_lease_next(user=annotator)
    client = client_for(coordinator)
    response = client.post("/stats/regions/", {"categories": ["quality", "state"]})
    assert response.status_code == 302
    assert TeamSettings.current().regions_required == ["state", "quality"]
    client = client_for(annotator)
    refused = submit(client, video, regions=[])
    assert refused.status_code == 400
    assert refused.json()["errors"]["regions"][0].startswith("A quality pair needs at least one difference region")
    assert (
        submit(
            client,
            video,
            key="m" * 32,
            category="action",
            question="What did the man do?",
            answer="waved",
            distractors=["sat"],
            regions=[],
        ).status_code
        == 201
    )
    assert submit(client, video, key="n" * 32, index_a=1, index_b=4).status_code == 201


def test_an_unknown_category_in_the_setting_is_refused(client_for, coordinator):
    response = client_for(coordinator).post("/stats/regions/", {"categories": ["quality", "colour"]}, follow=True)
    assert "colour" in response.content.decode()
    assert TeamSettings.current().regions_required == []


def test_regions_travel_with_the_draft(client_for, annotator):
    video = make_video(frames=5)
    client = client_for(annotator)
    state = {"a": 0, "b": 3, "regions": [BOX_A]}
    saved = client.put(
        f"/api/videos/{video.pk}/draft/", {"state": state, "version": 0}, content_type="application/json"
    )
    assert saved.status_code == 200
    assert client.get(f"/api/videos/{video.pk}/draft/").json()["state"]["regions"] == [BOX_A]


def test_a_reviewer_corrects_the_regions_and_the_review_records_them(client_for, reviewer):
    pair = make_pair(status=Pair.Status.SUBMITTED, regions=[{"image": 1, "x": 1, "y": 1, "w": 5, "h": 5}])
    new = [{"image": 2, "x": 40, "y": 30, "w": 20, "h": 10}]
    response = client_for(reviewer).post(
        f"/api/pairs/{pair.pk}/review/",
        {"decision": "correct", "version": pair.version, "corrections": {"regions": new}},
        content_type="application/json",
    )
    assert response.status_code == 200, response.json()
    pair.refresh_from_db()
    assert pair.regions == new and pair.status == Pair.Status.ACCEPTED
    review = Review.objects.get(pair=pair)
    assert review.changes == {"regions": {"old": [{"image": 1, "x": 1, "y": 1, "w": 5, "h": 5}], "new": new}}


def test_a_reviewers_region_outside_the_image_is_refused_and_nothing_changes(client_for, reviewer):
    pair = make_pair(status=Pair.Status.SUBMITTED)
    response = client_for(reviewer).post(
        f"/api/pairs/{pair.pk}/review/",
        {
            "decision": "correct",
            "version": pair.version,
            "corrections": {"regions": [{"image": 1, "x": 0, "y": 100, "w": 10, "h": 30}]},
        },
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["errors"]["regions"] == ["region 1: the box (0, 100, 10×30) runs outside image 1 (160×120)."]
    pair.refresh_from_db()
    assert pair.status == Pair.Status.SUBMITTED and pair.regions == []
    assert not Review.objects.exists()


# --- Drawing the boxes on an image (model evaluation's highlight strategy) -------------------------------------


def test_draw_regions_outlines_the_boxes_of_one_image_and_leaves_the_input_alone():
    from PIL import Image as PILImage

    from annotator.regions import draw_regions

    image = PILImage.new("RGB", (100, 80), (255, 255, 255))
    regions = [{"image": 1, "x": 10, "y": 20, "w": 30, "h": 10}, {"image": 2, "x": 0, "y": 0, "w": 100, "h": 80}]
    drawn = draw_regions(image, regions, 1, width=2)
    assert image.getpixel((10, 20)) == (255, 255, 255)  # a copy was drawn on
    red = {(x, y) for x in range(100) for y in range(80) if drawn.getpixel((x, y)) == (255, 0, 0)}
    inside = {(x, y) for x in range(10, 40) for y in range(20, 30)}
    hole = {(x, y) for x in range(12, 38) for y in range(22, 28)}
    assert red == inside - hole  # a 2-pixel outline inside the box, nothing of image 2's box
    assert draw_regions(image, regions[:1], 2).tobytes() == image.tobytes()


def test_draw_regions_scales_the_boxes_to_a_resized_image():
    from PIL import Image as PILImage

    from annotator.regions import draw_regions

    small = PILImage.new("RGB", (50, 40), (0, 0, 0))
    drawn = draw_regions(small, [{"image": 2, "x": 20, "y": 40, "w": 40, "h": 20}], 2, original_size=(100, 80), width=1)
    red = {(x, y) for x in range(50) for y in range(40) if drawn.getpixel((x, y)) == (255, 0, 0)}
    assert min(red) == (10, 20) and max(red) == (29, 29)  # the box at half size: x 10-29, y 20-29
    with pytest.raises(ValueError, match="image_number must be 1 or 2"):
        draw_regions(small, [], 3)


def test_the_regions_setting_is_for_coordinators_and_posts_only(client, client_for, reviewer, coordinator):
    anonymous = client.post("/stats/regions/", {"categories": ["state"]})
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous.url
    assert client_for(reviewer).post("/stats/regions/", {"categories": ["state"]}).status_code == 403
    assert TeamSettings.current().regions_required == []
    answer = client_for(coordinator).get("/stats/regions/")
    assert answer.status_code == 302 and answer.url == "/stats/"  # a GET goes to the page with the form
    assert client_for(coordinator).post("/stats/regions/", {}).status_code == 302
    assert TeamSettings.current().regions_required == []  # none ticked: no category requires a region

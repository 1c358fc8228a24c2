"""Prompting strategies and run settings (issue 28) against the loopback model server (tests/model_server.py), which
decodes what it got: each strategy sends the images the official code would (unchanged files, a 4×4 grid, side by
side, a 50/50 blend, a difference map), two-stage sends two requests, highlight draws boxes computed from the two
images only (never the pair's stored regions) and the oracle condition draws the stored regions only (an item without
any gets no box, and the run counts it); per-run temperature, max tokens, seed and prompt texts reach the request and
stay with the run."""

from __future__ import annotations

import io

import numpy as np
import pytest
from django.core.files.base import ContentFile
from PIL import Image, ImageDraw, ImageFilter

from annotator.llm.endpoints import endpoint_create
from annotator.models import Image as StoredImage
from annotator.models import Job, Release
from benchmark.protocol import Item, shuffle_options
from evaluation.models import ModelEvaluation
from evaluation.runs.results_files import results_file
from evaluation.runs.services import evaluation_run, evaluation_start
from evaluation.runs.strategies import MAX_BOXES, STRATEGIES, default_prompt, difference_boxes, highlighted
from evaluation.runs.summaries import evaluation_summary
from subtlebench.errors import Invalid
from tests.factories import make_image, make_pair
from tests.model_server import ModelServer
from tests.modeleval_release_factories import make_release

GREY = (120, 120, 120)


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def solid(size, color, square=None, square_color=(250, 250, 250)) -> Image.Image:
    image = Image.new("RGB", size, color)
    if square:
        ImageDraw.Draw(image).rectangle(square, fill=square_color)
    return image


def item_release(first: Image.Image, second: Image.Image) -> tuple[Release, tuple[bytes, bytes]]:
    """A release of one item with these two images (PNG files: lossless, so what is sent can be predicted)."""
    pair = make_pair(
        category="existence",
        domain="synthetic",
        source="synthetic",
        source_id="s1",
        question="What changed in the second image?",
        answer="a square appeared",
        distractors=["nothing", "it got darker"],
    )
    pair.image_1, pair.image_2 = stored_png(first, "a.png"), stored_png(second, "b.png")
    pair.save(update_fields=["image_1", "image_2"])
    return make_release([(pair, "test", False)]), (png(first), png(second))


@pytest.fixture
def server():
    server = ModelServer(policy=lambda question, options: "a square appeared").start()
    yield server
    server.stop()


def run(server, coordinator, release, **fields) -> ModelEvaluation:
    endpoint = endpoint_create(
        user=coordinator, name="tiny", base_url=server.base_url, model_id="tiny-vlm", concurrency=2, timeout_s=10
    )
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release, **fields)
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    evaluation.job.refresh_from_db()
    assert evaluation.job.status == Job.Status.SUCCEEDED, evaluation.job.errors
    return evaluation


def near(pixel, expected, tolerance=12) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, expected, strict=True))


def red(pixel) -> bool:
    return pixel[0] > 190 and pixel[1] < 70 and pixel[2] < 70


def red_box(image: Image.Image) -> tuple[int, int, int, int] | None:
    """The bounds (x0, y0, x1, y1, inclusive) of the red pixels of a decoded image; None without any."""
    found = [(x, y) for y in range(image.height) for x in range(image.width) if red(image.getpixel((x, y)))]
    if not found:
        return None
    xs, ys = [x for x, _ in found], [y for _, y in found]
    return min(xs), min(ys), max(xs), max(ys)


def stored_png(picture: Image.Image, name: str) -> StoredImage:
    """An image row whose file is the picture as a PNG (lossless: the pixels that differ are exactly those drawn)."""
    data = png(picture)
    image = StoredImage(width=picture.width, height=picture.height, source="synthetic", original_name=name)
    image.file.save(f"images/test/{name}", ContentFile(data), save=False)
    image.thumbnail.save(f"images/test/thumb_{name}", ContentFile(data), save=False)
    image.save()
    return image


@pytest.mark.parametrize("strategy", ["standard", "no_reasoning", "camera_augmented"])
def test_the_plain_strategies_send_both_files_unchanged_with_their_own_system_text(db, coordinator, server, strategy):
    release, files = item_release(solid((64, 48), GREY), solid((64, 48), GREY, (10, 10, 20, 20)))
    evaluation = run(server, coordinator, release, strategy=strategy)
    [seen] = server.requests
    assert [ModelServer.image_bytes(url) for url in seen.images] == list(files)
    assert seen.system == default_prompt(strategy)["system"] and evaluation.prompt == default_prompt(strategy)
    assert evaluation.strategy == strategy and evaluation.correct == 1


def test_grid_draws_a_grey_four_by_four_grid_on_both_images(db, coordinator, server):
    release, _ = item_release(solid((64, 48), (255, 255, 255)), solid((64, 48), (255, 255, 255), (40, 30, 50, 40)))
    run(server, coordinator, release, strategy="grid")
    [seen] = server.requests
    images = seen.decoded()
    assert [image.size for image in images] == [(64, 48), (64, 48)]
    for image in images:
        # Lines at width·i//4 and height·i//4 in (76, 76, 76); the cells between them untouched.
        assert all(near(image.getpixel((5, y)), (76, 76, 76), 20) for y in (12, 24, 36))
        assert all(near(image.getpixel((x, 5)), (76, 76, 76), 20) for x in (16, 32, 48))
        assert near(image.getpixel((8, 6)), (255, 255, 255))


def test_concatenated_sends_one_image_side_by_side_at_the_lower_height(db, coordinator, server):
    release, _ = item_release(solid((64, 48), (200, 40, 40)), solid((80, 40), (40, 40, 200)))
    run(server, coordinator, release, strategy="concatenated")
    [seen] = server.requests
    [image] = seen.decoded()
    # Heights scaled to 40: the first is int(64·40/48) = 53 wide, then a 1-pixel black line, then the second's 80.
    assert image.size == (53 + 1 + 80, 40)
    assert near(image.getpixel((20, 20)), (200, 40, 40), 16)
    assert near(image.getpixel((100, 20)), (40, 40, 200), 16)
    assert sum(image.getpixel((53, 20))) < sum(image.getpixel((20, 20)))  # the separator is darker than either side


def test_overlapped_sends_both_files_and_their_blend_at_the_smaller_size(db, coordinator, server):
    release, files = item_release(solid((64, 48), (200, 40, 40)), solid((80, 40), (40, 40, 200)))
    run(server, coordinator, release, strategy="overlapped")
    [seen] = server.requests
    assert [ModelServer.image_bytes(url) for url in seen.images[:2]] == list(files)
    blend = seen.decoded()[2]
    assert blend.size == (64, 40)
    assert near(blend.getpixel((30, 20)), (120, 40, 120))
    assert "three images" in seen.text and "blend" in seen.text


def test_substract_sends_a_difference_map_bright_where_the_images_differ(db, coordinator, server):
    release, files = item_release(solid((64, 48), GREY), solid((64, 48), GREY, (16, 8, 31, 23), (240, 240, 240)))
    run(server, coordinator, release, strategy="substract")
    [seen] = server.requests
    assert [ModelServer.image_bytes(url) for url in seen.images[:2]] == list(files)
    difference = seen.decoded()[2]
    assert difference.size == (64, 48)
    assert near(difference.getpixel((24, 16)), (255, 255, 255), 20)  # the largest difference is scaled to 255
    assert near(difference.getpixel((50, 40)), (0, 0, 0), 20)
    r, g, b = difference.getpixel((24, 16))
    assert r == g == b or max(r, g, b) - min(r, g, b) <= 6  # grey


def test_highlight_without_regions_boxes_the_pixels_that_differ_on_both_images(db, coordinator, server):
    release, _ = item_release(solid((64, 48), GREY), solid((64, 48), GREY, (16, 8, 31, 23), (240, 240, 240)))
    evaluation = run(server, coordinator, release, strategy="highlight")
    [seen] = server.requests
    for image in seen.decoded():
        assert image.size == (64, 48)
        assert red(image.getpixel((16, 15))) and red(image.getpixel((31, 15))) and red(image.getpixel((24, 8)))
        assert not red(image.getpixel((24, 15))) and not red(image.getpixel((50, 40)))
    assert results_file(evaluation)["prompt_type"] == "highlight"


# The true change of the highlight tests: a 24x24 light square at x 100-123, y 70-93 of a grey 160x120 image.
SQUARE = (100, 70, 123, 93)


def test_highlight_boxes_the_changed_square_from_the_images_and_never_draws_the_stored_regions(db, coordinator, server):
    pair = make_pair(answer="a square appeared", distractors=["nothing"])
    pair.image_1 = stored_png(solid((160, 120), GREY), "plain.png")
    pair.image_2 = stored_png(solid((160, 120), GREY, SQUARE), "square.png")
    pair.regions = [{"image": 1, "x": 10, "y": 10, "w": 40, "h": 40}]  # stored elsewhere: never drawn here
    pair.save()
    release = make_release([(pair, "test", False)])
    endpoint = endpoint_create(user=coordinator, name="tiny", base_url=server.base_url, model_id="tiny-vlm")
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release, strategy="highlight")
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    [seen] = server.requests
    for image in seen.decoded():
        # One box, tight around the square (the outline is drawn inside it), not the whole image.
        left, top, right, bottom = red_box(image)
        assert abs(left - 100) <= 1 and abs(top - 70) <= 1 and abs(right - 123) <= 1 and abs(bottom - 93) <= 1
        assert not red(image.getpixel((111, 81)))  # inside the box: the picture
        # Nothing where the stored region is.
        assert not any(red(image.getpixel((x, y))) for x in range(0, 60) for y in range(0, 60))
    assert seen.system == default_prompt("highlight")["system"]
    assert "without_regions" not in evaluation.parameters
    assert evaluation_summary(evaluation)["without_regions"] is None
    assert "items_without_regions" not in results_file(evaluation)


def test_the_oracle_draws_the_stored_regions_only_and_counts_the_items_without_any(db, coordinator, server, client_for):
    boxed = make_pair(question="What changed in the boxed pair?", answer="a square appeared", distractors=["nothing"])
    boxed.image_1, boxed.image_2 = make_image(shift=0), make_image(shift=4)
    boxed.regions = [{"image": 2, "x": 90, "y": 10, "w": 50, "h": 50}]
    boxed.save()
    bare = make_pair(question="What changed in the bare pair?", answer="a square appeared", distractors=["nothing"])
    bare.image_1 = stored_png(solid((160, 120), GREY), "bare-plain.png")
    bare.image_2 = stored_png(solid((160, 120), GREY, SQUARE), "bare-square.png")
    bare.save()  # its images differ, but it has no stored region
    release = make_release([(boxed, "test", False), (bare, "test", False)])
    endpoint = endpoint_create(user=coordinator, name="tiny", base_url=server.base_url, model_id="tiny-vlm")
    evaluation = evaluation_start(endpoint=endpoint, user=coordinator, release=release, strategy="highlight_oracle")
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    asked = {seen.question: seen for seen in server.requests}
    for image in asked["What changed in the boxed pair?"].decoded():
        assert image.size == (160, 120)
        assert red(image.getpixel((90, 35))) and red(image.getpixel((139, 35))) and red(image.getpixel((115, 59)))
        assert not red(image.getpixel((115, 35)))  # inside the box: the picture
        assert not red(image.getpixel((150, 100)))
    # No stored region: no box at all, not one computed from the pixels in its place.
    assert [red_box(image) for image in asked["What changed in the bare pair?"].decoded()] == [None, None]
    assert asked["What changed in the bare pair?"].system == default_prompt("highlight_oracle")["system"]
    bare_id = evaluation.results.get(pair=bare).question_id
    assert evaluation_summary(evaluation)["without_regions"] == 1
    assert evaluation.job.result["without_regions"] == 1  # the summary stored when the run ended
    document = results_file(evaluation)
    assert (document["prompt_type"], document["items_without_regions"]) == ("highlight_oracle", 1)
    assert document["items_without_regions_ids"] == [bare_id]
    page = client_for(coordinator).get(f"/models/runs/{evaluation.pk}/").content.decode()
    assert 'id="run-without-regions"' in page and "1</span> item without stored regions, sent with no box" in page


def test_the_computed_boxes_drop_jpeg_noise_and_specks_merge_nearby_pixels_and_keep_the_largest_changes():
    rng = np.random.default_rng(7)
    texture = Image.fromarray((rng.random((120, 160, 3)) * 50 + 90).astype(np.uint8)).filter(
        ImageFilter.GaussianBlur(1.5)
    )
    changed = texture.copy()
    draw = ImageDraw.Draw(changed)
    draw.rectangle((40, 30, 59, 49), fill=(20, 200, 40))  # the change: 20x20
    draw.rectangle((62, 30, 69, 49), fill=(20, 200, 40))  # 2 pixels to its right: the same change
    draw.point((140, 100), fill=(255, 255, 255))  # a speck: noise
    boxes = difference_boxes(decoded_jpeg(texture, 75), decoded_jpeg(changed, 75))
    [(x0, y0, x1, y1)] = boxes
    assert abs(x0 - 40) <= 1 and abs(y0 - 30) <= 1 and abs(x1 - 70) <= 1 and abs(y1 - 50) <= 1
    # Seven separate squares, growing: the MAX_BOXES largest, largest first.
    many = texture.copy()
    for index in range(7):
        side = 6 + 2 * index
        ImageDraw.Draw(many).rectangle((4 + 22 * index, 80, 4 + 22 * index + side - 1, 80 + side - 1), fill=(0, 0, 0))
    boxes = difference_boxes(texture, many)
    assert len(boxes) == MAX_BOXES == 5
    assert [x1 - x0 for x0, _, x1, _ in boxes] == [18, 16, 14, 12, 10]
    assert difference_boxes(texture, texture.copy()) == []


def test_the_computed_boxes_are_scaled_to_each_images_size():
    small = solid((160, 120), GREY)
    large = solid((320, 240), GREY, (200, 140, 247, 187))  # (100, 70)-(123, 93) at half the size
    first, second = (Image.open(io.BytesIO(data)).convert("RGB") for data in highlighted(png(large), png(small), []))
    assert red(first.getpixel((200, 160))) and red(first.getpixel((247, 160))) and not red(first.getpixel((224, 160)))
    assert red(second.getpixel((100, 80))) and red(second.getpixel((123, 80))) and not red(second.getpixel((111, 80)))


def decoded_jpeg(image: Image.Image, quality: int) -> Image.Image:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    decoded = Image.open(io.BytesIO(buffer.getvalue()))
    return decoded.convert("RGB")


def test_two_stage_asks_for_a_description_then_sends_it_with_the_question(db, coordinator, server):
    release, files = item_release(solid((64, 48), GREY), solid((64, 48), GREY, (10, 10, 20, 20)))
    evaluation = run(server, coordinator, release, strategy="two_stage")
    describe, answer = server.requests
    texts = default_prompt("two_stage")
    assert describe.options == [] and describe.system == texts["describe_system"]
    assert "What changed in the second image?" in describe.text
    assert [ModelServer.image_bytes(url) for url in describe.images] == list(files)
    assert server.description in answer.text and len(answer.options) == 3 and answer.system == texts["system"]
    row = evaluation.results.get()
    assert row.first_response == server.description and row.is_correct and row.parse_outcome == "parsed"
    assert evaluation.completion_tokens == 2 * 12  # both requests counted
    assert results_file(evaluation)["questions"][0]["description"] == server.description


def test_temperature_max_tokens_seed_and_prompt_texts_reach_the_request_and_stay_with_the_run(
    db, coordinator, server, client_for
):
    release, _ = item_release(solid((64, 48), GREY), solid((64, 48), GREY, (10, 10, 20, 20)))
    user = "Q: {question}\nPick one.\n{options}\nQuestion: {question}"
    evaluation = run(
        server,
        coordinator,
        release,
        temperature=0.2,
        max_tokens=77,
        seed=11,
        prompt={"system": "Be brief.", "user": user},
    )
    [seen] = server.requests
    assert (seen.body["temperature"], seen.body["max_tokens"]) == (0.2, 77)
    assert seen.system == "Be brief." and seen.text.startswith("Q: What changed in the second image?\nPick one.\nA. ")
    item = Item("x", "q", "a square appeared", ["nothing", "it got darker"], "existence", "synthetic", "", "")
    shuffle_options([item], 11)
    assert seen.options == item.options  # the run's seed shuffled them
    assert evaluation.prompt == {"system": "Be brief.", "user": user} and evaluation.seed == 11
    data = client_for(coordinator).get(f"/api/models/runs/{evaluation.pk}/results/").json()
    assert (data["temperature"], data["max_tokens"], data["random_seed"]) == (0.2, 77, 11)
    assert data["prompt"]["system"] == "Be brief."


def test_bad_run_settings_are_refused_naming_the_field(db, coordinator, server):
    release, _ = item_release(solid((64, 48), GREY), solid((64, 48), GREY))
    endpoint = endpoint_create(user=coordinator, name="tiny", base_url=server.base_url, model_id="tiny-vlm")
    start = {"endpoint": endpoint, "user": coordinator, "release": release}
    cases = [
        ({"strategy": "zoom"}, "strategy", "'zoom' is not a strategy"),
        ({"prompt": {"user": "no placeholders"}}, "prompt", "user: lacks {question}, {options}"),
        ({"strategy": "two_stage", "prompt": {"user": "{question} {options}"}}, "prompt", "lacks {description}"),
        ({"temperature": 3}, "temperature", "from 0 to 2"),
        ({"max_tokens": -1}, "max_tokens", "from 0"),
    ]
    for fields, name, message in cases:
        with pytest.raises(Invalid) as refused:
            evaluation_start(**start, **fields)
        assert message in " ".join(refused.value.errors[name]), refused.value.errors
    assert not ModelEvaluation.objects.exists()


def test_every_strategy_has_a_default_prompt_file_with_its_placeholders():
    for name, strategy in STRATEGIES.items():
        texts = default_prompt(name)
        assert "{question}" in texts["user"] and "{options}" in texts["user"]
        if strategy.two_stage:
            assert "{description}" in texts["user"] and "{question}" in texts["describe"]


def test_the_run_form_and_the_api_start_runs_with_their_settings_and_the_run_page_shows_them(
    db, coordinator, server, client_for
):
    release, _ = item_release(solid((64, 48), GREY), solid((64, 48), GREY))
    endpoint = endpoint_create(user=coordinator, name="tiny", base_url=server.base_url, model_id="tiny-vlm")
    reader = endpoint_create(user=coordinator, name="reader", base_url=server.base_url, model_id="tiny-vlm")
    client = client_for(coordinator)
    form = {"endpoint": endpoint.pk, "release": release.pk, "split": "test", "seed": 4, "strategy": "two_stage"}
    form |= {
        "temperature": "0.1",
        "max_tokens": "300",
        "describe": "Describe it for: {question}",
        "extraction_endpoint": reader.pk,
    }
    response = client.post("/models/runs/new/", form)
    evaluation = ModelEvaluation.objects.get()
    assert response.status_code == 302 and evaluation.strategy == "two_stage" and evaluation.seed == 4
    assert evaluation.parameters["request"] == {"temperature": 0.1, "max_tokens": 300}
    assert evaluation.prompt["describe"] == "Describe it for: {question}"
    assert evaluation.prompt["system"] == default_prompt("two_stage")["system"]  # blank: the default kept
    assert evaluation.extraction_endpoint == reader and "extraction_prompt" in evaluation.parameters
    page = client.get(f"/models/runs/{evaluation.pk}/").content.decode()
    assert "two_stage" in page and "Describe it for: {question}" in page and 'id="run-strategy"' in page
    refused = client.post("/models/runs/new/", {**form, "user": "no placeholders"}, follow=True)
    assert "lacks {question}, {options}" in refused.content.decode() and ModelEvaluation.objects.count() == 1

    body = {"endpoint": endpoint.pk, "release": release.pk, "strategy": "overlapped", "temperature": 0, "max_tokens": 0}
    api = client.post("/api/models/runs/create/", body, content_type="application/json")
    assert api.status_code == 202, api.json()
    data = api.json()
    assert (data["strategy"], data["temperature"], data["max_tokens"]) == ("overlapped", 0.0, None)
    assert data["prompt"] == default_prompt("overlapped") and data["unparsable"] == 0
    bad = client.post("/api/models/runs/create/", {**body, "strategy": "zoom"}, content_type="application/json")
    assert bad.status_code == 400 and "strategy" in bad.json()["errors"]


def test_the_oracle_on_a_release_follows_an_items_swapped_images(db, coordinator, server):
    pair = make_pair()
    pair.image_1, pair.image_2 = make_image(size=(160, 120)), make_image(size=(320, 240))
    pair.regions = [{"image": 2, "x": 180, "y": 20, "w": 100, "h": 100}]  # in the 320x240 image's pixels
    pair.save()
    release = make_release([(pair, "test", True)])  # released with its images traded: the 320x240 one first
    server.policy = lambda question, options: options[0]
    endpoint = endpoint_create(user=coordinator, name="tiny", base_url=server.base_url, model_id="tiny-vlm")
    evaluation = evaluation_start(
        endpoint=endpoint,
        user=coordinator,
        source="release",
        release=release,
        split="test",
        strategy="highlight_oracle",
    )
    evaluation_run(evaluation_id=evaluation.pk)
    [seen] = server.requests
    first, second = seen.decoded()
    assert (first.size, second.size) == ((320, 240), (160, 120))
    assert red(first.getpixel((180, 70))) and red(first.getpixel((279, 70))) and not red(first.getpixel((230, 70)))
    # Scaled to the smaller image: (90, 10) to (140, 60).
    assert red(second.getpixel((90, 35))) and red(second.getpixel((139, 35))) and not red(second.getpixel((115, 35)))

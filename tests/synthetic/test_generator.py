"""The synthetic generator: each family's ground truth checked on the pixels, byte-identical images from one seed, and
questions that follow the format's rules. Pure: no database."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from annotator.synthetic.generator import BACKGROUND, SyntheticError, clean_factors, synthetic_pair
from benchmark.protocol import MAX_OPTIONS
from benchmark.questions import question_problems
from benchmark.regions import boxes_from_mask, validate_regions
from benchmark.taxonomy import BINARY_OPTIONS, VIEWPOINT_MOVES


def pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def blobs(data: bytes) -> list[dict]:
    """The objects of an image: the connected parts of its non-background pixels."""
    array = pixels(data)
    foreground = np.any(array != np.array(BACKGROUND, dtype=np.uint8), axis=2)
    return boxes_from_mask(foreground.astype(np.uint8), image=1, max_boxes=10_000)


@pytest.mark.parametrize("displacement", [7, 25, 60])
def test_it_moves_the_named_object_by_the_displacement_asked(displacement):
    moves = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
    for index in range(4):  # the four directions, in turn
        pair = synthetic_pair("spatial", {"displacement": displacement, "object_count": 6}, seed=3, index=index)
        dx, dy = (displacement * step for step in moves[pair.answer])
        assert (pair.truth["dx"], pair.truth["dy"]) == (dx, dy)
        first, second = pixels(pair.image_1), pixels(pair.image_2)
        x, y, w, h = pair.truth["box_1"]
        # The object's box in image 1 is found in image 2 exactly (dx, dy) away, and is gone from where it was.
        assert np.array_equal(first[y : y + h, x : x + w], second[y + dy : y + dy + h, x + dx : x + dx + w])
        assert not np.array_equal(first[y : y + h, x : x + w], second[y : y + h, x : x + w])
        # Everything outside the object's two boxes is unchanged.
        mask = np.ones(pixels(pair.image_1).shape[:2], dtype=bool)
        for region in pair.regions:
            mask[region["y"] : region["y"] + region["h"], region["x"] : region["x"] + region["w"]] = False
        assert np.array_equal(pixels(pair.image_1)[mask], pixels(pair.image_2)[mask])
    assert {synthetic_pair("spatial", {"displacement": displacement}, seed=3, index=i).answer for i in range(4)} == {
        "left",
        "right",
        "up",
        "down",
    }


@pytest.mark.parametrize(("count", "difference"), [(3, 1), (12, 2), (32, 1), (40, 8)])
def test_it_makes_counts_that_differ_by_the_amount_asked(count, difference):
    answers = []
    for index in range(2):
        pair = synthetic_pair(
            "quantity", {"object_count": count, "difference": difference, "object_size": 20}, seed=1, index=index
        )
        first, second = len(blobs(pair.image_1)), len(blobs(pair.image_2))
        assert {first, second} == {count, count + difference}
        assert pair.answer == ("second image" if second > first else "first image")
        assert pair.distractors == [option for option in BINARY_OPTIONS if option != pair.answer]
        answers.append(pair.answer)
    assert sorted(answers) == ["first image", "second image"]  # positions balanced item by item


@pytest.mark.parametrize("change", ["added", "removed"])
def test_the_added_object_is_absent_from_one_image_and_present_in_the_other(change):
    pair = synthetic_pair("existence", {"change": change, "object_count": 10}, seed=5, index=2)
    x, y, w, h = pair.truth["box"]
    background = np.array(BACKGROUND, dtype=np.uint8)
    before, after = pixels(pair.image_1)[y : y + h, x : x + w], pixels(pair.image_2)[y : y + h, x : x + w]
    empty, drawn = (before, after) if change == "added" else (after, before)
    assert np.all(empty == background)
    assert np.any(np.any(drawn != background, axis=2))
    assert len(blobs(pair.image_2)) - len(blobs(pair.image_1)) == (1 if change == "added" else -1)
    assert pair.answer == pair.truth["object"] and pair.answer not in pair.distractors
    assert pair.regions[0]["image"] == (2 if change == "added" else 1)


@pytest.mark.parametrize(
    ("change", "step"), [("brightness", 0.25), ("brightness", 0.1), ("size", 0.3), ("colour", 0.2)]
)
def test_it_changes_one_objects_attribute_by_the_step_asked(change, step):
    pair = synthetic_pair("attribute", {"change": change, "step": step, "object_count": 6}, seed=2, index=1)
    old, new = tuple(pair.truth["rgb_1"]), tuple(pair.truth["rgb_2"])
    if change == "brightness":
        factor = 1 + step if pair.answer == "brighter" else 1 - step
        assert all(abs(n - o * factor) < 1 for n, o in zip(new, old, strict=True)) and new != old
        x, y, w, h = pair.truth["box_1"]
        assert np.all(pixels(pair.image_2)[y + h // 2, x + w // 2] == np.array(new, dtype=np.uint8))
    elif change == "size":
        w1, w2 = pair.truth["box_1"][2], pair.truth["box_2"][2]
        assert w2 == round(w1 * (1 + step if pair.answer == "larger" else 1 - step))
    else:
        assert new != old and pair.answer == "different colour"
    assert len(blobs(pair.image_1)) == len(blobs(pair.image_2)) == 6


@pytest.mark.parametrize("motion", ["pan", "zoom", "rotate"])
def test_the_camera_moves_as_asked(motion):
    pair = synthetic_pair("viewpoint", {"motion": motion, "shift": 0.27}, seed=4, index=0)
    first, second = pixels(pair.image_1), pixels(pair.image_2)
    assert pair.answer in VIEWPOINT_MOVES and all(option in VIEWPOINT_MOVES for option in pair.distractors)
    if motion == "pan":
        dx, dy = pair.truth["dx"], pair.truth["dy"]
        assert abs(dx or dy) == round(0.27 * 512)
        # The camera moved by (dx, dy): what image 2 shows at (x, y), image 1 showed at (x + dx, y + dy).
        if dx:
            overlap_1 = first[:, max(dx, 0) : 512 + min(dx, 0)]
            overlap_2 = second[:, max(-dx, 0) : 512 + min(-dx, 0)]
        else:
            overlap_1 = first[max(dy, 0) : 512 + min(dy, 0)]
            overlap_2 = second[max(-dy, 0) : 512 + min(-dy, 0)]
        assert np.array_equal(overlap_1, overlap_2)
    elif motion == "zoom":
        span, size = pair.truth["span"], 512
        assert pair.answer == "forward" and span == round(size / 1.27)
        # Forward: image 2 is the middle span x span of image 1, enlarged to the whole image.
        start = (size - span) // 2
        middle = Image.fromarray(first).crop((start, start, start + span, start + span))
        assert np.array_equal(np.asarray(middle.resize((size, size), Image.NEAREST)), second)
        back = synthetic_pair("viewpoint", {"motion": "zoom", "shift": 0.27}, seed=4, index=1)
        assert back.answer == "backward" and back.truth["span"] == round(512 * 1.27)
    else:
        angle = pair.truth["angle"]
        assert abs(angle) == 15.0 and pair.answer == ("rotate clockwise" if angle > 0 else "rotate counterclockwise")
        # The scene turned against the camera about the image's centre: inside the inscribed disc (whose pixels
        # came from image 1), image 2 is image 1 turned by the angle.
        turned = np.asarray(Image.fromarray(first).rotate(angle, resample=Image.NEAREST, center=(256, 256)))
        ys, xs = np.mgrid[0:512, 0:512]
        disc = (xs - 255.5) ** 2 + (ys - 255.5) ** 2 < 250**2
        # Nearest-neighbour sampling of the scene (turned about its own centre) and of image 1 (about its centre) can
        # round a pixel on a shape's edge differently: a few pixels in the disc's 196,000.
        assert np.count_nonzero(np.any(turned[disc] != second[disc], axis=1)) <= 10
        assert not np.array_equal(first[disc], second[disc])


def test_the_same_seed_gives_byte_identical_images():
    for family in ("attribute", "existence", "quantity", "spatial", "viewpoint"):
        one = synthetic_pair(family, seed=11, index=7)
        again = synthetic_pair(family, seed=11, index=7)
        assert (one.image_1, one.image_2) == (again.image_1, again.image_2)
        assert one.generation_info == again.generation_info
        other = synthetic_pair(family, seed=12, index=7)
        assert (other.image_1, other.image_2) != (one.image_1, one.image_2)


def test_every_family_follows_the_question_rules_and_records_its_factors():
    for family in ("attribute", "existence", "quantity", "spatial", "viewpoint"):
        for index in range(4):
            pair = synthetic_pair(family, seed=0, index=index, size=256)
            assert (
                question_problems(
                    question=pair.question, answer=pair.answer, distractors=pair.distractors, category=pair.category
                )
                == []
            )
            assert 2 <= len(pair.distractors) + 1 <= MAX_OPTIONS
            validate_regions(pair.regions, sizes={1: (256, 256), 2: (256, 256)})
            info = pair.generation_info
            assert info["family"] == family and info["factors"] == clean_factors(family, {})
            assert info["seed"] == 0 and info["index"] == index


@pytest.mark.parametrize(
    ("family", "factors", "message"),
    [
        ("shapes", {}, "unknown family"),
        ("quantity", {"displacement": 3}, "unknown factor displacement"),
        ("quantity", {"object_size": 500}, "object_size must be from 6 to 160"),
        ("quantity", {"object_count": 2.5}, "whole number"),
        ("attribute", {"change": "texture"}, "change must be one of"),
        ("quantity", {"object_count": 200, "object_size": 60}, "do not fit"),
    ],
)
def test_it_refuses_factors_it_cannot_make_saying_which(family, factors, message):
    with pytest.raises(SyntheticError, match=message):
        synthetic_pair(family, factors)

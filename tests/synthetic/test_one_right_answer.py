"""Every synthetic item has one right answer, checked on the rendered pixels: a colour change keeps the changed
object's relative luminance (so "brighter" and "darker" are wrong), a brightness change keeps its hue (so "different
colour" is wrong), every existence distractor is a shape in both images, and no family's set of options gives its
answer away. Pure: no database."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from annotator.synthetic.generator import (
    BACKGROUND,
    COLOURS,
    HUE_TOLERANCE,
    LUMINANCE_TOLERANCE,
    SHAPES,
    Shape,
    SyntheticError,
    hue_degrees,
    hue_distance,
    relative_luminance,
    render,
    shape_name,
    synthetic_pair,
)
from benchmark.regions import boxes_from_mask

SIZE = 64  # small images: a thousand pairs decode in a moment
SMALL = {"object_size": 10, "object_count": 4}
COLOUR_OF = {rgb: name for name, rgb in COLOURS.items()}


def stacked(datas: list[bytes]) -> np.ndarray:
    return np.stack([np.asarray(Image.open(io.BytesIO(data)).convert("RGB")) for data in datas])


class ChangedRegions:
    """The pixels that differ between the two images of each pair, as they are in image 1 and in image 2, with the
    number of the pair each belongs to: what is measured is what was drawn."""

    def __init__(self, pairs):
        first, second = stacked([p.image_1 for p in pairs]), stacked([p.image_2 for p in pairs])
        self.images = first, second
        self.mask = np.any(first != second, axis=3)
        self.first, self.second = first[self.mask], second[self.mask]
        self.item = np.nonzero(self.mask)[0]
        self.background = np.array(BACKGROUND, dtype=np.uint8)
        self.count = len(pairs)

    def mean(self, values: np.ndarray) -> np.ndarray:
        """Per pair, the mean of one value per changed pixel."""
        return np.bincount(self.item, values, self.count) / np.bincount(self.item, minlength=self.count)


def test_relative_luminance_is_wcags():
    assert relative_luminance((0, 0, 0)) == 0 and relative_luminance((255, 255, 255)) == pytest.approx(1)
    assert relative_luminance((255, 0, 0)) == pytest.approx(0.2126)
    assert relative_luminance((0, 255, 0)) == pytest.approx(0.7152)
    assert relative_luminance((128, 128, 128)) == pytest.approx(0.21586, abs=1e-5)
    assert relative_luminance((10, 10, 10)) == pytest.approx(10 / 255 / 12.92)  # the linear segment
    assert list(hue_degrees([(255, 0, 0), (0, 255, 0), (0, 0, 255), (150, 80, 10)])) == [0, 120, 240, 30]
    assert hue_distance(350, 10) == 20


def test_a_thousand_colour_changes_keep_the_relative_luminance_on_the_pixels():
    steps = np.linspace(0.01, 0.6, 20)
    pairs = [
        synthetic_pair("attribute", {**SMALL, "change": "colour", "step": float(step)}, seed=7, index=index, size=SIZE)
        for step in steps
        for index in range(50)
    ]
    changed = ChangedRegions(pairs)
    # What changed is the colour of the one object, all of it: every pixel of its box that is not background.
    for number, pair in enumerate(pairs):
        x, y, w, h = pair.truth["box_1"]
        drawn = np.any(changed.images[0][number, y : y + h, x : x + w] != changed.background, axis=2)
        assert drawn.any() and np.count_nonzero(changed.mask[number]) == np.count_nonzero(drawn)
        assert np.array_equal(changed.mask[number, y : y + h, x : x + w], drawn)
    drift = np.abs(
        changed.mean(relative_luminance(changed.second)) / changed.mean(relative_luminance(changed.first)) - 1
    )
    assert drift.max() <= LUMINANCE_TOLERANCE, f"item {drift.argmax()}: luminance moved {drift.max():.2%}"
    # And its hue turned by about the step asked (the short way round).
    hue_1, hue_2 = changed.mean(hue_degrees(changed.first)), changed.mean(hue_degrees(changed.second))
    asked = np.repeat(np.minimum(steps, 1 - steps) * 360, 50)
    assert np.abs(hue_distance(hue_1, hue_2) - asked).max() < 10
    assert {pair.answer for pair in pairs} == {"different colour"}


def test_brightness_changes_keep_the_hue_and_move_the_luminance_the_way_answered():
    steps = np.linspace(0.01, 0.6, 10)
    pairs = [
        synthetic_pair("attribute", {**SMALL, "change": "brightness", "step": float(s)}, seed=3, index=i, size=SIZE)
        for s in steps
        for i in range(40)
    ]
    changed = ChangedRegions(pairs)
    assert changed.mask.any(axis=(1, 2)).all()
    hue_1, hue_2 = changed.mean(hue_degrees(changed.first)), changed.mean(hue_degrees(changed.second))
    assert hue_distance(hue_1, hue_2).max() <= HUE_TOLERANCE
    ratio = changed.mean(relative_luminance(changed.second)) / changed.mean(relative_luminance(changed.first))
    brighter = np.array([pair.answer == "brighter" for pair in pairs])
    assert brighter.sum() == len(pairs) // 2  # the two answers in turn
    assert np.all(np.where(brighter, ratio > 1, ratio < 1))
    # Value (the largest channel) times 1 ± step, to the 8-bit value.
    factor = 1 + np.repeat(steps, 40) * np.where(brighter, 1, -1)
    value_1, value_2 = (changed.mean(pixels.max(axis=1)) for pixels in (changed.first, changed.second))
    assert np.abs(value_2 - value_1 * factor).max() <= 1


def shapes_in(image: np.ndarray) -> list[str]:
    """The names of the shapes drawn in an image, read from its pixels: each blob's colour and outline."""
    foreground = np.any(image != np.array(BACKGROUND, dtype=np.uint8), axis=2)
    names = []
    for box in boxes_from_mask(foreground.astype(np.uint8), image=1, max_boxes=10_000):
        crop = image[box["y"] : box["y"] + box["h"], box["x"] : box["x"] + box["w"]]
        names.append(shape_name(COLOUR_OF[tuple(int(v) for v in crop[foreground_of(crop)][0])], kind_of(crop)))
    return names


def foreground_of(crop: np.ndarray) -> np.ndarray:
    return np.any(crop != np.array(BACKGROUND, dtype=np.uint8), axis=2)


def kind_of(crop: np.ndarray) -> str:
    mask = foreground_of(crop)
    side, fill = mask.shape[0], mask.mean()
    top, bottom = mask[0].sum(), mask[-1].sum()
    if fill > 0.95:
        return "square"
    if fill > 0.7:
        return "circle"
    if bottom >= side - 1:
        return "triangle"  # a full base, an apex on top
    return "cross" if top >= 3 else "diamond"  # a cross's arm ends in a bar; a diamond in a point


def test_the_shape_reader_names_every_colour_and_kind():
    for size in (12, 14, 17, 20, 31):
        shapes = [
            Shape(kind, colour, rgb, 2 + (size + 4) * column, 2 + (size + 4) * row, size)
            for row, (colour, rgb) in enumerate(COLOURS.items())
            for column, kind in enumerate(SHAPES)
        ]
        image = np.asarray(render(shapes, (size + 4) * len(COLOURS)).convert("RGB"))
        assert sorted(shapes_in(image)) == sorted(shape.name for shape in shapes)


@pytest.mark.parametrize("change", ["added", "removed"])
def test_every_existence_distractor_is_a_shape_in_both_images(change):
    items = [
        ({"change": change, "object_count": count, "options": options, "object_size": 14}, index)
        for count, options in [(1, 2), (2, 3), (3, 4), (4, 5), (5, 5), (12, 5), (30, 4)]
        for index in range(12)
    ]
    for factors, index in items:
        pair = synthetic_pair("existence", factors, seed=9, index=index, size=128)
        first, second = stacked([pair.image_1, pair.image_2])
        in_1, in_2 = shapes_in(first), shapes_in(second)
        assert len(pair.distractors) == len(set(pair.distractors)) == factors["options"] - 1
        for distractor in pair.distractors:
            assert distractor in in_1 and distractor in in_2, (factors, index, distractor)
        with_it, without = (in_2, in_1) if change == "added" else (in_1, in_2)
        assert pair.answer in with_it and pair.answer not in without


def test_existence_refuses_more_options_than_the_images_have_shapes():
    with pytest.raises(SyntheticError, match="5 options need at least 4 objects"):
        synthetic_pair("existence", {"object_count": 3})
    with pytest.raises(SyntheticError, match="options must be one of 2, 3, 4, 5"):
        synthetic_pair("existence", {"options": 6})


@pytest.mark.parametrize(
    ("family", "factors", "answers"),
    [
        ("attribute", {"change": "brightness"}, 2),
        ("attribute", {"change": "colour"}, 1),
        ("attribute", {"change": "size"}, 2),
        ("quantity", {}, 2),
        ("spatial", {"displacement": 5}, 4),
        ("viewpoint", {"motion": "pan"}, 4),
        ("viewpoint", {"motion": "zoom"}, 2),
        ("viewpoint", {"motion": "rotate"}, 2),
    ],
)
def test_no_set_of_options_gives_the_answer_away(family, factors, answers):
    """Items whose answers differ come with the same options: the options alone cannot tell which is right."""
    answers_by_options: dict[frozenset, set[str]] = {}
    for index in range(8):
        pair = synthetic_pair(family, {**SMALL, **factors}, seed=5, index=index, size=96)
        answers_by_options.setdefault(frozenset([pair.answer, *pair.distractors]), set()).add(pair.answer)
    assert len(answers_by_options) == 1
    assert len(next(iter(answers_by_options.values()))) == answers

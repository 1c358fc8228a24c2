"""Difference regions: the contract's validator and the boxes made from a mask."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from benchmark.regions import MAX_REGIONS, RegionError, boxes_from_mask, union_box, validate_regions


def test_valid_regions_come_back_in_canonical_form():
    regions = [
        {"h": 5, "w": 4, "y": 3, "x": 2, "image": 2, "label": "dent"},
        {"image": 1, "x": 0, "y": 0, "w": 1, "h": 1},
    ]
    assert validate_regions(regions, {1: (10, 10), 2: (10, 10)}) == [
        {"image": 2, "x": 2, "y": 3, "w": 4, "h": 5, "label": "dent"},
        {"image": 1, "x": 0, "y": 0, "w": 1, "h": 1},
    ]
    assert validate_regions(None) == []


@pytest.mark.parametrize(
    ("regions", "message"),
    [
        ({"image": 1}, "must be a list"),
        ([{"image": 1, "x": 0, "y": 0, "w": 1}], "region 1: h missing"),
        ([{"image": 3, "x": 0, "y": 0, "w": 1, "h": 1}], "region 1: image must be 1 or 2"),
        ([{"image": 1, "x": 0, "y": 0, "w": 1, "h": 1}, {"image": 1, "x": -1, "y": 0, "w": 1, "h": 1}], "region 2"),
        ([{"image": 1, "x": 0, "y": 0, "w": 0, "h": 1}], "w and h must be at least 1"),
        ([{"image": 1, "x": 0.5, "y": 0, "w": 1, "h": 1}], "x must be a whole number"),
        ([{"image": 1, "x": True, "y": 0, "w": 1, "h": 1}], "x must be a whole number"),
        ([{"image": 1, "x": 0, "y": 0, "w": 1, "h": 1, "colour": "red"}], "unknown field colour"),
        ([{"image": 1, "x": 0, "y": 0, "w": 1, "h": 1, "label": "a\nb"}], "label must be one line"),
        ([{"image": 2, "x": 8, "y": 0, "w": 3, "h": 1}], "runs outside image 2 (10×10)"),
        ([{"image": 1, "x": 0, "y": 0, "w": 1, "h": 1}] * (MAX_REGIONS + 1), f"at most {MAX_REGIONS}"),
    ],
)
def test_a_broken_region_list_says_which_region_and_field(regions, message):
    with pytest.raises(RegionError) as raised:
        validate_regions(regions, {1: (10, 10), 2: (10, 10)})
    assert message in str(raised.value)


def test_boxes_from_a_mask_are_its_connected_parts_largest_first():
    mask = np.zeros((20, 30), dtype=np.uint8)
    mask[2:4, 3:5] = 255  # 4 pixels
    mask[10:15, 20:26] = 255  # 30 pixels
    mask[15, 26] = 255  # touches the big part diagonally: the same part
    assert boxes_from_mask(mask, image=2) == [
        {"image": 2, "x": 20, "y": 10, "w": 7, "h": 6},
        {"image": 2, "x": 3, "y": 2, "w": 2, "h": 2},
    ]
    assert boxes_from_mask(mask, image=2, min_pixels=5) == [{"image": 2, "x": 20, "y": 10, "w": 7, "h": 6}]
    assert boxes_from_mask(np.zeros((4, 4)), image=1) == []


def test_more_parts_than_boxes_merge_the_smallest_into_one():
    mask = np.zeros((10, 40), dtype=bool)
    for column in range(0, 40, 4):  # ten separate single pixels
        mask[5, column] = True
    boxes = boxes_from_mask(mask, image=1, max_boxes=3)
    assert len(boxes) == 3
    assert boxes[2] == {"image": 1, "x": 8, "y": 5, "w": 29, "h": 1}  # the eight after the first two


def flood_filled_boxes(mask) -> list[tuple[int, int, int, int, int]]:
    """The reference: (pixels, y0, x0, y1, x1) of each 8-connected part, pixel by pixel, in the order of its first
    pixel (row-major), sorted as boxes_from_mask sorts them."""
    foreground = {(y, x) for y, x in zip(*np.nonzero(mask), strict=True)}
    parts = []
    for start in sorted(foreground):
        if start not in foreground:
            continue
        foreground.discard(start)
        stack, pixels = [start], []
        while stack:
            y, x = stack.pop()
            pixels.append((y, x))
            for neighbour in ((y + dy, x + dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)):
                if neighbour in foreground:
                    foreground.discard(neighbour)
                    stack.append(neighbour)
        ys, xs = [p[0] for p in pixels], [p[1] for p in pixels]
        parts.append((len(pixels), min(ys), min(xs), max(ys), max(xs)))
    return sorted(parts, key=lambda part: (-part[0], part[1], part[2]))


@pytest.mark.parametrize("density", [0.05, 0.3, 0.55, 0.9])
def test_boxes_from_a_mask_equal_a_pixel_by_pixel_flood_fill_in_every_form_of_mask(density):
    """Random masks (parts of every shape: rings, diagonals, combs, one that spans the mask) as an array, a list of
    lists, an 8-bit Pillow image and an RGB one: the same parts, the same order, as the pixel-by-pixel reference."""
    rng = np.random.default_rng(int(density * 100))
    for _ in range(5):
        mask = (rng.random((37, 53)) < density).astype(np.uint8) * 255
        expected = [
            {"image": 1, "x": x0, "y": y0, "w": x1 - x0 + 1, "h": y1 - y0 + 1}
            for _, y0, x0, y1, x1 in flood_filled_boxes(mask)
        ]
        rgb = np.zeros((*mask.shape, 3), dtype=np.uint8)
        rgb[..., int(rng.integers(3))] = mask  # foreground in one channel only
        for form in (mask, mask > 0, mask.tolist(), Image.fromarray(mask), Image.fromarray(rgb), rgb):
            assert boxes_from_mask(form, image=1, max_boxes=10_000) == expected


def test_the_union_box_spans_one_images_regions():
    regions = [{"image": 1, "x": 2, "y": 2, "w": 2, "h": 2}, {"image": 1, "x": 10, "y": 1, "w": 1, "h": 5}]
    assert union_box(regions, 1) == {"image": 1, "x": 2, "y": 1, "w": 9, "h": 5}
    assert union_box(regions, 2) is None

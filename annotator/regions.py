"""Difference regions in the app: checking a pair's boxes against its images, the workbench's frames A/B against
the stored images 1/2, the categories that require a box, drawing boxes on an image (the oracle highlight strategy),
and boxes around where two images of one size differ (a model's edit).

The contract itself (the shape of a region, its validator) is `benchmark/regions.py`.
"""

from __future__ import annotations

from PIL import Image as PILImage
from PIL import ImageChops, ImageDraw, ImageFilter

from annotator.models import TeamSettings
from benchmark.regions import RegionError, boxes_from_mask, validate_regions
from subtlebench.errors import Invalid

# The workbench's regions name the annotator's frames: {"frame": "a" | "b", x, y, w, h}.
FRAMES = ("a", "b")
# What draw_regions draws with, unless told otherwise: a red outline, 1/200 of the image's longer side thick.
COLOR = (255, 0, 0)


def regions_check(regions, *, image_1, image_2, field: str = "regions") -> list[dict]:
    """The regions in canonical form, checked against the sizes of the pair's two images; Invalid naming the
    region and the field otherwise (under `field`)."""
    sizes = {1: (image_1.width, image_1.height), 2: (image_2.width, image_2.height)}
    try:
        return validate_regions(regions, sizes)
    except RegionError as error:
        raise Invalid({field: [str(error)]}) from error


def regions_from_frames(regions, *, swapped: bool) -> list[dict]:
    """The workbench's boxes on frames A and B as boxes on images 1 and 2. When the app put B first (answer
    balancing, `Pair.swapped`), a box on A lands on image 2."""
    if regions is None:
        return []
    if not isinstance(regions, list):
        raise Invalid({"regions": ["regions must be a list of boxes."]})
    stored = []
    for number, region in enumerate(regions, start=1):
        if not isinstance(region, dict) or region.get("frame") not in FRAMES:
            raise Invalid({"regions": [f"region {number}: frame must be a or b."]})
        on_a = region["frame"] == "a"
        box = {key: value for key, value in region.items() if key != "frame"}
        box["image"] = 2 if on_a == swapped else 1
        stored.append(box)
    return stored


def regions_as_frames(regions, *, swapped: bool) -> list[dict]:
    """A stored pair's boxes on images 1 and 2 as the workbench's boxes on frames A and B (the inverse of
    `regions_from_frames`), so an edit reopens them where the annotator drew them."""
    shown = []
    for region in regions or []:
        box = {key: value for key, value in region.items() if key != "image"}
        box["frame"] = "a" if (region["image"] == 1) != swapped else "b"
        shown.append(box)
    return shown


def regions_swapped(regions) -> list[dict]:
    """The boxes of a pair whose two images were traded (an export's answer balancing): image 1 becomes 2."""
    return [{**region, "image": 3 - region["image"]} for region in regions or []]


def categories_requiring_regions() -> list[str]:
    """The categories whose pairs must mark at least one region (the coordinator's team setting)."""
    # One read, no row made: pages that only show the setting (the workbench) stay within their query budget.
    return list(TeamSettings.objects.filter(pk=1).values_list("regions_required", flat=True).first() or [])


def regions_required_check(*, category: str, regions: list, field: str = "regions") -> None:
    """Invalid when the category requires a region and there is none."""
    if not regions and category in categories_requiring_regions():
        article = "An" if category[:1] in "aeiou" else "A"
        raise Invalid(
            {
                field: [
                    f"{article} {category} pair needs at least one difference region: draw a box on A or B where the "
                    "images differ (drag on an image in draw mode, or press r)."
                ]
            }
        )


def draw_regions(
    image: PILImage.Image, regions, image_number: int, *, original_size=None, color=COLOR, width: int | None = None
) -> PILImage.Image:
    """A copy of `image` with the outlines of the regions on image 1 or 2 (`image_number`) drawn on it.

    `regions` are in pixels of the original image. For an image resized from the original (a model's input), pass
    the original's `original_size` (width, height): the boxes are scaled to the image, so they stay on the same
    content. The outline is drawn inside each box, `width` pixels thick (by default 1/200 of the image's longer
    side, at least 2), in `color`. The input image is not changed; a box on the other image draws nothing.
    """
    if image_number not in (1, 2):
        raise ValueError(f"image_number must be 1 or 2, got {image_number!r}.")
    drawn = image.convert("RGB") if image.mode not in ("RGB", "RGBA") else image.copy()
    width_0, height_0 = original_size or drawn.size
    scale_x, scale_y = drawn.width / width_0, drawn.height / height_0
    thickness = width if width is not None else max(2, round(max(drawn.size) / 200))
    pen = ImageDraw.Draw(drawn)
    for region in regions or []:
        if region["image"] != image_number:
            continue
        left, top = round(region["x"] * scale_x), round(region["y"] * scale_y)
        right = max(left, round((region["x"] + region["w"]) * scale_x) - 1)
        bottom = max(top, round((region["y"] + region["h"]) * scale_y) - 1)
        pen.rectangle((left, top, right, bottom), outline=color, width=thickness)
    return drawn


# A pixel differs when a channel moved by more than this (re-encoding noise stays below it); a part smaller than
# DIFFERENCE_MIN_SHARE of the image is noise; at most DIFFERENCE_MAX_BOXES boxes (the smallest merged).
DIFFERENCE_THRESHOLD = 32
DIFFERENCE_MIN_SHARE = 0.0005
DIFFERENCE_MAX_BOXES = 4


def regions_from_difference(first: PILImage.Image, second: PILImage.Image) -> list[dict]:
    """Boxes around where two images of one size differ, on both images (1 and 2): the per-pixel difference of
    their RGB, thresholded, grown by a 3×3 maximum so that a change's pieces join, as parts (benchmark.regions)."""
    if first.size != second.size:
        raise ValueError(f"the images differ in size: {first.size} and {second.size}")
    difference = ImageChops.difference(first.convert("RGB"), second.convert("RGB"))
    channels = difference.split()
    largest = ImageChops.lighter(ImageChops.lighter(channels[0], channels[1]), channels[2])
    mask = largest.point(lambda value: 255 if value > DIFFERENCE_THRESHOLD else 0).filter(ImageFilter.MaxFilter(3))
    width, height = first.size
    min_pixels = max(1, int(width * height * DIFFERENCE_MIN_SHARE))
    boxes = boxes_from_mask(mask, image=2, min_pixels=min_pixels, max_boxes=DIFFERENCE_MAX_BOXES)
    # A box is a pixel wider on each side than the change (the 3x3 maximum), which covers the change whole.
    return [{**box, "image": 1} for box in boxes] + boxes

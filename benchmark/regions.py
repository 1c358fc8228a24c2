"""Difference regions: boxes marking where two images of a pair differ.

A region is a dict `{"image": 1 or 2, "x": int, "y": int, "w": int, "h": int}` in pixels of that image (its
original size, origin at the top left), with an optional short `label`. A pair holds a list of them (at most
`MAX_REGIONS`); the official records never carry them, the provenance sidecar of an export does. Annotators draw
them, imports make them from masks (MVTec-AD `ground_truth/`, change-detection `label/`), the synthetic generator
knows them by construction, and model evaluation's oracle condition (`highlight_oracle`) draws them on the images.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MAX_REGIONS = 20
LABEL_MAX = 100
KEYS = {"image", "x", "y", "w", "h"}
OPTIONAL_KEYS = {"label"}


class RegionError(ValueError):
    """A region list that breaks the contract; the message names the region (1-based) and the field."""


def validate_regions(regions, sizes: Mapping[int, tuple[int, int]] | None = None) -> list[dict]:
    """The regions in their canonical form (keys in a fixed order, ints), or RegionError saying which region and
    field is wrong. `sizes`: {1: (width, height), 2: (width, height)} of the pair's images, to check that every box
    lies inside its image; None skips that check."""
    if regions is None:
        return []
    if not isinstance(regions, list):
        raise RegionError("regions must be a list of boxes.")
    if len(regions) > MAX_REGIONS:
        raise RegionError(f"at most {MAX_REGIONS} regions per pair, got {len(regions)}.")
    clean = []
    for number, region in enumerate(regions, start=1):
        where = f"region {number}"
        if not isinstance(region, dict):
            raise RegionError(f"{where}: must be an object with image, x, y, w and h.")
        missing = sorted(KEYS - region.keys())
        if missing:
            raise RegionError(f"{where}: {', '.join(missing)} missing.")
        unknown = sorted(region.keys() - KEYS - OPTIONAL_KEYS)
        if unknown:
            raise RegionError(f"{where}: unknown field {', '.join(unknown)}.")
        for key in ("image", "x", "y", "w", "h"):
            value = region[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise RegionError(f"{where}: {key} must be a whole number of pixels, got {value!r}.")
        if region["image"] not in (1, 2):
            raise RegionError(f"{where}: image must be 1 or 2, got {region['image']}.")
        if region["x"] < 0 or region["y"] < 0:
            raise RegionError(f"{where}: x and y must be 0 or more.")
        if region["w"] < 1 or region["h"] < 1:
            raise RegionError(f"{where}: w and h must be at least 1 pixel.")
        if sizes is not None and region["image"] in sizes:
            width, height = sizes[region["image"]]
            if region["x"] + region["w"] > width or region["y"] + region["h"] > height:
                raise RegionError(
                    f"{where}: the box ({region['x']}, {region['y']}, {region['w']}×{region['h']}) runs outside "
                    f"image {region['image']} ({width}×{height})."
                )
        box = {key: region[key] for key in ("image", "x", "y", "w", "h")}
        label = region.get("label")
        if label not in (None, ""):
            if not isinstance(label, str) or len(label) > LABEL_MAX or "\n" in label:
                raise RegionError(f"{where}: label must be one line of at most {LABEL_MAX} characters.")
            box["label"] = label
        clean.append(box)
    return clean


def boxes_from_mask(mask, *, image: int, min_pixels: int = 1, max_boxes: int = MAX_REGIONS) -> list[dict]:
    """The bounding boxes of the connected parts (8-connected) of a mask's nonzero pixels, for image 1 or 2:
    largest first (ties by position, so the order is fixed), parts smaller than `min_pixels` left out, at most
    `max_boxes` (the smallest are merged into one box around them all rather than dropped). `mask`: rows of
    pixel values (a list of lists, an array with `tolist()`, or a Pillow image); a pixel that is itself a sequence (RGB)
    counts when any channel is nonzero.

    The parts are found from each row's runs of foreground pixels, joined to the runs they touch in the row above
    (union-find), not pixel by pixel: a 1000×1000 mask is a thousand rows of a few runs each."""
    rows = foreground_rows(mask)
    parent: list[int] = []  # union-find over the runs, in row-major order
    runs: list[tuple[int, int, int]] = []  # (y, start, end) with end exclusive

    def root(run: int) -> int:
        while parent[run] != run:
            parent[run] = parent[parent[run]]
            run = parent[run]
        return run

    above: list[int] = []  # the run numbers of the previous row
    for y, row in enumerate(rows):
        here = []
        for match in FOREGROUND_RUN.finditer(row):
            number = len(runs)
            runs.append((y, match.start(), match.end()))
            parent.append(number)
            here.append(number)
        # Two runs of neighbouring rows touch (8-connected) when they overlap with one pixel to spare on each side.
        i = j = 0
        while i < len(above) and j < len(here):
            _, start_above, end_above = runs[above[i]]
            _, start, end = runs[here[j]]
            if start_above <= end and start <= end_above:
                first, second = root(above[i]), root(here[j])
                if first != second:
                    parent[max(first, second)] = min(first, second)  # the earlier run stays the root
            if end_above < end:
                i += 1
            else:
                j += 1
        above = here
    boxes: dict[int, list[int]] = {}  # root -> [pixels, y0, x0, y1, x1]; roots in the order parts first appear
    for number, (y, start, end) in enumerate(runs):
        box = boxes.get(root(number))
        if box is None:
            boxes[root(number)] = [end - start, y, start, y, end - 1]
        else:
            box[0] += end - start
            box[1], box[2], box[3], box[4] = min(box[1], y), min(box[2], start), max(box[3], y), max(box[4], end - 1)
    parts = [tuple(box) for box in boxes.values() if box[0] >= min_pixels]  # (pixels, y0, x0, y1, x1)
    parts.sort(key=lambda part: (-part[0], part[1], part[2]))
    if len(parts) > max_boxes:
        rest = parts[max_boxes - 1 :]
        merged = (
            sum(part[0] for part in rest),
            min(part[1] for part in rest),
            min(part[2] for part in rest),
            max(part[3] for part in rest),
            max(part[4] for part in rest),
        )
        parts = [*parts[: max_boxes - 1], merged]
    return [{"image": image, "x": x0, "y": y0, "w": x1 - x0 + 1, "h": y1 - y0 + 1} for _, y0, x0, y1, x1 in parts]


FOREGROUND_RUN = re.compile(rb"[^\x00]+")


def foreground_rows(mask) -> list[bytes]:
    """Each row of the mask as bytes, nonzero where the pixel counts as foreground. An 8-bit Pillow image and a
    two-dimensional array give theirs at once; other masks go pixel by pixel."""
    if hasattr(mask, "getpixel") and hasattr(mask, "size"):  # a Pillow image
        width, height = mask.size
        if mask.mode == "L":
            return split_rows(mask.tobytes(), width, height)
        flat = list(mask.get_flattened_data() if hasattr(mask, "get_flattened_data") else mask.getdata())
        rows = [flat[y * width : (y + 1) * width] for y in range(height)]
    elif hasattr(mask, "shape") and len(mask.shape) == 2 and hasattr(mask, "astype"):  # an array (numpy's)
        height, width = mask.shape
        return split_rows((mask > 0).astype("uint8").tobytes(), width, height)
    else:
        rows = mask.tolist() if hasattr(mask, "tolist") else mask
    return [
        bytes(1 if (max(value) if isinstance(value, list | tuple) else value) > 0 else 0 for value in row)
        for row in rows
    ]


def split_rows(data: bytes, width: int, height: int) -> list[bytes]:
    return [data[y * width : (y + 1) * width] for y in range(height)]


def union_box(regions: Iterable[Mapping], image: int) -> dict | None:
    """One box around all regions on image 1 or 2, or None when it has none."""
    boxes = [region for region in regions if region["image"] == image]
    if not boxes:
        return None
    x0 = min(box["x"] for box in boxes)
    y0 = min(box["y"] for box in boxes)
    x1 = max(box["x"] + box["w"] for box in boxes)
    y1 = max(box["y"] + box["h"] for box in boxes)
    return {"image": image, "x": x0, "y": y0, "w": x1 - x0, "h": y1 - y0}

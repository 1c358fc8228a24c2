"""Synthetic pairs for the paper's controlled experiments (pure: Pillow and numpy, no Django): simple shapes on a
plain background, one factor varied at a time, with the answer, the distractors and the difference regions known by
construction.

`synthetic_pair(family, factors, seed=..., index=...)` draws one pair; the same arguments always give the same
bytes (numpy's generator seeded from a digest of them, Pillow drawing without anti-aliasing, PNG). Families follow
the paper: attribute (brightness, colour or size of one object), existence (one object added or removed), quantity
(counts that differ by `difference`), spatial (one object moved by `displacement` pixels) and viewpoint (the camera
panned by `shift` of the image height, zoomed by `shift`, or rotated by `angle` degrees). Shapes sit in the cells of
a grid (never touching), so every object is one connected blob of one colour.

Each item has one right answer: a colour change keeps the object's relative luminance (within LUMINANCE_TOLERANCE),
a brightness change keeps its hue (within HUE_TOLERANCE) and saturation, and every wrong option is one that has to
be checked against the images (an existence distractor is a shape in both images; the options of a viewpoint item are
the same whichever way its camera moved).
"""

from __future__ import annotations

import colorsys
import functools
import hashlib
import io
import json
import math
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw

from benchmark.taxonomy import FIRST_IMAGE, SECOND_IMAGE

GENERATOR = "subtlebench-synthetic"
# Recorded in every pair's generation_info and part of its seed. Version 1's colour changes kept the HLS lightness
# (the relative luminance moved by a quarter or more in most items) and its existence distractors could name shapes
# in neither image; version 2 has one right answer per item (the module's docstring).
VERSION = 2
BACKGROUND = (235, 235, 235)
# Mid-tone colours (no channel above 150): a brightness step up to +60% stays below 255.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (150, 30, 30),
    "green": (30, 120, 40),
    "blue": (30, 60, 150),
    "yellow": (140, 130, 20),
    "purple": (110, 40, 130),
    "orange": (150, 80, 10),
    "teal": (20, 120, 120),
    "pink": (150, 50, 100),
}
SHAPES = ("circle", "square", "triangle", "diamond", "cross")
GAP = 4  # pixels kept free around each object's cell

# A colour change keeps the relative luminance (WCAG 2.x, of the sRGB colour drawn) within this fraction of the old
# one, |Y2 / Y1 - 1|, so that neither "brighter" nor "darker" is also right.
LUMINANCE_TOLERANCE = 0.01
# A brightness change keeps the HSV hue within this many degrees: the 8-bit rounding is all that may move it.
HUE_TOLERANCE = 1.0
LUMA = np.array([0.2126, 0.7152, 0.0722])  # the weights of linear R, G, B in relative luminance
ATTRIBUTE_OPTIONS = ("brighter", "darker", "larger", "smaller", "different colour")

FAMILIES: dict[str, str] = {
    "attribute": "attribute",
    "existence": "existence",
    "quantity": "quantity",
    "spatial": "spatial",
    "viewpoint": "viewpoint",
}
# The factors of each family, with their defaults; numeric ones can be swept.
DEFAULTS: dict[str, dict] = {
    "attribute": {"change": "brightness", "step": 0.25, "object_size": 40, "object_count": 8},
    "existence": {"change": "added", "options": 5, "object_size": 40, "object_count": 8},
    "quantity": {"difference": 1, "object_size": 30, "object_count": 8},
    "spatial": {"displacement": 20, "object_size": 40, "object_count": 8},
    "viewpoint": {"motion": "pan", "shift": 0.27, "angle": 15.0, "object_size": 40, "object_count": 24},
}
CHOICES = {
    ("attribute", "change"): ("brightness", "colour", "size"),
    ("existence", "change"): ("added", "removed"),
    # Not swept: a sweep's threshold is fitted with one chance rate, 1 / the options of its items.
    ("existence", "options"): (2, 3, 4, 5),
    ("viewpoint", "motion"): ("pan", "zoom", "rotate"),
}
# Bounds of the numeric factors: (low, high, whole number).
BOUNDS: dict[str, tuple[float, float, bool]] = {
    "step": (0.01, 0.6, False),
    "object_size": (6, 160, True),
    "object_count": (1, 256, True),
    "difference": (1, 64, True),
    "displacement": (1, 400, True),
    "shift": (0.01, 0.5, False),
    "angle": (1.0, 90.0, False),
}
DIRECTIONS = ("left", "right", "up", "down")
STEP = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}


def shape_name(colour: str, kind: str) -> str:
    return f"{'an' if colour[0] in 'aeiou' else 'a'} {colour} {kind}"


class SyntheticError(ValueError):
    """Factors that cannot make a pair (unknown, out of range, or more objects than fit); the message names them."""


@dataclass(frozen=True)
class Shape:
    kind: str
    colour: str
    rgb: tuple[int, int, int]
    x: int  # the box's top left corner
    y: int
    size: int

    @property
    def name(self) -> str:
        return shape_name(self.colour, self.kind)

    @property
    def box(self) -> tuple[int, int, int, int]:
        return (self.x, self.y, self.size, self.size)


@dataclass
class SyntheticPair:
    family: str
    category: str
    factors: dict
    image_1: bytes
    image_2: bytes
    question: str
    answer: str
    distractors: list[str]
    regions: list[dict]
    truth: dict = field(default_factory=dict)
    seed: int = 0
    index: int = 0
    size: int = 512

    @property
    def generation_info(self) -> dict:
        """What `generation_info` records: the generator, the family, every factor, the seed and the truth."""
        return {
            "generator": GENERATOR,
            "version": VERSION,
            "family": self.family,
            "factors": self.factors,
            "seed": self.seed,
            "index": self.index,
            "size": self.size,
            "truth": self.truth,
        }


def clean_factors(family: str, factors: dict | None) -> dict:
    """The family's factors with defaults filled in and every value checked; SyntheticError names a bad one."""
    if family not in FAMILIES:
        raise SyntheticError(f"unknown family {family!r}: use one of {', '.join(FAMILIES)}")
    given = dict(factors or {})
    unknown = sorted(set(given) - set(DEFAULTS[family]))
    if unknown:
        raise SyntheticError(
            f"{family}: unknown factor {', '.join(unknown)}; its factors are {', '.join(DEFAULTS[family])}"
        )
    clean = {**DEFAULTS[family], **given}
    for name, value in clean.items():
        choices = CHOICES.get((family, name))
        if choices is not None:
            if value not in choices:
                raise SyntheticError(f"{family}: {name} must be one of {', '.join(map(str, choices))}, got {value!r}")
            continue
        low, high, whole = BOUNDS[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise SyntheticError(f"{family}: {name} must be a number, got {value!r}")
        if whole and value != int(value):
            raise SyntheticError(f"{family}: {name} must be a whole number, got {value!r}")
        if not low <= value <= high:
            raise SyntheticError(f"{family}: {name} must be from {low:g} to {high:g}, got {value:g}")
        clean[name] = int(value) if whole else float(value)
    if family == "existence" and clean["object_count"] < clean["options"] - 1:
        raise SyntheticError(
            f"existence: {clean['options']} options need at least {clean['options'] - 1} objects (the wrong answers "
            f"are shapes in both images), got object_count {clean['object_count']}; use fewer options or more objects"
        )
    return clean


def _rng(family: str, factors: dict, seed: int, index: int) -> np.random.Generator:
    text = json.dumps([GENERATOR, VERSION, family, factors, seed, index], sort_keys=True)
    return np.random.default_rng(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))


# --- Colour ------------------------------------------------------------------------------------------------------


def _decode(srgb: np.ndarray) -> np.ndarray:
    """sRGB values 0 to 1, not rounded, in linear light (IEC 61966-2-1; WCAG's 0.03928 for the threshold gives the
    same on 8-bit values)."""
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


# Linear light of each 8-bit value: a table, so whole images decode at the speed of an index.
LINEAR = _decode(np.arange(256) / 255)


def linear_light(rgb) -> np.ndarray:
    """8-bit sRGB values (any array of whole numbers 0 to 255 whose last axis is R, G, B) in linear light."""
    return LINEAR[np.asarray(rgb, dtype=np.intp)]


def relative_luminance(rgb) -> np.ndarray:
    """WCAG 2.x relative luminance of 8-bit sRGB values: 0 for black, 1 for white."""
    return linear_light(rgb) @ LUMA


def hue_degrees(rgb) -> np.ndarray:
    """The HSV hue (0 to 360) of 8-bit RGB values; NaN for greys, which have none."""
    c = np.asarray(rgb, dtype=np.float64)
    r, g, b = c[..., 0], c[..., 1], c[..., 2]
    top, spread = c.max(axis=-1), np.ptp(c, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        hue = np.where(top == r, (g - b) / spread, np.where(top == g, 2 + (b - r) / spread, 4 + (r - g) / spread))
    return np.where(spread == 0, np.nan, (hue * 60) % 360)


def hue_distance(a, b) -> np.ndarray:
    """Degrees between two hues, the short way round the circle."""
    turn = np.abs(np.asarray(a) - np.asarray(b)) % 360
    return np.minimum(turn, 360 - turn)


def _saturation(rgb) -> np.ndarray:
    c = np.asarray(rgb, dtype=np.float64)
    top = c.max(axis=-1)
    return np.where(top == 0, 0.0, np.ptp(c, axis=-1) / np.maximum(top, 1))


def _encode(linear: np.ndarray) -> np.ndarray:
    """Linear light (0 to 1) to sRGB values 0 to 255, not rounded."""
    c = np.clip(linear, 0, 1)
    return 255 * np.where(c <= 0.0031308, c * 12.92, 1.055 * c ** (1 / 2.4) - 0.055)


def _near(exact: np.ndarray, spread: int) -> np.ndarray:
    """The 8-bit colours around an exact one: each channel from `spread` - 1 below its floor to `spread` - 1 above its
    ceiling (with spread 1, rounded down or up)."""
    exact = np.round(exact, 9)  # 150 × 0.4 is 60.00000000000001, whose ceiling would be 61
    axes = [np.arange(int(np.floor(v)) - spread + 1, int(np.ceil(v)) + spread) for v in exact]
    return np.clip(np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3), 0, 255)


@functools.lru_cache(maxsize=4096)  # a sweep's cell has one step: eight colours, each solved once
def brightened(rgb: tuple[int, int, int], factor: float) -> tuple[int, int, int]:
    """`rgb` with its HSV value times `factor`, its hue and saturation kept: every channel times the factor, each
    rounded down or up so that the hue (then the saturation) stays nearest the old. Never the old colour itself."""
    candidates = _near(np.array(rgb) * factor, 1)
    candidates = candidates[np.any(candidates != rgb, axis=1)]
    hue_error = hue_distance(hue_degrees(candidates), hue_degrees(rgb))
    saturation_error = np.abs(_saturation(candidates) - _saturation(rgb))
    best = candidates[np.lexsort((saturation_error, hue_error))[0]]
    if not hue_distance(hue_degrees(best), hue_degrees(rgb)) <= HUE_TOLERANCE:
        raise SyntheticError(f"attribute: no 8-bit colour {rgb} × {factor:g} keeps its hue within {HUE_TOLERANCE}°")
    return tuple(int(v) for v in best)


@functools.lru_cache(maxsize=4096)
def hue_turned(rgb: tuple[int, int, int], turn: float) -> tuple[int, int, int]:
    """`rgb` with its hue turned by `turn` of the circle at the same relative luminance: the hue turned at constant
    HLS lightness and saturation, the result scaled in linear light to the old luminance (which keeps its hue), mixed
    towards the grey of that luminance where scaling leaves the gamut, and rounded to a nearby 8-bit colour of that
    luminance (never the old colour itself)."""
    target = float(relative_luminance(rgb))
    hue, lightness, saturation = colorsys.rgb_to_hls(*(c / 255 for c in rgb))
    turned = _decode(np.array(colorsys.hls_to_rgb((hue + turn) % 1.0, lightness, saturation)))
    turned *= target / float(turned @ LUMA)
    if turned.max() > 1:
        turned = target + (turned - target) * (1 - target) / (turned.max() - target)
    # One 8-bit step of a mid green moves a dark colour's luminance by up to 4%: the fine tuning is in the other
    # channels, a few steps either way. The nearest colour within a tenth of the tolerance, else the nearest in
    # luminance.
    candidates = _near(_encode(turned), 4)
    candidates = candidates[np.any(candidates != rgb, axis=1)]
    error = np.abs(relative_luminance(candidates) / target - 1)
    distance = np.sum((candidates - _encode(turned)) ** 2, axis=1)
    close = error <= LUMINANCE_TOLERANCE / 10
    best = candidates[close][np.argmin(distance[close])] if close.any() else candidates[np.argmin(error)]
    if not abs(float(relative_luminance(best)) / target - 1) <= LUMINANCE_TOLERANCE:
        raise SyntheticError(f"attribute: no 8-bit colour near {rgb} turned by {turn:g} keeps its luminance")
    return tuple(int(v) for v in best)


def _draw(draw: ImageDraw.ImageDraw, shape: Shape, fill: int) -> None:
    x0, y0 = shape.x, shape.y
    s = shape.size
    x1, y1 = x0 + s - 1, y0 + s - 1
    if shape.kind == "circle":
        draw.ellipse((x0, y0, x1, y1), fill=fill)
    elif shape.kind == "square":
        draw.rectangle((x0, y0, x1, y1), fill=fill)
    elif shape.kind == "triangle":
        draw.polygon([(x0 + s // 2, y0), (x1, y1), (x0, y1)], fill=fill)
    elif shape.kind == "diamond":
        draw.polygon([(x0 + s // 2, y0), (x1, y0 + s // 2), (x0 + s // 2, y1), (x0, y0 + s // 2)], fill=fill)
    else:  # cross: two bars a third of the size wide
        bar = max(2, s // 3)
        start = (s - bar) // 2
        draw.rectangle((x0 + start, y0, x0 + start + bar - 1, y1), fill=fill)
        draw.rectangle((x0, y0 + start, x1, y0 + start + bar - 1), fill=fill)


def render(shapes: list[Shape], size: int) -> Image.Image:
    """The shapes on the background, as a palette image (index 0 the background): a few colours, drawn without
    anti-aliasing, so a PNG of it is small and quick to write (a tenth of the time of RGB)."""
    colours = list(dict.fromkeys([BACKGROUND, *(shape.rgb for shape in shapes)]))
    if len(colours) > 256:
        raise SyntheticError(f"{len(colours)} colours in one image; at most 256")
    index = {rgb: number for number, rgb in enumerate(colours)}
    image = Image.new("P", (size, size), 0)
    image.putpalette([channel for rgb in colours for channel in rgb])
    draw = ImageDraw.Draw(image)
    for shape in shapes:
        _draw(draw, shape, index[shape.rgb])
    return image


def png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=1)
    return out.getvalue()


class Grid:
    """The cells of a size×size image for objects of `object_size` pixels (plus the largest size change)."""

    def __init__(self, size: int, cell: int):
        self.cell = cell
        self.columns = size // cell
        self.count = self.columns * self.columns

    def origin(self, number: int) -> tuple[int, int]:
        row, column = divmod(number, self.columns)
        return column * self.cell, row * self.cell


def _combos(rng: np.random.Generator) -> list[tuple[str, str]]:
    combos = [(colour, kind) for colour in COLOURS for kind in SHAPES]
    order = rng.permutation(len(combos))
    return [combos[i] for i in order]


def _scene(
    rng,
    grid: Grid,
    cells: list[int],
    object_size: int,
    combos: list[tuple[str, str]],
    margin: int = 0,
    distinct: bool = False,
) -> list[Shape]:
    """One shape per cell, its (colour, kind) drawn from `combos` (or, `distinct`, taken from them in turn: no two
    alike until they run out), jittered inside the cell, `margin` pixels kept free on each side (room for the shape to
    grow about its centre)."""
    shapes = []
    slack = grid.cell - GAP - object_size - 2 * margin
    for order, number in enumerate(cells):
        colour, kind = combos[order % len(combos) if distinct else int(rng.integers(len(combos)))]
        ox, oy = grid.origin(number)
        jx, jy = (int(v) for v in rng.integers(0, slack + 1, size=2)) if slack > 0 else (0, 0)
        x, y = ox + GAP // 2 + margin + jx, oy + GAP // 2 + margin + jy
        shapes.append(Shape(kind, colour, COLOURS[colour], x, y, object_size))
    return shapes


def _grid_for(size: int, object_size: int, needed: int, family: str, room: int = 0) -> Grid:
    grid = Grid(size, object_size + GAP + room)
    if grid.count < needed:
        raise SyntheticError(
            f"{family}: {needed} objects of {object_size} px do not fit a {size}×{size} image "
            f"(at most {grid.count}); use fewer or smaller objects"
        )
    return grid


def _region(shape: Shape, image: int, size: int, label: str = "") -> dict:
    x0, y0 = max(0, shape.x), max(0, shape.y)
    x1, y1 = min(size, shape.x + shape.size), min(size, shape.y + shape.size)
    region = {"image": image, "x": x0, "y": y0, "w": x1 - x0, "h": y1 - y0}
    if label:
        region["label"] = label
    return region


def _balanced(options: tuple[str, ...], seed: int, index: int) -> str:
    """The answer of item `index`: cycling through `options` from a seed-chosen start, so answers are balanced."""
    return options[(index + seed) % len(options)]


# --- The families ----------------------------------------------------------------------------------------------


def _attribute(rng, f: dict, size: int, seed: int, index: int):
    step, object_size = f["step"], f["object_size"]
    change = f["change"]
    margin = int(math.ceil(object_size * step / 2)) + 1 if change == "size" else 0
    grid = _grid_for(size, object_size, f["object_count"], "attribute", 2 * margin)
    cells = sorted(int(c) for c in rng.choice(grid.count, size=f["object_count"], replace=False))
    shapes = _scene(rng, grid, cells, object_size, _combos(rng), margin)
    target = int(rng.integers(len(shapes)))
    old = shapes[target]
    if change == "brightness":
        answer = _balanced(("brighter", "darker"), seed, index)
        rgb = brightened(old.rgb, 1 + step if answer == "brighter" else 1 - step)
        new = Shape(old.kind, old.colour, rgb, old.x, old.y, old.size)
    elif change == "colour":
        answer = "different colour"
        new = Shape(old.kind, old.colour, hue_turned(old.rgb, step), old.x, old.y, old.size)
    else:
        answer = _balanced(("larger", "smaller"), seed, index)
        grown = round(old.size * (1 + step if answer == "larger" else 1 - step))
        grown = max(2, grown if grown != old.size else old.size + (1 if answer == "larger" else -1))
        # Grown or shrunk about its centre, inside its cell's room.
        shift = (old.size - grown) // 2
        new = Shape(old.kind, old.colour, old.rgb, old.x + shift, old.y + shift, grown)
    after = [*shapes[:target], new, *shapes[target + 1 :]]
    # Every change gets all five options: the set never says which change was made.
    distractors = [option for option in ATTRIBUTE_OPTIONS if option != answer]
    question = "How did one of the shapes change in the second image?"
    regions = [_region(old, 1, size), _region(new, 2, size)]
    truth = {"changed": old.name, "box_1": list(old.box), "box_2": list(new.box), "rgb_1": old.rgb, "rgb_2": new.rgb}
    return shapes, after, question, answer, distractors, regions, truth


def _existence(rng, f: dict, size: int, seed: int, index: int):
    count, object_size = f["object_count"], f["object_size"]
    grid = _grid_for(size, object_size, count + 1, "existence")
    combos = _combos(rng)
    unique, rest = combos[0], combos[1:]
    cells = [int(c) for c in rng.choice(grid.count, size=count + 1, replace=False)]
    scene = _scene(rng, grid, sorted(cells[:count]), object_size, rest, distinct=True)
    (special,) = _scene(rng, grid, [cells[count]], object_size, [unique])
    if f["change"] == "added":
        before, after, changed_on = scene, [*scene, special], 2
        question = "Which shape appears in the second image but not in the first?"
    else:
        before, after, changed_on = [*scene, special], scene, 1
        question = "Which shape is in the first image but missing from the second?"
    answer = special.name
    # Wrong answers: shapes in both images, so each has to be looked for in both (a shape in neither could be ruled
    # out from one image alone). The scene's shapes are all different, so there are enough (clean_factors checks).
    present = [shape.name for shape in scene]
    picked = sorted(int(i) for i in rng.choice(len(present), size=f["options"] - 1, replace=False))
    distractors = [present[i] for i in picked]
    regions = [_region(special, changed_on, size, label=special.name)]
    truth = {"change": f["change"], "object": special.name, "box": list(special.box)}
    return before, after, question, answer, distractors, regions, truth


def _quantity(rng, f: dict, size: int, seed: int, index: int):
    count, difference, object_size = f["object_count"], f["difference"], f["object_size"]
    grid = _grid_for(size, object_size, count + difference, "quantity")
    cells = [int(c) for c in rng.choice(grid.count, size=count + difference, replace=False)]
    fewer = _scene(rng, grid, sorted(cells[:count]), object_size, _combos(rng))
    extra = _scene(rng, grid, sorted(cells[count:]), object_size, _combos(rng))
    answer = _balanced((SECOND_IMAGE, FIRST_IMAGE), seed, index)
    more = [*fewer, *extra]
    before, after = (fewer, more) if answer == SECOND_IMAGE else (more, fewer)
    on = 2 if answer == SECOND_IMAGE else 1
    regions = [_region(shape, on, size) for shape in extra][:20]
    truth = {"count_1": len(before), "count_2": len(after)}
    question = "In which image are there more shapes?"
    distractors = [FIRST_IMAGE if answer == SECOND_IMAGE else SECOND_IMAGE]
    return before, after, question, answer, distractors, regions, truth


def _spatial(rng, f: dict, size: int, seed: int, index: int):
    count, object_size, displacement = f["object_count"], f["object_size"], f["displacement"]
    direction = _balanced(DIRECTIONS, seed, index)
    dx, dy = (displacement * v for v in STEP[direction])
    grid = _grid_for(size, object_size, count, "spatial")
    for _attempt in range(200):
        combos = _combos(rng)
        cells = [int(c) for c in rng.choice(grid.count, size=count, replace=False)]
        others = _scene(rng, grid, sorted(cells[1:]), object_size, combos[1:])
        (mover,) = _scene(rng, grid, [cells[0]], object_size, combos[:1])
        moved = Shape(mover.kind, mover.colour, mover.rgb, mover.x + dx, mover.y + dy, mover.size)
        inside = 0 <= moved.x and 0 <= moved.y and moved.x + moved.size <= size and moved.y + moved.size <= size
        if inside and not any(_overlap(moved, other) for other in others):
            break
    else:
        raise SyntheticError(
            f"spatial: no room to move a {object_size} px object {displacement} px {direction} among {count} objects "
            f"in a {size}×{size} image; use fewer objects or a smaller displacement"
        )
    question = f"How did the {mover.colour} {mover.kind} move in the second image?"
    distractors = [d for d in DIRECTIONS if d != direction]
    regions = [_region(mover, 1, size), _region(moved, 2, size)]
    truth = {"object": mover.name, "direction": direction, "dx": dx, "dy": dy, "box_1": list(mover.box)}
    return [*others, mover], [*others, moved], question, direction, distractors, regions, truth


def _overlap(a: Shape, b: Shape) -> bool:
    return not (
        a.x + a.size + GAP // 2 <= b.x
        or b.x + b.size + GAP // 2 <= a.x
        or a.y + a.size + GAP // 2 <= b.y
        or b.y + b.size + GAP // 2 <= a.y
    )


VIEW_ANSWERS = {
    "pan": DIRECTIONS,
    "zoom": ("forward", "backward"),
    "rotate": ("rotate clockwise", "rotate counterclockwise"),
}


def _viewpoint(rng, f: dict, size: int, seed: int, index: int):
    """A scene twice the image's size; the camera is a window on it. Panning the camera right moves the scene left in
    the image; moving forward shows a smaller part of the scene, larger; rotating it clockwise turns the scene the
    other way."""
    canvas = 2 * size
    grid = _grid_for(canvas, f["object_size"], f["object_count"], "viewpoint")
    cells = sorted(int(c) for c in rng.choice(grid.count, size=f["object_count"], replace=False))
    world = render(_scene(rng, grid, cells, f["object_size"], _combos(rng)), canvas)
    motion = f["motion"]
    answer = _balanced(VIEW_ANSWERS[motion], seed, index)
    left = top = size // 2
    first = world.crop((left, top, left + size, top + size))
    truth: dict = {"motion": motion, "move": answer}
    if motion == "pan":
        pixels = round(f["shift"] * size)
        sx, sy = (pixels * v for v in STEP[answer])
        second = world.crop((left + sx, top + sy, left + sx + size, top + sy + size))
        truth.update(dx=sx, dy=sy)
    elif motion == "zoom":
        scale = 1 + f["shift"]
        span = round(size / scale) if answer == "forward" else round(size * scale)
        start = left + (size - span) // 2
        second = world.crop((start, start, start + span, start + span)).resize((size, size), Image.NEAREST)
        truth.update(span=span)
    else:
        angle = f["angle"] if answer == "rotate clockwise" else -f["angle"]
        # Pillow turns counterclockwise for a positive angle: the scene turns against the camera.
        turned = world.rotate(angle, resample=Image.NEAREST, center=(canvas / 2, canvas / 2), fillcolor=0)
        second = turned.crop((left, top, left + size, top + size))
        truth.update(angle=angle)
    # The motion's other answers, then pans: every answer of a motion comes with the same four options (a zoom's are
    # forward, backward, left, right whichever way it went), so no set of options gives its answer away.
    same = [move for move in VIEW_ANSWERS[motion] if move != answer]
    distractors = [*same, *(move for move in DIRECTIONS if move not in VIEW_ANSWERS[motion])][:3]
    question = "How did the camera move from the first image to the second?"
    regions = [{"image": 1, "x": 0, "y": 0, "w": size, "h": size}, {"image": 2, "x": 0, "y": 0, "w": size, "h": size}]
    return first, second, question, answer, distractors, regions, truth


BUILDERS = {
    "attribute": _attribute,
    "existence": _existence,
    "quantity": _quantity,
    "spatial": _spatial,
    "viewpoint": _viewpoint,
}


def synthetic_pair(family: str, factors: dict | None = None, *, seed: int = 0, index: int = 0, size: int = 512):
    """One pair of the family with these factors (defaults for the rest); the same arguments give the same bytes."""
    if not 64 <= size <= 2048:
        raise SyntheticError(f"size must be from 64 to 2048 pixels, got {size}")
    clean = clean_factors(family, factors)
    rng = _rng(family, clean, seed, index)
    first, second, question, answer, distractors, regions, truth = BUILDERS[family](rng, clean, size, seed, index)
    if isinstance(first, list):
        first, second = render(first, size), render(second, size)
    return SyntheticPair(
        family=family,
        category=FAMILIES[family],
        factors=clean,
        image_1=png(first),
        image_2=png(second),
        question=question,
        answer=answer,
        distractors=list(distractors),
        regions=regions,
        truth=json.loads(json.dumps(truth)),
        seed=seed,
        index=index,
        size=size,
    )

"""Prompting strategies of a model run: which images a request carries and how they are made (Pillow and numpy), and
the prompt texts each strategy sends by default (`prompts/<strategy>.json`; a run may replace them and keeps the
exact texts it used).

The official evaluator's prompt types (krafton-ai/VLM-SubtleBench, `prompts/multiple_choice_evaluator.py`), as facts
carried over: `standard`, `no_reasoning` and `camera_augmented` send the two image files unchanged (their bytes);
`grid` draws a 4×4 grid of 1-pixel lines of (76, 76, 76) at width·i//4 and height·i//4 on each image;
`concatenated` sends one image: both scaled (Lanczos) to the lower of the two heights, side by side with a 1-pixel
black line between; `overlapped` sends the two files and a third image, their 50/50 blend at the smaller width and
height (Lanczos); `substract` sends the two files and a third image, the mean over the channels of their absolute
difference at that size, scaled so that its largest value is 255, grey as RGB. A made image is a JPEG of quality 95.
Ours besides: `two_stage` asks for a description of the difference first and sends it with the question in a second
request.

`highlight` draws red boxes on both images computed from the two images alone (`difference_boxes`), never from what
is stored about the pair: both images at the smaller width and height (Lanczos); the mean absolute difference over
the channels per pixel; the pixels where it is at least DIFF_THRESHOLD (24 of 255: above JPEG noise, below any change
a question is about) are changed; the changed pixels are grouped on a grid of cells (BOX_GRID cells on the longer
side) and changed cells at most MERGE_CELLS empty cells apart are one change (connected components after a dilation),
so nearby pixels of one object make one box; a change of fewer than MIN_CHANGE_PIXELS pixels or 1/MIN_CHANGE_SHARE of
the image is dropped as noise; the MAX_BOXES largest changes are kept, each boxed tightly around its changed pixels
and scaled to each image. Identical images get no box.
`highlight_oracle` is another condition, an oracle: it draws the pair's stored difference regions (masks, labels,
annotators' boxes; benchmark/regions.py) and nothing else; an item without stored regions gets no box (the run
counts those items: `without_regions`), never computed boxes in their place.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from annotator.images import open_within_limits
from benchmark.protocol import Item, lettered

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
JPEG_QUALITY = 95
GRID_COLOR = (76, 76, 76)
GRID_CELLS = 4
BOX_COLOR = (255, 0, 0)
# The computed highlight boxes (`difference_boxes`; the method is the module's docstring).
DIFF_THRESHOLD = 24  # of 255: a pixel whose mean absolute difference over the channels is at least this has changed
BOX_GRID = 128  # cells on the longer side of the grid the changed pixels are grouped on
MERGE_CELLS = 1  # changed cells with at most this many empty cells between them are one change
MIN_CHANGE_PIXELS = 4  # a smaller change is noise
MIN_CHANGE_SHARE = 5000  # so is a change of fewer than 1/MIN_CHANGE_SHARE of the image's pixels
MAX_BOXES = 5
PROMPT_MAX = 20000


class StrategyError(ValueError):
    """Prompt texts a strategy cannot use; the message names the text and what is missing."""


def _open(data: bytes) -> Image.Image:
    with open_within_limits(data) as opened:  # ImageLimitError (a ValueError): the item fails alone
        opened.load()
        image = opened.copy() if opened.mode == "RGB" else opened.convert("RGB")
    return image


def jpeg(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return buffer.getvalue()


def _common_size(first: Image.Image, second: Image.Image) -> tuple[int, int]:
    return min(first.width, second.width), min(first.height, second.height)


# --- The images of each strategy ----------------------------------------------------------------------------------


def unchanged(image_1: bytes, image_2: bytes, regions: list[dict]) -> list[bytes]:
    return [image_1, image_2]


def with_grid(data: bytes) -> bytes:
    image = _open(data).copy()
    draw = ImageDraw.Draw(image)
    width, height = image.size
    for step in range(1, GRID_CELLS):
        y = height * step // GRID_CELLS
        draw.line([(0, y), (width, y)], fill=GRID_COLOR, width=1)
        x = width * step // GRID_CELLS
        draw.line([(x, 0), (x, height)], fill=GRID_COLOR, width=1)
    return jpeg(image)


def gridded(image_1: bytes, image_2: bytes, regions: list[dict]) -> list[bytes]:
    return [with_grid(image_1), with_grid(image_2)]


def concatenated(image_1: bytes, image_2: bytes, regions: list[dict]) -> list[bytes]:
    first, second = _open(image_1), _open(image_2)
    height = min(first.height, second.height)
    width_1 = int(first.width * height / first.height)
    width_2 = int(second.width * height / second.height)
    canvas = Image.new("RGB", (width_1 + 1 + width_2, height))  # black: the 1-pixel line between them stays so
    canvas.paste(first.resize((width_1, height), Image.LANCZOS), (0, 0))
    canvas.paste(second.resize((width_2, height), Image.LANCZOS), (width_1 + 1, 0))
    return [jpeg(canvas)]


def _resized_pair(image_1: bytes, image_2: bytes) -> tuple[Image.Image, Image.Image]:
    first, second = _open(image_1), _open(image_2)
    size = _common_size(first, second)
    return first.resize(size, Image.LANCZOS), second.resize(size, Image.LANCZOS)


def overlapped(image_1: bytes, image_2: bytes, regions: list[dict]) -> list[bytes]:
    first, second = _resized_pair(image_1, image_2)
    return [image_1, image_2, jpeg(Image.blend(first, second, 0.5))]


def difference_map(first: Image.Image, second: Image.Image) -> np.ndarray:
    """The mean absolute difference over the channels, float32, one value per pixel."""
    return np.abs(np.asarray(first, dtype=np.float32) - np.asarray(second, dtype=np.float32)).mean(axis=2)


def subtracted(image_1: bytes, image_2: bytes, regions: list[dict]) -> list[bytes]:
    first, second = _resized_pair(image_1, image_2)
    diff = difference_map(first, second)
    peak = float(diff.max())
    # Identical images: an all-black map (the official code divides by zero there).
    scaled = (diff / peak * 255).astype(np.uint8) if peak > 0 else np.zeros(diff.shape, dtype=np.uint8)
    return [image_1, image_2, jpeg(Image.fromarray(scaled, mode="L").convert("RGB"))]


def _changes(changed: np.ndarray) -> list[tuple[int, list[tuple[int, int]]]]:
    """The changes of a mask of changed pixels: (changed pixels, grid cells) of each group of cells at most
    MERGE_CELLS empty cells apart."""
    height, width = changed.shape
    side = -(-max(width, height) // BOX_GRID)  # a cell's side in pixels
    rows, cols = -(-height // side), -(-width // side)
    padded = np.zeros((rows * side, cols * side), dtype=np.int32)
    padded[:height, :width] = changed
    counts = padded.reshape(rows, side, cols, side).sum(axis=(1, 3))
    occupied = {(int(r), int(c)) for r, c in np.argwhere(counts)}
    reach = MERGE_CELLS + 1
    changes = []
    for seed in sorted(occupied):
        if seed not in occupied:
            continue
        occupied.discard(seed)
        cells, queue = [], [seed]
        while queue:
            row, col = queue.pop()
            cells.append((row, col))
            for dr in range(-reach, reach + 1):
                for dc in range(-reach, reach + 1):
                    neighbour = (row + dr, col + dc)
                    if neighbour in occupied:
                        occupied.discard(neighbour)
                        queue.append(neighbour)
        changes.append((int(sum(counts[cell] for cell in cells)), cells))
    return changes


def difference_boxes(first: Image.Image, second: Image.Image) -> list[tuple[int, int, int, int]]:
    """The highlight boxes of a pair computed from its two images only (the method is the module's docstring):
    (x0, y0, x1, y1), x1 and y1 exclusive, in pixels of the two images at their common size; the largest change
    first; none for identical images."""
    size = _common_size(first, second)
    diff = difference_map(first.resize(size, Image.LANCZOS), second.resize(size, Image.LANCZOS))
    changed = diff >= DIFF_THRESHOLD
    if not changed.any():
        return []
    height, width = changed.shape
    smallest = max(MIN_CHANGE_PIXELS, width * height // MIN_CHANGE_SHARE)
    side = -(-max(width, height) // BOX_GRID)
    kept = [(pixels, cells) for pixels, cells in _changes(changed) if pixels >= smallest]
    boxes = []
    for _, cells in sorted(kept, key=lambda change: (-change[0], min(change[1])))[:MAX_BOXES]:
        mine = np.zeros(changed.shape, dtype=bool)
        for row, col in cells:
            mine[row * side : (row + 1) * side, col * side : (col + 1) * side] = True
        ys, xs = np.nonzero(changed & mine)
        boxes.append((int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1))
    return boxes


def box_width(image: Image.Image) -> int:
    return max(2, round(max(image.size) / 256))


def _draw_boxes(image: Image.Image, boxes: list[tuple[float, float, float, float]]) -> bytes:
    image = image.copy()
    draw = ImageDraw.Draw(image)
    for x0, y0, x1, y1 in boxes:
        draw.rectangle([x0, y0, x1 - 1, y1 - 1], outline=BOX_COLOR, width=box_width(image))
    return jpeg(image)


def highlighted(image_1: bytes, image_2: bytes, regions: list[dict]) -> list[bytes]:
    """The boxes computed from the two images (`difference_boxes`) drawn on both, scaled to each image's size. The
    pair's stored regions are not read."""
    images = [_open(image_1), _open(image_2)]
    width, height = _common_size(*images)
    boxes = difference_boxes(*images)
    out = []
    for shown in images:
        sx, sy = shown.width / width, shown.height / height
        out.append(_draw_boxes(shown, [(x0 * sx, y0 * sy, x1 * sx, y1 * sy) for x0, y0, x1, y1 in boxes]))
    return out


def highlighted_oracle(image_1: bytes, image_2: bytes, regions: list[dict]) -> list[bytes]:
    """The oracle condition: every stored region drawn on both images (a box given on one image is scaled to the
    other's size); an item without stored regions is sent with no box at all."""
    images = [_open(image_1), _open(image_2)]
    out = []
    for shown in images:
        boxes = []
        for region in regions:
            source = images[region["image"] - 1]
            sx, sy = shown.width / source.width, shown.height / source.height
            x, y = region["x"] * sx, region["y"] * sy
            boxes.append((x, y, x + region["w"] * sx, y + region["h"] * sy))
        out.append(_draw_boxes(shown, boxes))
    return out


@dataclass(frozen=True)
class Strategy:
    name: str
    label: str
    images: Callable[[bytes, bytes, list[dict]], list[bytes]]
    official: bool = True  # a prompt type of the official evaluator
    two_stage: bool = False
    # Draws the pair's stored regions (the ground truth): an oracle condition, never mixed into another strategy.
    uses_regions: bool = False


STRATEGIES = {
    strategy.name: strategy
    for strategy in (
        Strategy("standard", "standard (reasoning, then the letter)", unchanged),
        Strategy("no_reasoning", "no reasoning (the letter only)", unchanged),
        Strategy("camera_augmented", "camera augmented (a hint on camera motion)", unchanged),
        Strategy("concatenated", "concatenated side by side", concatenated),
        Strategy("grid", "4×4 grid on both images", gridded),
        Strategy("overlapped", "overlapped (a 50/50 blend as a third image)", overlapped),
        Strategy("substract", "difference image (a third image)", subtracted),
        Strategy("two_stage", "two-stage (describe, then answer)", unchanged, official=False, two_stage=True),
        Strategy("highlight", "highlight: boxes computed from the images", highlighted, official=False),
        Strategy(
            "highlight_oracle",
            "highlight: stored regions (oracle)",
            highlighted_oracle,
            official=False,
            uses_regions=True,
        ),
    )
}
DEFAULT_STRATEGY = "standard"
CHOICES = [(strategy.name, strategy.label) for strategy in STRATEGIES.values()]


# --- Prompt texts -------------------------------------------------------------------------------------------------

# The texts a strategy sends and the placeholders each must hold.
TEXTS = {"system": (), "user": ("{question}", "{options}")}
TWO_STAGE_TEXTS = {
    "describe_system": (),
    "describe": ("{question}",),
    "system": (),
    "user": ("{question}", "{options}", "{description}"),
}
EXTRACTION_TEXTS = {"system": (), "user": ("{question}", "{options}", "{response}")}


def texts_of(strategy: str) -> dict[str, tuple[str, ...]]:
    return TWO_STAGE_TEXTS if STRATEGIES[strategy].two_stage else TEXTS


@cache
def _prompt_file(name: str) -> dict[str, str]:
    return json.loads((PROMPTS_DIR / f"{name}.json").read_text(encoding="utf-8"))


def default_prompt(strategy: str) -> dict[str, str]:
    return dict(_prompt_file(strategy))


def default_extraction_prompt() -> dict[str, str]:
    return dict(_prompt_file("extraction"))


def clean_texts(texts: dict, required: dict[str, tuple[str, ...]], defaults: dict[str, str], where: str) -> dict:
    """`defaults` with the given texts put in (blank: the default kept); StrategyError naming the text that is too
    long or lacks a placeholder."""
    unknown = sorted(set(texts or {}) - set(required))
    if unknown:
        raise StrategyError(f"{where}: unknown text {', '.join(unknown)} (expected {', '.join(required)}).")
    cleaned = {}
    for name, placeholders in required.items():
        value = (texts or {}).get(name)
        if value is None or not str(value).strip():
            value = defaults[name]
        if not isinstance(value, str):
            raise StrategyError(f"{where}, {name}: must be text.")
        if len(value) > PROMPT_MAX:
            raise StrategyError(f"{where}, {name}: at most {PROMPT_MAX} characters.")
        missing = [placeholder for placeholder in placeholders if placeholder not in value]
        if missing:
            raise StrategyError(f"{where}, {name}: lacks {', '.join(missing)}.")
        cleaned[name] = value
    return cleaned


def run_prompt(strategy: str, texts: dict | None = None, *, standard_default: dict | None = None) -> dict:
    """The texts a run of `strategy` sends: the strategy's defaults (for `standard`, `standard_default` when the
    deployment sets MODEL_EVAL_PROMPT_FILE) with `texts` put in."""
    if strategy not in STRATEGIES:
        raise StrategyError(f"strategy: {strategy!r} is not one of {', '.join(STRATEGIES)}.")
    defaults = default_prompt(strategy)
    if strategy == DEFAULT_STRATEGY and standard_default:
        defaults.update(standard_default)
    return clean_texts(texts or {}, texts_of(strategy), defaults, "prompt")


def extraction_prompt(texts: dict | None = None) -> dict:
    return clean_texts(texts or {}, EXTRACTION_TEXTS, default_extraction_prompt(), "extraction prompt")


# --- Messages -------------------------------------------------------------------------------------------------------


def image_part(data: bytes) -> dict:
    # As the official evaluator sends every image: a JPEG data URL, whatever the file's type.
    return {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(data).decode()}}


def _fill(template: str, **values: str) -> str:
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


def _layout(system: str, images: list[bytes], text: str) -> list[dict]:
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": [*(image_part(data) for data in images), {"type": "text", "text": text}]},
    ]


def answer_messages(item: Item, images: list[bytes], prompt: dict, description: str = "") -> list[dict]:
    """The request that asks for the letter: the system text, then the images and the question with its options."""
    text = _fill(prompt["user"], question=item.question, options=lettered(item.options), description=description)
    return _layout(prompt["system"], images, text)


def describe_messages(item: Item, images: list[bytes], prompt: dict) -> list[dict]:
    """A two-stage run's first request: the images and the question, without the options."""
    return _layout(prompt["describe_system"], images, _fill(prompt["describe"], question=item.question))


def extraction_messages(item: Item, options: list[str], response: str, prompt: dict) -> list[dict]:
    """Text only: the question, its options as shown and the reply to read."""
    text = _fill(prompt["user"], question=item.question, options=lettered(options), response=response)
    return [
        {"role": "system", "content": prompt["system"]},
        {"role": "user", "content": [{"type": "text", "text": text}]},
    ]

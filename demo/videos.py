"""Demo videos for `seed_demo`, generated here with PyAV (nothing is downloaded): moving shapes, a camera
panning over a textured scene, a slow zoom forward and a slowly changing light, so that pairs picked from
their frames have real temporal, spatial, viewpoint and attribute differences. Imported and sampled in-process.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import av
import numpy as np
from django.conf import settings
from PIL import Image as PILImage
from PIL import ImageDraw

from annotator.models import Job, Video

DEMO_SIZE = (640, 360)
DEMO_FPS = 25
DEMO_SECONDS = 12
DEMO_SAMPLE_EVERY = 0.5


def write_video(path: Path, frames: Iterable[np.ndarray], *, fps: int = DEMO_FPS, keyframe_every: int = 50) -> Path:
    """Encode RGB frames as H.264 in an MP4 (a keyframe every `keyframe_every` frames, like real uploads).
    Written to a temporary name of its own first (two seeds at once never write one file), so an interrupted run
    never leaves a half-written video behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{uuid.uuid4().hex[:12]}.part")
    frames = iter(frames)
    first = next(frames)
    with av.open(str(partial), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.height, stream.width = first.shape[:2]
        stream.pix_fmt = "yuv420p"
        stream.options = {
            "preset": "veryfast",
            "crf": "23",
            "g": str(keyframe_every),
            "keyint_min": str(keyframe_every),
            "sc_threshold": "0",
        }
        for picture in itertools.chain([first], frames):
            for packet in stream.encode(av.VideoFrame.from_ndarray(picture, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    partial.replace(path)
    return path


def textured_scene(width: int, height: int, seed: int = 7) -> np.ndarray:
    """A wide street scene: sky gradient, houses with windows and doors, trees, a noisy pavement."""
    rng = np.random.default_rng(seed)
    picture = PILImage.new("RGB", (width, height))
    sky = np.linspace([120, 170, 230], [215, 230, 245], int(height * 0.6)).astype(np.uint8)
    pixels = np.zeros((height, width, 3), np.uint8)
    pixels[: len(sky)] = sky[:, None, :]
    ground = rng.integers(95, 125, (height - len(sky), width, 1)).astype(np.uint8)
    pixels[len(sky) :] = np.concatenate([ground, ground, ground + 8], axis=2)
    picture = PILImage.fromarray(pixels)
    draw = ImageDraw.Draw(picture)
    horizon = len(sky)
    x = 0
    while x < width:
        w = int(rng.integers(height // 4, height // 2))
        h = int(rng.integers(height // 4, int(horizon * 0.9)))
        colour = tuple(int(c) for c in rng.integers(70, 220, 3))
        draw.rectangle([x, horizon - h, x + w, horizon], fill=colour, outline=(40, 40, 40))
        draw.polygon(
            [(x - 6, horizon - h), (x + w // 2, horizon - h - w // 3), (x + w + 6, horizon - h)], fill=(150, 60, 50)
        )
        step = max(14, w // 5)
        for wx in range(x + 8, x + w - 14, step):
            for wy in range(horizon - h + 10, horizon - 30, max(18, h // 5)):
                lit = rng.random() < 0.3
                draw.rectangle([wx, wy, wx + step // 2, wy + 10], fill=(250, 225, 120) if lit else (60, 80, 110))
        draw.rectangle([x + w // 2 - 8, horizon - 30, x + w // 2 + 8, horizon], fill=(90, 55, 30))
        if rng.random() < 0.6:
            tx = x + w + 10
            draw.rectangle([tx - 3, horizon - 50, tx + 3, horizon], fill=(90, 60, 30))
            draw.ellipse([tx - 22, horizon - 85, tx + 22, horizon - 40], fill=(40, int(rng.integers(110, 160)), 50))
        x += w + int(rng.integers(20, 60))
    for _ in range(width // 8):  # pavement stones: texture that makes camera motion visible
        sx, sy = int(rng.integers(0, width)), int(rng.integers(horizon + 5, height))
        shade = int(rng.integers(70, 160))
        draw.rectangle([sx, sy, sx + 10, sy + 5], fill=(shade, shade, shade))
    return np.asarray(picture)


def panning_frames(size=DEMO_SIZE, seconds=DEMO_SECONDS, fps=DEMO_FPS, seed: int = 7) -> Iterator[np.ndarray]:
    """A camera moving steadily right over a wide textured scene (viewpoint differences between frames)."""
    width, height = size
    count = int(seconds * fps)
    scene = textured_scene(width * 3, height, seed)
    travel = scene.shape[1] - width
    for i in range(count):
        x = round(travel * i / max(1, count - 1))
        yield np.ascontiguousarray(scene[:, x : x + width])


def zoom_frames(size=DEMO_SIZE, seconds=DEMO_SECONDS, fps=DEMO_FPS) -> Iterator[np.ndarray]:
    """The camera moving forward into the scene: a centred crop that shrinks, scaled back to full size."""
    width, height = size
    scene = PILImage.fromarray(textured_scene(width * 2, height * 2, seed=11))
    count = int(seconds * fps)
    for i in range(count):
        scale = 1.0 - 0.5 * i / max(1, count - 1)
        w, h = width * 2 * scale, height * 2 * scale
        left, top = (width * 2 - w) / 2, (height * 2 - h) / 2
        crop = scene.resize((width, height), PILImage.Resampling.BILINEAR, box=(left, top, left + w, top + h))
        yield np.asarray(crop)


def shapes_frames(size=DEMO_SIZE, seconds=DEMO_SECONDS, fps=DEMO_FPS) -> Iterator[np.ndarray]:
    """Shapes on a table top: a ball rolls, a box slides, a cup stays; a second ball appears halfway."""
    width, height = size
    count = int(seconds * fps)
    table = PILImage.new("RGB", size, (222, 205, 170))
    draw = ImageDraw.Draw(table)
    for y in range(0, height, 24):
        draw.line([(0, y), (width, y + 6)], fill=(205, 186, 150), width=2)
    for i in range(count):
        t = i / fps
        frame = table.copy()
        draw = ImageDraw.Draw(frame)
        draw.rectangle([500, 90, 560, 170], fill=(245, 245, 240), outline=(80, 80, 80), width=2)  # the cup
        bx = 40 + (width - 120) * (i / count)
        draw.ellipse([bx, 230, bx + 60, 290], fill=(200, 50, 40), outline=(120, 30, 20), width=2)
        sx = 60 + 8 * t
        draw.rectangle([sx, 60, sx + 90, 130], fill=(60, 110, 190), outline=(30, 60, 110), width=2)
        if t >= seconds / 2:
            draw.ellipse([300, 120, 340, 160], fill=(240, 200, 40), outline=(150, 120, 20), width=2)
        yield np.asarray(frame)


def daylight_frames(size=DEMO_SIZE, seconds=DEMO_SECONDS, fps=DEMO_FPS) -> Iterator[np.ndarray]:
    """A still street while the light slowly turns from noon to a warm evening (attribute and quality)."""
    width, height = size
    scene = textured_scene(width, height, seed=3).astype(np.float32)
    count = int(seconds * fps)
    warm = np.array([1.08, 0.86, 0.62], np.float32)
    for i in range(count):
        k = i / max(1, count - 1)
        tint = (1 - k) + k * warm
        yield np.clip(scene * tint * (1 - 0.35 * k), 0, 255).astype(np.uint8)


DEMO_VIDEOS: dict[str, tuple[Callable[..., Iterator[np.ndarray]], str]] = {
    "demo_pan_street": (panning_frames, "Street;City;Camera pan"),
    "demo_table_shapes": (shapes_frames, "Toy;Table;Ball"),
    "demo_forward_zoom": (zoom_frames, "Street;Architecture;Zoom"),
    "demo_evening_light": (daylight_frames, "Street;Sunset;Timelapse"),
}


def demo_videos_seed(*, folder: Path | None = None, size=DEMO_SIZE, seconds: float = DEMO_SECONDS) -> Job | None:
    """Generate the demo videos (once) into a folder inside IMPORT_ROOTS and import and sample them in this
    process. Safe to re-run: existing files are kept and videos already sampled are left alone."""
    from annotator.videos.services import videos_import

    folder = Path(folder or Path(settings.IMPORT_ROOTS[0]) / "demo")
    for name, (frames, _) in DEMO_VIDEOS.items():
        path = folder / f"{name}.mp4"
        if not path.exists():
            write_video(path, frames(size=size, seconds=seconds))
    manifest = folder / "manifest.csv"
    rows = "".join(f"{name},{name}.mp4,{labels}\n" for name, (_, labels) in DEMO_VIDEOS.items())
    manifest.write_text("yt8m_id,path,labels\n" + rows)
    sources = {name: str((folder / f"{name}.mp4").resolve()) for name in DEMO_VIDEOS}
    videos = Video.objects.in_bulk(list(sources), field_name="yt8m_id")
    if all(
        name in videos and videos[name].is_sampled_as(source=source, every=DEMO_SAMPLE_EVERY, count=None)
        for name, source in sources.items()
    ):
        return None
    return videos_import(source=str(manifest), every=DEMO_SAMPLE_EVERY, sync=True, title="Demo videos")

"""Real H.264 MP4 files for the video tests, encoded here with PyAV: each frame shows its own number as a row
of black and white blocks (so a test can read which frame was sampled) and a moving square."""

from __future__ import annotations

import hashlib
from importlib.metadata import version
from pathlib import Path

import av
import numpy as np
import pytest

from tests.disk_cache import cache_root, cached_folder

# A test module gets the fixtures with `from tests.video_fixtures import *`.
__all__ = ["h264_master", "h264_video"]

BLOCK = 32
BITS = 10


def frame_picture(number: int, width: int, height: int) -> np.ndarray:
    picture = np.full((height, width, 3), 90, np.uint8)
    for bit in range(BITS):
        if number >> bit & 1:
            picture[:BLOCK, bit * BLOCK : (bit + 1) * BLOCK] = 255
        else:
            picture[:BLOCK, bit * BLOCK : (bit + 1) * BLOCK] = 0
    x = (number * 3) % (width - 40)
    picture[height // 2 : height // 2 + 40, x : x + 40] = (220, 60, 40)
    return picture


def read_frame_number(picture, encoded_width: int = 320) -> int:
    """The number written by frame_picture, read back from a decoded (JPEG, maybe scaled down) image."""
    pixels = np.asarray(picture.convert("L"))
    scale = pixels.shape[1] / encoded_width
    y = int(BLOCK // 2 * scale)
    return sum(1 << bit for bit in range(BITS) if pixels[y, int((bit * BLOCK + BLOCK // 2) * scale)] > 128)


def write_h264(
    path: Path, *, seconds: float = 12, fps: int = 25, gop: int = 25, size=(320, 240), faststart: bool = False
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    options = {"movflags": "faststart"} if faststart else {}
    with av.open(str(path), "w", options=options) as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        stream.options = {"preset": "ultrafast", "g": str(gop), "keyint_min": str(gop), "sc_threshold": "0"}
        for number in range(int(seconds * fps)):
            frame = av.VideoFrame.from_ndarray(frame_picture(number, *size), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


@pytest.fixture(scope="session")
def h264_master(request, tmp_path_factory) -> Path:
    """12 s at 25 fps, a keyframe every 25 frames, 320x240: encoded once and kept in the pytest cache, under a name
    that holds what it depends on (this module's code, PyAV's version). Tests read it; they copy it to change it."""
    recipe = Path(__file__).read_bytes() + version("av").encode()
    cached = cached_folder(
        cache_root(request, tmp_path_factory, "videos"),
        f"h264-master-{hashlib.sha256(recipe).hexdigest()[:16]}",
        lambda building: write_h264(building / "clip.mp4", faststart=True),
    )
    return cached / "clip.mp4"


@pytest.fixture
def h264_video(h264_master, tmp_path) -> Path:
    """A copy of the master clip inside IMPORT_ROOTS (the test's tmp_path)."""
    target = tmp_path / "videos" / "clip.mp4"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(h264_master.read_bytes())
    return target


def queued_unit(callback):
    """The job unit (JobTask) a captured commit hook hands to the broker."""
    from annotator.models import JobTask

    return JobTask.objects.get(pk=callback.keywords["task_id"])


def run_queued(callback) -> str:
    """Run in this process what a worker runs for the sampling unit a captured commit hook queues."""
    from annotator.videos.tasks import sample_video

    unit = queued_unit(callback)
    return sample_video(**unit.kwargs, unit_id=unit.pk)

"""The demo's generated videos, kept in the pytest cache: `seed_demo` in a test finds them in its folder and does
not encode them again (about 7 s of CPU for the four of them)."""

from __future__ import annotations

import hashlib
import shutil
from importlib.metadata import version
from pathlib import Path

import demo.videos
from demo.videos import DEMO_VIDEOS, write_video
from tests.disk_cache import cached_folder


def cached_demo_videos(cache_root: Path, folder: Path) -> None:
    """Copy the demo's videos into `folder` (where `seed_demo` writes them), from the cache; the cache is filled
    first if no earlier run made the same ones: its name holds everything they depend on (the code that draws and
    encodes them, PyAV's version)."""

    def build(building: Path) -> None:
        for name, (frames, _) in DEMO_VIDEOS.items():
            write_video(building / f"{name}.mp4", frames())

    recipe = Path(demo.videos.__file__).read_bytes() + version("av").encode()
    cached = cached_folder(cache_root, f"demo-videos-{hashlib.sha256(recipe).hexdigest()[:16]}", build)
    folder.mkdir(parents=True, exist_ok=True)
    for name in DEMO_VIDEOS:
        shutil.copyfile(cached / f"{name}.mp4", folder / f"{name}.mp4")

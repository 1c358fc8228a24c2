"""The demo's generated videos, kept in the pytest cache: `seed_demo` in a test finds them in its folder and does
not encode them again (about 7 s of CPU for the four of them)."""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import tempfile
from importlib.metadata import version
from pathlib import Path

import demo.videos
from demo.videos import DEMO_VIDEOS, write_video


def cached_demo_videos(cache_root: Path, folder: Path) -> None:
    """Copy the demo's videos into `folder` (where `seed_demo` writes them), from the cache; the cache is filled
    first if no earlier run made the same ones: its name holds everything they depend on (the code that draws and
    encodes them, PyAV's version). Built under a lock, in a folder renamed into place, as the tiny model is."""
    recipe = Path(demo.videos.__file__).read_bytes() + version("av").encode()
    cached = cache_root / f"demo-videos-{hashlib.sha256(recipe).hexdigest()[:16]}"
    if not cached.exists():
        cache_root.mkdir(parents=True, exist_ok=True)
        with open(cache_root / ".build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not cached.exists():
                building = Path(tempfile.mkdtemp(prefix=".building-", dir=cache_root))
                for name, (frames, _) in DEMO_VIDEOS.items():
                    write_video(building / f"{name}.mp4", frames())
                building.rename(cached)
    folder.mkdir(parents=True, exist_ok=True)
    for name in DEMO_VIDEOS:
        shutil.copyfile(cached / f"{name}.mp4", folder / f"{name}.mp4")

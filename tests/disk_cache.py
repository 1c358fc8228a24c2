"""Folders the suite builds once and keeps in the pytest cache between runs (the tiny models, the demo's videos)."""

from __future__ import annotations

import fcntl
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def cache_root(request, tmp_path_factory, name: str) -> Path:
    """The pytest cache's folder `name` (kept between runs), or a fresh one when the cache is switched off."""
    cache = getattr(request.config, "cache", None)  # absent with -p no:cacheprovider
    if cache is not None:
        return cache.mkdir(name)
    return tmp_path_factory.mktemp(name)


def cached_folder(root: Path, name: str, build: Callable[[Path], None]) -> Path:
    """`root / name`, made by `build(folder)` only if no earlier run made it: the name must hold everything its
    contents depend on. Built under a lock by one xdist worker while the others wait, in a folder of its own renamed
    into place, so a reader never sees half of it (and a build cut short leaves nothing under the name)."""
    folder = root / name
    if folder.exists():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if folder.exists():
            return folder
        building = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
        try:
            build(building)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)  # the half-built folder is not left in the cache either
            raise
        building.rename(folder)
    return folder

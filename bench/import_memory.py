"""Peak memory of reading one large image the way `import_pairs` does, against the way it did before issue 25.

    python bench/import_memory.py [--width 10000 --height 9000]

A textured RGB PNG of that size (within IMPORT_MAX_IMAGE_PIXELS and IMPORT_MAX_IMAGE_BYTES) is generated once
under var/bench/. Each way runs in a fresh child process and reports its peak RSS (ru_maxrss) above the child's
RSS after its imports: 'now' is `inspect_image` with a thumbnail folder, the one decode of an import (validation
and thumbnail together); 'before' is the old path (validation's verify and load, then the import's second open,
convert to RGB and thumbnail). Pillow allocates pixels outside Python's allocator, so tracemalloc would not see
them: RSS is the measure.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def current_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024**2


def bench_image(width: int, height: int) -> Path:
    path = BASE_DIR / "var" / "bench" / f"large_{width}x{height}.png"
    if not path.exists():
        import numpy as np
        from PIL import Image

        print(f"Generating {path} (once) ...", flush=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = np.arange(height, dtype=np.uint16)[:, None]
        columns = np.arange(width, dtype=np.uint16)[None, :]
        channels = [(rows + columns) % 256, (rows * 3 + columns * 0) % 256, (columns // 7 + rows * 0) % 256]
        pixels = np.stack(channels, axis=-1).astype(np.uint8)
        Image.fromarray(pixels, "RGB").save(path, "PNG", compress_level=6)
    return path


def child(way: str, path: Path) -> None:
    import django

    django.setup()
    from django.conf import settings
    from PIL import Image

    from annotator.export.format import allowed_roots, inspect_image

    baseline = current_mib()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        if way == "now":
            check = inspect_image(path, allowed_roots(path.parent), thumbnail_dir=Path(folder))
            assert check.problem is None, check.problem
        else:
            with Image.open(path) as picture:
                picture.verify()
            with Image.open(path) as picture:
                picture.load()
            data = path.read_bytes()
            with Image.open(io.BytesIO(data)) as picture:
                thumb = picture.convert("RGB")
                thumb.thumbnail((settings.THUMBNAIL_MAX_SIDE, settings.THUMBNAIL_MAX_SIDE))
                thumb.save(Path(folder) / "thumb.jpg", "JPEG", quality=85)
    print(json.dumps({"baseline": baseline, "peak": peak_mib(), "seconds": time.perf_counter() - started}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=10000)
    parser.add_argument("--height", type=int, default=9000)
    parser.add_argument("--child", choices=["now", "before"])
    parser.add_argument("--path")
    options = parser.parse_args()
    if options.child:
        child(options.child, Path(options.path))
        return
    path = bench_image(options.width, options.height)
    print(f"{path.name}: {path.stat().st_size / 1024**2:.1f} MiB on disk, {options.width * options.height} pixels")
    for way in ("now", "before"):
        env = {**os.environ, "IMPORT_ROOTS": str(path.parent)}
        result = subprocess.run(
            [sys.executable, __file__, "--child", way, "--path", str(path)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        figures = json.loads(result.stdout.strip().splitlines()[-1])
        print(
            f"{way:>6}: peak RSS {figures['peak']:.0f} MiB, {figures['peak'] - figures['baseline']:.0f} MiB above the "
            f"process after its imports, {figures['seconds']:.1f} s"
        )


if __name__ == "__main__":
    main()

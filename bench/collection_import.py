"""Throughput of `import_collection` on a LEVIR-CD-shaped folder: scenes of A/, B/ and label/ PNGs.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/anything python bench/collection_import.py [--scenes 300]

Builds its own database (`sb_collections_bench`, migrated afresh) and a folder of SCENES scenes (256x256 RGB A and
B, a label with two changed blocks) under a temporary folder, runs the import in this process (`sync`, as the
command does), and prints the images per second, the candidate pairs and the peak RSS. A second run of the same
import (nothing new: every image is there already) is timed too.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.lease_load import bench_database_url, recreate_database  # noqa: E402


def make_folder(root: Path, scenes: int) -> None:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for side in ("A", "B", "label"):
        (root / side).mkdir(parents=True)
    for number in range(scenes):
        before = rng.integers(0, 255, size=(256, 256, 3), dtype=np.uint8)
        after = before.copy()
        label = np.zeros((256, 256), dtype=np.uint8)
        for y, x in ((20 + number % 100, 30), (150, 40 + number % 150)):
            after[y : y + 30, x : x + 40] = 0
            label[y : y + 30, x : x + 40] = 255
        Image.fromarray(before).save(root / "A" / f"scene_{number}.png")
        Image.fromarray(after).save(root / "B" / f"scene_{number}.png")
        Image.fromarray(label).save(root / "label" / f"scene_{number}.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=300)
    options = parser.parse_args()
    url = bench_database_url("sb_collections_bench")
    recreate_database(url)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "levir"
        os.environ.update(
            DATABASE_URL=url,
            DJANGO_SETTINGS_MODULE="subtlebench.settings",
            IMPORT_ROOTS=folder,
            MEDIA_ROOT=str(Path(folder) / "media"),
        )
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, check=True)
        make_folder(root, options.scenes)
        import django

        django.setup()
        from annotator.collections.services import collection_import

        for run in ("first", "again"):
            started = time.perf_counter()
            job = collection_import(source=str(root), name="levir_bench", domain="aerial", sync=True)
            seconds = time.perf_counter() - started
            result = job.result
            print(
                f"{run:>5}: {job.status}, {result['images']} images ({result['images_new']} new), "
                f"{result['candidates']} candidates, {len(job.errors)} problems in {seconds:.1f} s: "
                f"{result['images'] / seconds:.0f} images/s"
            )
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()

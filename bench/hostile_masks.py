"""Peak memory of reading an MVTec-AD collection's masks the way an import does, with two hostile masks (small PNG
files whose headers declare 13000x13000 pixels) against a normal collection, and against the old way (every mask
decoded before any size check).

    python bench/hostile_masks.py [--side 13000]

Each case runs in a fresh child process (django.setup(), no database: the plan and the regions are what decode
masks) and reports its peak RSS (ru_maxrss) above its RSS after its imports; Pillow allocates pixels outside
Python's allocator, so RSS is the measure. The folders are made once under var/bench/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")

from bench.import_memory import current_mib, peak_mib  # noqa: E402


def folder(kind: str, side: int) -> Path:
    """An MVTec-AD folder: two good images, two defects with masks; `hostile`: the masks declare side x side."""
    root = BASE_DIR / "var" / "bench" / f"masks_{kind}_{side}"
    if not root.exists():
        from tests.collection_fixtures import mvtec_folder

        mvtec_folder(root)
        if kind == "hostile":
            from PIL import Image

            huge = Image.new("L", (side, side), 0)  # all black: a few hundred KB of PNG
            for stem in ("000", "001"):
                huge.save(root / f"bottle/ground_truth/broken_large/{stem}_mask.png", optimize=True)
    return root


def child(way: str, root: Path) -> None:
    import django

    django.setup()
    from PIL import Image as PILImage

    from annotator.collections import layouts
    from annotator.collections.services import _regions
    from annotator.export.format import allowed_roots, inspect_image

    start = current_mib()
    if way == "before":  # every mask decoded as the plan used to, no limit looked at
        PILImage.MAX_IMAGE_PIXELS = None
        for mask in sorted(root.rglob("*_mask.png")):
            with PILImage.open(mask) as picture:
                picture.convert("L")
        problems = []
    else:
        plan = layouts.read_plan(root, "mvtec")
        checks = {name: inspect_image(image.path, allowed_roots(root)) for name, image in plan.images.items()}
        for pair in plan.pairs:
            _regions(pair, checks, root, plan)
        problems = plan.problems
    refused = sorted({p.split(":")[0] for p in problems if "IMPORT_MAX_IMAGE_PIXELS" in p})
    sizes = sorted(mask.stat().st_size for mask in root.rglob("*_mask.png"))
    print(json.dumps({"peak_mib": peak_mib() - start, "refused": refused, "mask_bytes": sizes}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=13000)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return
    cases = [
        ("normal masks, now", "now", folder("normal", args.side)),
        (f"two {args.side}x{args.side} masks, now", "now", folder("hostile", args.side)),
        (f"two {args.side}x{args.side} masks, before (decoded unchecked)", "before", folder("hostile", args.side)),
    ]
    for label, way, root in cases:
        output = subprocess.run(
            [sys.executable, __file__, "--child", way, str(root)], capture_output=True, text=True, check=True
        ).stdout
        result = json.loads(output.strip().splitlines()[-1])
        print(
            f"{label:55s} peak RSS +{result['peak_mib']:7.1f} MiB  mask files {result['mask_bytes']} bytes  "
            f"refused: {', '.join(result['refused']) or 'none'}"
        )


if __name__ == "__main__":
    main()

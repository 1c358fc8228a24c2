"""Builders for export tests: accepted pairs with or without a chosen caption, small datasets on disk."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

from annotator.models import Caption, Pair, Video
from tests import factories
from tests.factories import jpeg_bytes

_colors = itertools.count(1)


def make_video(frames: int = 2) -> Video:
    """A video whose frames differ from every other video's (the shared factory's frames look alike)."""
    n = next(_colors)
    return factories.make_video(frames=frames, color=(n * 37 % 256, n * 91 % 256, n * 53 % 256))


def make_pair(video: Video | None = None, **fields) -> Pair:
    return factories.make_pair(video=video or make_video(2), **fields)


def accepted_caption(pair: Pair, author, text: str = "The cup moved left.") -> Caption:
    return Caption.objects.create(pair=pair, author=author, text=text, status=Caption.Status.ACCEPTED, chosen=True)


def video_with_pairs(count: int, category: str = "temporal", **fields) -> list[Pair]:
    """`count` pairs over the frames of one video (frames 0-1, 1-2, ...), so they share images."""
    video = make_video(frames=count + 1)
    frames = list(video.frames.select_related("image").order_by("index"))
    pairs = []
    for n in range(count):
        pair = make_pair(video=video, category=category, **fields)
        pair.image_1, pair.image_2 = frames[n].image, frames[n + 1].image
        pair.save(update_fields=["image_1", "image_2"])
        pairs.append(pair)
    return pairs


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def all_records(root: Path) -> list[dict]:
    """The records of both splits; an export leaves out the file of an empty split."""
    return [
        r
        for split in ("test", "val")
        if (root / f"data/{split}.jsonl").is_file()
        for r in read_jsonl(root / f"data/{split}.jsonl")
    ]


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def record(n: int = 1, **fields) -> dict:
    base = {
        "image_1": f"images/aerial/change/{n}_a.jpg",
        "image_2": f"images/aerial/change/{n}_b.jpg",
        "question": "What was added to the shelf in the second image?",
        "answer": "a car",
        "distractors": ["a tree", "a house", "a boat"],
        "has_caption": False,
        "caption": None,
        "category": "existence",
        "domain": "aerial",
        "source": "levir",
        "source_id": str(n),
        "raw_folder": "levir_existence_pairs",
        "generation_info": None,
    }
    base.update(fields)
    if "raw_folder" not in fields:
        base["raw_folder"] = f"{base['source']}_{base['category']}_pairs"
    return base


def write_dataset(
    root: Path, test: list[dict], val: list[dict] = (), images: bool = True, package: bool = False
) -> Path:
    """A dataset folder in the benchmark format, with a real JPEG at every image path the records name.

    With `package`, as an export leaves it: no empty split file, a card with the counts and a manifest.
    """
    (root / "data").mkdir(parents=True, exist_ok=True)
    for split, records in (("test", test), ("val", val)):
        if package and not records:
            continue
        lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
        (root / f"data/{split}.jsonl").write_text("".join(line + "\n" for line in lines))
        if not images:
            continue
        for shift, r in enumerate(records):
            if isinstance(r, str):
                continue
            for field in ("image_1", "image_2"):
                path = r.get(field)
                if isinstance(path, str) and ".." not in path and not (root / path).exists():
                    (root / path).parent.mkdir(parents=True, exist_ok=True)
                    (root / path).write_bytes(jpeg_bytes(shift * 3 + (field == "image_2")))
    if package:
        write_package(root)
    return root


def write_package(root: Path) -> None:
    """The card (configs and dataset_info with each split's count) and the manifest of every file."""
    splits = [s for s in ("test", "val") if (root / f"data/{s}.jsonl").is_file()]
    lines = ["---", "configs:", "- config_name: default", "  data_files:"]
    for split in splits:
        lines += [f"  - split: {split}", f"    path: data/{split}.jsonl"]
    lines += ["dataset_info:", "  splits:"]
    for split in splits:
        count = sum(1 for line in (root / f"data/{split}.jsonl").read_text().splitlines() if line.strip())
        lines += [f"  - name: {split}", f"    num_examples: {count}"]
    lines += ["---", "", "# A test dataset", ""]
    (root / "README.md").write_text("\n".join(lines))
    write_manifest(root)


def write_manifest(root: Path) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != "manifest.sha256")
    entries = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(root).as_posix()}\n" for p in files]
    (root / "manifest.sha256").write_text("".join(entries))

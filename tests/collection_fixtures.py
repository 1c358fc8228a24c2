"""Tiny collections made on disk for the tests: MVTec-AD-shaped and LEVIR-CD-shaped folders and pair lists, with
masks and labels, images made with Pillow (each different, so their bytes and hashes differ)."""

from __future__ import annotations

from pathlib import Path

from PIL import Image as PILImage
from PIL import ImageDraw


def picture(path: Path, shade: int, *, size=(48, 32), spot=None, fmt=None) -> Path:
    """A plain image of one shade, with a darker rectangle `spot` (x0, y0, x1, y1) if given."""
    path.parent.mkdir(parents=True, exist_ok=True)
    image = PILImage.new("RGB", size, (shade, 120, 200 - shade // 2))
    if spot:
        ImageDraw.Draw(image).rectangle(spot, fill=(10, 10, 10))
    image.save(path, fmt)
    return path


def mask(path: Path, boxes, *, size=(48, 32)) -> Path:
    """A black mask with white rectangles (x0, y0, x1, y1), inclusive."""
    path.parent.mkdir(parents=True, exist_ok=True)
    image = PILImage.new("L", size, 0)
    for box in boxes:
        ImageDraw.Draw(image).rectangle(box, fill=255)
    image.save(path)
    return path


def mvtec_folder(root: Path, shade: int = 40) -> Path:
    """bottle: two good images, two 'broken_large' defects (a small and a larger spot) with masks; the smaller
    defect's mask marks (4, 5)-(9, 10): a 6x6 box. Another `shade` draws other pictures of the same class."""
    picture(root / "bottle/train/good/000.png", shade)
    picture(root / "bottle/test/good/001.png", shade + 4)
    picture(root / "bottle/test/broken_large/000.png", shade + 8, spot=(4, 5, 9, 10))
    picture(root / "bottle/test/broken_large/001.png", shade + 12, spot=(20, 8, 35, 20))
    mask(root / "bottle/ground_truth/broken_large/000_mask.png", [(4, 5, 9, 10)])
    mask(root / "bottle/ground_truth/broken_large/001_mask.png", [(20, 8, 35, 20)])
    return root


def levir_folder(root: Path) -> Path:
    """Two scenes: A/B with a label marking (10, 4)-(19, 11) on scene 'train_1' (a 10x8 box), none on 'train_2'."""
    picture(root / "A/train_1.png", 60)
    picture(root / "B/train_1.png", 62, spot=(10, 4, 19, 11))
    mask(root / "label/train_1.png", [(10, 4, 19, 11)])
    picture(root / "A/train_2.png", 70)
    picture(root / "B/train_2.png", 72)
    return root


def pair_list(root: Path) -> Path:
    """A pair list (JSONL) of one pair without a question or regions: 'edit/before.png' and 'edit/after.png' (a spot
    added at (30, 6)-(41, 15)); returns the manifest."""
    picture(root / "edit/before.png", 80)
    picture(root / "edit/after.png", 80, spot=(30, 6, 41, 15))
    manifest = root / "pairs.jsonl"
    manifest.write_text('{"image_1": "edit/before.png", "image_2": "edit/after.png"}\n')
    return manifest

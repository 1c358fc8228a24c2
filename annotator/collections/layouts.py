"""Read an image collection's folder or manifest into a plan: the images to import and the pairs it gives.

Layouts: MVTec-AD (`<class>/{train,test}/<defect>/<file>`, masks in `<class>/ground_truth/<defect>/<stem>_mask.png`),
change detection (`A/`, `B/`, optional `label/`, matched by file name), a pair list (CSV or JSONL with the columns
`image_1,image_2[,category,question,answer,distractors…]`) and plain images (a folder, or a CSV/JSONL manifest with
`path[,label]`). Nothing here writes: every bad file or row becomes one problem naming the file (and line), and the
rest of the plan stands. The images are decoded later, once, by the import (annotator/collections/services.py).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from annotator.images import open_within_limits
from annotator.models import Collection
from benchmark import jsonlimits

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".gif", ".tif", ".tiff")
GOOD = "good"  # MVTec-AD's name for the defect-free images
TEXT_FIELDS = ("category", "question", "answer")


@dataclass
class PlannedImage:
    """One image file to import: `name` is its path inside the collection (its original name)."""

    name: str
    path: Path
    label: str = ""
    mask: Path | None = None  # MVTec-AD: its ground-truth mask, if it has one


@dataclass
class PlannedPair:
    """Two images of the collection the layout pairs. With a question it is imported as a submitted pair; without
    one it is a candidate for the authoring queue. `masks` make regions: {image number: mask file}."""

    image_1: str
    image_2: str
    where: str
    source_id: str
    group_key: str = ""
    category: str = ""
    question: str = ""
    answer: str = ""
    distractors: list = field(default_factory=list)
    regions: list = field(default_factory=list)
    masks: dict[int, Path] = field(default_factory=dict)


@dataclass
class Plan:
    layout: str
    images: dict[str, PlannedImage] = field(default_factory=dict)
    pairs: list[PlannedPair] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def is_image(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_SUFFIXES and not path.name.startswith(".")


def detect_layout(root: Path) -> str:
    """The layout of a folder or manifest file when none is given."""
    if root.is_file():
        return Collection.Layout.PAIR_LIST if "image_1" in _header(root) else Collection.Layout.MANIFEST
    if (root / "A").is_dir() and (root / "B").is_dir():
        return Collection.Layout.CHANGE_DETECTION
    if any((child / "test").is_dir() or (child / "ground_truth").is_dir() for child in _subfolders(root)):
        return Collection.Layout.MVTEC
    return Collection.Layout.IMAGES


def _subfolders(root: Path) -> list[Path]:
    return sorted(child for child in root.iterdir() if child.is_dir() and not child.name.startswith("."))


def _header(path: Path) -> list[str]:
    """The column names of a CSV, or the keys of a JSONL file's first object (empty when unreadable)."""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            first = handle.readline(settings.IMPORT_MAX_LINE_BYTES)
    except (OSError, UnicodeDecodeError):
        return []
    if path.suffix.lower() == ".jsonl":
        try:
            return list(jsonlimits.loads(first))
        except (ValueError, TypeError):
            return []
    return [name.strip() for name in next(csv.reader([first]), [])]


def read_plan(root: Path, layout: str) -> Plan:
    readers = {
        Collection.Layout.MVTEC: read_mvtec,
        Collection.Layout.CHANGE_DETECTION: read_change_detection,
        Collection.Layout.PAIR_LIST: read_pair_list,
        Collection.Layout.IMAGES: read_images,
        Collection.Layout.MANIFEST: read_images,
    }
    plan = readers[layout](root)
    # A problem may quote a file name that is not UTF-8: it is stored and shown with those bytes as \\xNN.
    plan.problems = [printable(problem) for problem in plan.problems]
    return plan


def printable(text: str) -> str:
    """A text holding a file name as the file system gave it, with the bytes that are not UTF-8 as \\xNN."""
    return os.fsencode(text).decode("utf-8", "backslashreplace")


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _inside(path: Path, root: Path) -> bool:
    """Whether the path, every link resolved, stays in the collection's folder (or IMPORT_ROOTS)."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    roots = [root.resolve(), *(Path(allowed).resolve() for allowed in settings.IMPORT_ROOTS)]
    return any(real == allowed or real.is_relative_to(allowed) for allowed in roots)


def _add_image(plan: Plan, root: Path, path: Path, where: str, label: str = "") -> PlannedImage | None:
    name = path.relative_to(root).as_posix()
    if not _is_utf8(name):
        plan.problems.append(f"{where}: the file name is not UTF-8: rename it; the rest is imported")
        return None
    if name in plan.images:
        plan.problems.append(f"{where}: {name} is listed twice")
        return None
    if not _inside(path, root):
        plan.problems.append(f"{where}: {name} leads outside the collection's folder and IMPORT_ROOTS")
        return None
    image = PlannedImage(name=name, path=path, label=label)
    plan.images[name] = image
    return image


# --- MVTec-AD ---------------------------------------------------------------------------------------------------


def read_mvtec(root: Path) -> Plan:
    """Every image of every class; candidates within a class and defect type: each defective test image with a good
    image of its class (regions from its mask, on image 2), and defective images of one type paired in order of
    their defect's size (the smaller first), so the two differ in severity."""
    plan = Plan(Collection.Layout.MVTEC)
    for class_dir in _subfolders(root):
        label = class_dir.name
        goods: list[PlannedImage] = []
        defects: dict[str, list[PlannedImage]] = {}
        for part in ("train", "test"):
            for defect_dir in _subfolders(class_dir / part) if (class_dir / part).is_dir() else []:
                for path in sorted(defect_dir.iterdir()):
                    if not is_image(path):
                        continue
                    image = _add_image(plan, root, path, path.relative_to(root).as_posix(), label)
                    if image is None:
                        continue
                    if defect_dir.name == GOOD:
                        goods.append(image)
                        continue
                    mask = class_dir / "ground_truth" / defect_dir.name / f"{path.stem}_mask.png"
                    if mask.is_file() and _inside(mask, root):
                        image.mask = mask
                    else:
                        plan.problems.append(
                            f"{image.name}: no mask {mask.relative_to(root).as_posix()}: its pair has no regions"
                        )
                    defects.setdefault(defect_dir.name, []).append(image)
        if defects and not goods:
            plan.problems.append(f"{label}: no good images (train/good or test/good): only defect pairs are made")
        for defect, images in sorted(defects.items()):
            for number, image in enumerate(images):
                stem = Path(image.name).stem
                if goods:
                    good = goods[number % len(goods)]
                    plan.pairs.append(
                        PlannedPair(
                            image_1=good.name,
                            image_2=image.name,
                            where=image.name,
                            source_id=f"{label}_{defect}_{stem}",
                            group_key=label,
                            masks={2: image.mask} if image.mask else {},
                        )
                    )
            with_masks = [image for image in images if image.mask is not None]
            by_size = sorted(with_masks, key=lambda image: (_mask_pixels(image.mask), image.name))
            for first, second in zip(by_size[0::2], by_size[1::2], strict=False):
                plan.pairs.append(
                    PlannedPair(
                        image_1=first.name,
                        image_2=second.name,
                        where=second.name,
                        source_id=f"{label}_{defect}_{Path(first.name).stem}_{Path(second.name).stem}",
                        group_key=label,
                        masks={1: first.mask, 2: second.mask},
                    )
                )
    return plan


def _mask_pixels(mask: Path) -> int:
    """How many pixels a mask marks (0 when it cannot be read: the import reports the mask then)."""
    import numpy as np

    try:
        with open_within_limits(mask) as picture:
            return int(np.count_nonzero(np.asarray(picture.convert("L"))))
    except Exception:  # a broken mask, or one over the limits, is reported when the import reads it for its regions
        return 0


# --- Change detection -------------------------------------------------------------------------------------------


def read_change_detection(root: Path) -> Plan:
    """A/ and B/ matched by file name (the stem: A/x.png with B/x.png), label/x.* marking the change on image 2."""
    plan = Plan(Collection.Layout.CHANGE_DETECTION)
    sides: dict[str, dict[str, Path]] = {}
    for side in ("A", "B", "label"):
        folder = root / side
        sides[side] = {}
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if not is_image(path):
                continue
            if path.stem in sides[side]:
                first = sides[side][path.stem].name
                plan.problems.append(f"{side}/{path.name}: another file in {side}/ has the name {path.stem} ({first})")
                continue
            sides[side][path.stem] = path
    for stem in sorted(sides["A"].keys() | sides["B"].keys()):
        a, b = sides["A"].get(stem), sides["B"].get(stem)
        if a is None or b is None:
            have, lack = ("A", "B") if b is None else ("B", "A")
            plan.problems.append(f"{have}/{sides[have][stem].name}: no {lack}/{stem}.* to pair it with")
            continue
        image_1 = _add_image(plan, root, a, f"A/{a.name}", stem)
        image_2 = _add_image(plan, root, b, f"B/{b.name}", stem)
        if image_1 is None or image_2 is None:
            continue
        mask = sides["label"].get(stem)
        plan.pairs.append(
            PlannedPair(
                image_1=image_1.name,
                image_2=image_2.name,
                where=f"A/{a.name}",
                source_id=stem,
                group_key=stem,
                masks={2: mask} if mask is not None and _inside(mask, root) else {},
            )
        )
    for stem, path in sorted(sides["label"].items()):
        if stem not in sides["A"] or stem not in sides["B"]:
            plan.problems.append(f"label/{path.name}: no A/{stem}.* and B/{stem}.* pair for this label")
    if not sides["A"] and not sides["B"]:
        plan.problems.append(f"{root}: A/ and B/ hold no images ({', '.join(IMAGE_SUFFIXES)})")
    return plan


# --- Manifests: a pair list, a list of images -------------------------------------------------------------------


def manifest_rows(manifest: Path, plan: Plan):
    """(line, row) of a CSV (with a header) or JSONL manifest; a line that cannot be read is a problem of its own."""
    name = manifest.name
    try:
        handle = manifest.open("rb")
    except OSError as error:
        plan.problems.append(f"{name}: cannot be read ({error.strerror or error})")
        return
    with handle:
        lines = jsonlimits.text_lines(
            handle, max_bytes=settings.IMPORT_MAX_LINE_BYTES, limit_name="IMPORT_MAX_LINE_BYTES", allow_bom=True
        )
        if manifest.suffix.lower() == ".jsonl":
            for number, line, error in lines:
                if error:
                    plan.problems.append(f"{name}:{number}: {error}")
                    continue
                if not line.strip():
                    continue
                try:
                    row = jsonlimits.loads(line)
                except ValueError as problem:  # not JSON, nested too deep, NaN
                    plan.problems.append(f"{name}:{number}: not valid JSON ({problem})")
                    continue
                if not isinstance(row, dict):
                    plan.problems.append(f"{name}:{number}: a line must be a JSON object")
                    continue
                yield number, row
            return
        good: list[tuple[int, str]] = []
        for number, line, error in lines:
            if error:
                plan.problems.append(f"{name}:{number}: {error}")
            else:
                good.append((number, line))
        if not good:
            plan.problems.append(f"{name}: empty: no header")
            return
        header = [column.strip() for column in next(csv.reader([good[0][1]]))]
        for number, line in good[1:]:
            if not line.strip():
                continue
            try:
                values = next(csv.reader([line]))
            except csv.Error as problem:
                plan.problems.append(f"{name}:{number}: not a valid CSV row ({problem})")
                continue
            if len(values) > len(header):
                plan.problems.append(f"{name}:{number}: {len(values)} fields, the header has {len(header)}")
                continue
            yield number, dict(zip(header, (value.strip() for value in values), strict=False))


def _manifest_path(manifest: Path, raw, where: str, column: str, plan: Plan) -> Path | None:
    """A file named in a manifest, relative to its folder: it must stay inside that folder."""
    if not isinstance(raw, str) or not raw.strip():
        plan.problems.append(f"{where}, field {column}: empty")
        return None
    if "\0" in raw:
        plan.problems.append(f"{where}, field {column}: holds a NUL byte")
        return None
    relative = Path(raw.strip())
    base = manifest.parent
    if relative.is_absolute() or ".." in relative.parts:
        plan.problems.append(f"{where}, field {column}: {raw!r} leaves the manifest's folder (no absolute paths or ..)")
        return None
    path = base / relative
    if not _inside(path, base):
        plan.problems.append(f"{where}, field {column}: {raw!r} is a link out of the manifest's folder")
        return None
    if not path.is_file():
        plan.problems.append(f"{where}, field {column}: {raw} is missing")
        return None
    return path


def _planned(plan: Plan, manifest: Path, path: Path, label: str = "") -> PlannedImage:
    """The image of a manifest path; two rows may name one image (a pair list reuses images)."""
    name = path.relative_to(manifest.parent).as_posix()
    if name not in plan.images:
        plan.images[name] = PlannedImage(name=name, path=path, label=label)
    return plan.images[name]


def read_images(root: Path) -> Plan:
    """Plain images: every image of a folder (its subfolders too; a subfolder's name is its label), or the rows of a
    CSV/JSONL manifest with `path` and an optional `label`. No pairs: mining finds candidates among them."""
    plan = Plan(Collection.Layout.MANIFEST if root.is_file() else Collection.Layout.IMAGES)
    if root.is_dir():
        for folder, subfolders, files in os.walk(root):
            subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
            for file_name in sorted(files):
                path = Path(folder) / file_name
                if is_image(path):
                    label = Path(folder).name if Path(folder) != root else ""
                    _add_image(plan, root, path, path.relative_to(root).as_posix(), label)
        return plan
    seen: dict[str, int] = {}
    for number, row in manifest_rows(root, plan):
        where = f"{root.name}:{number}"
        path = _manifest_path(root, row.get("path"), where, "path", plan)
        if path is None:
            continue
        name = path.relative_to(root.parent).as_posix()
        if name in seen:
            plan.problems.append(f"{where}, field path: {name} already appears on line {seen[name]}")
            continue
        seen[name] = number
        _planned(plan, root, path, str(row.get("label") or "")[:100])
    return plan


def read_pair_list(manifest: Path) -> Plan:
    """Rows `image_1,image_2[,category,question,answer,distractors…]` (CSV: distractors in columns named
    `distractor…`, or one `distractors` column separated by '|'; JSONL: a list). A row with a question is a pair
    for review; one without is a candidate. Optional `source_id` and `group`."""
    plan = Plan(Collection.Layout.PAIR_LIST)
    seen: dict[tuple[str, str], int] = {}
    for number, row in manifest_rows(manifest, plan):
        where = f"{manifest.name}:{number}"
        paths = [_manifest_path(manifest, row.get(column), where, column, plan) for column in ("image_1", "image_2")]
        if None in paths:
            continue
        image_1, image_2 = (_planned(plan, manifest, path) for path in paths)
        if image_1.name == image_2.name:
            plan.problems.append(f"{where}: image_1 and image_2 are the same file ({image_1.name})")
            continue
        key = (image_1.name, image_2.name)
        if key in seen:
            plan.problems.append(
                f"{where}: the pair {image_1.name}, {image_2.name} already appears on line {seen[key]}"
            )
            continue
        seen[key] = number
        texts = {}
        for column in (*TEXT_FIELDS, "source_id", "group"):
            value = row.get(column)
            if value is not None and not isinstance(value, str):
                plan.problems.append(f"{where}, field {column}: must be text")
                break
            texts[column] = (value or "").strip()
        else:
            distractors = _distractors(row)
            if distractors is None:
                plan.problems.append(f"{where}, field distractors: must be a list of texts")
                continue
            plan.pairs.append(
                PlannedPair(
                    image_1=image_1.name,
                    image_2=image_2.name,
                    where=where,
                    source_id=texts["source_id"] or f"{Path(image_1.name).stem}_{Path(image_2.name).stem}",
                    group_key=texts["group"],
                    category=texts["category"],
                    question=texts["question"],
                    answer=texts["answer"],
                    distractors=distractors,
                    regions=row.get("regions") if isinstance(row.get("regions"), list) else [],
                )
            )
    return plan


def _distractors(row: dict) -> list | None:
    value = row.get("distractors")
    if isinstance(value, list):
        return value if all(isinstance(text, str) for text in value) else None
    if isinstance(value, str):
        texts = [text.strip() for text in value.split("|")]
    elif value is None:
        texts = []
    else:
        return None
    texts += [row[column] for column in sorted(row) if column.startswith("distractor") and column != "distractors"]
    return [text for text in texts if isinstance(text, str) and text.strip()]

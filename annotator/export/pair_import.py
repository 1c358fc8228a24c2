"""Import a dataset in the benchmark format (labelled pairs prepared elsewhere) as submitted pairs.

Record by record: the whole folder is validated first (every violation with its file, line and field, hostile files
included: see `annotator.export.format`); a record with a problem is left out and named in the report, the others
are imported. A problem of the folder as a whole (a data file that cannot be read, a metadata line that names no
item, captions without a user to credit) imports nothing, and so does any problem with `all_or_none`. A failure
while writing removes what it wrote. Each image is decoded once, by the validation, which also makes its
thumbnail.
Each pair keeps its group (its video), so a re-export never splits a video across test and val: the `group`
of an export's metadata/items.jsonl when the folder has one, else the video part of its source_id.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from annotator.export.format import (
    ImageCheck,
    ScratchSpaceError,
    Violation,
    allowed_roots,
    iter_lines,
    readable_file_problem,
    validate_dataset,
)
from annotator.images import IMAGE_FORMATS
from annotator.jobs.scratch import scratch_folder, scratch_root
from annotator.models import Caption, Image, Pair
from annotator.similarity.services import images_queue_embeddings
from benchmark.records import (
    IMAGE_FIELDS,
    ITEMS_METADATA,
    SPLITS,
    item_id,
    local_image_path,
    record_item_id,
    source_group,
    split_path,
    structure_problems,
)
from benchmark.regions import RegionError, validate_regions
from subtlebench.errors import Invalid, file_error_detail


class PairImportError(Invalid):
    """Nothing of the folder was imported; `problems` lists every problem found, file and line first."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(f"{len(problems)} problem{'s' if len(problems) != 1 else ''}: " + "; ".join(problems[:5]))


@dataclass(frozen=True)
class Importable:
    """A record that passed every check, where it was read, and what the folder's metadata gives its pair."""

    file: str
    line: int
    record: dict
    group: str
    regions: list


def checked_import_root(folder) -> Path:
    try:
        root = Path(folder).resolve()
    except (OSError, RuntimeError, ValueError) as error:  # RuntimeError: a symlink loop (Python 3.11)
        raise PairImportError([f"{folder} cannot be resolved ({error})"]) from error
    if not any(root == allowed or root.is_relative_to(allowed) for allowed in settings.IMPORT_ROOTS):
        roots = ", ".join(str(r) for r in settings.IMPORT_ROOTS)
        raise PairImportError([f"{root} is outside the import folders ({roots}): set IMPORT_ROOTS to allow it"])
    if not root.is_dir():
        raise PairImportError([f"{root} is not a folder"])
    return root


def read_records(root: Path, refused: set[tuple[str, int]]) -> list[tuple[str, int, dict]]:
    """The records of the folder but the refused ones, read again after it was validated: a file changed in
    between imports nothing."""
    records = []
    for split in SPLITS:
        name = split_path(split)
        if not (root / name).is_file():
            continue
        for number, record, error in iter_lines(root / name):
            if (name, number) in refused:
                continue
            if error or structure_problems(record):
                raise PairImportError([f"{name}:{number}: the file changed while it was imported; nothing was"])
            records.append((name, number, record))
    return records


GROUP_MAX = Pair._meta.get_field("group_key").max_length


def read_groups(root: Path) -> tuple[dict[str, str], list[tuple[str | None, Violation]]]:
    """The explicit groups of an export's metadata/items.jsonl, by item id ('' for an item it groups with no
    other), and the problems of that file, each with the item id its line names (None: it names none). A folder
    without the file has none."""
    path = root / ITEMS_METADATA
    groups: dict[str, str] = {}
    problems: list[tuple[str | None, Violation]] = []
    if not path.is_file():
        return groups, problems
    problem = readable_file_problem(path, allowed_roots(root))
    if problem:
        return groups, [(None, Violation(ITEMS_METADATA, None, problem))]
    for number, line, error in iter_lines(path):
        if error:
            problems.append((None, Violation(ITEMS_METADATA, number, error)))
        elif not isinstance(line, dict) or not isinstance(line.get("item_id"), str):
            problems.append(
                (None, Violation(ITEMS_METADATA, number, "a line must be a JSON object with a string 'item_id'"))
            )
        elif not isinstance(line.get("group"), str | None) or len(line.get("group") or "") > GROUP_MAX:
            message = f"'group' must be null or a string of at most {GROUP_MAX} characters"
            problems.append((line["item_id"], Violation(ITEMS_METADATA, number, message, "group")))
        else:
            groups[line["item_id"]] = line.get("group") or ""
    return groups, problems


def read_regions(root: Path, records, checks: dict[str, ImageCheck]) -> tuple[dict[str, list[dict]], list]:
    """The difference regions of an export's metadata/items.jsonl, by item id, each checked against the sizes of
    its record's images; and the problems, each with the item id of its line. A folder without the file has none;
    a line without `regions` (an older export) gives its item none."""
    path = root / ITEMS_METADATA
    found: dict[str, list[dict]] = {}
    problems: list[tuple[str, Violation]] = []
    if not path.is_file() or readable_file_problem(path, allowed_roots(root)):
        return found, problems  # read_groups says what is wrong with the file
    images = {
        record_item_id(record): tuple(local_image_path(record[field]) for field in IMAGE_FIELDS)
        for _, _, record in records
    }
    for number, line, error in iter_lines(path):
        if error or not isinstance(line, dict) or line.get("item_id") not in images:
            continue  # read_groups names a broken line; an item that is not in the data files is not imported
        if not line.get("regions"):
            continue
        sizes = {
            n: (checks[p].width, checks[p].height) for n, p in enumerate(images[line["item_id"]], 1) if p in checks
        }
        try:
            found[line["item_id"]] = validate_regions(line["regions"], sizes)
        except RegionError as error:
            problems.append((line["item_id"], Violation(ITEMS_METADATA, number, f"regions: {error}", "regions")))
    return found, problems


def metadata_refusals(records, problems: list[tuple[str | None, Violation]]) -> list[Violation]:
    """Each problem of a metadata line as the refusal of the record it is about (the record's file and line, the
    metadata line in the message); a line that names no item refuses the folder, since which record it was for is
    unknown. A problem about an item the data files do not hold imports nothing either way: it is left out."""
    where = {record_item_id(record): (name, number) for name, number, record in records}
    refusals = []
    for item, violation in problems:
        if item is None:
            refusals.append(violation)
        elif item in where:
            name, number = where[item]
            message = f"{violation.message} ({violation.file}:{violation.line})"
            refusals.append(Violation(name, number, message, violation.field))
    return refusals


# The model's text fields and their lengths: a record that does not fit is refused before anything is written.
STORED_LENGTHS = {name: Pair._meta.get_field(name).max_length for name in ("source", "source_id", "raw_folder")}


def storage_problems(name: str, number: int, record: dict) -> list[Violation]:
    """What the database cannot hold of a valid record: a text over its column's length, or U+0000 anywhere
    (PostgreSQL stores no NUL in text or JSON)."""
    problems = [
        Violation(name, number, f"field {field!r} is {len(record[field])} characters (at most {limit})", field)
        for field, limit in STORED_LENGTHS.items()
        if len(record[field]) > limit
    ]
    for field, value in record.items():
        if holds_nul(value):
            problems.append(
                Violation(name, number, f"field {field!r} holds U+0000, which no database text holds", field)
            )
    return problems


def holds_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(holds_nul(key) or holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(holds_nul(item) for item in value)
    return False


def clashes_with_database(records) -> list[Violation]:
    """Records whose item id a pair in the database already has, its derived id included (see `item_id`)."""
    where = {record_item_id(record): (name, number) for name, number, record in records}
    # Ids are compared, not (category, source, source_id): "levir" + "cd_1" and "levir_cd" + "1" are one id.
    existing = Pair.objects.filter(category__in={record["category"] for _, _, record in records}).values_list(
        "pk", "category", "source", "source_id", "video__yt8m_id"
    )
    taken = set()
    for pk, category, source, source_id, yt8m_id in existing.iterator(chunk_size=2000):
        identifier = item_id(category=category, source=source, source_id=source_id, pair_id=pk, yt8m_id=yt8m_id)
        if identifier in where:
            taken.add(identifier)
    return [
        Violation(*where[identifier], f"item {identifier} already exists in the database", "source_id")
        for identifier in sorted(taken)
    ]


def stored_image(root: Path, path: str, check: ImageCheck, source: str, saved: list[str]) -> Image:
    """The image and its thumbnail (made when it was validated, by its one decode) in storage, and its row."""
    data = (root / path).read_bytes()  # at most IMPORT_MAX_IMAGE_BYTES: checked when it was validated
    digest = hashlib.sha256(data).hexdigest()
    if digest != check.sha256:
        raise PairImportError([f"{path}: the file changed while it was imported; nothing was"])
    # The suffix of the format Pillow found, never the name's: storage serves a file by its suffix.
    name = f"imports/{digest[:2]}/{digest}{IMAGE_FORMATS[check.format]}"
    thumb_name = f"imports/{digest[:2]}/{digest}_thumb.jpg"
    image = Image(width=check.width, height=check.height, source=source, original_name=path, sha256=digest)
    for target, content in ((name, data), (thumb_name, check.thumbnail.read_bytes())):
        if not default_storage.exists(target):
            default_storage.save(target, ContentFile(content))
            saved.append(target)
    image.file.name, image.thumbnail.name = name, thumb_name
    image.save()
    return image


def captions_without_author(records: list[Importable], user) -> list[str]:
    """A caption needs an author to be reviewed and credited: without a user, refuse rather than drop them."""
    captioned = [f"{item.file}:{item.line}" for item in records if item.record["has_caption"]]
    if user is None and captioned:
        listed = ", ".join(captioned[:3]) + (f" and {len(captioned) - 3} more" if len(captioned) > 3 else "")
        return [
            f"{len(captioned)} record{'s have' if len(captioned) != 1 else ' has'} a caption ({listed}) and a "
            "caption needs an author: run import_pairs with --user USERNAME to credit that user with the "
            "captions; nothing was imported"
        ]
    return []


def pairs_import(*, folder, user=None, progress=None, all_or_none: bool = False) -> dict:
    """Import every valid record of data/test.jsonl and data/val.jsonl as a submitted pair; returns the counts and
    `refused`, the problems of the records left out (Violations: file, line, field, message).

    With `all_or_none`, any problem imports nothing (PairImportError, as for a problem of the whole folder).
    `progress` (optional) is told the number of records, then each one written, as a Job is.
    """
    root = checked_import_root(folder)
    try:
        # Under SCRATCH_ROOT, in the clean-up's ledger: a killed import's thumbnails do not stay behind.
        with scratch_folder("import-thumbnails") as thumbnails:
            return _pairs_import(root, user=user, progress=progress, thumbnail_dir=thumbnails, all_or_none=all_or_none)
    except (OSError, ScratchSpaceError) as error:  # the temporary folder's disk is full or read-only: one line
        cause = error.error if isinstance(error, ScratchSpaceError) else error
        detail = file_error_detail(cause, what=f"Import of {root}", where=scratch_root())
        raise PairImportError([detail]) from error


def _pairs_import(root: Path, *, user, progress, thumbnail_dir: Path, all_or_none: bool) -> dict:
    checks: dict[str, ImageCheck] = {}
    records, refused = importable_records(root, checks=checks, thumbnail_dir=thumbnail_dir)
    if all_or_none and refused:
        raise PairImportError([str(problem) for problem in refused])
    # A command without --user is fixed by running it again with one, not by leaving the captioned records out.
    missing_author = captions_without_author(records, user)
    if missing_author:
        raise PairImportError([*(str(problem) for problem in refused), *missing_author])
    return {**pairs_write(root, records, checks=checks, user=user, progress=progress), "refused": refused}


def importable_records(root: Path, *, checks: dict[str, ImageCheck], thumbnail_dir: Path):
    """The records that can be imported (Importable), and the problems of the
    others (Violations in file and line order). A problem of the folder as a whole raises PairImportError.

    The records and their images are validated first; an export's card and manifest are not needed to import its
    pairs. Each image is decoded once, here: its thumbnail is kept in `thumbnail_dir` for the writing."""
    problems = list(validate_dataset(root, contract=False, images=checks, thumbnail_dir=thumbnail_dir))
    if any(problem.line is None for problem in problems):  # a data file that cannot be read, or none at all
        raise PairImportError([str(problem) for problem in problems])
    records = read_records(root, refused={(problem.file, problem.line) for problem in problems})
    groups, group_problems = read_groups(root)
    regions, region_problems = read_regions(root, records, checks)
    problems += metadata_refusals(records, group_problems + region_problems)
    for name, number, record in records:
        problems += storage_problems(name, number, record)
    problems += clashes_with_database(records)
    order = {name: place for place, name in enumerate(map(split_path, SPLITS))}
    problems.sort(key=lambda problem: (order.get(problem.file, len(order)), problem.line or 0))
    if any(problem.file not in order for problem in problems):  # a metadata line that names no item
        raise PairImportError([str(problem) for problem in problems])
    refused = {(problem.file, problem.line) for problem in problems}
    importable = []
    for name, number, record in records:
        if (name, number) not in refused:
            identifier = record_item_id(record)
            group = groups.get(identifier, source_group(record["source"], record["source_id"], max_length=GROUP_MAX))
            importable.append(Importable(name, number, record, group, regions.get(identifier, [])))
    return importable, problems


def pairs_write(root: Path, records, *, checks: dict[str, ImageCheck], user, progress) -> dict:
    """Write the checked records' pairs, images and captions in one transaction; a failure removes the files it
    wrote."""
    if progress is not None:
        progress.start(len(records))
    saved: list[str] = []
    images: dict[str, Image] = {}
    captions = 0
    now = timezone.now()
    try:
        with transaction.atomic():
            for importable in records:
                record = importable.record
                path_1, path_2 = (local_image_path(record[field]) for field in IMAGE_FIELDS)
                for path in (path_1, path_2):
                    if path not in images:
                        images[path] = stored_image(root, path, checks[path], record["source"], saved)
                pair = Pair.objects.create(
                    image_1=images[path_1],
                    image_2=images[path_2],
                    category=record["category"],
                    domain=record["domain"],
                    source=record["source"],
                    source_id=record["source_id"],
                    group_key=importable.group,
                    raw_folder=record["raw_folder"],
                    generation_info=record["generation_info"],
                    question=record["question"],
                    answer=record["answer"],
                    distractors=record["distractors"],
                    regions=importable.regions,
                    status=Pair.Status.SUBMITTED,
                    author=user,
                    submitted_at=now,
                )
                if record["has_caption"]:  # with a user to credit: captions_without_author refused otherwise
                    Caption.objects.create(
                        pair=pair,
                        author=user,
                        text=record["caption"],
                        status=Caption.Status.SUBMITTED,
                        submitted_at=now,
                    )
                    captions += 1
                if progress is not None:
                    progress.advance(1)
            # Standalone images are embedded like frames: the similarity worker scores these pairs next.
            images_queue_embeddings(images=images.values(), user=user)
    except BaseException as error:
        for name in saved:
            default_storage.delete(name)
        if isinstance(error, OSError):  # a full disk, a missing or read-only media folder: one line with the path
            where = getattr(default_storage, "location", None)
            raise PairImportError([file_error_detail(error, what=f"Import of {root}", where=where)]) from error
        raise
    return {"pairs": len(records), "images": len(images), "captions": captions}

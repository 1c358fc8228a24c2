"""The benchmark's record format (data/test.jsonl, data/val.jsonl, images/...) and a validator for any folder in it.

Shared by `export_benchmark` (what it writes), `validate_benchmark` (what it checks) and `import_pairs`
(what it accepts), so the three can never disagree about the format.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from PIL import Image as PILImage
from PIL import UnidentifiedImageError

from annotator.models import Category, Domain

SPLITS = ("test", "val")
MAX_DISTRACTORS = 4  # evaluators parse the letters A-E only: the answer plus at most 4 distractors

# Field -> the JSON types it may hold, in the order the export writes them.
FIELDS: dict[str, tuple[type, ...]] = {
    "image_1": (str,),
    "image_2": (str,),
    "question": (str,),
    "answer": (str,),
    "distractors": (list,),
    "has_caption": (bool,),
    "caption": (str, type(None)),
    "category": (str,),
    "domain": (str,),
    "source": (str,),
    "source_id": (str,),
    "raw_folder": (str,),
    "generation_info": (dict, type(None)),
}
CATEGORIES = frozenset(Category.values)
DOMAINS = frozenset(Domain.values)


def split_path(split: str) -> str:
    return f"data/{split}.jsonl"


def item_id(record: dict) -> str:
    """The id the official evaluator gives an item; two items with one id silently overwrite each other."""
    return f"{record['category']}_{record['source']}_{record['source_id']}"


def question_problems(answer, distractors) -> list[str]:
    """What is wrong with a multiple-choice question (empty when it is fine)."""
    problems = []
    if not isinstance(answer, str) or not answer.strip():
        problems.append("the answer is empty")
    if not isinstance(distractors, list) or not distractors:
        return [*problems, "there are no distractors"]
    if not all(isinstance(d, str) and d.strip() for d in distractors):
        problems.append("a distractor is empty or not a string")
        return problems
    if answer in distractors:
        problems.append(f"the answer {answer!r} is among the distractors")
    if len(distractors) > MAX_DISTRACTORS:
        problems.append(f"{len(distractors)} distractors (at most {MAX_DISTRACTORS})")
    options = [answer, *distractors]
    duplicated = sorted({o for o in distractors if options.count(o) > 1 and o != answer})
    if duplicated:
        problems.append(f"duplicate options: {', '.join(map(repr, duplicated))}")
    return problems


def record_problems(record) -> list[str]:
    """Everything wrong with one parsed record, each as a short sentence naming the field."""
    return structure_problems(record) or content_problems(record)


def structure_problems(record) -> list[str]:
    """Missing or extra fields and wrong types: with any of these the content cannot be checked."""
    if not isinstance(record, dict):
        return [f"a record must be a JSON object, got {type(record).__name__}"]
    problems = [f"missing field {name!r}" for name in FIELDS if name not in record]
    problems += [f"extra field {name!r}" for name in record if name not in FIELDS]
    for name, types in FIELDS.items():
        value = record.get(name)
        # bool is an int in Python, and an int is not a str: check exactly.
        if name in record and type(value) not in types:
            expected = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            problems.append(f"field {name!r} must be {expected}, got {type(value).__name__}")
    return problems


def content_problems(record: dict) -> list[str]:
    problems = []
    if record["category"] not in CATEGORIES:
        problems.append(f"unknown category {record['category']!r}")
    if record["domain"] not in DOMAINS:
        problems.append(f"unknown domain {record['domain']!r}")
    for name in ("question", "source", "source_id"):
        if not record[name].strip():
            problems.append(f"field {name!r} is empty")
    problems += question_problems(record["answer"], record["distractors"])
    if record["has_caption"] and not (record["caption"] or "").strip():
        problems.append("has_caption is true but caption is empty")
    if not record["has_caption"] and record["caption"] is not None:
        problems.append("has_caption is false but caption is not null")
    for name in ("image_1", "image_2"):
        problem = image_path_problem(record[name])
        if problem:
            problems.append(f"field {name!r}: {problem}")
    return problems


def image_path_problem(path: str) -> str | None:
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts or "\\" in path:
        return f"image path {path!r} must be relative to the dataset folder, without '..'"
    return None


def image_read_problem(file: Path) -> str | None:
    """None when the file is a readable image; else why not."""
    if not file.is_file():
        return "is missing"
    try:
        with PILImage.open(file) as picture:
            picture.verify()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        return f"is not a readable image ({error})"
    return None


@dataclass(frozen=True)
class Violation:
    file: str
    line: int | None
    message: str

    def __str__(self):
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


def iter_lines(path: Path) -> Iterator[tuple[int, object | None, str | None]]:
    """(line number, parsed record or None, JSON error or None) for each non-blank line, streaming."""
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line), None
            except json.JSONDecodeError as error:
                yield number, None, f"invalid JSON ({error.msg} at column {error.colno})"


def validate_dataset(root: Path, *, check_images: bool = True) -> Iterator[Violation]:
    """Every violation in a dataset folder, file by file and line by line, streaming the JSONL files."""
    root = Path(root)
    seen_ids: dict[str, str] = {}
    checked_images: dict[str, str | None] = {}
    if not (root / split_path("test")).is_file() and not (root / split_path("val")).is_file():
        yield Violation(str(root), None, "neither data/test.jsonl nor data/val.jsonl exists")
        return
    for split in SPLITS:
        name = split_path(split)
        if not (root / name).is_file():
            continue
        for number, record, json_error in iter_lines(root / name):
            if json_error:
                yield Violation(name, number, json_error)
                continue
            structural = structure_problems(record)
            for problem in structural or content_problems(record):
                yield Violation(name, number, problem)
            if structural:
                continue
            identifier = item_id(record)
            if identifier in seen_ids:
                yield Violation(name, number, f"duplicate item id {identifier!r} (first at {seen_ids[identifier]})")
            else:
                seen_ids[identifier] = f"{name}:{number}"
            if not check_images:
                continue
            for field in ("image_1", "image_2"):
                path = record[field]
                if image_path_problem(path):
                    continue
                if path not in checked_images:
                    checked_images[path] = image_read_problem(root / path)
                if checked_images[path]:
                    yield Violation(name, number, f"{field} {path!r} {checked_images[path]}")

"""The benchmark's record format (data/test.jsonl, data/val.jsonl, images/...): the item id, the question rules and
a validator for any folder in it.

The one home of these rules: the editor (`picking.questions`, its authoring rules on top), `import_pairs`, the
export and `validate_benchmark` use them, and studies and model results use its item id, so none can disagree.
"""

from __future__ import annotations

import json
import re
import string
import unicodedata
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


# --- The item id ---------------------------------------------------------------------------------------------


def exported_source_id(*, source_id: str, pair_id: int | None = None, yt8m_id: str | None = None) -> str:
    """The source_id an item is exported with: its own, or for a pair without one a stable id derived from its
    video and its pair id (neither ever changes, so the id is the same in every export)."""
    if source_id:
        return source_id
    return f"{yt8m_id}_{pair_id}" if yt8m_id else f"pair{pair_id}"


def item_id(
    *, category: str, source: str, source_id: str, pair_id: int | None = None, yt8m_id: str | None = None
) -> str:
    """The id the official evaluator gives an item (`question_id` in its results): the only place it is built.

    Two items with one id silently overwrite each other. A pair without a source_id gets the derived one the
    export writes, so pass its pair id and video's YT8M id.
    """
    return f"{category}_{source}_{exported_source_id(source_id=source_id, pair_id=pair_id, yt8m_id=yt8m_id)}"


def record_item_id(record: dict) -> str:
    return item_id(category=record["category"], source=record["source"], source_id=record["source_id"])


# --- Questions ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One broken rule of a question: `field` ("question", "answer" or "distractors") is where a form shows it."""

    field: str
    message: str

    def __str__(self):
        return self.message


def option_key(text: str) -> str:
    """The form in which two options count as the same option.

    NFKC folds compatibility variants (full-width letters, ligatures, a no-break space) and the canonical
    ones NFC folds (a precomposed é and e + combining accent); casefold ignores case; runs of white space
    count as one space and the ends do not count. A model reads "First image" and "first image " as one
    option, so they may not be two options of one question, nor the answer and a distractor.
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(folded.split())


def option_clean(text: str) -> str:
    """An option (or question) as the editor stores it: NFC, ends trimmed, runs of white space as one space."""
    return " ".join(unicodedata.normalize("NFC", text).split())


# The evaluator lists the options one per line as "A. text" and reads the model's reply for a letter A-E: on
# a line or a word of its own, punctuation stripped (dataset_adapters/response_parser.py). An option that is
# such a letter, or starts with such a label, makes a reply that quotes it read as another option's letter.
LETTERS = frozenset("ABCDE")
LETTER_LABEL = re.compile(r"\(?[A-E][.):](\s|$)")
# Line breaks would split an option over lines of that list; invisible characters (zero-width space, bidi
# controls) would make two options that look the same differ.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def option_text_problem(text: str) -> str | None:
    """Why a non-empty option text cannot go to the evaluator, or None."""
    hidden = next((c for c in text if unicodedata.category(c) in INVISIBLE_CATEGORIES), None)
    if hidden is not None:
        return f"contains a line break, tab or invisible character (U+{ord(hidden):04X})"
    stripped = text.strip()
    if stripped.strip(string.punctuation + " ") in LETTERS or LETTER_LABEL.match(stripped):
        return "reads as an answer letter (A-E): the evaluator would take a reply quoting it for that letter"
    return None


def question_problems(*, question, answer, distractors) -> list[Problem]:
    """Every way a multiple-choice question breaks the benchmark format (empty when it is fine).

    The one set of format rules: the editor (with its authoring rules on top), `import_pairs`, the export and
    `validate_benchmark` all ask this function, so the same question gets the same verdict from each.
    """
    problems: list[Problem] = []
    if not isinstance(question, str):
        problems.append(Problem("question", "the question is not a string"))
    elif not question.strip():
        problems.append(Problem("question", "the question is empty"))
    answer_problem = option_problem("the answer", answer)
    if answer_problem:
        problems.append(Problem("answer", answer_problem))
    if not isinstance(distractors, list):
        return [*problems, Problem("distractors", "the distractors must be a list of texts")]
    if not distractors:
        problems.append(Problem("distractors", f"give 1 to {MAX_DISTRACTORS} distractors: there are none"))
    if len(distractors) > MAX_DISTRACTORS:
        problems.append(Problem("distractors", f"{len(distractors)} distractors (at most {MAX_DISTRACTORS})"))
    usable = []  # the distractors whose text can be compared
    for number, text in enumerate(distractors, 1):
        problem = option_problem(f"distractor {number}", text)
        if problem:
            problems.append(Problem("distractors", problem))
        else:
            usable.append(text)
    answer_key = None if answer_problem else option_key(answer)
    like_answer = [text for text in usable if option_key(text) == answer_key]
    if like_answer:
        spelled = "" if like_answer[0] == answer else f" (as {like_answer[0]!r})"
        problems.append(Problem("answer", f"the answer {answer!r} is among the distractors{spelled}"))
    spellings: dict[str, list[str]] = {}
    for text in usable:
        if option_key(text) != answer_key:
            spellings.setdefault(option_key(text), []).append(text)
    repeated = [list(dict.fromkeys(group)) for group in spellings.values() if len(group) > 1]
    if repeated:
        listed = ", ".join(" = ".join(map(repr, group)) for group in repeated)
        problems.append(Problem("distractors", f"duplicate options: {listed}"))
    return problems


def option_problem(label: str, text) -> str | None:
    """What is wrong with one option on its own ("the answer", "distractor 2"), or None."""
    if not isinstance(text, str):
        return f"{label} is not a string"
    if not text.strip():
        return f"{label} is empty"
    problem = option_text_problem(text)
    return f"{label} {text!r} {problem}" if problem else None


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
    for name in ("source", "source_id"):
        if not record[name].strip():
            problems.append(f"field {name!r} is empty")
    problems += map(
        str, question_problems(question=record["question"], answer=record["answer"], distractors=record["distractors"])
    )
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
            identifier = record_item_id(record)
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

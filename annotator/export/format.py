"""The benchmark's record format (data/test.jsonl, data/val.jsonl, images/...): the item id, the question rules and
a validator for any folder in it.

The one home of these rules: the editor (`picking.questions`, its authoring rules on top), `import_pairs`, the
export and `validate_benchmark` use them, and studies and model results use its item id, so none can disagree.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml
from PIL import Image as PILImage
from PIL import UnidentifiedImageError

from annotator.models import Category, Domain

SPLITS = ("test", "val")
CARD = "README.md"
MANIFEST = "manifest.sha256"
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


# The example questions of BENCHMARK.md's table, which the editor shows as placeholders. Each names an object
# of one imagined pair ("the mug"): sent unchanged it says nothing about the pair it is on, so no entry point
# takes it, whatever the category. Temporal and viewpoint have a standard question instead (their options are
# fixed by the category), which any pair of theirs may use: `STANDARD_QUESTIONS`.
EXAMPLE_QUESTIONS: dict[str, str] = {
    Category.ATTRIBUTE: "What changed about the mug?",
    Category.STATE: "In which image is the apple peeled more?",
    Category.EMOTION: "In which image does the person look happier?",
    Category.SPATIAL: "How did the cup move?",
    Category.EXISTENCE: "What was added in the second image?",
    Category.QUANTITY: "In which image are there more people?",
    Category.QUALITY: "Which image has better quality?",
    Category.ACTION: "What did the person do between the two images?",
}
STANDARD_QUESTIONS: dict[str, str] = {
    Category.TEMPORAL: "Which image was taken later?",
    Category.VIEWPOINT: "How did the camera move from the first image to the second?",
}


def question_key(text: str) -> str:
    """The form in which two questions count as the same words: `option_key` (case, width, white space) with
    the punctuation dropped, so "what changed about the mug" is the example "What changed about the mug?"."""
    kept = "".join(" " if unicodedata.category(c).startswith("P") else c for c in option_key(text))
    return " ".join(kept.split())


EXAMPLE_KEYS = {question_key(text): category for category, text in EXAMPLE_QUESTIONS.items()}


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
    elif question_key(question) in EXAMPLE_KEYS:
        problems.append(
            Problem(
                "question",
                f"the question {question.strip()!r} is the {EXAMPLE_KEYS[question_key(question)]} example: "
                "write what differs in these two images",
            )
        )
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
    """None when the file is an image Pillow can decode to the last pixel; else why not.

    `verify` checks the container (a PNG's checksums) but not the pixel data, so a JPEG cut short passes it;
    the second open decodes every pixel, which a cut-short file fails.
    """
    if not file.is_file():
        return "is missing"
    try:
        with PILImage.open(file) as picture:
            picture.verify()
        with PILImage.open(file) as picture:
            picture.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        return f"is not a readable image ({error})"
    return None


@dataclass(frozen=True)
class Violation:
    """One broken rule: `line` is None for a problem of the whole file (an empty split, a file not listed)."""

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


def validate_dataset(root: Path, *, check_images: bool = True, contract: bool = True) -> Iterator[Violation]:
    """Every violation in a dataset folder, file by file and line by line, streaming the JSONL files.

    The records and their images are always checked. With `contract` (what `validate_benchmark` checks; an
    import of labelled pairs prepared elsewhere does not ask it) the folder is also held to what the export
    promises: no empty split and at least one item (the official evaluator crashes otherwise), a card whose
    counts are the files' counts, and a manifest that lists every file with its hash.
    """
    root = Path(root)
    present = [split for split in SPLITS if (root / split_path(split)).is_file()]
    if not present and not contract:
        yield Violation(str(root), None, "neither data/test.jsonl nor data/val.jsonl exists")
        return
    counts: dict[str, int] = {}
    seen_ids: dict[str, str] = {}
    checked_images: dict[str, str | None] = {}
    for split in present:
        name = split_path(split)
        counts[split] = 0
        for number, record, json_error in iter_lines(root / name):
            counts[split] += 1
            yield from record_violations(root, name, number, record, json_error, seen_ids, checked_images, check_images)
    if not contract:
        return
    yield from split_violations(counts)
    yield from card_violations(root, counts)
    yield from manifest_violations(root)


def record_violations(root, name, number, record, json_error, seen_ids, checked_images, check_images):
    if json_error:
        yield Violation(name, number, json_error)
        return
    structural = structure_problems(record)
    for problem in structural or content_problems(record):
        yield Violation(name, number, problem)
    if structural:
        return
    identifier = record_item_id(record)
    if identifier in seen_ids:
        yield Violation(name, number, f"duplicate item id {identifier!r} (first at {seen_ids[identifier]})")
    else:
        seen_ids[identifier] = f"{name}:{number}"
    if not check_images:
        return
    for field in ("image_1", "image_2"):
        path = record[field]
        if image_path_problem(path):
            continue
        if path not in checked_images:
            checked_images[path] = image_read_problem(root / path)
        if checked_images[path]:
            yield Violation(name, number, f"{field} {path!r} {checked_images[path]}")


# --- The folder as a whole: splits, card, manifest -------------------------------------------------------------


def split_violations(counts: dict[str, int]) -> Iterator[Violation]:
    """The official evaluator reads data/<split>.jsonl of the configured split (default test): a missing file
    raises FileNotFoundError and an empty one ValueError (ThreadPoolExecutor(max_workers=0))."""
    if not sum(counts.values()):
        yield Violation(
            "data", None, "the export has no item: the official evaluator has nothing to evaluate and crashes"
        )
    for split, count in counts.items():
        if not count:
            yield Violation(
                split_path(split),
                None,
                "empty split: the official evaluator crashes on it (ValueError: max_workers must be greater "
                "than 0); leave the file and its config out",
            )
    if "test" not in counts:
        yield Violation(
            split_path("test"),
            None,
            "missing: the official evaluator reads the test split unless told otherwise (FileNotFoundError)",
        )


class LineLoader(yaml.SafeLoader):
    """A YAML loader that remembers the line of each mapping, so a card problem names its line."""

    def __init__(self, stream, first_line: int):
        super().__init__(stream)
        self.first_line = first_line
        self.lines: dict[int, int] = {}

    def construct_yaml_map(self, node):
        mapping: dict = {}
        self.lines[id(mapping)] = self.first_line + node.start_mark.line
        yield mapping
        mapping.update(self.construct_mapping(node))


LineLoader.add_constructor("tag:yaml.org,2002:map", LineLoader.construct_yaml_map)


def card_header(text: str) -> tuple[object, dict[int, int]] | str:
    """The card's YAML header and the line of each mapping in it, or why it cannot be read."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return "no YAML header (a first line '---'): the Hugging Face Hub reads configs and dataset_info from it"
    end = next((n for n, line in enumerate(lines[1:], start=1) if line.strip() == "---"), None)
    if end is None:
        return "the YAML header has no closing '---'"
    loader = LineLoader("\n".join(lines[1:end]), first_line=2)
    try:
        header = loader.get_single_data()
    except yaml.YAMLError as error:
        return f"the YAML header is not valid YAML ({error})"
    finally:
        loader.dispose()
    return header, loader.lines


def card_violations(root: Path, counts: dict[str, int]) -> Iterator[Violation]:
    """The card (README.md) is what the Hub and a reader go by: each config's data files exist, and each split's
    num_examples is the number of records in its file."""
    if not (root / CARD).is_file():
        yield Violation(CARD, None, "missing: the dataset card with configs and dataset_info")
        return
    parsed = card_header((root / CARD).read_text(encoding="utf-8"))
    if isinstance(parsed, str):
        yield Violation(CARD, 1, parsed)
        return
    header, lines = parsed
    if not isinstance(header, dict):
        yield Violation(CARD, 2, "the YAML header must be a mapping (configs, dataset_info)")
        return

    def at(node) -> int | None:
        return lines.get(id(node))

    configured: set[str] = set()
    configs = header.get("configs")
    if not isinstance(configs, list) or not configs:
        yield Violation(CARD, at(header), "no configs: the Hub would not know which file is which split")
        configs = []
    for config in configs:
        entries = config_data_files(config.get("data_files") if isinstance(config, dict) else None)
        if entries is None:
            yield Violation(CARD, at(config), "a config needs data_files: a list of {split, path}")
            continue
        for split, path, node in entries:
            line = at(node) or at(config)
            if not isinstance(path, str) or image_path_problem(path):
                yield Violation(CARD, line, f"data_files entry {node!r} needs a relative path")
                continue
            matches = sorted(root.glob(path)) if any(c in path for c in "*?[") else [root / path]
            found = [m.relative_to(root).as_posix() for m in matches if m.is_file()]
            if not found:
                yield Violation(CARD, line, f"config data file {path} does not exist")
            for name in found:
                configured.add(name)
                named = PurePosixPath(name).stem if PurePosixPath(name).parent.as_posix() == "data" else None
                if split is not None and named in SPLITS and named != split:
                    yield Violation(CARD, line, f"config split {split!r} points at {name}, the {named} split")
    for split in counts:
        if split_path(split) not in configured:
            yield Violation(CARD, None, f"{split_path(split)} exists but no config of the card points at it")

    info = header.get("dataset_info")
    if isinstance(info, list):  # one entry per config, as the Hub writes it for several configs
        info = next((i for i in info if isinstance(i, dict) and i.get("config_name", "default") == "default"), None)
    splits = info.get("splits") if isinstance(info, dict) else None
    if not isinstance(splits, list):
        yield Violation(CARD, at(info) or at(header), "no dataset_info.splits with the count of each split")
        return
    listed = set()
    for entry in splits:
        name = entry.get("name") if isinstance(entry, dict) else None
        examples = entry.get("num_examples") if isinstance(entry, dict) else None
        listed.add(name)
        if name not in counts:
            yield Violation(CARD, at(entry), f"dataset_info split {name!r} has no file {split_path(str(name))}")
        elif examples != counts[name]:
            yield Violation(
                CARD,
                at(entry),
                f"dataset_info split {name!r}: num_examples is {examples!r}, "
                f"but {split_path(name)} has {counts[name]} records",
            )
    for split in counts:
        if split not in listed:
            yield Violation(CARD, at(info), f"dataset_info.splits does not list {split!r} ({counts[split]} records)")


def config_data_files(files) -> list[tuple[str | None, object, object]] | None:
    """(split, path, node for its line) of each file a config names, in the forms the Hub reads: a path, a list
    of paths, a {split: path(s)} mapping, or a list of {split, path(s)}; None when it is none of them."""
    if isinstance(files, str):
        return [(None, files, files)]
    if isinstance(files, dict):
        return [(split, path, files) for split, paths in files.items() for path in as_list(paths)]
    if not isinstance(files, list):
        return None
    entries = []
    for entry in files:
        if isinstance(entry, dict):
            entries += [(entry.get("split"), path, entry) for path in as_list(entry.get("path"))]
        else:
            entries.append((None, entry, entry))
    return entries


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


MANIFEST_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")


def manifest_violations(root: Path) -> Iterator[Violation]:
    """What `sha256sum -c manifest.sha256` would report, and more: every listed file is there with its hash,
    each is listed once, and every file of the folder (the manifest itself excepted) is listed."""
    if not (root / MANIFEST).is_file():
        yield Violation(MANIFEST, None, "missing: the list of every file and its sha256 (sha256sum format)")
        return
    listed: set[str] = set()
    with open(root / MANIFEST, encoding="utf-8") as manifest:
        for number, line in enumerate(manifest, start=1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            match = MANIFEST_LINE.match(line)
            if not match:
                yield Violation(MANIFEST, number, "not a sha256sum line ('<64 hex digits>  <path>')")
                continue
            expected, path = match.group(1).lower(), match.group(2)
            if image_path_problem(path):
                yield Violation(MANIFEST, number, f"{path!r} must be a path relative to the folder, without '..'")
                continue
            path = PurePosixPath(path).as_posix()  # `find . | xargs sha256sum` writes ./data/test.jsonl
            if path in listed:
                yield Violation(MANIFEST, number, f"{path} is listed twice")
                continue
            listed.add(path)
            if not (root / path).is_file():
                yield Violation(MANIFEST, number, f"{path} is listed but missing")
                continue
            actual = file_sha256(root / path)
            if actual != expected:
                yield Violation(MANIFEST, number, f"{path}: sha256 {actual} does not match the listed {expected}")
    for path in folder_files(root):
        if path != MANIFEST and path not in listed:
            yield Violation(path, None, f"not listed in {MANIFEST}")


def folder_files(root: Path) -> Iterator[str]:
    """Every file under root, as a '/'-separated relative path, in a stable order."""
    for folder, subfolders, files in os.walk(root):
        subfolders.sort()
        relative = Path(folder).relative_to(root)
        for name in sorted(files):
            yield (relative / name).as_posix()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

"""The folder's files, and one record of `data/<split>.jsonl`: its fields in order, their types, the rules a record
obeys, how one is built, and the item id the official evaluator gives it (built and taken apart here only)."""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath

from benchmark.questions import Problem, question_problems
from benchmark.taxonomy import CATEGORIES, DOMAINS

SPLITS = ("test", "val")
# The other files of the folder: the dataset card, the list of every file's sha256 (written last), provenance.
CARD = "README.md"
MANIFEST = "manifest.sha256"
ITEMS_METADATA = "metadata/items.jsonl"  # one line per item, beside the official records (never in them)

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
    # How a generated pair was made, as its source wrote it: an object, a string (JSON or plain: `datasets` gives
    # back a string for a card that declares one) or null. The evaluator never reads it; it is kept as it came.
    "generation_info": (dict, str, type(None)),
}
IMAGE_FIELDS = ("image_1", "image_2")


def split_path(split: str) -> str:
    """The data file of a split: the split is the file (there is no `split` field)."""
    return f"data/{split}.jsonl"


# --- The Parquet view: the same records for `datasets` and the Hub's viewer, the pictures inside -------------------

# The card's configs point here, not at data/: a Parquet shard holds each image's bytes, so `datasets.load_dataset`
# gives pictures from any working directory (a JSONL path is opened relative to the working directory). The official
# evaluator reads data/<split>.jsonl only.
PARQUET_FOLDER = "parquet"


def parquet_shard_path(split: str, index: int, count: int) -> str:
    """The n-th of `count` Parquet shards of a split, named as the Hub names shards (`test-00000-of-00002.parquet`)."""
    return f"{PARQUET_FOLDER}/{split}-{index:05d}-of-{count:05d}.parquet"


def generation_info_text(value: dict | str | None) -> str | None:
    """`generation_info` as the Parquet view holds it: one type for every row, JSON text (or null), written as the
    JSONL line writes the object; a record that gives it as text already (the paper's records may) keeps its text.
    The JSONL keeps the object: a column of objects whose keys differ from row to row has no one Arrow type
    (`datasets` fails to cast it, or turns it into a string of its own making)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


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


def item_id_tails(identifier: str) -> set[str]:
    """Every part of an item id after one of its "_": the source_id is one of them (a source may hold "_" too,
    "levir_cd", so which one only the id rebuilt from the candidate's own fields can tell)."""
    return {identifier[match.end() :] for match in re.finditer("_", identifier)}


def derived_pair_number(identifier: str) -> int | None:
    """The pair id a derived source_id (`<yt8m>_<pair id>`, `pair<pair id>`) would end in, or None."""
    match = re.search(r"(\d+)$", identifier)
    return int(match.group(1)) if match else None


# --- Groups: the pairs that must share a split ---------------------------------------------------------------

# `<video>_<frame 1>_<frame 2>`, the paper's ids of frame pairs; and for yt8m `<video>_<n>`, the id the export
# derives for a pair without one (`exported_source_id`).
FRAME_PAIR_ID = re.compile(r"(?P<video>.+)_\d+_\d+")
DERIVED_ID = re.compile(r"(?P<video>.+)_\d+")


def video_group(yt8m_id: str | None) -> str:
    """The group of a video's pairs (the `group` of metadata/items.jsonl), or '' for a pair of no video."""
    return f"yt8m:{yt8m_id}" if yt8m_id else ""


def source_group(source: str, source_id: str, *, max_length: int | None = None) -> str:
    """The group of a pair that names none: its source and the video part of its source_id, or '' (a pair of its
    own). For yt8m it is `video_group` of that video, so a re-imported export groups its pairs as the first did."""
    match = FRAME_PAIR_ID.fullmatch(source_id) or (source == "yt8m" and DERIVED_ID.fullmatch(source_id))
    return f"{source}:{match['video']}"[:max_length] if match else ""


# --- Building a record -----------------------------------------------------------------------------------------


def raw_folder_of(*, source: str, category: str, raw_folder: str = "") -> str:
    return raw_folder or f"{source}_{category}_pairs"


def build_record(
    *,
    image_1: str,
    image_2: str,
    question: str,
    answer: str,
    distractors: list[str],
    caption: str | None,
    category: str,
    domain: str,
    source: str,
    source_id: str,
    raw_folder: str = "",
    generation_info: dict | str | None = None,
) -> dict:
    """One record, its fields in the order of `FIELDS`; a blank caption is no caption."""
    has_caption = bool(caption and caption.strip())
    return {
        "image_1": image_1,
        "image_2": image_2,
        "question": question,
        "answer": answer,
        "distractors": list(distractors),
        "has_caption": has_caption,
        "caption": caption if has_caption else None,
        "category": category,
        "domain": domain,
        "source": source,
        "source_id": source_id,
        "raw_folder": raw_folder_of(source=source, category=category, raw_folder=raw_folder),
        "generation_info": generation_info,
    }


# --- The rules of one record ----------------------------------------------------------------------------------


def record_problems(record) -> list[str]:
    """Everything wrong with one parsed record, each as a short sentence naming the field."""
    return [str(problem) for problem in structure_problems(record) or content_problems(record)]


def structure_problems(record) -> list[Problem]:
    """Missing or extra fields and wrong types: with any of these the content cannot be checked."""
    if not isinstance(record, dict):
        return [Problem("", f"a record must be a JSON object, got {type(record).__name__}")]
    problems = [Problem(name, f"missing field {name!r}") for name in FIELDS if name not in record]
    problems += [Problem(str(name), f"extra field {name!r}") for name in record if name not in FIELDS]
    for name, types in FIELDS.items():
        value = record.get(name)
        # bool is an int in Python, and an int is not a str: check exactly.
        if name in record and type(value) not in types:
            expected = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            problems.append(Problem(name, f"field {name!r} must be {expected}, got {type(value).__name__}"))
    return problems


def content_problems(record: dict) -> list[Problem]:
    problems = []
    if record["category"] not in CATEGORIES:
        problems.append(Problem("category", f"unknown category {record['category']!r}"))
    if record["domain"] not in DOMAINS:
        problems.append(Problem("domain", f"unknown domain {record['domain']!r}"))
    for name in ("source", "source_id"):
        if not record[name].strip():
            problems.append(Problem(name, f"field {name!r} is empty"))
    problems += question_problems(
        question=record["question"],
        answer=record["answer"],
        distractors=record["distractors"],
        category=record["category"],
    )
    if record["has_caption"] and not (record["caption"] or "").strip():
        problems.append(Problem("caption", "has_caption is true but caption is empty"))
    if not record["has_caption"] and record["caption"] is not None:
        problems.append(Problem("caption", "has_caption is false but caption is not null"))
    for name in IMAGE_FIELDS:
        path = local_image_path(record[name])
        if path.startswith(WEB_ADDRESS):
            problem = f"image URL {path!r} names no file of the folder (a Hub URL's path after {HUB_FILE!r} does)"
        else:
            problem = image_path_problem(path)
        if problem:
            problems.append(Problem(name, f"field {name!r}: {problem}"))
    return problems


# The official adapter reads an image named by a Hugging Face Hub URL (https://huggingface.co/datasets/<name>/resolve/
# main/<path>) from <path> in the dataset folder when it is there, as a downloaded copy of the Hub's folder has it.
WEB_ADDRESS = ("http://", "https://")
HUB_FILE = "/resolve/main/"


def local_image_path(path: str) -> str:
    """The path in the folder of the file an image field names: the field itself, or the part of a Hub URL after
    /resolve/main/ (the app reads that file and downloads nothing)."""
    if path.startswith(WEB_ADDRESS) and HUB_FILE in path:
        return path[path.index(HUB_FILE) + len(HUB_FILE) :]
    return path


def image_path_problem(path: str) -> str | None:
    """Why a path cannot name a file of the folder (absolute, with '..', with a backslash, with a control character
    such as NUL, which no file name holds), or None."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts or "\\" in path:
        return f"image path {path!r} must be relative to the dataset folder, without '..'"
    if any(ord(character) < 32 or ord(character) == 127 for character in path):
        return f"image path {path!r} holds a control character"
    return None

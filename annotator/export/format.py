"""A validator for any folder in the benchmark format (data/test.jsonl, data/val.jsonl, images/..., the card, the
manifest): `validate_benchmark`, `import_pairs` and the tests ask it.

The format itself (the record and its rules, the item id, the question rules) is `benchmark.records` and
`benchmark.questions`; this module reads a folder against them, and adds what needs files: images Pillow can
decode, the card's YAML header, the manifest's hashes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml
from PIL import Image as PILImage
from PIL import UnidentifiedImageError

from benchmark import jsonlimits
from benchmark.records import (
    CARD,
    IMAGE_FIELDS,
    MANIFEST,
    SPLITS,
    content_problems,
    image_path_problem,
    record_item_id,
    split_path,
    structure_problems,
)


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
                yield number, jsonlimits.loads(line), None
            except json.JSONDecodeError as error:
                yield number, None, f"invalid JSON ({error.msg} at column {error.colno})"
            except ValueError as error:
                yield number, None, f"invalid JSON ({error})"


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
    for field in IMAGE_FIELDS:
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

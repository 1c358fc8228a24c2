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

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from django.conf import settings
from PIL import UnidentifiedImageError

from annotator.images import IMAGE_FORMATS, ImageLimitError, open_within_limits
from benchmark import jsonlimits
from benchmark.records import (
    CARD,
    IMAGE_FIELDS,
    MANIFEST,
    PARQUET_FOLDER,
    SPLITS,
    WEB_ADDRESS,
    content_problems,
    image_path_problem,
    local_image_path,
    record_item_id,
    split_path,
    structure_problems,
)

# --- Files from outside: where they really are, and their limits ----------------------------------------------


def allowed_roots(root: Path) -> list[Path]:
    """The folders a file named inside a dataset folder may really lie in: the folder itself and IMPORT_ROOTS."""
    return list(dict.fromkeys([Path(root).resolve(), *(Path(allowed).resolve() for allowed in settings.IMPORT_ROOTS)]))


def escape_problem(path: Path, roots: list[Path]) -> str | None:
    """Why a file of the folder may not be read, or None: its real path (every symlink of a file or a folder on the
    way resolved, relative ones and chains too) lies outside `roots`, or the links loop."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError, ValueError) as error:  # RuntimeError: a symlink loop (Python 3.11)
        return f"cannot be resolved ({error})"
    if any(real == allowed or real.is_relative_to(allowed) for allowed in roots):
        return None
    listed = ", ".join(str(allowed) for allowed in roots)
    return f"is a link to {real}, outside the dataset folder and the import folders ({listed}; IMPORT_ROOTS)"


def readable_file_problem(path: Path, roots: list[Path], *, max_bytes: int | None = None, limit_name: str = ""):
    """Why a file of the folder cannot be read safely (outside the roots, not a regular file, over `max_bytes`),
    or None. A FIFO or a device is never opened: reading one would block or never end."""
    problem = escape_problem(path, roots)
    if problem:
        return problem
    if not path.exists():
        return "is missing"
    if not path.is_file():
        return "is not a regular file"
    size = path.stat().st_size
    if max_bytes is not None and size > max_bytes:
        return f"is {size} bytes, over the limit of {max_bytes} bytes ({limit_name})"
    return None


# The modes that convert to 8-bit RGB as they are; 16-bit and float images (I;16, I, F) do not.
IMAGE_MODES = ("1", "L", "LA", "P", "PA", "RGB", "RGBA", "CMYK", "YCbCr")


class ScratchSpaceError(Exception):
    """The importer's temporary folder failed (a full or read-only disk): not a problem of the folder read."""

    def __init__(self, error: OSError):
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True)
class ImageCheck:
    """What reading one image found: `problem` (None: fine), and for a fine one its facts, its file's sha256 and,
    when asked for, the path of its RGB thumbnail (made from the one full decode)."""

    problem: str | None
    width: int = 0
    height: int = 0
    format: str = ""
    sha256: str = ""
    thumbnail: Path | None = None


def inspect_image(file: Path, roots: list[Path], *, thumbnail_dir: Path | None = None) -> ImageCheck:
    """Read one image of the folder within the limits: where it really is, its size in bytes (before reading it),
    its format, mode and pixel count (from the header, before decoding), its container (`verify`), then one decode
    of every pixel, which a cut-short file fails. With `thumbnail_dir`, that decode also makes its thumbnail."""
    problem = readable_file_problem(
        file, roots, max_bytes=settings.IMPORT_MAX_IMAGE_BYTES, limit_name="IMPORT_MAX_IMAGE_BYTES"
    )
    if problem:
        return ImageCheck(problem)
    try:
        # One handle from the checks to the decode: the file read is the file whose size was checked.
        with open(file, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > settings.IMPORT_MAX_IMAGE_BYTES:
                limit_bytes = settings.IMPORT_MAX_IMAGE_BYTES
                return ImageCheck(f"is {size} bytes, over the limit of {limit_bytes} bytes (IMPORT_MAX_IMAGE_BYTES)")
            if size == 0:
                return ImageCheck("is empty (0 bytes)")
            digest = hashlib.sha256()
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
            sha256 = digest.hexdigest()
            handle.seek(0)
            with open_within_limits(handle) as picture:
                width, height, kind, mode = picture.width, picture.height, picture.format, picture.mode
                if mode not in IMAGE_MODES:
                    return ImageCheck(f"has the pixel mode {mode}, which does not convert to RGB: save it as 8-bit")
                picture.verify()
            handle.seek(0)
            # Checked again on the same handle: the file whose header was read is the file decoded.
            with open_within_limits(handle) as picture:
                small = None
                if thumbnail_dir is None:
                    picture.load()
                else:
                    side = settings.THUMBNAIL_MAX_SIDE
                    picture.thumbnail((side, side))  # decodes once (a JPEG at a reduced scale), then shrinks
                    small = picture.convert("RGB")
    except ImageLimitError as error:
        return ImageCheck(str(error))
    except UnidentifiedImageError:
        return ImageCheck(f"is not a readable image (not one of the formats {', '.join(IMAGE_FORMATS)})")
    except Exception as error:  # a decoder fed a hostile file raises anything: OSError, SyntaxError, struct.error...
        return ImageCheck(f"is not a readable image ({type(error).__name__}: {error})")
    thumbnail = None
    if small is not None:  # outside the decoder's errors: a full disk here is the disk's problem, not the image's
        thumbnail = thumbnail_dir / f"{sha256}.jpg"
        try:
            small.save(thumbnail, "JPEG", quality=85)
        except OSError as error:
            raise ScratchSpaceError(error) from error
    return ImageCheck(None, width, height, kind, sha256, thumbnail)


@dataclass(frozen=True)
class Violation:
    """One broken rule: `line` is None for a problem of the whole file (an empty split, a file not listed); `field`
    is the record's field it is about, when it is about one (the message names it too)."""

    file: str
    line: int | None
    message: str
    field: str = ""

    def __str__(self):
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


def iter_lines(path: Path) -> Iterator[tuple[int, object | None, str | None]]:
    """(line number, parsed record or None, error or None) for each non-blank line, streaming: a line over
    IMPORT_MAX_LINE_BYTES, not UTF-8, nested too deep or not JSON is one error with its line, never a traceback."""
    with open(path, "rb") as stream:
        lines = jsonlimits.text_lines(
            stream, max_bytes=settings.IMPORT_MAX_LINE_BYTES, limit_name="IMPORT_MAX_LINE_BYTES"
        )
        for number, line, error in lines:
            if error:
                yield number, None, error
                continue
            if not line.strip():
                continue
            try:
                yield number, jsonlimits.loads(line), None
            except json.JSONDecodeError as error:
                yield number, None, f"invalid JSON ({error.msg} at column {error.colno})"
            except (ValueError, RecursionError) as error:
                yield number, None, f"invalid JSON ({error})"


def validate_dataset(
    root: Path,
    *,
    check_images: bool = True,
    contract: bool = True,
    images: dict[str, ImageCheck] | None = None,
    thumbnail_dir: Path | None = None,
) -> Iterator[Violation]:
    """Every violation in a dataset folder, file by file and line by line, streaming the JSONL files.

    The records and their images are always checked. With `contract` (what `validate_benchmark` checks; an
    import of labelled pairs prepared elsewhere does not ask it) the folder is also held to what the export
    promises: no empty split and at least one item (the official evaluator crashes otherwise), a card whose
    counts are the files' counts, and a manifest that lists every file with its hash.

    Every file is read within the limits (IMPORT_MAX_LINE_BYTES, IMPORT_MAX_IMAGE_BYTES, IMPORT_MAX_IMAGE_PIXELS)
    and only where it really lies inside the folder or IMPORT_ROOTS (symlinks resolved). `images`, when given, is
    filled with each image path's ImageCheck; with `thumbnail_dir`, each image's thumbnail is written there by the
    same decode (an importer stores it: no image is decoded twice at full size).
    """
    root = Path(root)
    roots = allowed_roots(root)
    present = [split for split in SPLITS if (root / split_path(split)).is_file()]
    if not present and not contract:
        yield Violation(str(root), None, "neither data/test.jsonl nor data/val.jsonl exists")
        return
    counts: dict[str, int] = {}
    seen_ids: dict[str, str] = {}
    checked_images: dict[str, ImageCheck] = images if images is not None else {}
    for split in present:
        name = split_path(split)
        counts[split] = 0
        problem = readable_file_problem(root / name, roots)
        if problem:
            yield Violation(name, None, problem)
            continue
        try:
            for number, record, json_error in iter_lines(root / name):
                counts[split] += 1
                yield from record_violations(
                    root, name, number, record, json_error, seen_ids, checked_images, check_images, roots, thumbnail_dir
                )
        except OSError as error:  # unreadable (permissions) or failing (EIO) mid-way: the file's problem, in a line
            yield Violation(name, None, f"cannot be read ({error.strerror or error})")
    if not contract:
        return
    yield from split_violations(counts)
    yield from card_violations(root, counts)
    yield from manifest_violations(root)


def record_violations(
    root, name, number, record, json_error, seen_ids, checked_images, check_images, roots, thumbnail_dir=None
):
    if json_error:
        yield Violation(name, number, json_error)
        return
    structural = structure_problems(record)
    for problem in structural or content_problems(record):
        yield Violation(name, number, problem.message, problem.field)
    if structural:
        return
    identifier = record_item_id(record)
    if identifier in seen_ids:
        yield Violation(
            name, number, f"duplicate item id {identifier!r} (first at {seen_ids[identifier]})", "source_id"
        )
    else:
        seen_ids[identifier] = f"{name}:{number}"
    if not check_images:
        return
    for field in IMAGE_FIELDS:
        path = local_image_path(record[field])
        if image_path_problem(path) or path.startswith(WEB_ADDRESS):
            continue
        if path not in checked_images:
            checked_images[path] = inspect_image(root / path, roots, thumbnail_dir=thumbnail_dir)
        if checked_images[path].problem:
            yield Violation(name, number, f"{field} {path!r} {checked_images[path].problem}", field)


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
    try:  # PyYAML composes nested collections recursively: bound the flow nesting before it starts
        jsonlimits.check_depth("\n".join(lines[1:end]))
    except json.JSONDecodeError as error:
        return f"the YAML header is {error.msg}"
    loader = LineLoader("\n".join(lines[1:end]), first_line=2)
    try:
        header = loader.get_single_data()
    except yaml.YAMLError as error:
        return f"the YAML header is not valid YAML ({error})"
    except RecursionError:  # block nesting (indentation) the bracket count does not see
        return "the YAML header is nested too deep to read"
    finally:
        loader.dispose()
    return header, loader.lines


def card_violations(root: Path, counts: dict[str, int]) -> Iterator[Violation]:
    """The card (README.md) is what the Hub and a reader go by: each config's data files exist, each split with
    records is configured (its JSONL, or its Parquet shards holding as many rows), and each split's num_examples is
    the number of records in its file."""
    if not (root / CARD).is_file():
        yield Violation(CARD, None, "missing: the dataset card with configs and dataset_info")
        return
    problem = readable_file_problem(
        root / CARD, allowed_roots(root), max_bytes=settings.IMPORT_MAX_LINE_BYTES, limit_name="IMPORT_MAX_LINE_BYTES"
    )
    if problem:
        yield Violation(CARD, None, problem)
        return
    try:
        data = (root / CARD).read_bytes()
    except OSError as error:
        yield Violation(CARD, None, f"cannot be read ({error.strerror or error})")
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1)
        yield Violation(CARD, line, f"not UTF-8: byte 0x{data[error.start]:02x} at byte offset {column} of the line")
        return
    parsed = card_header(text)
    if isinstance(parsed, str):
        yield Violation(CARD, 1, parsed)
        return
    header, lines = parsed
    if not isinstance(header, dict):
        yield Violation(CARD, 2, "the YAML header must be a mapping (configs, dataset_info)")
        return

    def at(node) -> int | None:
        return lines.get(id(node))

    configured: set[str] = set()  # the splits some config gives (by name, or by a data/<split>.jsonl it names)
    parquet_rows: dict[str, int] = {}  # rows of the configured Parquet shards, per split
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
                named = file_split(name)
                if split is not None and named in SPLITS and named != split:
                    yield Violation(CARD, line, f"config split {split!r} points at {name}, the {named} split")
                    continue
                configured.add(split or named)
                if name.endswith(".parquet") and (split or named) in SPLITS:
                    problem = readable_file_problem(root / name, allowed_roots(root))
                    rows = None if problem else parquet_row_count(root / name)
                    if problem:
                        yield Violation(CARD, line, f"config data file {name} {problem}")
                    elif rows is None:
                        yield Violation(CARD, line, f"config data file {name} is not a readable Parquet file")
                    else:
                        parquet_rows[split or named] = parquet_rows.get(split or named, 0) + rows
    for split in counts:
        if split not in configured:
            yield Violation(CARD, None, f"{split_path(split)} has records but no config of the card gives its split")
    for split, rows in parquet_rows.items():
        if rows != counts.get(split, 0):
            yield Violation(
                CARD,
                None,
                f"the Parquet shards of the {split} split hold {rows} rows, but {split_path(split)} has "
                f"{counts.get(split, 0)} records",
            )

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


PARQUET_SHARD = re.compile(rf"{PARQUET_FOLDER}/(?P<split>\w+)-\d+-of-\d+\.parquet")


def file_split(name: str) -> str | None:
    """The split a file of the folder holds by its name: data/<split>.jsonl, or a Parquet shard of that split."""
    path = PurePosixPath(name)
    if path.parent.as_posix() == "data" and path.suffix == ".jsonl":
        return path.stem
    match = PARQUET_SHARD.fullmatch(name)
    return match["split"] if match else None


def parquet_row_count(path: Path) -> int | None:
    """The rows of a Parquet file, from its footer alone (no page is read), or None when it is not one."""
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (OSError, pa.ArrowException):
        return None


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
    roots = allowed_roots(root)
    problem = readable_file_problem(root / MANIFEST, roots)
    if problem:
        yield Violation(MANIFEST, None, problem)
        return
    listed: set[str] = set()
    with open(root / MANIFEST, "rb") as manifest:
        lines = jsonlimits.text_lines(
            manifest, max_bytes=settings.IMPORT_MAX_LINE_BYTES, limit_name="IMPORT_MAX_LINE_BYTES"
        )
        for number, line, error in lines:
            if error:
                yield Violation(MANIFEST, number, error)
                continue
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
            if not (root / path).is_file() and not (root / path).is_symlink():
                yield Violation(MANIFEST, number, f"{path} is listed but missing")
                continue
            problem = readable_file_problem(root / path, roots)
            if problem:
                yield Violation(MANIFEST, number, f"{path} {problem}")
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

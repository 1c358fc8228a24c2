"""Export finished pairs as the benchmark the official evaluation code loads: splits, images, card, manifest.

Two streaming passes over the exportable pairs: the first checks each question and plans the leak-free
split (union-find over videos and shared images), the second writes the JSONL lines and copies each image
once. Everything is written into a temporary folder beside the target and renamed into place at the end;
an S3 target is staged locally and uploaded images first, manifest last.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import tomllib
import uuid
import zipfile
from array import array
from bisect import bisect_left
from collections import Counter, defaultdict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.core.files.storage import FileSystemStorage, default_storage
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotator.export.format import (
    FIELDS,
    MAX_DISTRACTORS,
    SPLITS,
    exported_source_id,
    item_id,
    question_problems,
    split_path,
)
from annotator.models import EmbeddingModel, Job, Pair
from subtlebench.errors import Conflict, Invalid, NotFound
from subtlebench.storage import s3_client, split_s3_uri
from subtlebench.text import EXPORT_NAME_MAX

MANIFEST = "manifest.sha256"
CARD = "README.md"
REPRODUCIBLE_TIME = "1970-01-01T00:00:00Z"
CHUNK = 2000
COPY_WINDOW = 256  # rows whose image copies may be in flight at once
UPLOAD_ATTEMPTS = 4
UPLOAD_PAUSE = 0.5  # seconds before the second attempt; doubles after each failure
SKIPPED_KEPT = 200  # a job row keeps this many skipped items with their reasons (the count is always exact)


class ExportError(Conflict):
    """The export could not be written (a target in the way, an unreadable stored file, a failed upload): a previous
    local export is left as it was; an S3 prefix is left without its manifest (the sign that an export there is
    unfinished)."""


class ExportGone(NotFound):
    """The export's files are no longer where it wrote them; 410 Gone, the not-found of a thing that existed."""

    status = 410


@dataclass(frozen=True)
class ExportOptions:
    out: str
    val_fraction: float = 0.1
    seed: int = 0
    min_similarity: float | None = None
    categories: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    reproducible: bool = False

    def __post_init__(self):
        if not 0 <= self.val_fraction < 1:
            raise Invalid({"val_fraction": [f"must be at least 0 and below 1, got {self.val_fraction}."]})
        object.__setattr__(self, "categories", tuple(sorted(set(self.categories))))
        object.__setattr__(self, "domains", tuple(sorted(set(self.domains))))

    @property
    def is_s3(self) -> bool:
        return self.out.startswith("s3://")

    def as_dict(self) -> dict:
        return {**asdict(self), "categories": list(self.categories), "domains": list(self.domains)}

    @classmethod
    def from_dict(cls, data: dict) -> ExportOptions:
        names = cls.__dataclass_fields__
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in names})


class NoProgress:
    def start(self, total: int | None = None) -> None:
        pass

    def advance(self, steps: int = 1, error: str | None = None) -> None:
        pass


# --- Selection --------------------------------------------------------------------------------------------


def export_queryset(options: ExportOptions):
    """The pairs an export considers, in a stable order, with the chosen accepted caption alongside."""
    pairs = Pair.objects.exportable()
    if options.categories:
        pairs = pairs.filter(category__in=options.categories)
    if options.domains:
        pairs = pairs.filter(domain__in=options.domains)
    if options.min_similarity is not None:
        # A coordinator's recorded override is a decision about this pair; a stricter bar does not undo it.
        pairs = pairs.filter(Q(similarity__gte=options.min_similarity) | ~Q(similarity_override_reason=""))
    return pairs.with_caption().order_by("pk")


ROW_FIELDS = (
    "pk",
    "image_1_id",
    "image_2_id",
    "image_1__file",
    "image_2__file",
    "image_1__sha256",
    "image_2__sha256",
    "video_id",
    "video__yt8m_id",
    "category",
    "domain",
    "source",
    "source_id",
    "question",
    "answer",
    "distractors",
    "similarity_model",
    "caption_text",
)


def iter_rows(options: ExportOptions):
    """Rows as dicts, fetched in chunks through a server-side cursor: memory stays flat as the count grows."""
    return export_queryset(options).values(*ROW_FIELDS).iterator(chunk_size=CHUNK)


def row_problem(row: dict) -> str | None:
    problems = question_problems(question=row["question"], answer=row["answer"], distractors=row["distractors"])
    return "; ".join(map(str, problems)) if problems else None


# --- The split ----------------------------------------------------------------------------------------------


class UnionFind:
    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, node: int) -> int:
        parent = self.parent.setdefault(node, node)
        root = node
        while parent != root:
            root, parent = parent, self.parent[parent]
        while node != root:  # path compression keeps later finds short
            self.parent[node], node = root, self.parent[node]
        return root

    def union(self, a: int, b: int) -> None:
        a, b = self.find(a), self.find(b)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def image_node(image_id: int) -> int:
    return image_id * 2


def video_node(video_id: int) -> int:
    return video_id * 2 + 1


@dataclass
class Plan:
    """What pass one decided: the split of each included pair, the skipped ones with their reasons.

    Pair ids are kept in sorted arrays of 8-byte ints rather than dicts: a few bytes per item, so memory
    hardly grows with the item count.
    """

    included: array = field(default_factory=lambda: array("q"))
    val: array = field(default_factory=lambda: array("q"))
    skipped: list[dict] = field(default_factory=list)
    skipped_count: int = 0
    counts: dict = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    total: int = 0

    def split_of(self, pair_id: int) -> str | None:
        """'test' or 'val'; None for a pair that is not part of the plan (skipped, or created since)."""
        if not contains(self.included, pair_id):
            return None
        return "val" if contains(self.val, pair_id) else "test"

    def skip(self, pair_id: int, reason: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < SKIPPED_KEPT:
            self.skipped.append({"pair": pair_id, "reason": reason})


def contains(sorted_ids: array, value: int) -> bool:
    index = bisect_left(sorted_ids, value)
    return index < len(sorted_ids) and sorted_ids[index] == value


def item_id_clashes(options: ExportOptions) -> dict[int, str]:
    """Pairs that cannot have their item id because another pair has it: {pair id: why it is skipped}.

    The database's unique (category, source, source_id) misses two ways ids clash: a derived id equal to a
    real one, and sources whose names run into the source_id ("levir" + "cd_1" and "levir_cd" + "1"). Of
    the pairs with one id, a real source_id keeps it over a derived one, then the lowest pair id. The first
    pass holds only an 8-byte hash of each id, so memory stays small; ids are compared only for hashes seen twice.
    """
    hashes = sorted(id_hash(identifier) for _, identifier, _ in pair_item_ids(options))
    repeated = {first for first, second in zip(hashes, hashes[1:], strict=False) if first == second}
    del hashes
    if not repeated:
        return {}
    holders: dict[str, list[tuple[bool, int]]] = defaultdict(list)
    for pk, identifier, derived in pair_item_ids(options):
        if id_hash(identifier) in repeated:
            holders[identifier].append((derived, pk))
    clashes = {}
    for identifier, pairs in holders.items():
        (_, keeper), *others = sorted(pairs)
        for derived, pk in others:
            clashes[pk] = (
                f"its derived item id {identifier!r} is taken by another pair's source_id"
                if derived
                else f"its item id {identifier!r} is taken by pair {keeper}"
            )
    return clashes


def pair_item_ids(options: ExportOptions):
    """(pair id, item id, whether the source_id is derived) of each pair the export considers, streamed."""
    rows = export_queryset(options).values_list("pk", "category", "source", "source_id", "video__yt8m_id")
    for pk, category, source, source_id, yt8m_id in rows.iterator(chunk_size=CHUNK):
        identifier = item_id(category=category, source=source, source_id=source_id, pair_id=pk, yt8m_id=yt8m_id)
        yield pk, identifier, not source_id


def id_hash(identifier: str) -> int:
    return int.from_bytes(hashlib.blake2b(identifier.encode(), digest_size=8).digest(), "big", signed=True)


def group_order_key(seed: int, group_min_pk: int) -> bytes:
    return hashlib.sha256(f"{seed}:{group_min_pk}".encode()).digest()


def plan_export(options: ExportOptions) -> Plan:
    """Pass one: check every question, skip duplicates, group pairs by video and shared images, split."""
    plan = Plan()
    uf = UnionFind()
    # Columns of the included pairs, in id order: compact arrays, with names as indexes into small lists.
    nodes, category_of, domain_of = array("q"), array("b"), array("b")
    names: dict[str, int] = {}
    clashes = item_id_clashes(options)
    models: set[str] = set()
    content_nodes: dict[str, int] = {}  # a known content hash joins images that are copies of each other
    for row in iter_rows(options):
        plan.total += 1
        problem = row_problem(row)
        if problem is None:
            problem = clashes.get(row["pk"])
        if problem:
            plan.skip(row["pk"], problem)
            continue
        first = image_node(row["image_1_id"])
        uf.union(first, image_node(row["image_2_id"]))
        if row["video_id"]:
            uf.union(first, video_node(row["video_id"]))
        for digest in (row["image_1__sha256"], row["image_2__sha256"]):
            if digest:
                uf.union(first, -content_nodes.setdefault(digest, len(content_nodes) + 1))
        plan.included.append(row["pk"])
        nodes.append(first)
        category_of.append(names.setdefault(row["category"], len(names)))
        domain_of.append(names.setdefault(row["domain"], len(names)))
        if row["similarity_model"]:
            models.add(row["similarity_model"])
    name_of = {index: name for name, index in names.items()}

    groups: dict[int, Counter] = defaultdict(Counter)
    group_min: dict[int, int] = {}
    per_category: Counter = Counter()
    for pk, node, category_index in zip(plan.included, nodes, category_of, strict=True):
        category = name_of[category_index]
        root = uf.find(node)
        groups[root][category] += 1
        group_min[root] = min(group_min.get(root, pk), pk)
        per_category[category] += 1

    target = {c: options.val_fraction * n for c, n in per_category.items()}
    in_val: Counter = Counter()
    val_groups: set[int] = set()
    # Walk the groups in an order fixed by the seed; each goes to val when that brings its main category closer
    # to the asked fraction. Same database and options: same order, same split.
    for root in sorted(groups, key=lambda r: group_order_key(options.seed, group_min[r])):
        sizes = groups[root]
        main = min(sizes, key=lambda c: (-sizes[c], c))
        before, after = in_val[main], in_val[main] + sizes[main]
        if abs(after - target[main]) < abs(before - target[main]):
            val_groups.add(root)
            in_val.update(sizes)

    counts: dict = {}
    for pk, node, category_index, domain_index in zip(plan.included, nodes, category_of, domain_of, strict=True):
        split = "val" if uf.find(node) in val_groups else "test"
        if split == "val":
            plan.val.append(pk)  # ids arrive in ascending order: the array stays sorted
        cell = counts.setdefault(name_of[category_index], {}).setdefault(name_of[domain_index], {"test": 0, "val": 0})
        cell[split] += 1
    plan.counts = counts
    plan.models = sorted(models)
    return plan


def split_totals(counts: dict) -> dict[str, int]:
    totals = dict.fromkeys(SPLITS, 0)
    for domains in counts.values():
        for cell in domains.values():
            for split in SPLITS:
                totals[split] += cell[split]
    return totals


# --- Writing -------------------------------------------------------------------------------------------------


class ImageWriter:
    """Copies each image once, under a name made from its content's hash (no frame index, no timestamp).

    Copies run on a few threads (file creation is latency, and the GIL is released around it); the pairs
    still resolve their paths in id order, so the manifest and every choice of folder stay deterministic.
    """

    def __init__(self, root: Path, manifest, threads: int):
        # Plain strings and os.path here: this runs once per image, and pathlib costs more than the copy.
        self.root = str(root)
        self.manifest = manifest
        self.pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="export-copy")
        self.pending: dict[int, Future] = {}  # image id -> its copy, until resolved
        self.path_of: dict[int, str] = {}  # image id -> exported path
        self.written: dict[str, str] = {}  # content sha256 -> exported path
        self.strays: set[str] = set()  # a copy of already exported content, written in a second folder
        self.folders_lock = threading.Lock()
        self.folders: set[str] = set()
        self.media = default_storage.location if isinstance(default_storage, FileSystemStorage) else None

    def read(self, name: str) -> bytes:
        """The bytes of an image file in storage (a plain read for local storage: the common, fast case)."""
        if self.media is not None and ".." not in name and not name.startswith("/"):
            with open(os.path.join(self.media, name), "rb") as file:
                return file.read()
        with default_storage.open(name, "rb") as file:
            return file.read()

    def copy(self, image_id: int, name: str, folder: str, pair_id: int) -> tuple[str, str]:
        try:
            data = self.read(name)
        except (OSError, ClientError, BotoCoreError) as error:
            raise ExportError(f"pair {pair_id}: image {image_id} file {name!r} cannot be read from storage ({error})")
        digest = hashlib.sha256(data).hexdigest()
        path = f"{folder}/{digest[:32]}{os.path.splitext(name)[1].lower() or '.jpg'}"
        with self.folders_lock:
            if folder not in self.folders:
                os.makedirs(os.path.join(self.root, folder), exist_ok=True)
                self.folders.add(folder)
        with open(os.path.join(self.root, path), "wb") as file:
            file.write(data)
        return digest, path

    def submit(self, image_id: int, name: str, source: str, category: str, pair_id: int) -> None:
        if image_id not in self.path_of and image_id not in self.pending:
            # The first pair (in id order) that uses an image decides its folder.
            folder = f"images/{source}/{category}"
            self.pending[image_id] = self.pool.submit(self.copy, image_id, name, folder, pair_id)

    def resolve(self, image_id: int) -> str:
        """The exported path of a submitted image; call in pair order."""
        if image_id in self.path_of:
            return self.path_of[image_id]
        digest, path = self.pending.pop(image_id).result()
        first = self.written.get(digest)
        if first is None:
            self.written[digest] = first = path
            self.manifest.write(f"{digest}  {path}\n")
        elif first != path:
            self.strays.add(path)  # identical content used first in another category: that folder wins
        self.path_of[image_id] = first
        return first

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        for path in self.strays - set(self.written.values()):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.root, path))


def record_of(row: dict, image_1: str, image_2: str) -> dict:
    caption = row["caption_text"]
    has_caption = bool(caption and caption.strip())
    record = {
        "image_1": image_1,
        "image_2": image_2,
        "question": row["question"],
        "answer": row["answer"],
        "distractors": list(row["distractors"]),
        "has_caption": has_caption,
        "caption": caption if has_caption else None,
        "category": row["category"],
        "domain": row["domain"],
        "source": row["source"],
        "source_id": exported_source_id(source_id=row["source_id"], pair_id=row["pk"], yt8m_id=row["video__yt8m_id"]),
        "raw_folder": f"{row['source']}_{row['category']}_pairs",
        "generation_info": None,
    }
    assert list(record) == list(FIELDS)
    return record


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def app_version() -> str:
    with open(settings.BASE_DIR / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["project"]["version"]


def write_export(options: ExportOptions, plan: Plan, root: Path, progress) -> dict:
    """Pass two: the JSONL files line by line, each image once, the card, and the manifest last."""
    (root / "data").mkdir(parents=True)
    counts: dict = {}
    manifest_part = root / f".{MANIFEST}.part"
    hashes = {split: hashlib.sha256() for split in SPLITS}
    sizes = dict.fromkeys(SPLITS, 0)
    with (
        open(manifest_part, "w", encoding="utf-8") as manifest,
        open(root / split_path("test"), "wb") as test_file,
        open(root / split_path("val"), "wb") as val_file,
    ):
        files = {"test": test_file, "val": val_file}
        images = ImageWriter(root, manifest, settings.EXPORT_COPY_THREADS)
        window: deque = deque()  # rows whose images are being copied, in id order; bounded, so memory is too

        def write_line(row: dict, split: str) -> None:
            image_1, image_2 = images.resolve(row["image_1_id"]), images.resolve(row["image_2_id"])
            line = (json.dumps(record_of(row, image_1, image_2), ensure_ascii=False) + "\n").encode()
            files[split].write(line)
            hashes[split].update(line)
            sizes[split] += len(line)
            cell = counts.setdefault(row["category"], {}).setdefault(row["domain"], {"test": 0, "val": 0})
            cell[split] += 1

        try:
            pending = 0
            for row in iter_rows(options):
                pending += 1
                if pending == CHUNK:
                    progress.advance(pending)
                    pending = 0
                split = plan.split_of(row["pk"])
                if split is None:  # skipped in pass one, or created since: not part of this export's plan
                    continue
                for n in ("1", "2"):
                    images.submit(
                        row[f"image_{n}_id"], row[f"image_{n}__file"], row["source"], row["category"], row["pk"]
                    )
                window.append((row, split))
                if len(window) > COPY_WINDOW:
                    write_line(*window.popleft())
            while window:
                write_line(*window.popleft())
            progress.advance(pending)
        finally:
            images.close()
        image_count = len(images.written)
        card_time = REPRODUCIBLE_TIME if options.reproducible else timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        card = dataset_card(options=options, counts=counts, sizes=sizes, models=plan.models, time=card_time)
        (root / CARD).write_bytes(card.encode())
        for split in SPLITS:
            manifest.write(f"{hashes[split].hexdigest()}  {split_path(split)}\n")
        manifest.write(f"{hashlib.sha256(card.encode()).hexdigest()}  {CARD}\n")
    os.replace(manifest_part, root / MANIFEST)
    totals = split_totals(counts)
    return {
        "items": sum(totals.values()),
        "splits": totals,
        "images": image_count,
        "counts": counts,
        "similarity_models": plan.models,
        "card_time": card_time,
        "manifest_sha256": sha256_of(root / MANIFEST),
    }


def yaml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid YAML scalar


def dataset_card(*, options: ExportOptions, counts: dict, sizes: dict, models: list[str], time: str) -> str:
    """The README.md: a YAML header as on the benchmark's card (configs, dataset_info), counts, provenance."""
    totals = split_totals(counts)
    features = [
        ("image_1", "string"),
        ("image_2", "string"),
        ("question", "string"),
        ("answer", "string"),
        ("distractors", None),
        ("has_caption", "bool"),
        ("caption", "string"),
        ("category", "string"),
        ("domain", "string"),
        ("source", "string"),
        ("source_id", "string"),
        ("raw_folder", "string"),
        ("generation_info", "string"),
    ]
    lines = ["---", "configs:", "- config_name: default", "  data_files:"]
    for split in SPLITS:
        lines += [f"  - split: {split}", f"    path: {split_path(split)}"]
    lines += ["dataset_info:", "  features:"]
    for name, dtype in features:
        lines.append(f"  - name: {name}")
        lines.append("    sequence: string" if dtype is None else f"    dtype: {dtype}")
    lines.append("  splits:")
    for split in SPLITS:
        lines += [f"  - name: {split}", f"    num_bytes: {sizes[split]}", f"    num_examples: {totals[split]}"]
    lines += [f"  dataset_size: {sum(sizes.values())}", "---", ""]

    lines += [
        "# SubtleBench Studio export",
        "",
        "Pairs of nearly identical images with a multiple-choice question about their difference, in the",
        "format of VLM-SubtleBench (`data/test.jsonl`, `data/val.jsonl`, image paths relative to this folder).",
        f"No video and no image is shared between the splits. `{MANIFEST}` lists the sha256 of every file.",
        "",
        "## Counts",
        "",
        "| category | domain | test | val |",
        "|---|---|---:|---:|",
    ]
    for category in sorted(counts):
        for domain in sorted(counts[category]):
            cell = counts[category][domain]
            lines.append(f"| {category} | {domain} | {cell['test']} | {cell['val']} |")
    lines += [f"| **all** | | **{totals['test']}** | **{totals['val']}** |", ""]
    # Where it was written is not part of what it is: the same data exported elsewhere gives the same card.
    options_text = json.dumps({k: v for k, v in options.as_dict().items() if k != "out"}, sort_keys=True)
    lines += [
        "## Provenance",
        "",
        f"- app: SubtleBench Studio {app_version()}",
        f"- similarity models: {', '.join(f'`{m}`' for m in models) or 'none recorded'}",
        f"- similarity threshold: {settings.SIMILARITY_THRESHOLD}"
        + (f" (export minimum {options.min_similarity})" if options.min_similarity is not None else ""),
        f"- DINOv3 input size: {input_sizes(models)}",
        f"- at most {MAX_DISTRACTORS} distractors per question",
        f"- split seed: {options.seed}, val fraction: {options.val_fraction}",
        f"- options: `{options_text}`",
        f"- exported: {time}",
        "",
    ]
    return "\n".join(lines)


def input_sizes(fingerprints) -> str:
    """The input sizes of the models that scored the exported pairs, from their rows (every process knows them;
    none reads a DINOV3_* setting)."""
    sizes = EmbeddingModel.objects.filter(fingerprint__in=list(fingerprints)).values_list("image_size", flat=True)
    return ", ".join(f"{size}px" for size in sorted(set(sizes))) or "not recorded"


# --- Targets -----------------------------------------------------------------------------------------------


def swap_into_place(staging: Path, out: Path) -> None:
    """Rename the finished export into place; the previous one is kept until the new one is there."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(out, old)
    try:
        os.replace(staging, out)
    except OSError:
        if old is not None:
            os.replace(old, out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def check_local_target(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MANIFEST).exists())):
        raise ExportError(f"{out} exists and is not an earlier export (no {MANIFEST}): refusing to replace it")


def upload_file(client, path: Path, bucket: str, key: str) -> None:
    """Upload one file; on top of boto3's own retries, retry a few times with a growing pause."""
    for attempt in range(1, UPLOAD_ATTEMPTS + 1):
        try:
            client.upload_file(str(path), bucket, key)
            return
        except (ClientError, BotoCoreError, OSError) as error:
            if attempt == UPLOAD_ATTEMPTS:
                raise ExportError(f"upload of s3://{bucket}/{key} failed after {attempt} attempts: {error}")
            time.sleep(UPLOAD_PAUSE * 2 ** (attempt - 1))


def s3_zip_key(prefix: str) -> str:
    return f"{prefix.rstrip('/')}.zip" if prefix.strip("/") else "export.zip"


def upload_export(staging: Path, uri: str) -> dict:
    """Images first, then data files and card, then the zip, the manifest last: a reader that waits for the
    manifest never sees half an export. The old manifest goes first, so a half-replaced export looks unfinished."""
    bucket, prefix = split_s3_uri(uri)
    prefix = prefix.strip("/")
    client = s3_client()

    def key(name: str) -> str:
        return f"{prefix}/{name}" if prefix else name

    try:
        client.delete_object(Bucket=bucket, Key=key(MANIFEST))
    except (ClientError, BotoCoreError) as error:
        raise ExportError(f"cannot write to s3://{bucket}/{prefix}: {error}")
    for want_images in (True, False):  # two streaming passes over the manifest: images, then the rest
        with open(staging / MANIFEST, encoding="utf-8") as manifest:
            for line in manifest:
                name = line.rstrip("\n").split("  ", 1)[1]
                if name.startswith("images/") == want_images:
                    upload_file(client, staging / name, bucket, key(name))
    archive = staging.parent / f"{staging.name}.zip"
    zip_folder(staging, archive)
    upload_file(client, archive, bucket, s3_zip_key(prefix))
    archive.unlink()
    upload_file(client, staging / MANIFEST, bucket, key(MANIFEST))
    return {"zip_key": s3_zip_key(prefix), "bucket": bucket}


def zip_folder(folder: Path, archive: Path) -> None:
    """A stored (not deflated: JPEGs do not shrink) zip of an export, files in manifest order, streamed."""
    part = archive.parent / f".{archive.name}.part-{uuid.uuid4().hex[:8]}"
    with open(folder / MANIFEST, encoding="utf-8") as manifest:
        with zipfile.ZipFile(part, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            for line in manifest:
                name = line.rstrip("\n").split("  ", 1)[1]
                zf.write(folder / name, name)
            zf.write(folder / MANIFEST, MANIFEST)
    os.replace(part, archive)


# --- Services ----------------------------------------------------------------------------------------------


def benchmark_export(*, options: ExportOptions, progress=None, dry_run: bool = False) -> dict:
    """Export the benchmark to options.out (a folder or s3://bucket/prefix); returns counts and provenance."""
    progress = progress or NoProgress()
    plan = plan_export(options)
    result = {
        "out": options.out,
        "target": "s3" if options.is_s3 else "local",
        "options": options.as_dict(),
        "considered": plan.total,
        "skipped": plan.skipped,
        "skipped_count": plan.skipped_count,
    }
    if dry_run:
        totals = split_totals(plan.counts)
        return {**result, "dry_run": True, "items": sum(totals.values()), "splits": totals, "counts": plan.counts}
    progress.start(plan.total)
    if options.is_s3:
        split_s3_uri(options.out)  # a malformed URI fails before any work
        with tempfile.TemporaryDirectory(prefix="export-") as tmp:
            staging = Path(tmp) / "export"
            result.update(write_export(options, plan, staging, progress))
            result.update(upload_export(staging, options.out))
        return result
    out = Path(options.out).resolve()
    check_local_target(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        result.update(write_export(options, plan, staging, progress))
        swap_into_place(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    result["out"] = str(out)
    return result


def export_start(*, options: ExportOptions, user) -> Job:
    """Record an export job and queue it once the row is committed."""
    from annotator.export.tasks import export_benchmark_task

    with transaction.atomic():
        job = Job.objects.create(
            kind=Job.Kind.EXPORT,
            title=f"Export to {options.out}",
            created_by=user,
            result={"options": options.as_dict()},
        )
        transaction.on_commit(lambda: export_benchmark_task.delay(job.pk))
    return job


def export_run(*, job_id: int) -> Job:
    """Run a queued export job; a job that already finished is left as it is (a redelivered task is harmless)."""
    job = Job.objects.get(pk=job_id)
    if not job.is_active:
        return job
    options = ExportOptions.from_dict(job.result["options"])
    job.start()
    try:
        result = benchmark_export(options=options, progress=job)
    except ExportError as error:
        job.finish(result={"options": options.as_dict()}, error=str(error))
        return job
    except Exception as error:
        job.finish(result={"options": options.as_dict()}, error=f"unexpected error: {error!r}")
        raise
    job.finish(result=result)
    return job


def export_folder_for_web(name: str) -> str:
    """Where a page-started local export goes: a plain name under EXPORT_ROOT, never an arbitrary path."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise Invalid({"target": ["The folder name must be a plain name (letters, digits, - and _), not a path."]})
    if len(name) > EXPORT_NAME_MAX:
        raise Invalid({"target": [f"The folder name has {len(name)} characters; at most {EXPORT_NAME_MAX}."]})
    return str(Path(settings.EXPORT_ROOT) / name)


def export_zip(*, job: Job) -> Path:
    """The zip of a local export, built once (named by the manifest's hash) and reused for later downloads."""
    result = job.result or {}
    if job.status != Job.Status.SUCCEEDED or result.get("target") != "local":
        raise ExportError("Only a finished export to a local folder can be downloaded as a zip.")
    folder = Path(result["out"])
    if not (folder / MANIFEST).exists() or sha256_of(folder / MANIFEST) != result["manifest_sha256"]:
        raise ExportGone(f"{folder} no longer holds this export: a later export replaced it, or it was removed.")
    zips = Path(settings.EXPORT_ROOT) / ".zips"
    zips.mkdir(parents=True, exist_ok=True)
    archive = zips / f"{result['manifest_sha256']}.zip"
    if not archive.exists():
        zip_folder(folder, archive)
    return archive


def export_download_url(*, job: Job) -> str:
    """A presigned URL of the zip an S3 export uploaded beside its prefix."""
    result = job.result or {}
    if job.status != Job.Status.SUCCEEDED or result.get("target") != "s3":
        raise ExportError("Only a finished export to S3 has a download URL.")
    return s3_client().generate_presigned_url(
        "get_object",
        Params={"Bucket": result["bucket"], "Key": result["zip_key"]},
        ExpiresIn=settings.S3_URL_EXPIRY,
    )

"""Export finished pairs as the benchmark the official evaluation code loads: splits, images, provenance, card,
manifest.

Two streaming passes over the exportable pairs: the first checks each question, plans the leak-free split
(union-find over videos, groups and shared images) and the orientation of the binary items, the second writes
the JSONL lines and the provenance sidecar and copies each image once. Everything is written into a temporary
folder beside the target and renamed into place at the end; an S3 target is staged locally, uploaded under a
version of its own and made current by switching a pointer object last (see `upload_export`).

The switch into place is the export's last step, under a database lock on its target, after one more check of the
target: of two exports at once to one target, the second finds the first's files and fails unless it replaces. An
export published as a release takes its number first (a reservation), writes under the staging name, then makes
the release (committed) and switches: files in place always have their release, and an export that died between
the two is finished by its retry or by the clean-up (`release_files_place`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import logging
import os
import re
import shutil
import socket
import statistics
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
from datetime import UTC, datetime
from pathlib import Path

from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.core.files.storage import FileSystemStorage, default_storage
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import OuterRef, Q, Subquery
from django.utils import timezone

from annotator.export.format import file_sha256
from annotator.hub_view import HubView, hub_view_write
from annotator.jobs.outages import outage_of
from annotator.jobs.scratch import (
    newest_mtime,
    owner_alive,
    owner_record,
    scratch_file,
    scratch_folder,
    scratch_paths,
    scratch_register,
    scratch_root,
)
from annotator.jobs.services import TransferBeats
from annotator.models import (
    EmbeddingModel,
    Job,
    Pair,
    Release,
    ReleasePublication,
    ReleaseReservation,
    Review,
    SourceLicense,
)
from annotator.models.releases import release_name
from annotator.regions import regions_swapped
from annotator.releases.services import (
    ReleaseDraft,
    ReleaseError,
    release_files_write,
    release_made_for,
    release_next_number,
    release_publication_record,
    release_publish,
    release_reservation_done,
    release_reservation_mark_placed,
    release_reservation_owner_gone,
    release_reservation_stage,
    release_reservation_withdraw,
    release_reservations_abandoned,
    release_reservations_unplaced,
    release_reserve,
)
from benchmark import jsonlimits
from benchmark.card import dataset_card, left_out_warnings, split_totals
from benchmark.questions import MAX_DISTRACTORS, question_problems
from benchmark.records import (
    CARD,
    FIELDS,
    ITEMS_METADATA,
    MANIFEST,
    SPLITS,
    build_record,
    exported_source_id,
    item_id,
    source_group,
    split_path,
    video_group,
)
from benchmark.splits import (
    UnionFind,
    answer_place,
    balance_answers,
    choose_val_groups,
    id_hash,
    orientation_is_fixed,
    swap_binary_answer,
)
from subtlebench.errors import Conflict, Invalid, NotFound, ServiceError, file_error_detail
from subtlebench.storage import media_in_bucket, s3_client, split_s3_uri
from subtlebench.text import EXPORT_NAME_MAX, NAME_MAX, NOTE_MAX, control_character

log = logging.getLogger(__name__)

REPRODUCIBLE_TIME = "1970-01-01T00:00:00Z"
NOT_IN_CARD = ("out", "replace", "release", "release_title", "release_notes")
CHUNK = 2000
COPY_WINDOW = 256  # rows whose image copies may be in flight at once
UPLOAD_ATTEMPTS = 4
UPLOAD_PAUSE = 0.5  # seconds before the second attempt; doubles after each failure
IMAGE_CHUNK = 1 << 20  # an image is copied (and hashed on the way) in pieces of this many bytes
ZIP_PROGRESS_EVERY = 50  # a zip job counts its progress (and beats its heartbeat) every this many files
SKIPPED_KEPT = 200  # a job row keeps this many skipped items with their reasons (the count is always exact)


class ExportError(Conflict):
    """The export could not be written (a target in the way, a full disk, a failed upload): a previous export is
    left as it was, local or on S3 (whose pointer still names it)."""


class ExportTargetTaken(ExportError):
    """The target already holds an export, and replacing it was not asked for; `existing` says which."""

    def __init__(self, message: str, existing: str):
        self.existing = existing
        super().__init__(message)


class ImageUnusable(Exception):
    """An image cannot be exported (its file is unreadable, or its bytes are not the ones recorded when it was
    stored): the pairs that use it are left out with the reason; the rest of the export goes on."""


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
    replace: bool = False  # an earlier export at `out` is replaced only when asked
    # Hard pairs (issue 16): keep only pairs that at most this share of the chosen models got right (a pair no
    # chosen model answered is kept). `models`: endpoint names; empty means every endpoint with results.
    max_model_accuracy: float | None = None
    models: tuple[str, ...] = ()
    # Publish the export as the next release (vN, issue 23): its items are kept, frozen, in the database.
    release: bool = False
    release_title: str = ""
    release_notes: str = ""
    # Synthetic sweeps: the pairs of this sweep alone (its experiment release); None: the pairs in the benchmark
    # (`Pair.objects.in_benchmark`, which every count of the benchmark counts too).
    sweep: int | None = None

    def __post_init__(self):
        if not 0 <= self.val_fraction < 1:
            raise Invalid({"val_fraction": [f"must be at least 0 and below 1, got {self.val_fraction}."]})
        if self.max_model_accuracy is not None and not 0 <= self.max_model_accuracy <= 1:
            raise Invalid({"max_model_accuracy": [f"must be a share from 0 to 1, got {self.max_model_accuracy}."]})
        if self.models and self.max_model_accuracy is None:
            raise Invalid({"models": ["choose models only together with a maximum model accuracy."]})
        self.check_release_fields()
        object.__setattr__(self, "categories", tuple(sorted(set(self.categories))))
        object.__setattr__(self, "domains", tuple(sorted(set(self.domains))))
        object.__setattr__(self, "models", tuple(sorted({name.strip() for name in self.models if name.strip()})))

    def check_release_fields(self) -> None:
        title, notes = (self.release_title or "").strip(), (self.release_notes or "").strip()
        if (title or notes) and not self.release:
            raise Invalid({"release_title": ["a release title or notes only go with publishing a release."]})
        if len(title) > NAME_MAX or control_character(title, multi_line=False):
            raise Invalid({"release_title": [f"must be one line of at most {NAME_MAX} characters."]})
        if len(notes) > NOTE_MAX or control_character(notes):
            raise Invalid({"release_notes": [f"must be text of at most {NOTE_MAX} characters."]})
        object.__setattr__(self, "release_title", title)
        object.__setattr__(self, "release_notes", notes)

    @property
    def is_s3(self) -> bool:
        return self.out.startswith("s3://")

    def as_dict(self) -> dict:
        data = {**asdict(self), "categories": list(self.categories), "domains": list(self.domains)}
        data["models"] = list(self.models)
        if self.sweep is None:  # an export of the benchmark reads (and its card says) what it did before sweeps
            del data["sweep"]
        return data

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
    if options.sweep is not None:
        pairs = Pair.objects.exportable().filter(sweep_item__sweep_id=options.sweep)
    else:
        pairs = Pair.objects.in_benchmark()
    if options.categories:
        pairs = pairs.filter(category__in=options.categories)
    if options.domains:
        pairs = pairs.filter(domain__in=options.domains)
    if options.min_similarity is not None:
        # A coordinator's recorded override is a decision about this pair; a stricter bar does not undo it.
        pairs = pairs.filter(Q(similarity__gte=options.min_similarity) | ~Q(similarity_override_reason=""))
    if options.max_model_accuracy is not None:
        pairs = pairs.model_accuracy_at_most(options.max_model_accuracy, endpoints=model_filter_endpoints(options))
    return pairs.with_caption().order_by("pk")


def model_filter_endpoints(options: ExportOptions) -> list[int]:
    """The endpoints the model-accuracy filter counts: those named, or every endpoint with results."""
    from annotator.models import ModelEndpoint

    if not options.models:
        return list(
            ModelEndpoint.objects.filter(evaluations__results__isnull=False).distinct().values_list("pk", flat=True)
        )
    found = dict(ModelEndpoint.objects.filter(name__in=options.models).values_list("name", "pk"))
    unknown = [name for name in options.models if name not in found]
    if unknown:
        known = ", ".join(ModelEndpoint.objects.values_list("name", flat=True)) or "none registered"
        raise Invalid({"models": [f"no model endpoint named {', '.join(unknown)} (known: {known})."]})
    return [found[name] for name in options.models]


def model_filter_text(options: ExportOptions) -> str | None:
    """The model-accuracy filter in words, for the dataset card (provenance); None when the export has none."""
    from annotator.models import ModelEndpoint

    if options.max_model_accuracy is None:
        return None
    names = options.models or ModelEndpoint.objects.filter(pk__in=model_filter_endpoints(options)).values_list(
        "name", flat=True
    )
    chosen = ", ".join(f"`{name}`" for name in sorted(names)) or "none had results"
    models = chosen if options.models else f"every endpoint with results ({chosen})"
    return (
        f"kept only pairs that at most {options.max_model_accuracy:g} of the chosen models answered correctly "
        f"(each model's latest answer; failed requests not counted); models: {models}; "
        "pairs no chosen model answered are kept"
    )


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
    "group_key",
    "raw_folder",
    "generation_info",
    "question",
    "answer",
    "distractors",
    "similarity_model",
    "caption_text",
)
# Pass two also writes each item's provenance (metadata/items.jsonl).
PROVENANCE_FIELDS = (
    "similarity",
    "similarity_override_reason",
    "similarity_override_by_id",
    "similarity_override_at",
    "author_id",
    "reviewer_id",
    "image_1__original_name",
    "image_2__original_name",
    "image_1__frame__timestamp",
    "image_2__frame__timestamp",
    "image_1__frame__pts",
    "image_2__frame__pts",
    "regions",
)


def iter_rows(options: ExportOptions, *, provenance: bool = False):
    """Rows as dicts, fetched in chunks through a server-side cursor: memory stays flat as the count grows."""
    pairs = export_queryset(options)
    if not provenance:
        return pairs.values(*ROW_FIELDS).iterator(chunk_size=CHUNK)
    # The reviewer who accepted it: the latest accepting review (a correction accepts too).
    accepting = Review.objects.filter(
        pair=OuterRef("pk"), decision__in=[Review.Decision.ACCEPT, Review.Decision.CORRECT]
    ).order_by("-created", "-pk")
    pairs = pairs.annotate(reviewer_id=Subquery(accepting.values("reviewer_id")[:1]))
    return pairs.values(*ROW_FIELDS, *PROVENANCE_FIELDS).iterator(chunk_size=CHUNK)


def row_problem(row: dict) -> str | None:
    problems = question_problems(
        question=row["question"], answer=row["answer"], distractors=row["distractors"], category=row["category"]
    )
    return "; ".join(map(str, problems)) if problems else None


# --- The split ----------------------------------------------------------------------------------------------


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
    swapped: array = field(default_factory=lambda: array("q"))  # binary items written with the images traded
    skipped: list[dict] = field(default_factory=list)
    skipped_count: int = 0
    counts: dict = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    total: int = 0
    keep_every_skip: bool = False  # a release keeps every pair it left out, with the reason (its diff names it)

    def split_of(self, pair_id: int) -> str | None:
        """'test' or 'val'; None for a pair that is not part of the plan (skipped, or created since)."""
        if not contains(self.included, pair_id):
            return None
        return "val" if contains(self.val, pair_id) else "test"

    def is_swapped(self, pair_id: int) -> bool:
        return contains(self.swapped, pair_id)

    def skip(self, pair_id: int, reason: str) -> None:
        self.skipped_count += 1
        if self.keep_every_skip or len(self.skipped) < SKIPPED_KEPT:
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


def pair_group(*, group_key: str, yt8m_id: str | None) -> str:
    """The group a pair shares with others: its stored key (an imported pair's video), else its video; or ''.

    A video's key has the form `benchmark.records.source_group` derives from a yt8m source_id, so a re-imported export
    groups its pairs as the first export did.
    """
    return group_key or video_group(yt8m_id)


def item_cluster(row: dict, identifier: str) -> str:
    """The items that share a video or a source image share this: the pair's group, else the group its source_id
    names, else the item alone (`benchmark.records` group rules)."""
    group = pair_group(group_key=row["group_key"], yt8m_id=row["video__yt8m_id"])
    return group or source_group(row["source"], row["source_id"]) or f"item:{identifier}"


def orientation_is_fixed_row(row: dict) -> bool:
    return orientation_is_fixed(question=row["question"], caption=row["caption_text"])


def plan_export(options: ExportOptions) -> Plan:
    """Pass one: check every question, skip duplicates, group pairs, split them, balance the binary answers.

    The split and the orientations derive from item ids (never database ids), so the same items give the same
    plan in any database: an export imported elsewhere and exported again with the same seed is the same export.
    """
    plan = Plan(keep_every_skip=options.release)
    uf = UnionFind()
    # Columns of the included pairs, in id order: compact arrays, with names as indexes into small lists.
    nodes, id_hashes = array("q"), array("q")
    category_of, domain_of, places = array("b"), array("b"), array("b")
    names: dict[str, int] = {}
    clashes = item_id_clashes(options)
    models: set[str] = set()
    # Nodes for a known content hash (images that are copies of each other) and for a group key.
    named_nodes: dict[str, int] = {}

    def named_node(name: str) -> int:
        return -named_nodes.setdefault(name, len(named_nodes) + 1)

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
        group = pair_group(group_key=row["group_key"], yt8m_id=row["video__yt8m_id"])
        if group:
            uf.union(first, named_node(f"group:{group}"))
        for digest in (row["image_1__sha256"], row["image_2__sha256"]):
            if digest:
                uf.union(first, named_node(f"sha256:{digest}"))
        identifier = item_id(
            category=row["category"],
            source=row["source"],
            source_id=row["source_id"],
            pair_id=row["pk"],
            yt8m_id=row["video__yt8m_id"],
        )
        plan.included.append(row["pk"])
        nodes.append(first)
        id_hashes.append(id_hash(identifier))
        category_of.append(names.setdefault(row["category"], len(names)))
        domain_of.append(names.setdefault(row["domain"], len(names)))
        place = answer_place(row)
        places.append(-place if place and orientation_is_fixed_row(row) else place)
        if row["similarity_model"]:
            models.add(row["similarity_model"])
    named_nodes.clear()
    name_of = {index: name for name, index in names.items()}

    groups: dict[int, Counter] = defaultdict(Counter)  # root -> items per (category, domain)
    identity: dict[int, int] = {}  # root -> the smallest id hash of its items: the same in every database
    for node, category_index, domain_index, hashed in zip(nodes, category_of, domain_of, id_hashes, strict=True):
        root = uf.find(node)
        groups[root][(name_of[category_index], name_of[domain_index])] += 1
        identity[root] = min(identity.get(root, hashed), hashed)
    val_roots = choose_val_groups(groups, identity, fraction=options.val_fraction, seed=options.seed)
    del groups, identity

    counts: dict = {}
    in_val = array("b")
    for pk, node, category_index, domain_index in zip(plan.included, nodes, category_of, domain_of, strict=True):
        split = "val" if uf.find(node) in val_roots else "test"
        in_val.append(split == "val")
        if split == "val":
            plan.val.append(pk)  # ids arrive in ascending order: the array stays sorted
        cell = counts.setdefault(name_of[category_index], {}).setdefault(name_of[domain_index], {"test": 0, "val": 0})
        cell[split] += 1
    del uf, nodes
    categories = [name_of[index] for index in category_of]
    plan.swapped = balance_answers(plan.included, in_val, categories, id_hashes, places, seed=options.seed)
    plan.counts = counts
    plan.models = sorted(models)
    return plan


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
        self.digest_of: dict[int, str] = {}  # image id -> sha256 of its bytes as read (a release keeps it)
        self.written: dict[str, str] = {}  # content sha256 -> exported path
        self.strays: set[str] = set()  # a copy of already exported content, written in a second folder
        self.failed: dict[int, str] = {}  # image id -> why it cannot be exported
        self.folders_lock = threading.Lock()
        self.folders: set[str] = set()
        self.media = default_storage.location if isinstance(default_storage, FileSystemStorage) else None

    def open(self, name: str):
        """An image file in storage, opened for reading (a plain open for local storage: the common, fast case)."""
        if self.media is not None and ".." not in name and not name.startswith("/"):
            return open(os.path.join(self.media, name), "rb")
        return default_storage.open(name, "rb")

    def copy(self, image_id: int, name: str, expected: str, folder: str) -> tuple[str, str]:
        """Copy one image, hashing the bytes as they stream through (one read); (sha256, exported path). A file that
        cannot be read, or whose bytes are not the ones recorded when it was stored, raises ImageUnusable."""
        with self.folders_lock:
            if folder not in self.folders:
                os.makedirs(os.path.join(self.root, folder), exist_ok=True)
                self.folders.add(folder)
        part = os.path.join(self.root, folder, f".{image_id}.part")
        digest = hashlib.sha256()
        unreadable = f"image {image_id} file {name!r} cannot be read from storage"
        try:
            source = self.open(name)
        except (OSError, ClientError, BotoCoreError) as error:
            raise ImageUnusable(f"{unreadable} ({error})") from error
        # A failed write (a full disk) is not the image's fault: it propagates, and the whole export fails.
        with source, open(part, "wb") as target:
            while True:
                try:
                    chunk = source.read(IMAGE_CHUNK)
                except (OSError, ClientError, BotoCoreError) as error:
                    target.close()
                    os.remove(part)
                    raise ImageUnusable(f"{unreadable} ({error})") from error
                if not chunk:
                    break
                digest.update(chunk)
                target.write(chunk)
        actual = digest.hexdigest()
        if expected and actual != expected:
            os.remove(part)
            raise ImageUnusable(
                f"image {image_id} file {name!r} is corrupt: its sha256 is {actual}, not the {expected} recorded "
                "when it was stored"
            )
        path = f"{folder}/{actual[:32]}{os.path.splitext(name)[1].lower() or '.jpg'}"
        os.replace(part, os.path.join(self.root, path))
        return actual, path

    def submit(self, image_id: int, name: str, expected: str, source: str, category: str) -> None:
        if image_id not in self.path_of and image_id not in self.pending and image_id not in self.failed:
            # The first pair (in id order) that uses an image decides its folder.
            folder = f"images/{source}/{category}"
            self.pending[image_id] = self.pool.submit(self.copy, image_id, name, expected, folder)

    def check(self, image_id: int) -> None:
        """Wait for a submitted image's copy; raise ImageUnusable (each time it is asked) when it failed."""
        if image_id in self.failed:
            raise ImageUnusable(self.failed[image_id])
        if image_id in self.pending:
            try:
                self.pending[image_id].result()
            except ImageUnusable as problem:
                del self.pending[image_id]
                self.failed[image_id] = str(problem)
                raise

    def resolve(self, image_id: int) -> str:
        """The exported path of a submitted image that passed `check`; call in pair order."""
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
        self.digest_of[image_id] = digest
        return first

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        unused = set(self.strays)
        for future in self.pending.values():  # copied, but every pair that used it failed (its other image did)
            if not future.cancelled() and future.exception() is None:
                unused.add(future.result()[1])
        for path in unused - set(self.written.values()):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.root, path))


def opaque_user_id(user_id: int | None) -> str | None:
    """A stable id for a user that tells nothing about who it is: an HMAC of the user's id under SECRET_KEY."""
    if user_id is None:
        return None
    return hmac.new(settings.SECRET_KEY.encode(), f"user:{user_id}".encode(), hashlib.sha256).hexdigest()[:16]


def utc_text(moment) -> str | None:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if moment else None


def provenance_of(row: dict, *, identifier: str, split: str, swapped: bool, input_size: int | None) -> dict:
    """One line of metadata/items.jsonl: where the item came from and who vouched for it, by opaque ids.

    `row` is the item as written (images already traded when `swapped`), so origins follow image_1, image_2.
    """
    override = None
    if row["similarity_override_reason"]:
        override = {
            "by": opaque_user_id(row["similarity_override_by_id"]),
            "at": utc_text(row["similarity_override_at"]),
            "reason": row["similarity_override_reason"],
        }
    if row["video__yt8m_id"]:
        origin = {
            "video": row["video__yt8m_id"],
            "timestamps": [row["image_1__frame__timestamp"], row["image_2__frame__timestamp"]],
            # The exact presentation timestamps (stream time-base units) the frames were decoded at, sampled or picked.
            "pts": [row["image_1__frame__pts"], row["image_2__frame__pts"]],
        }
    else:
        origin = {"source": row["source"], "files": [row["image_1__original_name"], row["image_2__original_name"]]}
    return {
        "item_id": identifier,
        "split": split,
        "similarity": row["similarity"],
        "similarity_model": row["similarity_model"] or None,
        "input_size": input_size,
        "similarity_override": override,
        "origin": origin,
        "group": pair_group(group_key=row["group_key"], yt8m_id=row["video__yt8m_id"]) or None,
        "annotator": opaque_user_id(row["author_id"]),
        "reviewer": opaque_user_id(row["reviewer_id"]),
        "swapped": swapped,
        # Where the images differ, on image_1 / image_2 as written (traded with them when swapped).
        "regions": row["regions"] or [],
    }


def swapped_row(row: dict) -> dict:
    """The row with its two images traded and its answer flipped: "first image" becomes "second image"."""
    row = dict(row)
    for suffix in ("_id", "__file", "__sha256", "__original_name", "__frame__timestamp", "__frame__pts"):
        row[f"image_1{suffix}"], row[f"image_2{suffix}"] = row[f"image_2{suffix}"], row[f"image_1{suffix}"]
    row["answer"], row["distractors"] = swap_binary_answer(row["answer"], row["distractors"])
    if "regions" in row:  # the provenance pass reads them
        row["regions"] = regions_swapped(row["regions"])
    return row


def record_of(row: dict, image_1: str, image_2: str) -> dict:
    record = build_record(
        image_1=image_1,
        image_2=image_2,
        question=row["question"],
        answer=row["answer"],
        distractors=row["distractors"],
        caption=row["caption_text"],
        category=row["category"],
        domain=row["domain"],
        source=row["source"],
        source_id=exported_source_id(source_id=row["source_id"], pair_id=row["pk"], yt8m_id=row["video__yt8m_id"]),
        raw_folder=row["raw_folder"],
        generation_info=row["generation_info"],
    )
    assert list(record) == list(FIELDS)
    return record


def app_version() -> str:
    with open(settings.BASE_DIR / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["project"]["version"]


@dataclass
class Tally:
    """What pass two wrote: counts per category x domain and split, binary answers, similarities, overrides."""

    counts: dict = field(default_factory=dict)
    # category -> split -> [items whose answer is "first image", binary items]
    answer_first: dict = field(default_factory=dict)
    similarities: array = field(default_factory=lambda: array("d"))
    overrides: int = 0
    sources: Counter = field(default_factory=Counter)  # items per source: each source's license goes on the card

    def add(self, row: dict, split: str) -> None:
        cell = self.counts.setdefault(row["category"], {}).setdefault(row["domain"], {"test": 0, "val": 0})
        cell[split] += 1
        self.sources[row["source"]] += 1
        place = answer_place(row)
        if place:
            shares = self.answer_first.setdefault(row["category"], {s: [0, 0] for s in SPLITS})[split]
            shares[0] += place == 1
            shares[1] += 1
        if row["similarity"] is not None:
            self.similarities.append(row["similarity"])
        self.overrides += bool(row["similarity_override_reason"])

    def similarity_summary(self) -> dict | None:
        """min, 5th percentile and median of the exported items' similarities (inclusive quantiles)."""
        values = sorted(self.similarities)
        if not values:
            return None
        p5 = statistics.quantiles(values, n=20, method="inclusive")[0] if len(values) > 1 else values[0]
        return {"min": values[0], "p5": p5, "median": statistics.median(values), "count": len(values)}


def write_export(
    options: ExportOptions, plan: Plan, root: Path, progress, *, draft: ReleaseDraft | None = None
) -> dict:
    """Pass two: the JSONL files line by line, each image once, the provenance, the card, and the manifest last.

    With a `draft` (an export published as a release), each item is also kept as its ReleaseItem will hold it:
    its lines exactly as written, its place in its split's file, its group and the hashes of its images' bytes.
    """
    (root / "data").mkdir(parents=True)
    (root / ITEMS_METADATA).parent.mkdir()
    tally = Tally()
    manifest_part = root / f".{MANIFEST}.part"
    hashes = {name: hashlib.sha256() for name in (*SPLITS, ITEMS_METADATA)}
    positions = dict.fromkeys(SPLITS, 0)
    sizes_of_models = dict(
        EmbeddingModel.objects.filter(fingerprint__in=plan.models).values_list("fingerprint", "image_size")
    )
    with (
        open(manifest_part, "w", encoding="utf-8") as manifest,
        open(root / split_path("test"), "wb") as test_file,
        open(root / split_path("val"), "wb") as val_file,
        open(root / ITEMS_METADATA, "wb") as metadata_file,
    ):
        files = {"test": test_file, "val": val_file}
        images = ImageWriter(root, manifest, settings.EXPORT_COPY_THREADS)
        window: deque = deque()  # rows whose images are being copied, in id order; bounded, so memory is too

        def write_line(row: dict, split: str, swapped: bool) -> None:
            try:
                images.check(row["image_1_id"])
                images.check(row["image_2_id"])
            except ImageUnusable as problem:  # this item fails, with the reason; the others are exported
                plan.skip(row["pk"], str(problem))
                return
            image_1, image_2 = images.resolve(row["image_1_id"]), images.resolve(row["image_2_id"])
            record = record_of(row, image_1, image_2)
            record_text = json.dumps(record, ensure_ascii=False)
            line = (record_text + "\n").encode()
            files[split].write(line)
            hashes[split].update(line)
            positions[split] += 1
            identifier = item_id(category=record["category"], source=record["source"], source_id=record["source_id"])
            provenance = provenance_of(
                row,
                identifier=identifier,
                split=split,
                swapped=swapped,
                input_size=sizes_of_models.get(row["similarity_model"]),
            )
            provenance_text = json.dumps(provenance, ensure_ascii=False)
            line = (provenance_text + "\n").encode()
            metadata_file.write(line)
            hashes[ITEMS_METADATA].update(line)
            tally.add(row, split)
            if draft is not None:
                draft.add(
                    item_id=identifier,
                    split=split,
                    position=positions[split],
                    line=record_text,
                    provenance=provenance_text,
                    category=row["category"],
                    domain=row["domain"],
                    cluster=item_cluster(row, identifier),
                    swapped=swapped,
                    image_1=row["image_1_id"],
                    image_2=row["image_2_id"],
                    image_1_sha256=images.digest_of[row["image_1_id"]],
                    image_2_sha256=images.digest_of[row["image_2_id"]],
                    pair=row["pk"],
                )

        try:
            pending = 0
            for row in iter_rows(options, provenance=True):
                pending += 1
                if pending == CHUNK:
                    progress.advance(pending)
                    pending = 0
                split = plan.split_of(row["pk"])
                if split is None:  # skipped in pass one, or created since: not part of this export's plan
                    continue
                swapped = plan.is_swapped(row["pk"])
                if swapped:
                    row = swapped_row(row)
                for n in ("1", "2"):
                    images.submit(
                        row[f"image_{n}_id"],
                        row[f"image_{n}__file"],
                        row[f"image_{n}__sha256"],
                        row["source"],
                        row["category"],
                    )
                window.append((row, split, swapped))
                if len(window) > COPY_WINDOW:
                    write_line(*window.popleft())
            while window:
                write_line(*window.popleft())
            progress.advance(pending)
        finally:
            images.close()
        image_count = len(images.written)
        totals = split_totals(tally.counts)
        written = [split for split in SPLITS if totals[split]]
        card_time = REPRODUCIBLE_TIME if options.reproducible else timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        for split in written:
            manifest.write(f"{hashes[split].hexdigest()}  {split_path(split)}\n")
        manifest.write(f"{hashes[ITEMS_METADATA].hexdigest()}  {ITEMS_METADATA}\n")
        # The card names the release by the hash of the official files' lines: the manifest so far.
        manifest.flush()
        content_sha256 = file_sha256(manifest_part)
        for file in (*files.values(), metadata_file):
            file.flush()
        view = hub_view_write(root, written)
        manifest.write(view.manifest_lines())
        card = export_card(
            options=options, tally=tally, view=view, models=plan.models, time=card_time,
            images=image_count, content_sha256=content_sha256, release=draft.label if draft else None,
        )  # fmt: skip
        (root / CARD).write_bytes(card.encode())
        if draft is not None:
            draft.card = card
        manifest.write(f"{hashlib.sha256(card.encode()).hexdigest()}  {CARD}\n")
    for split in SPLITS:
        if split not in written:  # an empty file would crash the evaluator; a missing one says "no such split"
            (root / split_path(split)).unlink()
    os.replace(manifest_part, root / MANIFEST)
    return {
        "items": sum(totals.values()),
        "splits": totals,
        # Pass two adds the items whose images could not be exported (unreadable, or not the bytes recorded).
        "skipped": plan.skipped[:SKIPPED_KEPT],
        "skipped_count": plan.skipped_count,
        "left_out": [split for split in SPLITS if split not in written],
        "warnings": left_out_warnings(totals),
        "images": image_count,
        "counts": tally.counts,
        "answer_first": tally.answer_first,
        "swapped": len(plan.swapped),
        "overrides": tally.overrides,
        "similarity": tally.similarity_summary(),
        "similarity_models": plan.models,
        "card_time": card_time,
        "content_sha256": content_sha256,
        "manifest_sha256": file_sha256(root / MANIFEST),
    }


def export_card(
    *,
    options: ExportOptions,
    tally: Tally,
    view: HubView,
    models: list[str],
    time: str,
    images: int,
    content_sha256: str,
    release: str | None = None,
) -> str:
    """The README.md (`benchmark.card.dataset_card`) with this export's provenance: app, similarity, options, time."""
    summary = tally.similarity_summary()
    similarity = (
        f"min {summary['min']:.4f}, 5th percentile {summary['p5']:.4f}, median {summary['median']:.4f}"
        if summary
        else "none recorded"
    )
    # Where it was written is not part of what it is: the same data exported elsewhere gives the same card.
    # The release's name and title have their own line (`release`), its notes their page.
    options_text = json.dumps({k: v for k, v in options.as_dict().items() if k not in NOT_IN_CARD}, sort_keys=True)
    provenance = [
        f"app: SubtleBench Studio {app_version()}",
        f"similarity models: {', '.join(f'`{m}`' for m in models) or 'none recorded'}",
        f"similarity threshold: {settings.SIMILARITY_THRESHOLD}"
        + (f" (export minimum {options.min_similarity})" if options.min_similarity is not None else ""),
        f"similarity of the items: {similarity}",
        f"items accepted through a coordinator's override of the threshold: {tally.overrides}",
        f"DINOv3 input size: {input_sizes(models)}",
        f"at most {MAX_DISTRACTORS} distractors per question",
        *([f"model accuracy filter: {model_filter_text(options)}"] if options.max_model_accuracy is not None else []),
        f"split seed: {options.seed}, val fraction: {options.val_fraction}",
        f"options: `{options_text}`",
        f"exported: {time}",
    ]
    terms = SourceLicense.objects.terms_of(tally.sources)
    return dataset_card(
        name=settings.BENCHMARK_NAME,
        sources={source: (terms[source], items) for source, items in tally.sources.items()},
        counts=tally.counts,
        answer_first=tally.answer_first,
        shards=view.shards,
        sizes=view.sizes,
        images=images,
        release_hash=content_sha256,
        provenance=provenance,
        release=release,
    )


def input_sizes(fingerprints) -> str:
    """The input sizes of the models that scored the exported pairs, from their rows (every process knows them;
    none reads a DINOV3_* setting)."""
    sizes = EmbeddingModel.objects.filter(fingerprint__in=list(fingerprints)).values_list("image_size", flat=True)
    return ", ".join(f"{size}px" for size in sorted(set(sizes))) or "not recorded"


# --- Targets -----------------------------------------------------------------------------------------------


def swap_into_place(staging: Path, out: Path, *, owner=None) -> None:
    """Rename the finished export into place; the previous one is kept until the new one is there (killed between
    the two renames, the clean-up puts the previous one back)."""
    if not out.exists():
        os.replace(staging, out)
        return
    old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
    entry = scratch_register(old, owner=owner, restore_to=out)
    try:
        os.replace(out, old)
        try:
            os.replace(staging, out)
        except OSError:
            os.replace(old, out)
            raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        entry.release()


REPLACE_HOW = (
    "replace it explicitly (--replace on the command line, the confirmation on the exports page, "
    '"replace": true in the API) or choose another target'
)


def check_local_target(out: Path, *, replace: bool, create_root: bool = True) -> None:
    """Refuse a target that is not ours to write: a missing parent folder (never created, except the app's own
    EXPORT_ROOT), a folder that is not an earlier export, or an earlier export unless `replace`."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MANIFEST).exists())):
        raise ExportError(f"{out} exists and is not an earlier export (no {MANIFEST}): refusing to replace it")
    if (out / MANIFEST).exists() and not replace:
        existing = describe_local_export(out)
        raise ExportTargetTaken(f"{out} already holds an export ({existing}): {REPLACE_HOW}.", existing)
    if out.parent.exists() and not out.parent.is_dir():
        in_the_way = FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(out.parent))
        raise ExportError(file_error_detail(in_the_way, what=f"Export to {out}"))
    if not out.parent.is_dir():
        if out.parent != Path(settings.EXPORT_ROOT).resolve():
            raise ExportError(
                f"{out.parent} does not exist: create the folder first, or check the path "
                "(the export never creates a missing parent folder)"
            )
        if create_root:
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise ExportError(file_error_detail(error, what=f"Export to {out}", where=out.parent)) from error


def describe_local_export(out: Path) -> str:
    """An earlier export in words: the job that wrote it when one did, else when its manifest was written."""
    job = export_jobs_at(str(out)).first()
    if job is not None:
        return f"export #{job.pk} of {job.finished:%Y-%m-%d %H:%M}"
    written = datetime.fromtimestamp((out / MANIFEST).stat().st_mtime, tz=UTC)
    return f"written {written:%Y-%m-%d %H:%M} UTC"


def check_s3_target(uri: str, *, replace: bool, job_id: int | None = None) -> None:
    """An S3 prefix with a pointer (or, from before pointers, a manifest) holds a finished export: replaced only
    when asked, or when the pointer names this very job (an earlier run of its unit uploaded it: the run that goes
    on replaces its own export, it is not another's)."""
    if replace:
        return
    current = s3_export_current(uri)
    if current is None or (job_id is not None and current.get("job") == job_id):
        return
    job = export_jobs_at(uri).first()
    bucket, _ = split_s3_uri(uri)
    where = f"s3://{bucket}/{current['manifest_key']}"
    existing = f"export #{job.pk} of {job.finished:%Y-%m-%d %H:%M}" if job else f"{where} exists"
    raise ExportTargetTaken(f"{uri} already holds an export ({existing}): {REPLACE_HOW}.", existing)


def check_target(options: ExportOptions, *, dry_run: bool = False, job_id: int | None = None) -> None:
    if options.is_s3:
        check_s3_target(options.out, replace=options.replace, job_id=job_id)
    else:
        check_local_target(Path(options.out).resolve(), replace=options.replace, create_root=not dry_run)


def export_jobs_at(out: str):
    """The finished export jobs whose files are still the ones at `out` (not marked replaced), newest first."""
    return (
        Job.objects.filter(kind=Job.Kind.EXPORT, status=Job.Status.SUCCEEDED, result__out=out)
        .exclude(result__has_key="replaced_at")
        .order_by("-finished", "-pk")
    )


def exports_mark_replaced(*, out: str, by_job: int | None) -> int:
    """Mark the earlier exports at `out` as replaced (by which job, when), so the history shows it and offers no
    dead download link. Recorded in the job's result: an export's history is its result."""
    at = timezone.now().isoformat()
    marked = 0
    with transaction.atomic():
        for job in export_jobs_at(out).exclude(pk=by_job).select_for_update():
            job.result = {**job.result, "replaced_by": by_job, "replaced_at": at}
            job.save(update_fields=["result"])
            marked += 1
    return marked


def upload_file(client, path: Path, bucket: str, key: str, beats: TransferBeats | None = None) -> None:
    """Upload one file; on top of boto3's own retries, retry a few times with a growing pause. `beats` hears of the
    bytes as they go (the unit beats while a slow upload moves). An S3 that still does not answer is an outage (the
    ExportError's cause says so: the unit pauses), anything else a failed export."""
    for attempt in range(1, UPLOAD_ATTEMPTS + 1):
        try:
            client.upload_file(str(path), bucket, key, Callback=beats)
            break
        except (ClientError, BotoCoreError, S3UploadFailedError, OSError) as error:
            if attempt == UPLOAD_ATTEMPTS:
                raise ExportError(f"upload of s3://{bucket}/{key} failed after {attempt} attempts: {error}") from error
            time.sleep(UPLOAD_PAUSE * 2 ** (attempt - 1))
    if beats is not None:
        beats.file_done()


# An S3 export is written under a version of its own, `<prefix>/versions/<version>/` (its zip beside it, as
# `<version>.zip`), and made current by the small pointer object `<prefix>/current.json`, written last: one PUT, so
# readers see the previous export or the new one, never half of either. Older versions are removed only after the
# switch. An export from before pointers sits directly under the prefix (its manifest there): read as current
# until the first export with a pointer replaces it.
POINTER = "current.json"
VERSIONS = "versions"


POINTER_MAX_BYTES = 4096  # {"version": ..., "manifest": ...}: a few dozen bytes
_VERSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _s3_pointer(body: bytes, bucket: str, key: str) -> dict:
    """The pointer object another writer of the bucket may have written, read as text from outside: bounded in size
    and nesting, its version a plain name (never a path that leaves `versions/`). ValueError naming the object."""
    where = f"s3://{bucket}/{key}"
    if len(body) > POINTER_MAX_BYTES:
        raise ValueError(f"{where} is {len(body)} bytes, over the {POINTER_MAX_BYTES} bytes of an export pointer")
    try:
        pointer = jsonlimits.loads(body)
    except ValueError as error:
        raise ValueError(f"{where} is not an export pointer ({error})") from None
    version = pointer.get("version") if isinstance(pointer, dict) else None
    if not isinstance(version, str) or not _VERSION_NAME.fullmatch(version) or set(version) == {"."}:
        raise ValueError(f"{where} is not an export pointer (no plain version name)")
    job = pointer.get("job")
    if job is not None and (type(job) is not int or job < 1):
        raise ValueError(f"{where} is not an export pointer (its job is not a job's number)")
    return pointer


def s3_key(prefix: str, name: str) -> str:
    prefix = prefix.strip("/")
    return f"{prefix}/{name}" if prefix else name


def s3_missing(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound")


def s3_export_current(uri: str, client=None) -> dict | None:
    """Where the current export at an s3:// URI lies: {"version", "root" (the key prefix of its files, ending in
    "/", or "" for the bucket's root), "manifest_key", "zip_key"}; None when the prefix holds no finished export."""
    bucket, prefix = split_s3_uri(uri)
    prefix = prefix.strip("/")
    client = client or s3_client()
    try:
        try:
            body = client.get_object(Bucket=bucket, Key=s3_key(prefix, POINTER))["Body"].read()
        except ClientError as error:
            if not s3_missing(error):
                raise
        else:
            pointer = _s3_pointer(body, bucket, s3_key(prefix, POINTER))
            version = pointer["version"]
            root = s3_key(prefix, f"{VERSIONS}/{version}/")
            return {
                "version": version,
                "root": root,
                "manifest_key": root + MANIFEST,
                "zip_key": s3_key(prefix, f"{VERSIONS}/{version}.zip"),
                "job": pointer.get("job"),
            }
        try:
            client.head_object(Bucket=bucket, Key=s3_key(prefix, MANIFEST))
        except ClientError as error:
            if s3_missing(error):
                return None
            raise
    except (ClientError, BotoCoreError, ValueError, KeyError) as error:
        raise ExportError(f"cannot read the export at {uri}: {error}") from error
    root = f"{prefix}/" if prefix else ""
    return {
        "version": None,
        "root": root,
        "manifest_key": root + MANIFEST,
        "zip_key": legacy_zip_key(prefix),
        "job": None,
    }


def legacy_zip_key(prefix: str) -> str:
    return f"{prefix.rstrip('/')}.zip" if prefix.strip("/") else "export.zip"


def s3_export_download(uri: str, folder: Path) -> dict:
    """Copy the current export at an s3:// URI (the one its pointer names) into a local folder, every file its
    manifest lists and the manifest; returns where it was read (s3_export_current)."""
    bucket, _ = split_s3_uri(uri)
    client = s3_client()
    current = s3_export_current(uri, client)
    if current is None:
        raise ExportError(f"{uri} holds no finished export (no {POINTER}, no {MANIFEST})")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        client.download_file(bucket, current["manifest_key"], str(folder / MANIFEST))
        with open(folder / MANIFEST, encoding="utf-8") as manifest:
            for line in manifest:
                name = line.rstrip("\n").split("  ", 1)[-1]
                if not name or name.startswith("/") or ".." in name.split("/"):
                    continue  # validate_dataset names a malformed line; nothing is written outside the folder
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(ClientError):  # a missing file is the validator's to report
                    client.download_file(bucket, current["root"] + name, str(folder / name))
    except (ClientError, BotoCoreError) as error:
        raise ExportError(f"cannot read the export at {uri}: {error}") from error
    return current


def export_version_name() -> str:
    """A new version's name: sortable by time (pruning keeps the newer ones), unique by its random tail."""
    return f"{timezone.now().astimezone(UTC):%Y%m%dT%H%M%S%fZ}-{uuid.uuid4().hex[:8]}"


def upload_export(staging: Path, uri: str, *, version: str, progress=None) -> dict:
    """Upload the export as `version` of the prefix (images first, then data files and card, then the zip, the
    version's manifest last). No reader sees it until `s3_export_switch` points the prefix at it: a failure at
    any step leaves the previous export current, whole and valid. The unit (`progress`, a JobRun) beats while the
    bytes go."""
    bucket, prefix = split_s3_uri(uri)
    prefix = prefix.strip("/")
    client = s3_client()
    beats = TransferBeats(progress)
    root = s3_key(prefix, f"{VERSIONS}/{version}/")
    for want_images in (True, False):  # two streaming passes over the manifest: images, then the rest
        with open(staging / MANIFEST, encoding="utf-8") as manifest:
            for line in manifest:
                name = line.rstrip("\n").split("  ", 1)[1]
                if name.startswith("images/") == want_images:
                    upload_file(client, staging / name, bucket, root + name, beats)
    archive = staging.parent / f"{staging.name}.zip"
    zip_folder(staging, archive, beat=beats.file_done)
    zip_key = s3_key(prefix, f"{VERSIONS}/{version}.zip")
    upload_file(client, archive, bucket, zip_key, beats)
    archive.unlink()
    upload_file(client, staging / MANIFEST, bucket, root + MANIFEST, beats)
    return {"zip_key": zip_key, "bucket": bucket, "version": version, "root": f"s3://{bucket}/{root}"}


def s3_export_switch(uri: str, version: str, *, job_id: int | None = None) -> None:
    """Make an uploaded version the prefix's current export: the pointer, one PUT, then the removal of what the
    previous export had. The pointer names the job (`job_id`) whose export it is (check_s3_target)."""
    bucket, prefix = split_s3_uri(uri)
    prefix = prefix.strip("/")
    client = s3_client()
    previous = s3_export_current(uri, client)
    with scratch_file("pointer", suffix=".json") as pointer:
        fields = {"version": version, "manifest": f"{VERSIONS}/{version}/{MANIFEST}"}
        if job_id is not None:
            fields["job"] = job_id
        pointer.write_text(json.dumps(fields) + "\n")
        upload_file(client, pointer, bucket, s3_key(prefix, POINTER))  # the switch
    s3_export_prune(client, bucket, prefix, keep=version, previous=previous)


def s3_version_remove(uri: str, version: str) -> None:
    """Remove an uploaded version that no pointer names (an export that failed, lost the race to its target, or
    died before its switch). A failure is logged: the next export at the prefix prunes it."""
    if not _VERSION_NAME.fullmatch(version or "") or set(version) == {"."}:
        return
    bucket, prefix = split_s3_uri(uri)
    prefix = prefix.strip("/")
    root = s3_key(prefix, f"{VERSIONS}/{version}/")
    try:
        client = s3_client()
        keys = [s3_key(prefix, f"{VERSIONS}/{version}.zip")]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=root):
            keys += [item["Key"] for item in page.get("Contents", [])]
        for start in range(0, len(keys), 1000):
            chunk = [{"Key": key} for key in keys[start : start + 1000]]
            client.delete_objects(Bucket=bucket, Delete={"Objects": chunk, "Quiet": True})
    except (ClientError, BotoCoreError) as error:
        log.warning("export at %s: version %s not removed yet (%s)", uri, version, error)


def s3_export_prune(client, bucket: str, prefix: str, *, keep: str, previous: dict | None) -> list[str]:
    """After the switch to `keep`: remove the versions older than it (the previous export, and what a cut upload
    left) and the files of an export from before pointers. A failure is logged, not raised: the new export is in
    place, and the next export at this prefix prunes again. Returns the keys removed."""
    doomed = []
    try:
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket, Prefix=s3_key(prefix, f"{VERSIONS}/")):
            for item in page.get("Contents", []):
                name = item["Key"][len(s3_key(prefix, f"{VERSIONS}/")) :]
                version = name.split("/", 1)[0].removesuffix(".zip")
                if version < keep:
                    doomed.append(item["Key"])
        if previous is not None and previous["version"] is None:  # the flat export from before pointers
            body = client.get_object(Bucket=bucket, Key=previous["manifest_key"])["Body"].read().decode()
            doomed += [previous["root"] + line.split("  ", 1)[1] for line in body.splitlines() if "  " in line]
            doomed += [previous["manifest_key"], previous["zip_key"]]
        for start in range(0, len(doomed), 1000):
            chunk = [{"Key": key} for key in doomed[start : start + 1000]]
            client.delete_objects(Bucket=bucket, Delete={"Objects": chunk, "Quiet": True})
    except (ClientError, BotoCoreError) as error:
        log.warning("export at s3://%s/%s: older versions not removed yet (%s)", bucket, prefix, error)
        return []
    return doomed


def zip_folder(folder: Path, archive: Path, *, progress=None, owner=None, beat=None) -> None:
    """A stored (not deflated: JPEGs do not shrink) zip of an export, files in manifest order, streamed into a part
    file (in the clean-up's ledger, held by `owner`) renamed into place when whole. `progress` counts files; `beat`
    is called after each (a unit's heartbeat, throttled)."""
    part = archive.parent / f".{archive.name}.part-{uuid.uuid4().hex[:8]}"
    entry = scratch_register(part, owner=owner)
    try:
        with open(folder / MANIFEST, encoding="utf-8") as manifest:
            names = [line.rstrip("\n").split("  ", 1)[1] for line in manifest]
        if progress is not None:
            progress.start(len(names) + 1)
        with zipfile.ZipFile(part, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            for done, name in enumerate(names, start=1):
                zf.write(folder / name, name)
                if beat is not None:
                    beat()
                if progress is not None and done % ZIP_PROGRESS_EVERY == 0:
                    progress.advance(ZIP_PROGRESS_EVERY)
            zf.write(folder / MANIFEST, MANIFEST)
        os.replace(part, archive)
        if progress is not None:
            progress.advance(len(names) % ZIP_PROGRESS_EVERY + 1)
    except BaseException:  # a full disk mid-zip, a cancelled job: no half-written zip stays behind
        part.unlink(missing_ok=True)
        raise
    finally:
        entry.release()


# --- Staging and the switch into place ---------------------------------------------------------------------------

# The first key of the advisory lock on an export's target ("TRGT"; the second, a hash of the target).
TARGET_LOCK = 0x54524754


@contextlib.contextmanager
def export_target_lock(out: str):
    """Hold the right to switch files into `out` (a resolved folder or an s3:// URI) for the few moments of a switch:
    two exports at once to one target check it and switch in turn, so the second sees the first's files. The lock
    belongs to the database session (a worker that dies lets go of it with its connection); it is re-entrant."""
    if str(out).startswith("s3://"):  # one prefix, however its slashes are written
        bucket, prefix = split_s3_uri(str(out))
        out = f"s3://{bucket}/{prefix.strip('/')}"
    key = int.from_bytes(hashlib.sha256(str(out).encode()).digest()[:4], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", [TARGET_LOCK, key])
    try:
        yield
    finally:
        with contextlib.suppress(DatabaseError), connection.cursor() as cursor:  # a lost connection let go already
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [TARGET_LOCK, key])


@dataclass
class Staged:
    """An export written under its staging name, not yet in place: a hidden folder beside a local target (`folder`,
    in the clean-up's ledger until switched), or a version under an S3 prefix that the pointer does not name yet."""

    out: str  # the resolved folder, or the s3:// URI
    folder: Path | None = None
    version: str | None = None
    owner: object = None
    entry: object = None  # the ledger entry of a local staging folder
    job_id: int | None = None  # the export job, named by an S3 pointer

    @property
    def name(self) -> str:
        """What a reservation records of it: the folder, or the S3 version's name."""
        return str(self.folder) if self.folder is not None else self.version

    def holds(self, manifest_sha256: str) -> bool:
        """Whether the staging holds a whole export with this manifest (the manifest is written last)."""
        if self.folder is not None:
            try:
                return file_sha256(self.folder / MANIFEST) == manifest_sha256
            except OSError:
                return False
        bucket, prefix = split_s3_uri(self.out)
        key = s3_key(prefix.strip("/"), f"{VERSIONS}/{self.version}/{MANIFEST}")
        try:
            body = s3_client().get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as error:
            if s3_missing(error):
                return False
            raise ExportError(f"cannot read s3://{bucket}/{key}: {error}") from error
        return hashlib.sha256(body).hexdigest() == manifest_sha256

    def switch(self) -> None:
        """Put it in place: rename the folder (the previous export kept until the new one is there), or switch the
        pointer to the version."""
        if self.folder is not None:
            swap_into_place(self.folder, Path(self.out), owner=self.owner)
        else:
            s3_export_switch(self.out, self.version, job_id=self.job_id)

    def remove(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        elif self.version:
            s3_version_remove(self.out, self.version)

    def close(self) -> None:
        if self.entry is not None:
            self.entry.release()
            self.entry = None


def staging_owner_record(owner) -> dict:
    """Who writes a release's staging, as its reservation records it: the scratch ledger's owner, and the host (its
    clean-up, on that host, finishes a local target's release) and process."""
    return {**owner_record(owner), "host": socket.gethostname(), "pid": os.getpid()}


def staged_local(out: Path, owner) -> Staged:
    """A new hidden staging folder beside `out` (`.<name>.tmp-xxxxxxxx`), in the clean-up's ledger from now."""
    folder = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    return Staged(out=str(out), folder=folder, owner=owner, entry=scratch_register(folder, owner=owner))


def staged_of_reservation(reservation: ReleaseReservation) -> Staged | None:
    """The staging a reservation records (of the attempt that wrote last, or that made the release); None when it
    records none, or a path that is not a staging folder beside its target."""
    if not reservation.staging:
        return None
    if reservation.target.startswith("s3://"):
        return Staged(out=reservation.target, version=reservation.staging, job_id=reservation.export_job_id)
    out, folder = Path(reservation.target), Path(reservation.staging)
    if folder.parent != out.parent or not re.fullmatch(rf"\.{re.escape(out.name)}\.tmp-[0-9a-f]{{8}}", folder.name):
        return None  # never remove or rename a path that is not one this export named
    return Staged(out=reservation.target, folder=folder)


def export_target_holds(out: str, manifest_sha256: str) -> bool:
    """Whether the export in place at `out` is the one with this manifest."""
    if not out.startswith("s3://"):
        try:
            return file_sha256(Path(out) / MANIFEST) == manifest_sha256
        except OSError:
            return False
    current = s3_export_current(out)
    if current is None:
        return False
    bucket, _ = split_s3_uri(out)
    try:
        body = s3_client().get_object(Bucket=bucket, Key=current["manifest_key"])["Body"].read()
    except ClientError as error:
        if s3_missing(error):
            return False
        raise ExportError(f"cannot read the export at {out}: {error}") from error
    return hashlib.sha256(body).hexdigest() == manifest_sha256


def write_staged(
    options: ExportOptions,
    plan: Plan,
    result: dict,
    progress,
    *,
    job_id: int | None,
    draft: ReleaseDraft | None = None,
    reservation: ReleaseReservation | None = None,
) -> Staged:
    """Write the export under its staging name (a hidden folder beside a local target; a new version under an S3
    prefix, staged locally first), recorded on the release's reservation before any file is written. A failure
    removes what this attempt wrote; a kill leaves it to the retry or the clean-up."""
    progress.start(plan.total)
    owner = scratch_owner(progress, job_id)
    if options.is_s3:
        staged = Staged(out=options.out, version=export_version_name(), owner=owner, job_id=job_id)
        if reservation is not None:
            release_reservation_stage(reservation, staging=staged.name, owner=staging_owner_record(owner))
        try:
            with scratch_folder("export", owner=owner) as tmp:
                folder = tmp / "export"
                result.update(write_export(options, plan, folder, progress, draft=draft))
                result.update(upload_export(folder, options.out, version=staged.version, progress=progress))
        except OSError as error:  # the local staging folder: a full disk, a missing or read-only scratch folder
            staged.remove()
            what = f"Export to {options.out}"
            raise ExportError(file_error_detail(error, what=what, where=scratch_root())) from error
        except BaseException:
            staged.remove()
            raise
        return staged
    out = Path(options.out).resolve()
    staged = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staged = staged_local(out, owner)  # a killed export's staging folder is in the ledger, wherever the target is
        if reservation is not None:
            release_reservation_stage(reservation, staging=staged.name, owner=staging_owner_record(owner))
        result.update(write_export(options, plan, staged.folder, progress, draft=draft))
    except OSError as error:  # a full disk, a missing or read-only target: one line with the path, not a traceback
        if staged is not None:
            staged.remove()
            staged.close()
        raise ExportError(file_error_detail(error, what=f"Export to {out}", where=out.parent)) from error
    except BaseException:
        if staged is not None:
            staged.remove()
            staged.close()
        raise
    result["out"] = str(out)
    return staged


def place_staged(options: ExportOptions, staged: Staged, *, job_id: int | None, publish=None) -> Release | None:
    """Switch the staged export into place under its target's lock, after checking the target once more (an export
    may have landed there while this one was written: the second of two at once fails, and removes its staging,
    unless it replaces). With `publish` (a function of the staging's name that makes the release and commits it),
    the release is made first and the files switched after: files in place always have their release.

    Returns the release (None without `publish`). A release that another copy of the same job made first is
    returned as it is, this copy's staging removed: its own files are the caller's to place (`release_files_place`).
    """
    release = None
    try:
        with export_target_lock(staged.out):
            try:
                check_target(options, job_id=job_id)
                if publish is not None:
                    release = publish(staged.name)
            except BaseException:
                staged.remove()
                raise
            if release is not None and release.reservation.staging != staged.name:
                staged.remove()
                return release
            try:
                staged.switch()
            except OSError as error:
                if release is None:
                    staged.remove()
                raise ExportError(file_error_detail(error, what=f"Export to {staged.out}", where=staged.out)) from error
            if release is not None:
                release_reservation_mark_placed(release.reservation)
    finally:
        staged.close()
    exports_mark_replaced(out=staged.out, by_job=job_id)
    return release


def staging_remove_abandoned(reservation: ReleaseReservation, *, force: bool = False) -> str | None:
    """Remove the staging an earlier attempt of the reservation's export left (a killed worker, a lost database
    connection) once its writer is gone (or `force`: the reservation was given back); a live writer's (a second
    copy of the unit) is left to it. Returns what was removed."""
    staged = staged_of_reservation(reservation)
    if staged is None or (not force and reservation.staging_owner and owner_alive(reservation.staging_owner)):
        return None
    staged.remove()
    log.warning("release %s: removed the staging of an earlier attempt (%s)", reservation.name, staged.name)
    return staged.name


def release_stage_from_database(release: Release, out: str, owner) -> Staged:
    """Write a made release's files under a new staging name from the database alone (its staging was lost)."""
    if out.startswith("s3://"):
        staged = Staged(out=out, version=export_version_name(), owner=owner)
        try:
            with scratch_folder("release", owner=owner) as tmp:
                release_files_write(release=release, out=tmp / "export")
                upload_export(tmp / "export", out, version=staged.version)
        except BaseException:
            staged.remove()
            raise
        return staged
    staged = staged_local(Path(out), owner)
    try:
        release_files_write(release=release, out=staged.folder)
    except BaseException:
        staged.close()
        raise
    return staged


def release_files_place(reservation: ReleaseReservation, *, owner=None) -> None:
    """Put a made release's files in place at its target, once: for an export that died between making its release
    and switching its files (its retry, or the clean-up once it is gone). The staging it left is switched into
    place; when that is gone (removed by the clean-up, a lost disk) the files are written again from the database,
    byte for byte. A target taken meanwhile by another export is left alone: ReleaseError says how to get the
    files."""
    release = reservation.release
    options = ExportOptions.from_dict(release.options)
    with export_target_lock(reservation.target):
        reservation.refresh_from_db()
        if reservation.placed is not None:
            return
        if not export_target_holds(reservation.target, release.manifest_sha256):
            staged = staged_of_reservation(reservation)
            if staged is None or not staged.holds(release.manifest_sha256):
                if staged is not None:
                    staged.remove()
                staged = release_stage_from_database(release, reservation.target, owner)
            try:
                try:
                    check_target(options)
                except ExportError as error:
                    staged.remove()
                    raise ReleaseError(
                        f"Release {release.name} is made, but its files cannot be put in place: {error} Write them "
                        f"with `manage.py release_files {release.name} DIR`."
                    ) from error
                try:
                    staged.switch()
                except OSError as error:
                    what = f"Files of release {release.name}"
                    raise ReleaseError(file_error_detail(error, what=what, where=reservation.target)) from error
            finally:
                staged.close()
            log.warning("release %s: its files were switched into place at %s after its export stopped", release.name,
                        reservation.target)  # fmt: skip
        release_reservation_mark_placed(reservation)
    exports_mark_replaced(out=reservation.target, by_job=reservation.export_job_id)


def releases_finish_abandoned(*, in_bucket: bool | None = None) -> dict:
    """The clean-up's part for releases whose export died: a made release whose files were never switched into
    place is placed (from its staging, or from the database); a number whose release was never made is given back
    and its staging removed. Only where the export is gone (its job ended, its command-line process died).
    `in_bucket`: the releases of S3 targets (True, the shared part), of local targets on this host (False)."""
    placed, given_back, problems = [], [], []
    for reservation in release_reservations_unplaced(in_bucket=in_bucket):
        if not release_reservation_owner_gone(reservation):
            continue
        try:
            release_files_place(reservation)
            placed.append(reservation.release.name)
        except (ServiceError, OSError) as error:
            problems.append(f"{reservation.release.name}: {error}")
            log.warning("release %s: files not placed: %s", reservation.release.name, error)
    for reservation in release_reservations_abandoned(in_bucket=in_bucket):
        staging_remove_abandoned(reservation, force=True)
        given_back.append(reservation.name)
    return {"placed": placed, "given_back": given_back, "problems": problems}


# --- Services ----------------------------------------------------------------------------------------------


def benchmark_export(
    *,
    options: ExportOptions,
    progress=None,
    dry_run: bool = False,
    job_id: int | None = None,
    published_by=None,
    hands_out: bool = False,
) -> dict:
    """Export the benchmark to options.out (a folder or s3://bucket/prefix); returns counts and provenance.

    The target is checked first (parent folder, an earlier export and `replace`), and again when the files are
    switched into place; earlier export jobs at the same target are marked replaced by `job_id` (None: the command
    line) once the new export is in place. With `options.release` the export is published as the next release of
    its series (v, or exp for a sweep's): its number is reserved before any file is written, the release is made
    with it once the files wait at their staging name, then they are switched into place. A job (or a command-line
    run again at the same target) whose release is made already writes nothing again: it puts that release's files
    in place if its earlier run died before, and answers that release.
    """
    progress = progress or NoProgress()
    if options.release and not dry_run:
        made = release_made_for(job_id=job_id, target=export_target_name(options))
        if made is not None:
            release_files_place(made, owner=scratch_owner(progress, job_id))
            return release_export_result(made.release)
    if options.is_s3:
        split_s3_uri(options.out)  # a malformed URI fails before any work
    target_problem = None
    try:
        check_target(options, dry_run=dry_run, job_id=job_id)
    except ExportError as error:
        if not dry_run:
            raise
        target_problem = str(error)  # a dry run still gives the counts, and says what a real run would refuse
    plan = plan_export(options)
    result = {
        "out": options.out,
        "target": "s3" if options.is_s3 else "local",
        "options": options.as_dict(),
        "model_filter": model_filter_text(options),
        "considered": plan.total,
        "skipped": plan.skipped[:SKIPPED_KEPT],
        "skipped_count": plan.skipped_count,
    }
    totals = split_totals(plan.counts)
    experiment = options.sweep is not None
    if dry_run:
        return {
            **result,
            "dry_run": True,
            "items": sum(totals.values()),
            "splits": totals,
            "left_out": [split for split in SPLITS if not totals[split]],
            "warnings": left_out_warnings(totals),
            "counts": plan.counts,
            "swapped": len(plan.swapped),
            "target_problem": target_problem,
            "release_next": (
                release_name(number=release_next_number(experiment=experiment), experiment=experiment)
                if options.release
                else None
            ),
        }
    if not options.release:
        staged = write_staged(options, plan, result, progress, job_id=job_id)
        place_staged(options, staged, job_id=job_id)
        pairs_record_export_split(plan)
        return result
    if not sum(totals.values()):
        why = (
            f"none of the {plan.total} pair(s) considered can be exported ({plan.skipped_count} left out, each "
            "with its reason)"
            if plan.total
            else "no pair is accepted and passes the similarity check under these options"
        )
        raise ReleaseError(f"Nothing to publish: {why}, so no release was made.")
    release, made_here = publish_as_release(
        options, plan, result, progress, job_id=job_id, published_by=published_by, hands_out=hands_out
    )
    if not made_here:  # another copy of this job made it: answer that one
        return release_export_result(release)
    pairs_record_export_split(plan)
    result["release"] = {"number": release.number, "name": release.name, "title": release.title}
    return result


def export_target_name(options: ExportOptions) -> str:
    """The target as reservations and job results name it: the resolved folder, or the s3:// URI."""
    return options.out if options.is_s3 else str(Path(options.out).resolve())


def publish_as_release(
    options: ExportOptions, plan: Plan, result: dict, progress, *, job_id: int | None, published_by, hands_out: bool
) -> tuple[Release, bool]:
    """Reserve the number, write the files under their staging name, make the release and switch the files into
    place (see benchmark_export); (the release, whether this run made it: False when another copy of the same job
    made it first). A failure gives the number back and says so; a lost database connection keeps it for the task's
    retry, which resumes."""
    experiment = options.sweep is not None
    owner = scratch_owner(progress, job_id)
    reservation, given_back = release_reserve(experiment=experiment, target=export_target_name(options), job_id=job_id)
    for stale in given_back:
        staging_remove_abandoned(stale, force=True)
    try:
        if reservation.release_id is not None:  # a copy of this job made it since the check in benchmark_export
            release_files_place(reservation, owner=owner)
            return reservation.release, False
        staging_remove_abandoned(reservation)
        title = options.release_title
        with ReleaseDraft(number=reservation.number, experiment=experiment, title=title) as draft:
            staged = write_staged(options, plan, result, progress, job_id=job_id, draft=draft, reservation=reservation)
            if options.is_s3 and not export_kept_by_the_app(options.out):
                how, where = ReleasePublication.How.S3_TARGET, result.get("root") or options.out
            else:
                how, where = (ReleasePublication.How.CLI_EXPORT if hands_out else None), result["out"]

            def publish(staging: str) -> Release:
                return release_publish(
                    reservation=reservation,
                    staging=staging,
                    draft=draft,
                    options=options,
                    result=result,
                    left_out=plan.skipped,
                    user=published_by,
                    published_how=how,
                    published_where=where,
                )

            release = place_staged(options, staged, job_id=job_id, publish=publish)
        if release.reservation.staging != staged.name:  # another copy of this job made it: its files, placed once
            release_files_place(release.reservation, owner=owner)
            return release, False
        return release, True
    except (OperationalError, InterfaceError):
        raise  # the database is away: the task retries with this reservation and resumes
    except BaseException as error:
        given = False
        with contextlib.suppress(DatabaseError):
            given = release_reservation_withdraw(reservation)
        if given and isinstance(error, ServiceError):
            error.args = (*error.args, f"No release was made: {reservation.name} is free again.")
        raise
    finally:
        release_reservation_done(reservation)


def release_export_result(release: Release) -> dict:
    """The result of an export job that published `release` already, from the release's own record (a replayed job
    answers it, and writes nothing)."""
    options = release.options
    totals = split_totals(release.counts)
    result = {
        "out": options["out"],
        "target": "s3" if options["out"].startswith("s3://") else "local",
        "options": options,
        "considered": release.item_count + len(release.left_out),
        "skipped": release.left_out[:SKIPPED_KEPT],
        "skipped_count": len(release.left_out),
        "items": release.item_count,
        "splits": totals,
        "left_out": [split for split in SPLITS if not totals[split]],
        "warnings": left_out_warnings(totals),
        "images": release.image_count,
        "counts": release.counts,
        "manifest_sha256": release.manifest_sha256,
        "content_sha256": release.content_sha256,
        "release": {"number": release.number, "name": release.name, "title": release.title},
    }
    if result["target"] == "s3":
        bucket, _ = split_s3_uri(options["out"])
        current = s3_export_current(options["out"]) or {}
        result.update({"bucket": bucket, "zip_key": current.get("zip_key"), "version": current.get("version")})
    else:
        result["out"] = str(Path(options["out"]).resolve())
    return result


def scratch_owner(progress, job_id: int | None):
    """Who holds an export's temporary paths, for the clean-up: the claimed unit (a JobRun), the job, or this
    process (the command line)."""
    return progress if hasattr(progress, "token") else job_id


@transaction.atomic
def pairs_record_export_split(plan: Plan) -> None:
    """Note on each pair the split this (now the latest) export put it in, for the data manager's split filter."""
    Pair.objects.exclude(export_split="").update(export_split="")
    val = set(plan.val)
    test = [pk for pk in plan.included if pk not in val]
    for split, ids in (("val", sorted(val)), ("test", test)):
        for start in range(0, len(ids), 10_000):
            Pair.objects.filter(pk__in=ids[start : start + 10_000]).update(export_split=split)


def export_start(*, options: ExportOptions, user, idempotency_key: str = "") -> Job:
    """Record an export job and its unit in one transaction; the unit is queued once committed (with the broker
    away it waits, pending, for the sweeper). The same key from the same user returns the first job. A target
    that already holds an export is refused (ExportTargetTaken) unless the options say replace; the job checks
    again when it runs."""
    from annotator.jobs.services import job_create_once, job_task_add

    @transaction.atomic
    def create() -> Job:
        check_target(options)
        if options.max_model_accuracy is not None:
            model_filter_endpoints(options)  # an unknown model name is refused now, not when the job runs
        job = Job.objects.create(
            kind=Job.Kind.EXPORT,
            title=f"Export to {options.out}",
            created_by=user,
            idempotency_key=idempotency_key,
            result={"options": options.as_dict()},
        )
        job_task_add(job=job, name="annotator.tasks.export_benchmark_task", kwargs={"job_id": job.pk})
        return job

    return job_create_once(create, user=user, kind=Job.Kind.EXPORT, key=idempotency_key)[0]


def export_run(*, job_id: int, unit=None) -> Job:
    """Run a queued export job once: its unit is claimed with a compare-and-set, so a redelivered task (or a second
    worker) finds it taken or done and changes nothing. A cancelled job stops at its next item."""
    from django.db import InterfaceError, OperationalError

    from annotator.jobs.services import job_task_claim, job_unit
    from annotator.models import JobCancelled

    unit = job_unit(job_id, unit)
    run = job_task_claim(unit=unit) if unit.unit_id is not None else None
    job = run.job if run is not None else Job.objects.get(pk=job_id)
    if (run is None and unit.unit_id is not None) or not job.is_active:
        return job
    job.count_afresh()  # a re-run writes the whole export again
    options = ExportOptions.from_dict(job.result["options"])
    try:
        result = benchmark_export(options=options, progress=run or job, job_id=job.pk, published_by=job.created_by)
    except JobCancelled:
        if run is not None:
            run.cancel()
        job.refresh_from_db()
        return job
    except (OperationalError, InterfaceError):
        raise  # the database is away: the task retries and runs the export again
    except Exception as error:
        if outage_of(error) is not None:
            raise  # the storage is away: the task pauses the unit and runs it again later (job_task_failed)
        if not isinstance(error, ExportError | ReleaseError):
            job.finish(result={"options": options.as_dict()}, error=f"unexpected error: {error!r}")
            raise
        job.finish(result={"options": options.as_dict()}, error=str(error))
    else:
        job.finish(result=result)
    if run is not None:
        run.complete()
    return job


# An export folder's name, as the page and the API take it: letters, digits, - and _ only (no path, no "~", no markup).
EXPORT_FOLDER_NAME = re.compile(r"[A-Za-z0-9_-]+")


def export_root_for_web() -> str:
    """Where page-started exports (and sweeps' releases) go: EXPORT_ROOT; with media in S3, the media bucket's
    EXPORT_S3_PREFIX, which every host reads (a folder on a worker's own disk would be out of the web's reach)."""
    if media_in_bucket():
        return f"s3://{settings.S3_BUCKET}/{settings.EXPORT_S3_PREFIX}/"
    return str(Path(settings.EXPORT_ROOT))


def export_folder_for_web(name: str) -> str:
    """Where a page-started export goes: a plain name under `export_root_for_web`, never an arbitrary path."""
    if not name or not EXPORT_FOLDER_NAME.fullmatch(name):
        raise Invalid({"target": ["The folder name must be a plain name (letters, digits, - and _), not a path."]})
    if len(name) > EXPORT_NAME_MAX:
        raise Invalid({"target": [f"The folder name has {len(name)} characters; at most {EXPORT_NAME_MAX}."]})
    if media_in_bucket():
        return export_root_for_web() + name
    return str(Path(settings.EXPORT_ROOT) / name)


def export_kept_by_the_app(out: str) -> bool:
    """An export in the media bucket's EXPORT_S3_PREFIX is the app's own storage, as EXPORT_ROOT is: writing it there
    hands nothing out (its zip's download does); any other s3:// target is someone's bucket, public once written."""
    return media_in_bucket() and out.startswith(export_root_for_web())


def export_gone_reason(job: Job) -> str | None:
    """Why a finished export can no longer be downloaded (replaced, or its folder removed), or None.

    From the job's record and one stat of the manifest: cheap enough for every row of the history.
    """
    result = job.result or {}
    if "replaced_at" in result:
        by = f"export #{result['replaced_by']}" if result.get("replaced_by") else "an export from the command line"
        return f"Replaced by {by} at {result['replaced_at'][:16].replace('T', ' ')}."
    if result.get("target") == "local" and not (Path(result["out"]) / MANIFEST).exists():
        return "Removed: its folder no longer holds an export."
    return None


def export_zip_source(job: Job) -> Path:
    """The folder of a finished local export that still holds its files (else ExportGone, or ExportError)."""
    result = job.result or {}
    if job.kind != Job.Kind.EXPORT or job.status != Job.Status.SUCCEEDED or result.get("target") != "local":
        raise ExportError("Only a finished export to a local folder can be downloaded as a zip.")
    folder = Path(result["out"])
    gone = export_gone_reason(job)
    if gone is None:
        try:
            if file_sha256(folder / MANIFEST) != result["manifest_sha256"]:
                gone = "Replaced: a later export (not recorded in this history) wrote other files there."
        except FileNotFoundError:
            gone = "Removed: its folder no longer holds an export."
    if gone:
        raise ExportGone(f"{folder} no longer holds this export. {gone}")
    return folder


def export_zip_path(job: Job) -> Path:
    """Where the zip of a local export is (or will be): named by its manifest's hash, built once, shared by every
    export job with the same files."""
    return Path(settings.EXPORT_ROOT) / ".zips" / f"{job.result['manifest_sha256']}.zip"


def export_zip_jobs(job: Job):
    """The zip jobs of this export's files (any export job with the same manifest), newest first."""
    return Job.objects.filter(kind=Job.Kind.ZIP, result__manifest_sha256=job.result["manifest_sha256"]).order_by(
        "-created", "-pk"
    )


def export_zip_start(*, job: Job, user) -> Job | None:
    """Queue the job that builds the zip of a local export (a worker writes it; the web only serves the file). A zip
    that exists already needs none (None); a zip job of the same files that is queued or running is answered
    instead of a second one. The export's row is locked meanwhile, so two requests at once make one job."""
    from annotator.jobs.services import job_task_add

    export_zip_source(job)
    with transaction.atomic():
        Job.objects.select_for_update().filter(pk=job.pk).first()
        if export_zip_path(job).exists():
            return None
        building = export_zip_jobs(job).filter(status__in=(Job.Status.QUEUED, Job.Status.RUNNING)).first()
        if building is not None:
            return building
        zip_job = Job.objects.create(
            kind=Job.Kind.ZIP,
            title=f"Zip of export #{job.pk} ({Path(job.result['out']).name})",
            created_by=user,
            result={"export_job": job.pk, "manifest_sha256": job.result["manifest_sha256"]},
        )
        job_task_add(job=zip_job, name="annotator.tasks.export_zip_task", kwargs={"job_id": zip_job.pk})
    return zip_job


def export_zip_run(*, job_id: int, unit=None) -> Job:
    """Build the zip of a zip job's export once: its unit is claimed with a compare-and-set (a redelivery finds it
    taken or done); a zip already there is not built again. The part file is in the clean-up's ledger under this
    claim, so a killed worker's part is removed once its heartbeat is stale."""
    from annotator.jobs.services import job_task_claim, job_unit
    from annotator.models import JobCancelled

    unit = job_unit(job_id, unit)
    run = job_task_claim(unit=unit) if unit.unit_id is not None else None
    job = run.job if run is not None else Job.objects.get(pk=job_id)
    if (run is None and unit.unit_id is not None) or not job.is_active:
        return job
    job.count_afresh()  # a re-run zips every file again
    export = Job.objects.get(pk=job.result["export_job"])
    result = {**job.result}
    try:
        folder = export_zip_source(export)
        archive = export_zip_path(export)
        try:
            archive.parent.mkdir(parents=True, exist_ok=True)
            if not archive.exists():
                zip_folder(folder, archive, progress=run or job, owner=run or job.pk)
        except OSError as error:
            raise ExportError(file_error_detail(error, what=f"The zip of {folder}", where=archive.parent)) from error
    except JobCancelled:
        if run is not None:
            run.cancel()
        job.refresh_from_db()
        return job
    except (ExportError, ExportGone) as error:
        job.finish(result=result, error=str(error))
    else:
        job.finish(result={**result, "archive": str(archive), "size": archive.stat().st_size})
    if run is not None:
        run.complete()
    return job


def export_files_handed_out(*, job: Job, user, where: str) -> None:
    """An export's files left the server by a download of its zip: stamped on the job (`Job.PUBLIC_SINCE`, once) and,
    for the release the export made, recorded as a publication (who, when, where), from which its pairs are public."""
    job.mark_files_public()
    for release in Release.objects.filter(export_job=job):
        release_publication_record(release=release, how=ReleasePublication.How.ZIP_DOWNLOAD, who=user, where=where)


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


# --- Clean-up after crashes ------------------------------------------------------------------------------------

# The hidden names an export gives its temporary paths beside a target: a staging folder, the previous export moved
# aside during a swap, a zip being written. New ones are in the clean-up's ledger (annotator/jobs/scratch.py);
# the names find those left by a version before the ledger.
STAGING_NAME = re.compile(r"^\..+\.(tmp|old)-[0-9a-f]{8}(\.zip)?$|^\..+\.zip\.part-[0-9a-f]{8}$")


def export_staging_remove_stale(*, older_than: float, folders=None) -> list[str]:
    """Remove the hidden staging folders, previous exports moved aside and zip parts that a killed export or zip job
    left beside its target (`.<name>.tmp-xxxxxxxx`, `.<name>.old-xxxxxxxx`, `.<name>.zip.part-xxxxxxxx`) and that
    the ledger does not hold, once untouched for `older_than` seconds; a previous export moved aside goes back to
    its place when that is empty. Looks in EXPORT_ROOT, its zips and beside every local target of an export job.
    Returns the paths removed."""
    places = {Path(settings.EXPORT_ROOT), Path(settings.EXPORT_ROOT) / ".zips"}
    for out in Job.objects.filter(kind=Job.Kind.EXPORT).values_list("result__options__out", flat=True):
        if out and not str(out).startswith("s3://"):
            places.add(Path(out).resolve().parent)
    places.update(Path(folder) for folder in folders or ())
    registered = scratch_paths()
    removed, cutoff = [], time.time() - older_than
    for place in sorted(places):
        if not place.is_dir():
            continue
        for entry in place.iterdir():
            if not STAGING_NAME.match(entry.name) or str(entry) in registered or newest_mtime(entry) > cutoff:
                continue
            moved_aside = re.fullmatch(r"\.(.+)\.old-[0-9a-f]{8}", entry.name)
            if moved_aside and entry.is_dir() and not (place / moved_aside[1]).exists():
                os.replace(entry, place / moved_aside[1])
            elif entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(str(entry))
    return removed

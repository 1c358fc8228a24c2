"""Releases: an export published as the next numbered version (v1, v2, ...), its files written again from the
database alone, and what changed since the release before.

`release_publish` runs inside `benchmark_export` once the files are in place: the Release and every ReleaseItem in
one transaction, numbered under a lock, one release per export job. `release_files_write` rebuilds the folder byte
for byte (the Parquet view as the same pyarrow writes it) and checks every image against the hash the export
recorded. `release_diff` compares two releases by item
id and says why each item came, went or changed. `release_publication_record` records each time a release's files leave
the server: from the first, its pairs count as public.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from django.core.files.storage import default_storage
from django.db import DatabaseError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from annotator.hub_view import hub_view_write
from annotator.jobs.scratch import scratch_register
from annotator.models import Category, Domain, Pair, Release, ReleaseItem, ReleasePublication
from benchmark.card import split_totals
from benchmark.records import CARD, FIELDS, ITEMS_METADATA, MANIFEST, SPLITS, split_path
from subtlebench.errors import Conflict, Invalid, NotFound, file_error_detail

# One key for every advisory lock on release numbers ("RELS"): pg_advisory_lock is re-entrant within a session.
RELEASE_LOCK = 0x52454C53
CHUNK = 2000
DIFF_SHOWN = 300  # rows a diff section lists; the counts are always exact


class ReleaseError(Conflict):
    """A release could not be made or its files not written again (another publish under way, a stored image that
    changed, a target in the way); nothing half-made is left."""


# --- Publishing ---------------------------------------------------------------------------------------------------

DRAFT_FIELDS = (
    "item_id",
    "split",
    "position",
    "line",
    "provenance",
    "category",
    "domain",
    "cluster",
    "swapped",
    "image_1",
    "image_2",
    "image_1_sha256",
    "image_2_sha256",
    "pair",
)


class ReleaseDraft:
    """What an export keeps of each item while it writes it, for its ReleaseItem: spooled to a temporary file
    (one JSON line per item) so that memory stays flat however many items there are."""

    def __init__(self, *, number: int, title: str = ""):
        self.number = number
        self.title = title
        self.card: str | None = None  # README.md as written; set by write_export
        self.count = 0
        self.file = None

    def __enter__(self) -> ReleaseDraft:
        self.file = tempfile.TemporaryFile(prefix="release-")
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()

    @property
    def name(self) -> str:
        return f"v{self.number}"

    @property
    def label(self) -> str:
        """How the dataset card names the release: `v2` or `v2: the hard pairs`."""
        return f"{self.name}: {self.title}" if self.title else self.name

    def add(self, **item) -> None:
        self.file.write((json.dumps([item[name] for name in DRAFT_FIELDS], ensure_ascii=False) + "\n").encode())
        self.count += 1

    def items(self) -> Iterator[dict]:
        self.file.flush()
        self.file.seek(0)
        for line in self.file:
            yield dict(zip(DRAFT_FIELDS, json.loads(line), strict=True))


def release_next_number() -> int:
    return (Release.objects.aggregate(last=Max("number"))["last"] or 0) + 1


@contextlib.contextmanager
def release_number_lock():
    """Hold the right to publish the next release for as long as an export writes it; yields its number.

    A second export asking for a release meanwhile is refused at once (it would wait for hours otherwise). The lock
    belongs to the database session: a worker that dies lets go of it with its connection.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [RELEASE_LOCK])
        (taken,) = cursor.fetchone()
    if not taken:
        raise ReleaseError(
            "Another export is publishing a release now: start this one again once that export has finished."
        )
    try:
        yield release_next_number()
    finally:
        with contextlib.suppress(DatabaseError), connection.cursor() as cursor:  # a lost connection let go already
            cursor.execute("SELECT pg_advisory_unlock(%s)", [RELEASE_LOCK])


@transaction.atomic
def release_publish(
    *,
    draft: ReleaseDraft,
    options,
    result: dict,
    left_out: list[dict],
    job_id: int | None = None,
    user=None,
    published_how: str | None = None,
    published_where: str = "",
) -> Release:
    """Make the Release and all its items in one transaction, from what the export wrote (`result`) and kept
    (`draft`). An export job that has a release already gets that one back: one release per export job.

    `published_how` (a ReleasePublication.How): the export's files have left the server already (an S3 target, a
    folder written by the command line), recorded in the same transaction; None: the release is frozen, not public."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [RELEASE_LOCK])
    if job_id is not None:
        published = Release.objects.filter(export_job_id=job_id).first()
        if published is not None:
            return published
    number = release_next_number()
    if number != draft.number:
        raise ReleaseError(
            f"The export's card names release {draft.name}, but v{number - 1} was published meanwhile: export again."
        )
    if draft.card is None or draft.count != result["items"]:
        raise ReleaseError(f"The export kept {draft.count} of its {result['items']} items: no release was made.")
    release = Release.objects.create(
        number=number,
        title=options.release_title,
        notes=options.release_notes,
        export_job_id=job_id,
        options=options.as_dict(),
        manifest_sha256=result["manifest_sha256"],
        content_sha256=result["content_sha256"],
        card=draft.card,
        counts=result["counts"],
        item_count=result["items"],
        image_count=result["images"],
        left_out=[{"pair": entry["pair"], "reason": entry["reason"]} for entry in left_out],
        created_by=user,
    )
    batch: list[ReleaseItem] = []
    for item in draft.items():
        image_1, image_2, pair = item.pop("image_1"), item.pop("image_2"), item.pop("pair")
        batch.append(ReleaseItem(release=release, image_1_id=image_1, image_2_id=image_2, pair_id=pair, **item))
        if len(batch) == CHUNK:
            ReleaseItem.objects.bulk_create(batch)
            batch = []
    ReleaseItem.objects.bulk_create(batch)
    if published_how is not None:
        release_publication_record(release=release, how=published_how, who=user, where=published_where)
    return release


def release_publication_record(
    *, release: Release, how: str, who=None, where: str = "", note: str = "", when=None
) -> ReleasePublication:
    """Record that the release's files left the server (`how`, a ReleasePublication.How) at `when` (now by default):
    from its first publication on, the release's pairs count as public. Every event is kept, the first one counts.
    A time in the future is refused (Invalid): a release is public from when it was, not from when it will be."""
    now = timezone.now()
    when = when or now
    if how not in ReleasePublication.How.values:
        raise Invalid({"how": [f"one of {', '.join(ReleasePublication.How.values)}, got {how!r}."]})
    if when > now:
        raise Invalid({"when": [f"{when:%Y-%m-%d %H:%M} is in the future: give when the files were published."]})
    # By hand a time is given to the minute: the minute the release was made is its first.
    if when < release.created - timedelta(minutes=1) and how == ReleasePublication.How.BY_HAND:
        raise Invalid(
            {"when": [f"release {release.name} was made on {release.created:%Y-%m-%d %H:%M}: give a time after it."]}
        )
    when = max(when, release.created)  # a clock step back: its files cannot have left before the release was made
    max_where = ReleasePublication._meta.get_field("where").max_length
    return ReleasePublication.objects.create(
        release=release, how=how, who=who, when=when, where=where[:max_where], note=note, recorded=now
    )


def release_get(name: str) -> Release:
    """A release by its name (`v3` or `3`); NotFound names the releases there are."""
    number = name.lower().removeprefix("v")
    release = Release.objects.filter(number=int(number)).first() if number.isdigit() else None
    if release is None:
        known = ", ".join(f"v{n}" for n in Release.objects.order_by("number").values_list("number", flat=True))
        raise NotFound(f"There is no release {name!r} (releases: {known or 'none yet'}).")
    return release


# --- Writing the files again ----------------------------------------------------------------------------------------


def release_files_write(*, release: Release, out: str | os.PathLike) -> dict:
    """Write the release's folder again from the database alone: the split files, metadata/items.jsonl, README.md
    and the manifest in the export's order, and each image copied from storage and checked against the sha256 the
    export recorded. Written beside `out` and renamed into place: a failure leaves nothing behind."""
    out = Path(out).resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ReleaseError(f"{out} exists and is not an empty folder: choose a new folder for the files of {release}.")
    if not out.parent.is_dir():
        raise ReleaseError(f"{out.parent} does not exist: create the folder first, or check the path.")
    staging = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    entry = scratch_register(staging)  # a killed run's staging folder is the clean-up's to remove
    try:
        written = _write_release_files(release, staging)
        os.replace(staging, out)
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise ReleaseError(file_error_detail(error, what=f"Files of release {release.name}", where=out)) from error
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        entry.release()
    return {**written, "out": str(out)}


def _stored_bytes(item: ReleaseItem, n: str) -> bytes:
    image = getattr(item, f"image_{n}")
    expected = getattr(item, f"image_{n}_sha256")
    try:
        with default_storage.open(image.file.name, "rb") as file:
            data = file.read()
    except OSError as error:
        raise ReleaseError(
            f"item {item.item_id}: image_{n} (image {image.pk}, file {image.file.name!r}) cannot be read from "
            f"storage ({error})."
        ) from error
    found = hashlib.sha256(data).hexdigest()
    if found != expected:
        raise ReleaseError(
            f"item {item.item_id}: image_{n} (image {image.pk}, file {image.file.name!r}) has sha256 {found} in "
            f"storage, but release {item.release.name} recorded {expected}: the stored file changed since."
        )
    return data


def _write_release_files(release: Release, root: Path) -> dict:
    (root / "data").mkdir(parents=True)
    (root / ITEMS_METADATA).parent.mkdir()
    manifest: list[str] = []
    # The export went through the pairs in id order, copying image_1 then image_2, each content once.
    seen: set[str] = set()
    in_pair_order = release.items.select_related("image_1", "image_2", "release").order_by("pair_id", "pk")
    for item in in_pair_order.iterator(chunk_size=CHUNK):
        record = item.record
        for n in ("1", "2"):
            digest = getattr(item, f"image_{n}_sha256")
            if digest in seen:
                continue
            path = root / record[f"image_{n}"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(_stored_bytes(item, n))
            seen.add(digest)
            manifest.append(f"{digest}  {record[f'image_{n}']}\n")
    written = []
    for split in SPLITS:
        digest, count = hashlib.sha256(), 0
        with open(root / split_path(split), "wb") as file:
            lines = release.items.filter(split=split).order_by("position", "pk").values_list("line", flat=True)
            for line in lines.iterator(chunk_size=CHUNK):
                data = (line + "\n").encode()
                file.write(data)
                digest.update(data)
                count += 1
        if count:
            manifest.append(f"{digest.hexdigest()}  {split_path(split)}\n")
            written.append(split)
        else:  # the export writes no file for an empty split
            (root / split_path(split)).unlink()
    digest = hashlib.sha256()
    with open(root / ITEMS_METADATA, "wb") as file:
        lines = release.items.order_by("pair_id", "pk").values_list("provenance", flat=True)
        for line in lines.iterator(chunk_size=CHUNK):
            data = (line + "\n").encode()
            file.write(data)
            digest.update(data)
    manifest.append(f"{digest.hexdigest()}  {ITEMS_METADATA}\n")
    content = "".join(manifest).encode()
    if hashlib.sha256(content).hexdigest() != release.content_sha256:
        raise ReleaseError(
            f"The files of release {release.name} do not add up to its content hash {release.content_sha256[:12]}…: "
            "its stored items disagree with what was published."
        )
    content += hub_view_write(root, written).manifest_lines().encode()
    card = release.card.encode()
    (root / CARD).write_bytes(card)
    content += f"{hashlib.sha256(card).hexdigest()}  {CARD}\n".encode()
    (root / MANIFEST).write_bytes(content)
    return {"items": release.item_count, "images": len(seen), "manifest_sha256": hashlib.sha256(content).hexdigest()}


# --- What changed since the release before ----------------------------------------------------------------------


def release_previous(release: Release) -> Release | None:
    return Release.objects.filter(number__lt=release.number).order_by("-number").first()


def _items_of(release: Release) -> dict[str, tuple[int, str, str]]:
    """item id -> (pair id, split, JSON line)."""
    rows = release.items.order_by("pk").values_list("item_id", "pair_id", "split", "line")
    return {item_id: (pair, split, line) for item_id, pair, split, line in rows.iterator(chunk_size=CHUNK)}


def release_diff(*, release: Release) -> dict | None:
    """The items added, removed and changed since the release before (matched by item id), each with why; None for
    the first release. Changed items name the record fields (and the split) that differ."""
    previous = release_previous(release)
    if previous is None:
        return None
    old, new = _items_of(previous), _items_of(release)
    changed = []
    for identifier in sorted(old.keys() & new.keys()):
        (_, old_split, old_line), (pair, new_split, new_line) = old[identifier], new[identifier]
        if old_line == new_line and old_split == new_split:
            continue
        before, after = json.loads(old_line), json.loads(new_line)
        fields = [name for name in FIELDS if before.get(name) != after.get(name)]
        if old_split != new_split:
            fields.append("split")
        before["split"], after["split"] = old_split, new_split
        changed.append(
            {
                "item_id": identifier,
                "pair": pair,
                "fields": fields,
                # The images traded places: the answer balancing of a binary category turned it the other way.
                "traded": before["image_1"] == after["image_2"] and before["image_2"] == after["image_1"],
                "changes": [{"field": name, "before": before.get(name), "after": after.get(name)} for name in fields],
            }
        )
    new_by_pair = {pair: identifier for identifier, (pair, _, _) in new.items()}
    old_by_pair = {pair: identifier for identifier, (pair, _, _) in old.items()}
    left_out = {entry["pair"]: entry["reason"] for entry in release.left_out}
    removed_ids = sorted(old.keys() - new.keys())
    removed_pairs = [old[identifier][0] for identifier in removed_ids]
    status_of = dict(Pair.objects.filter(pk__in=removed_pairs).values_list("pk", "status"))
    removed = []
    for identifier, pair in zip(removed_ids, removed_pairs, strict=True):
        if pair in new_by_pair:
            reason = f"its item id is now {new_by_pair[pair]}"
        elif pair in left_out:
            reason = f"left out: {left_out[pair]}"
        elif status_of.get(pair) != Pair.Status.ACCEPTED:
            reason = f"the pair is now {status_of.get(pair, 'gone')}"
        else:
            reason = "accepted, but outside this release's options (categories, domains, similarity or model filter)"
        removed.append({"item_id": identifier, "pair": pair, "reason": reason})
    added_ids = sorted(new.keys() - old.keys())
    added_pairs = [new[identifier][0] for identifier in added_ids]
    earlier = dict(
        ReleaseItem.objects.filter(release__number__lt=previous.number, pair__in=added_pairs)
        .values("pair")
        .annotate(last=Max("release__number"))
        .order_by("pair")
        .values_list("pair", "last")
    )
    added = []
    for identifier, pair in zip(added_ids, added_pairs, strict=True):
        if pair in old_by_pair:
            reason = f"its item id was {old_by_pair[pair]}"
        elif pair in earlier:
            reason = f"back in (last in v{earlier[pair]})"
        else:
            reason = "new pair"
        added.append({"item_id": identifier, "pair": pair, "reason": reason})
    return {
        "previous": previous,
        "added": added,
        "removed": removed,
        "changed": changed,
        "unchanged": len(old.keys() & new.keys()) - len(changed),
    }


# --- What the pages show ------------------------------------------------------------------------------------------


def release_count_table(release: Release) -> dict:
    """The counts per category x domain x split as rows in the taxonomy's order, with totals per row and column."""
    counts = release.counts
    domains = [d for d in Domain.values if any(d in counts.get(c, {}) for c in counts)]
    rows = []
    column_totals = {domain: {split: 0 for split in SPLITS} for domain in domains}
    for category in Category.values:
        if category not in counts:
            continue
        cells = []
        for domain in domains:
            cell = counts[category].get(domain)
            cells.append(cell)
            for split in SPLITS:
                column_totals[domain][split] += cell[split] if cell else 0
        totals = split_totals({category: counts[category]})
        rows.append({"category": category, "cells": cells, **totals, "all": sum(totals.values())})
    totals = split_totals(counts)
    return {
        "domains": domains,
        "rows": rows,
        "column_totals": [column_totals[domain] for domain in domains],
        **totals,
        "all": sum(totals.values()),
    }

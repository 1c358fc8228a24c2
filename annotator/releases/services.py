"""Releases: an export published as the next numbered version (v1, v2, ...), its files written again from the
database alone, and what changed since the release before.

`release_reserve` takes the release's number before `benchmark_export` writes any file (one reservation per export
job); `release_publish` makes the Release and every ReleaseItem with that number in one transaction, once the files
wait at their staging name, and `benchmark_export` then switches them into place. `release_files_write` rebuilds the
folder byte for byte (the Parquet view as the same pyarrow writes it) and checks every image against the hash the
export recorded. `release_diff` compares a release with the one before it in its series by item id and says why
each item came, went or changed (an experiment is never the base of a benchmark release's diff).
`release_publication_record` records each time a release's files leave the server: from the first, its pairs count
as public.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from django.core.files.storage import default_storage
from django.db import DatabaseError, connection, transaction
from django.db.models import Max, Q
from django.utils import timezone

from annotator.hub_view import hub_view_write
from annotator.jobs.scratch import scratch_register
from annotator.models import (
    Category,
    Domain,
    Job,
    Pair,
    Release,
    ReleaseDiff,
    ReleaseItem,
    ReleasePublication,
    ReleaseReservation,
)
from annotator.models.jobs import ACTIVE
from annotator.models.releases import release_name
from benchmark.card import split_totals
from benchmark.records import CARD, FIELDS, ITEMS_METADATA, MANIFEST, SPLITS, split_path
from subtlebench.errors import Conflict, Invalid, NotFound, file_error_detail
from subtlebench.planner import analyze_on_commit

log = logging.getLogger(__name__)

# The first key of the advisory locks on release numbers ("RELS", the series the second key), and of the lock a
# command-line export holds on its reservation ("RESV", the reservation the second).
RELEASE_LOCK = 0x52454C53
RESERVATION_LOCK = 0x52455356
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

    def __init__(self, *, number: int, experiment: bool = False, title: str = ""):
        self.number = number
        self.experiment = experiment
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
        return release_name(number=self.number, experiment=self.experiment)

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


# --- Reserving the number -------------------------------------------------------------------------------------


def release_next_number(*, experiment: bool = False) -> int:
    """The number the next release of the series gets: after every release and every reservation of it."""
    made = Release.objects.filter(experiment=experiment).aggregate(last=Max("number"))["last"] or 0
    held = ReleaseReservation.objects.filter(experiment=experiment).aggregate(last=Max("number"))["last"] or 0
    return max(made, held) + 1


def _cli_lock_key(reservation: ReleaseReservation) -> list[int]:
    return [RESERVATION_LOCK, reservation.pk & 0x7FFFFFFF]


def release_reservation_owner_gone(reservation: ReleaseReservation) -> bool:
    """Whether the export that holds the reservation is gone: its job is no longer active (finished, failed, given
    up, cancelled), or the command-line process no longer holds the reservation's lock (its connection ended when
    it died, on whatever host it ran). A job that is active but whose worker died keeps it: its retry resumes."""
    if reservation.export_job_id is not None:
        return not Job.objects.filter(pk=reservation.export_job_id, status__in=ACTIVE).exists()
    with connection.cursor() as cursor:  # held by any session (this one too): pg_locks, not a re-entrant try
        cursor.execute(
            "SELECT NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = %s "
            "AND objid = %s AND objsubid = 2 AND database = (SELECT oid FROM pg_database "
            "WHERE datname = current_database()))",
            _cli_lock_key(reservation),
        )
        (free,) = cursor.fetchone()
    return free


def release_reserve(
    *, experiment: bool, target: str, job_id: int | None
) -> tuple[ReleaseReservation, list[ReleaseReservation]]:
    """Take the next number of the series (v or exp) for the export that writes `target`, before any file is
    written; returns (the reservation, the stale reservations given back to make way, whose staging the caller
    removes).

    A job's reservation is the job's own: a retried or duplicated unit of the job gets it back, and never waits for
    itself. A reservation of another export whose release is not made yet refuses this one (ReleaseError naming
    it) while that export lives; once its owner is gone it is given back and its number is taken again. A command-line
    export holds a lock on its reservation until it ends (`release_reservation_done`)."""
    withdrawn: list[ReleaseReservation] = []
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [RELEASE_LOCK, int(experiment)])
        if job_id is not None:
            mine = ReleaseReservation.objects.filter(export_job_id=job_id).first()
            if mine is not None:
                return mine, withdrawn
        unmade = ReleaseReservation.objects.filter(experiment=experiment, release__isnull=True).order_by("number", "pk")
        for other in unmade.select_related("export_job"):
            if not release_reservation_owner_gone(other):
                who = f"export #{other.export_job_id}" if other.export_job_id else "export_benchmark, command line"
                raise ReleaseError(
                    f"Another export ({who}, to {other.target}) is publishing release {other.name} now: start this "
                    "one again once it has finished."
                )
            log.warning("release %s: its export is gone before making it: the number is given back", other.name)
            other.delete()
            withdrawn.append(other)
        reservation = ReleaseReservation.objects.create(
            experiment=experiment,
            number=release_next_number(experiment=experiment),
            export_job_id=job_id,
            target=target,
        )
        if job_id is None:  # held by this process's connection from before the commit: never seen unheld
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_lock(%s, %s)", _cli_lock_key(reservation))
    return reservation, withdrawn


def release_reservation_stage(reservation: ReleaseReservation, *, staging: str, owner: dict) -> None:
    """Record where this attempt writes the release's files (and who writes them), before it writes any: a retry
    after a crash finds them, to remove (or, once the release is made, to switch into place)."""
    ReleaseReservation.objects.filter(pk=reservation.pk, release__isnull=True).update(
        staging=staging, staging_owner=owner
    )
    reservation.staging, reservation.staging_owner = staging, owner


def release_reservation_withdraw(reservation: ReleaseReservation) -> bool:
    """Give the number back when its release was not made (the export failed or was cancelled): True when given
    back; False when the release was made (it stands) or the reservation was given back already."""
    deleted, _ = ReleaseReservation.objects.filter(pk=reservation.pk, release__isnull=True).delete()
    return bool(deleted)


def release_reservation_done(reservation: ReleaseReservation) -> None:
    """A command-line export ends: it lets go of its reservation's lock (a lost connection let go already)."""
    if reservation.export_job_id is None and reservation.pk is not None:
        with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", _cli_lock_key(reservation))


def release_reservation_mark_placed(reservation: ReleaseReservation) -> None:
    """The release's files are in place at its target."""
    now = timezone.now()
    ReleaseReservation.objects.filter(pk=reservation.pk, placed__isnull=True).update(placed=now)
    reservation.placed = reservation.placed or now


def release_made_for(*, job_id: int | None, target: str) -> ReleaseReservation | None:
    """The reservation whose release an export already made: the job's own (a retried or replayed job answers its
    release), or for the command line (no job) a release made for the same target and never put in place by a
    process that is gone (running the command again finishes it)."""
    if job_id is not None:
        return ReleaseReservation.objects.filter(export_job_id=job_id, release__isnull=False).first()
    unplaced = release_reservations_unplaced().filter(export_job__isnull=True, target=target).order_by("pk")
    return next((reservation for reservation in unplaced if release_reservation_owner_gone(reservation)), None)


def release_reservations_of(queryset, *, in_bucket: bool | None):
    """The reservations of one part of the clean-up: those of S3 targets (the bucket is shared: cleaned once), or of
    local targets whose staging this host writes (or none yet: each host cleans its own disk); None: all."""
    if in_bucket is None:
        return queryset
    if in_bucket:
        return queryset.filter(target__startswith="s3://")
    here = Q(staging_owner__host=socket.gethostname()) | ~Q(staging_owner__has_key="host")
    return queryset.exclude(target__startswith="s3://").filter(here)


def release_reservations_unplaced(*, in_bucket: bool | None = None):
    """Reservations whose release is made but whose files were not switched into place (their export died between
    the two), with their owner: the clean-up places those whose owner is gone."""
    unplaced = ReleaseReservation.objects.filter(release__isnull=False, placed__isnull=True).select_related("release")
    return release_reservations_of(unplaced, in_bucket=in_bucket).order_by("pk")


def release_reservations_abandoned(*, in_bucket: bool | None = None) -> list[ReleaseReservation]:
    """Give back every reservation whose release was not made and whose owner is gone; returns them (their staging
    is the caller's to remove)."""
    given_back = []
    unmade = release_reservations_of(ReleaseReservation.objects.filter(release__isnull=True), in_bucket=in_bucket)
    for reservation in unmade.order_by("pk"):
        with transaction.atomic():
            held = ReleaseReservation.objects.select_for_update(skip_locked=True).filter(pk=reservation.pk).first()
            if held is None or held.release_id is not None or not release_reservation_owner_gone(held):
                continue
            held.delete()
            held.pk = reservation.pk
            given_back.append(held)
    return given_back


def release_publish(
    *,
    reservation: ReleaseReservation,
    staging: str,
    draft: ReleaseDraft,
    options,
    result: dict,
    left_out: list[dict],
    user=None,
    published_how: str | None = None,
    published_where: str = "",
) -> Release:
    """Make the Release and all its items with the reserved number, in one transaction that also marks the
    reservation made, with `staging` as where its files wait to be switched into place. A reservation made by
    another copy of the same job first answers that copy's release (its files are that copy's staging, not
    `staging`); a reservation given back meanwhile (its export was judged gone) is refused: no release is made.

    `published_how` (a ReleasePublication.How): the export's files leave the server with the switch that follows (an
    S3 target, a folder written by the command line), recorded in the same transaction; None: frozen, not public."""
    with transaction.atomic():
        held = ReleaseReservation.objects.select_for_update().filter(pk=reservation.pk).first()
        if held is None:
            raise ReleaseError(
                f"The number {reservation.name} was given back while this export ran (it was judged gone): no release "
                "was made; export again."
            )
        if held.release_id is not None:
            return held.release
        if draft.card is None or draft.count != result["items"]:
            raise ReleaseError(f"The export kept {draft.count} of its {result['items']} items: no release was made.")
        release = Release.objects.create(
            number=held.number,
            title=options.release_title,
            notes=options.release_notes,
            export_job_id=held.export_job_id,
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
        release.refresh_from_db(fields=["experiment"])
        if release.experiment != held.experiment:
            raise ReleaseError(f"release {release.name} does not match its reservation {held.name}: nothing was made.")
        batch: list[ReleaseItem] = []
        for item in draft.items():
            image_1, image_2, pair = item.pop("image_1"), item.pop("image_2"), item.pop("pair")
            batch.append(ReleaseItem(release=release, image_1_id=image_1, image_2_id=image_2, pair_id=pair, **item))
            if len(batch) == CHUNK:
                ReleaseItem.objects.bulk_create(batch)
                batch = []
        ReleaseItem.objects.bulk_create(batch)
        analyze_on_commit(ReleaseItem)
        release_diff_store(release)  # once, now: the release page and its downloads read it
        if published_how is not None:
            release_publication_record(release=release, how=published_how, who=user, where=published_where)
        held.release, held.staging = release, staging
        held.save(update_fields=["release", "staging"])
    reservation.release, reservation.staging = release, staging
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


def release_parse_name(name: str) -> tuple[int, bool] | None:
    """(number, experiment) of a release's name: `v3` or `3` (the benchmark's), `exp-3` (an experiment); None for
    anything else."""
    text = str(name).strip().lower()
    experiment = text.startswith("exp-")
    number = text.removeprefix("exp-") if experiment else text.removeprefix("v")
    if not number.isdigit() or len(number) > 9:
        return None
    return int(number), experiment


def release_get(name: str) -> Release:
    """A release by its name (`v3` or `3`, `exp-3` for an experiment); NotFound names the releases there are."""
    parsed = release_parse_name(name)
    release = None
    if parsed is not None:
        release = Release.objects.filter(number=parsed[0], experiment=parsed[1]).first()
    if release is None:
        known = ", ".join(r.name for r in Release.objects.only("number", "experiment").order_by("experiment", "number"))
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
    """The release a release is compared with: the benchmark's release before it, or for an experiment the release
    before it of the same sweep. An experiment is never the base of a benchmark release's diff."""
    earlier = Release.objects.filter(experiment=release.experiment, number__lt=release.number)
    if release.experiment:
        earlier = earlier.filter(options__sweep=release.options.get("sweep"))
    return earlier.order_by("-number", "-pk").first()


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
        ReleaseItem.objects.filter(
            release__experiment=release.experiment, release__number__lt=previous.number, pair__in=added_pairs
        )
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
            reason = f"back in (last in {release_name(number=earlier[pair], experiment=release.experiment)})"
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


def release_latest() -> Release | None:
    """The benchmark's newest release (experiments' releases apart)."""
    return Release.objects.filter(experiment=False).order_by("-number", "-pk").first()


def release_changes_since(release: Release) -> dict:
    """What changed in the benchmark since the release was made: pairs in it now that the release lacks (accepted
    since, or back in), and the release's pairs no longer in it (reopened, rejected, below the similarity bar)."""
    released = release.items.values("pair")
    now = Pair.objects.in_benchmark()
    return {
        "added": now.exclude(pk__in=released).count(),
        "left": release.items.exclude(pair__in=now.values("pk")).count(),
    }


def release_diff_store(release: Release) -> ReleaseDiff:
    """Compute the release's diff and keep it (a second call keeps the first)."""
    diff = release_diff(release=release)
    fields = {"previous": None}
    if diff is not None:
        fields = {key: diff[key] for key in ("previous", "added", "removed", "changed", "unchanged")}
    stored, _ = ReleaseDiff.objects.get_or_create(release=release, defaults=fields)
    return stored


def release_diff_stored(*, release: Release) -> dict | None:
    """`release_diff` as kept with the release: computed at its making, or the first time it is asked for (a release
    made before diffs were kept), then read."""
    stored = ReleaseDiff.objects.select_related("previous").filter(release=release).first()
    if stored is None:
        stored = release_diff_store(release)
    if stored.previous is None:
        return None
    return {
        "previous": stored.previous,
        "added": stored.added,
        "removed": stored.removed,
        "changed": stored.changed,
        "unchanged": stored.unchanged,
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

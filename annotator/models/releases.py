"""Releases: a published export frozen as a numbered benchmark version (v1, v2, ...), or as an experiment (exp-1,
exp-2, ...: a sweep's pairs alone, numbered apart so the benchmark's own versions stay v1, v2, ... in order).

A release keeps every item exactly as it was written (its JSON line, its split and place in the split's file, its
provenance line, the hashes of its two images), so its files can be written again byte for byte, and the human
baseline and every model score stand on the same items. Nothing of a release changes once it is made: correcting a
pair changes the next release, not this one. The database refuses updates and deletes of releases' items
(a trigger, migration 0018), and the models refuse them before the database is asked.

A release is frozen when it is made and public only from its first ReleasePublication: each way its files leave the
server records one, and a coordinator records one by hand for a copy that left another way.

Its number is taken before any of its files is written, as a ReleaseReservation held by the export that writes it
(its job, or a command-line process): the reservation turns into the release when the release is made, or is given
back when that export fails or its owner is gone, so no number is ever used twice.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotator.models.jobs import Job
from annotator.models.pairs import Pair
from annotator.models.taxonomy import Category, Domain
from annotator.models.videos import Image
from subtlebench.errors import Conflict
from subtlebench.text import NAME_MAX, NOTE_MAX, single_line

SPLIT_CHOICES = [("test", "test"), ("val", "val")]


class ReleaseFrozen(Conflict):
    """A change asked of a release or of its items: a release never changes once made."""


class FrozenQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise ReleaseFrozen(f"{self.model._meta.verbose_name_plural} never change once made.")

    def delete(self):
        raise ReleaseFrozen(f"{self.model._meta.verbose_name_plural} are never deleted.")


class ReleaseQuerySet(models.QuerySet):
    def delete(self):
        raise ReleaseFrozen("releases are never deleted.")


class Release(models.Model):
    """One published benchmark version: the export's options, who published it and when, and its hashes."""

    number = models.PositiveIntegerField(help_text="1 for v1 (or exp-1), 2 for v2, ...; given in order in its series.")
    title = models.CharField(max_length=NAME_MAX, blank=True, validators=[single_line])
    notes = models.TextField(blank=True, max_length=NOTE_MAX)
    export_job = models.ForeignKey(Job, models.PROTECT, null=True, blank=True, related_name="releases")
    options = models.JSONField(default=dict, help_text="The export's options, as it ran.")
    manifest_sha256 = models.CharField(max_length=64, help_text="The sha256 of the export's MANIFEST file.")
    content_sha256 = models.CharField(max_length=64, help_text="The content hash the dataset card names.")
    card = models.TextField(help_text="README.md exactly as written.")
    counts = models.JSONField(default=dict, help_text="{category: {domain: {test: n, val: n}}}")
    item_count = models.PositiveIntegerField(default=0)
    image_count = models.PositiveIntegerField(default=0)
    left_out = models.JSONField(
        default=list, blank=True, help_text="Pairs the export considered and left out: [{pair, reason}]."
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    # The export of one sweep (`ExportOptions.sweep`) is an experiment: numbered in a series of its own and never the
    # base of a benchmark release's diff. Read from the options as they ran, so the two can never disagree.
    experiment = models.GeneratedField(
        expression=Q(options__has_key="sweep"), output_field=models.BooleanField(), db_persist=True
    )

    objects = ReleaseQuerySet.as_manager()

    class Meta:
        ordering = ["experiment", "-number"]  # the benchmark's releases first, each series newest first
        constraints = [models.UniqueConstraint(fields=["experiment", "number"], name="release_unique_number")]

    def __str__(self):
        return f"{self.name} {self.title}".strip()

    def save(self, *args, **kwargs):
        if self.pk is not None and not self._state.adding:
            raise ReleaseFrozen(f"release {self.name} never changes once made.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ReleaseFrozen(f"release {self.name} is never deleted.")

    @property
    def name(self) -> str:
        return release_name(number=self.number, experiment=self.experiment)

    @property
    def public_since(self):
        """When its files first left the server (the earliest publication), or None: frozen, not public."""
        first = self.publications.order_by("when", "pk").first()
        return first.when if first else None


def release_name(*, number: int, experiment: bool) -> str:
    """How a release is named on pages, in URLs and in its card: `v3`, or `exp-3` for an experiment."""
    return f"exp-{number}" if experiment else f"v{number}"


class ReleaseReservation(models.Model):
    """A release number taken before any of the release's files is written, by the export that writes them: its job
    (at most one reservation per job, so a retried or duplicated unit finds its own), or a command-line process.

    While `release` is empty the files are being written to `staging` (a hidden folder beside a local target, or a
    version under an S3 prefix that no pointer names yet). The release is made with this number in one transaction
    that also sets `release`; the staged files are then switched into place (`placed`). A reservation whose owner
    is gone before its release was made is given back (its staging removed, its number free again); one whose
    release was made but not placed is placed by whoever finds it (a retry, the clean-up)."""

    experiment = models.BooleanField(default=False)
    number = models.PositiveIntegerField()
    export_job = models.OneToOneField(
        Job, models.CASCADE, null=True, blank=True, related_name="release_reservation", help_text="The export job."
    )
    target = models.CharField(max_length=1000, help_text="The export's target (a folder or s3://bucket/prefix).")
    # A command-line export holds a database lock named after this row while it runs (its connection ends when it
    # dies, wherever it ran); a job's reservation lives as long as the job is active.
    staging = models.CharField(
        max_length=1000, blank=True, help_text="Where the files are being written: a folder, or an S3 version's name."
    )
    staging_owner = models.JSONField(default=dict, blank=True, help_text="Who writes the staging (scratch ledger).")
    release = models.OneToOneField(
        Release, models.PROTECT, null=True, blank=True, related_name="reservation", help_text="Once made."
    )
    placed = models.DateTimeField(null=True, blank=True, help_text="When the release's files were switched into place.")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["experiment", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["experiment", "number"], name="releasereservation_unique_number")
        ]

    def __str__(self):
        return f"{self.name} reserved for {f'job {self.export_job_id}' if self.export_job_id else 'the command line'}"

    @property
    def name(self) -> str:
        return release_name(number=self.number, experiment=self.experiment)


class ReleasePublication(models.Model):
    """One time a release's files left the server (or were found to have): how, by whom, when and where to. From the
    earliest one on, every pair the release holds counts as public (`Pair.objects.already_public`)."""

    class How(models.TextChoices):
        CLI_EXPORT = "cli_export", "export_benchmark --release"
        RELEASE_FILES = "release_files", "manage.py release_files"
        ZIP_DOWNLOAD = "zip_download", "zip download"
        S3_TARGET = "s3_target", "S3 target"
        HUB_VIEW = "hub_view", "dataset hub"
        BY_HAND = "by_hand", "marked by hand"

    release = models.ForeignKey(Release, models.PROTECT, related_name="publications")
    how = models.CharField(max_length=20, choices=How.choices)
    who = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    when = models.DateTimeField(default=timezone.now, db_index=True)
    where = models.CharField(max_length=1000, blank=True, help_text="The folder, URL or place the files went to.")
    note = models.TextField(blank=True, max_length=NOTE_MAX)
    recorded = models.DateTimeField(default=timezone.now, help_text="When the app learnt of it (by hand: later).")

    class Meta:
        ordering = ["when", "pk"]

    def __str__(self):
        return f"{self.release.name} {self.get_how_display()} {self.when:%Y-%m-%d %H:%M}"


class ReleaseDiff(models.Model):
    """What changed since the release before (`annotator.releases.services.release_diff`), computed once: when the
    release is made, or for a release made before diffs were kept, the first time its page asks. Its reasons are as
    they stood then (a removed pair's status at that time)."""

    release = models.OneToOneField(Release, models.PROTECT, primary_key=True, related_name="stored_diff")
    previous = models.ForeignKey(Release, models.PROTECT, null=True, blank=True, related_name="+")
    added = models.JSONField(default=list)
    removed = models.JSONField(default=list)
    changed = models.JSONField(default=list)
    unchanged = models.PositiveIntegerField(default=0)
    computed = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return f"diff of {self.release_id}"


class ReleaseItem(models.Model):
    """One item of a release, as written: the JSON line of its split's file and the line of metadata/items.jsonl."""

    release = models.ForeignKey(Release, models.PROTECT, related_name="items")
    item_id = models.CharField(max_length=300, help_text="The id the official evaluator gives the item.")
    split = models.CharField(max_length=4, choices=SPLIT_CHOICES)
    position = models.PositiveIntegerField(help_text="Its line in the split's file, from 1.")
    line = models.TextField(help_text="The record's JSON line exactly as written, without the newline.")
    provenance = models.TextField(help_text="Its line of metadata/items.jsonl, without the newline.")
    category = models.CharField(max_length=20, choices=Category.choices)
    domain = models.CharField(max_length=20, choices=Domain.choices)
    cluster = models.CharField(
        max_length=300, help_text="Items that share a video or a source image share this (for honest intervals)."
    )
    swapped = models.BooleanField(default=False, help_text="Its images were traded to balance answer positions.")
    image_1 = models.ForeignKey(Image, models.PROTECT, related_name="+", help_text="Shown first, as released.")
    image_2 = models.ForeignKey(Image, models.PROTECT, related_name="+", help_text="Shown second, as released.")
    image_1_sha256 = models.CharField(max_length=64)
    image_2_sha256 = models.CharField(max_length=64)
    pair = models.ForeignKey(Pair, models.PROTECT, related_name="release_items", help_text="The pair it was made from.")

    objects = FrozenQuerySet.as_manager()

    class Meta:
        ordering = ["release", "split", "position"]
        constraints = [
            models.UniqueConstraint(fields=["release", "item_id"], name="releaseitem_unique_id"),
            models.UniqueConstraint(fields=["release", "split", "position"], name="releaseitem_unique_place"),
        ]

    def __str__(self):
        return f"{self.item_id} ({self.release_id})"

    def save(self, *args, **kwargs):
        if self.pk is not None and not self._state.adding:
            raise ReleaseFrozen(f"item {self.item_id} of a release never changes once made.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ReleaseFrozen(f"item {self.item_id} of a release is never deleted.")

    @property
    def record(self) -> dict:
        """The record as the evaluator reads it (image paths, question, answer, distractors, ...)."""
        return json.loads(self.line)


class TrainingSet(models.Model):
    """A training split beside a release (annotator.export.training): pairs the release does not hold that share no
    video, source image group, sweep cell or image with its test or val items, for fine-tuning. Its items are
    checked against the release again before every export."""

    release = models.ForeignKey(Release, models.PROTECT, related_name="training_sets")
    seed = models.IntegerField(default=0)
    limit = models.PositiveIntegerField(null=True, blank=True, help_text="At most this many items; None: every one.")
    item_count = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict, help_text="{category: {domain: n}}")
    excluded = models.JSONField(default=dict, help_text="Candidates left out, by reason: {reason: n}.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return f"training set {self.pk} of {self.release.name} ({self.item_count} items)"


class TrainingItem(models.Model):
    training_set = models.ForeignKey(TrainingSet, models.CASCADE, related_name="items")
    pair = models.ForeignKey(Pair, models.PROTECT, related_name="training_items")
    position = models.PositiveIntegerField(help_text="Its line in train.jsonl, from 1.")
    record = models.JSONField(help_text="The item's record, as the benchmark's files write one.")
    groups = models.JSONField(default=list, help_text="The groups it belongs to: its cluster, its sweep cell.")

    class Meta:
        ordering = ["training_set", "position"]
        constraints = [
            models.UniqueConstraint(fields=["training_set", "position"], name="trainingitem_unique_place"),
            models.UniqueConstraint(fields=["training_set", "pair"], name="trainingitem_pair_once"),
        ]

    def __str__(self) -> str:
        return f"train item {self.position} (pair {self.pair_id})"

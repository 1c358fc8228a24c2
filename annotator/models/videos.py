"""Videos, their sampled frames, and images (a frame or a standalone imported image)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.files.storage import default_storage
from django.db import models
from django.utils import timezone

from annotator.models.leases import Leasable
from annotator.models.taxonomy import Domain
from subtlebench.text import single_line


class Video(Leasable):
    class Status(models.TextChoices):
        PENDING = "pending"
        SAMPLING = "sampling"
        SAMPLED = "sampled"
        FAILED = "failed"
        # Sampled, but frame files are gone from storage: never leased; re-importing or `repair` samples it again.
        MISSING = "missing", "files missing"

    yt8m_id = models.CharField("YouTube-8M id", max_length=64, unique=True)
    title = models.CharField(max_length=300, blank=True, validators=[single_line])
    labels = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    domain = models.CharField(max_length=20, choices=Domain.choices, default=Domain.NATURAL)
    source = models.CharField(max_length=1000, help_text="Local path or s3:// URI of the video file.")
    duration = models.FloatField(null=True, blank=True, help_text="Seconds.")
    fps = models.FloatField(null=True, blank=True)
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    size_bytes = models.BigIntegerField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING, db_index=True)
    error = models.TextField(blank=True)
    sample_every = models.FloatField(null=True, blank=True, help_text="Seconds between sampled frames.")
    sample_count = models.PositiveIntegerField(null=True, blank=True, help_text="Or: this many frames.")
    frame_count = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(auto_now=True)
    # Pair picking: the lease (Leasable: who holds the video now, renewed by the workbench's heartbeats), and
    # whom a coordinator gave it to.
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="assigned_videos"
    )
    assigned_at = models.DateTimeField(null=True, blank=True, help_text="When a coordinator last assigned it.")
    archived_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Archived: never leased or assigned again; its frames and pairs are kept.",
    )

    class Meta(Leasable.Meta):
        ordering = ["yt8m_id"]

    def __str__(self):
        return self.yt8m_id

    # --- Videos and import: the states of sampling ---
    def is_sampled_as(self, *, source: str, every: float | None, count: int | None) -> bool:
        """Already sampled from this file with these parameters: a re-import has nothing to do."""
        return (
            self.status == self.Status.SAMPLED
            and self.source == source
            and self.sample_every == every
            and self.sample_count == count
        )

    def is_sampled_from(self, source: str, every: float | None, count: int | None) -> bool:
        """Its frames (whatever its status) come from this file with these parameters: sampling them again gives
        the same timestamps."""
        return self.source == source and self.sample_every == every and self.sample_count == count

    def mark_sampling(self) -> None:
        """Only a video without frames shows 'sampling': a sampled one keeps its status while re-sampled."""
        if self.status != self.Status.SAMPLED:
            self.status = self.Status.SAMPLING
            self.error = ""
            self.save(update_fields=["status", "error", "updated"])

    def missing_files(self) -> list[str]:
        """The frame files (images and thumbnails) storage no longer has: one listing per folder, not one request
        per file."""
        names = [n for pair in Image.objects.filter(frame__video=self).values_list("file", "thumbnail") for n in pair]
        present: dict[str, set[str]] = {}
        missing = []
        for name in filter(None, names):
            folder, _, base = name.rpartition("/")
            if folder not in present:
                try:
                    present[folder] = set(default_storage.listdir(folder)[1])
                except FileNotFoundError:
                    present[folder] = set()
            if base not in present[folder]:
                missing.append(name)
        return missing

    def mark_missing(self, missing: list[str]) -> None:
        """Frame files are gone: the video is never leased until it is sampled again."""
        self.status = self.Status.MISSING
        self.error = (
            f"{self.yt8m_id}: {len(missing)} frame file(s) missing from storage (first: {missing[0]}); "
            "re-import it or run manage.py repair"
        )
        self.save(update_fields=["status", "error", "updated"])

    def mark_restored(self) -> None:
        """Its lost frame files were written back, verified against their hashes: it is sampled again."""
        self.status = self.Status.SAMPLED
        self.error = ""
        self.save(update_fields=["status", "error", "updated"])

    def mark_not_restored(self, reason: str) -> None:
        """Its lost frame files could not be restored: it stays `missing` (its frames and the pairs on them are kept),
        with the reason for a coordinator."""
        self.error = reason
        self.save(update_fields=["error", "updated"])

    def mark_failed(self, error: str) -> bool:
        """Record a failure; a video that has frames keeps them and its status. True when the row changed."""
        if self.status == self.Status.SAMPLED:
            return False
        self.status = self.Status.FAILED
        self.error = error
        self.save(update_fields=["status", "error", "updated"])
        return True


class Image(models.Model):
    """Any image a pair can use: a sampled frame (see Frame) or a standalone imported image."""

    file = models.FileField(max_length=500)
    thumbnail = models.FileField(max_length=500, blank=True)
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    source = models.CharField(max_length=50, help_text="Dataset source, e.g. yt8m.")
    original_name = models.CharField(max_length=500, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    # Image collections (issue 27): the collection a standalone image was imported into, and its class there (an
    # MVTec-AD object class, a change-detection scene), which pair mining can keep candidates within.
    collection = models.ForeignKey("annotator.Collection", models.PROTECT, null=True, blank=True, related_name="images")
    label = models.CharField(max_length=100, blank=True, help_text="Its class in the collection, e.g. an MVTec class.")
    created = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return self.original_name or self.file.name


# A picked frame's index starts here: far above any sampled frame's position, so that sampling never meets one.
PICKED_INDEX_BASE = 1_000_000


class Frame(models.Model):
    video = models.ForeignKey(Video, models.CASCADE, related_name="frames")
    index = models.PositiveIntegerField(
        help_text="Position among the video's sampled frames; a picked frame's is PICKED_INDEX_BASE and up."
    )
    timestamp = models.FloatField(help_text="Seconds, from the stream's presentation timestamp.")
    pts = models.BigIntegerField(help_text="Presentation timestamp in stream time-base units.")
    image = models.OneToOneField(Image, models.CASCADE, related_name="frame")
    # Taken by an annotator at its exact time from the source video on the workbench (annotator/videos/frame_at.py),
    # not by sampling: it is not counted in the video's frame_count and re-sampling leaves nothing to reproduce.
    picked = models.BooleanField(default=False)

    class Meta:
        ordering = ["video", "index"]
        constraints = [models.UniqueConstraint(fields=["video", "index"], name="frame_unique_index")]

    def __str__(self):
        return f"{self.video.yt8m_id} #{self.index} @ {self.timestamp:.3f}s"

"""Image collections (issue 27) and the candidate pairs an annotator authors a question for.

A collection is a set of standalone images imported together (a folder, a manifest, an S3 prefix) under one source
name and domain: MVTec-AD, change-detection (A/B/label), a pair list, plain images. A candidate pair is two images
that may show a subtle difference and have no question yet: given by the collection (a change-detection A/B pair, a
pair-list row without a question) or found by mining the stored embeddings. Candidates wait in a queue, leased like
videos, and open in the comparison workbench; authoring one makes a Pair.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from annotator.models.leases import Leasable, LeaseQuerySet
from annotator.models.taxonomy import Category, Domain
from benchmark.regions import RegionError, validate_regions
from subtlebench.text import NOTE_MAX, text_validators

GROUP_KEY_MAX = 200  # of a pair's and a candidate's group_key


def regions_validator(value) -> None:
    """A JSON list of difference regions (benchmark/regions.py); bounds are checked where the images are known."""
    try:
        validate_regions(value)
    except RegionError as error:
        raise ValidationError(str(error)) from error


class Collection(models.Model):
    class Layout(models.TextChoices):
        IMAGES = "images", "plain images"
        MVTEC = "mvtec", "MVTec-AD"
        CHANGE_DETECTION = "change_detection", "change detection (A/B/label)"
        PAIR_LIST = "pair_list", "pair list"
        MANIFEST = "manifest", "manifest (CSV/JSONL)"

    name = models.SlugField(max_length=50, unique=True, help_text="The source name its pairs export under.")
    domain = models.CharField(max_length=20, choices=Domain.choices)
    layout = models.CharField(max_length=20, choices=Layout.choices)
    location = models.CharField(max_length=1000, help_text="The folder, manifest file or s3:// prefix it came from.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    archived_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Archived: its candidates are offered to nobody; its images and pairs are kept.",
    )

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self):
        return self.name

    def group_key(self, key: str) -> str:
        """The group key of this collection's pairs that share `key` (an MVTec class, a change-detection scene, a
        pair list's group): prefixed with the collection's name, as a video's is with `yt8m:`, so two collections
        that both have a `bottle` class share no split group and no cluster."""
        return f"{self.name}:{key}"[:GROUP_KEY_MAX]


class PairCandidateQuerySet(LeaseQuerySet):
    # A lease query set: the authoring queue leases candidates as videos are leased (annotator/authoring/work.py).
    def open(self):
        return self.filter(status=PairCandidate.Status.OPEN)


class PairCandidate(Leasable):
    class Origin(models.TextChoices):
        GIVEN = "given", "given by the collection"
        MINED = "mined", "found by mining"
        EDITED = "edited", "edited by a model"

    class Status(models.TextChoices):
        OPEN = "open"
        AUTHORED = "authored"
        DISMISSED = "dismissed"
        # A model's edit that a person has not yet accepted (annotator.models.editing): not in the authoring queue.
        EDIT_CHECK = "edit_check", "edit to check"

    image_1 = models.ForeignKey("annotator.Image", models.PROTECT, related_name="+")
    image_2 = models.ForeignKey("annotator.Image", models.PROTECT, related_name="+")
    origin = models.CharField(max_length=10, choices=Origin.choices)
    collection = models.ForeignKey(Collection, models.PROTECT, null=True, blank=True, related_name="candidates")
    domain = models.CharField(max_length=20, choices=Domain.choices)
    source = models.CharField(max_length=50)
    source_id = models.CharField(max_length=200, blank=True)
    group_key = models.CharField(max_length=GROUP_KEY_MAX, blank=True)
    category = models.CharField(max_length=20, choices=Category.choices, blank=True, help_text="A hint, if known.")
    regions = models.JSONField(default=list, blank=True, validators=[regions_validator])
    similarity = models.FloatField(null=True, blank=True)
    similarity_model = models.CharField(max_length=200, blank=True, help_text="Fingerprint of the model.")
    job = models.ForeignKey("annotator.Job", models.SET_NULL, null=True, blank=True, related_name="candidates")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN, db_index=True)
    pair = models.ForeignKey("annotator.Pair", models.SET_NULL, null=True, blank=True, related_name="candidates")
    dismissed_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(auto_now=True)

    objects = PairCandidateQuerySet.as_manager()

    class Meta(Leasable.Meta):
        ordering = ["-created", "-pk"]
        constraints = [
            *Leasable.Meta.constraints,
            models.UniqueConstraint(fields=["image_1", "image_2"], name="pair_candidate_unique_images"),
            models.CheckConstraint(condition=~models.Q(image_1=models.F("image_2")), name="pair_candidate_two_images"),
        ]
        # The candidates table's default sort (the most similar first: `similarity DESC NULLS LAST, id DESC`).
        indexes = [
            models.Index(
                models.F("similarity").desc(nulls_last=True), models.F("id").desc(), name="pair_candidate_similar"
            )
        ]

    def __str__(self):
        return f"candidate {self.image_1_id}/{self.image_2_id} ({self.origin})"

    @property
    def title(self) -> str:
        """How pages name it: its source and source id (or its images)."""
        return f"{self.source}/{self.source_id}" if self.source_id else f"{self.source} #{self.pk}"


class CandidateSkip(models.Model):
    """An annotator put a candidate pair aside with a reason: they are not offered it again (nobody is, if its images
    are bad). Undone from the work page, like a video skip."""

    class Reason(models.TextChoices):
        NO_DIFFERENCE = "no_difference", "no usable difference"
        BAD_IMAGES = "bad_images", "bad or broken images"

    FOR_EVERYONE = (Reason.BAD_IMAGES,)

    candidate = models.ForeignKey(PairCandidate, models.CASCADE, related_name="skips")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="candidate_skips")
    reason = models.CharField(max_length=20, choices=Reason.choices)
    note = models.TextField(blank=True, max_length=NOTE_MAX, validators=text_validators(NOTE_MAX))
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-pk"]
        indexes = [models.Index(fields=["candidate", "user"], name="candidateskip_candidate_user")]

    def __str__(self):
        return f"{self.user_id} skipped candidate {self.candidate_id}: {self.reason}"

"""Videos, their sampled frames, standalone images, pairs with their questions, captions, reviews, jobs."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models.expressions import CombinedExpression
from django.utils import timezone


class Category(models.TextChoices):
    ATTRIBUTE = "attribute"
    STATE = "state"
    EMOTION = "emotion"
    TEMPORAL = "temporal"
    SPATIAL = "spatial"
    EXISTENCE = "existence"
    QUANTITY = "quantity"
    QUALITY = "quality"
    VIEWPOINT = "viewpoint"
    ACTION = "action"


# The paper's column abbreviations, in the paper's order.
CATEGORY_ABBREVIATIONS = {
    Category.ATTRIBUTE: "AT",
    Category.STATE: "ST",
    Category.EMOTION: "EM",
    Category.TEMPORAL: "TM",
    Category.SPATIAL: "SP",
    Category.EXISTENCE: "EX",
    Category.QUANTITY: "QN",
    Category.QUALITY: "QL",
    Category.VIEWPOINT: "VP",
    Category.ACTION: "AC",
}


class Domain(models.TextChoices):
    NATURAL = "natural"
    GAMING = "gaming"
    INDUSTRIAL = "industrial"
    AERIAL = "aerial"
    MEDICAL = "medical"
    SYNTHETIC = "synthetic"


class Video(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        SAMPLING = "sampling"
        SAMPLED = "sampled"
        FAILED = "failed"

    yt8m_id = models.CharField("YouTube-8M id", max_length=64, unique=True)
    title = models.CharField(max_length=300, blank=True)
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

    class Meta:
        ordering = ["yt8m_id"]

    def __str__(self):
        return self.yt8m_id


class Image(models.Model):
    """Any image a pair can use: a sampled frame (see Frame) or a standalone imported image."""

    file = models.FileField(max_length=500)
    thumbnail = models.FileField(max_length=500, blank=True)
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    source = models.CharField(max_length=50, help_text="Dataset source, e.g. yt8m.")
    original_name = models.CharField(max_length=500, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    created = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return self.original_name or self.file.name


class Frame(models.Model):
    video = models.ForeignKey(Video, models.CASCADE, related_name="frames")
    index = models.PositiveIntegerField(help_text="Position among the video's sampled frames.")
    timestamp = models.FloatField(help_text="Seconds, from the stream's presentation timestamp.")
    pts = models.BigIntegerField(help_text="Presentation timestamp in stream time-base units.")
    image = models.OneToOneField(Image, models.CASCADE, related_name="frame")

    class Meta:
        ordering = ["video", "index"]
        constraints = [models.UniqueConstraint(fields=["video", "index"], name="frame_unique_index")]

    def __str__(self):
        return f"{self.video.yt8m_id} #{self.index} @ {self.timestamp:.3f}s"


class PairQuerySet(models.QuerySet):
    def awaiting_review(self):
        return self.filter(status=Pair.Status.SUBMITTED)

    def accepted(self):
        return self.filter(status=Pair.Status.ACCEPTED)

    def passing_similarity(self):
        """Pairs whose similarity under the current model meets the threshold, or whose failure a coordinator
        overrode. A similarity from another model (stale) counts as not computed."""
        from annotator.similarity import current_fingerprint

        meets = models.Q(similarity__gte=settings.SIMILARITY_THRESHOLD)
        overridden = ~models.Q(similarity_override_reason="")
        current = self.filter(similarity__isnull=False, similarity_model=current_fingerprint())
        return current.filter(meets | overridden)

    def needing_similarity(self):
        """Pairs whose similarity is not computed yet or was computed by another model (stale)."""
        from annotator.similarity import current_fingerprint

        return self.filter(models.Q(similarity__isnull=True) | ~models.Q(similarity_model=current_fingerprint()))

    def exportable(self):
        return self.accepted().passing_similarity()


class Pair(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        SUBMITTED = "submitted"
        ACCEPTED = "accepted"
        REJECTED = "rejected"

    image_1 = models.ForeignKey(Image, models.PROTECT, related_name="+")
    image_2 = models.ForeignKey(Image, models.PROTECT, related_name="+")
    video = models.ForeignKey(Video, models.SET_NULL, null=True, blank=True, related_name="pairs")
    category = models.CharField(max_length=20, choices=Category.choices)
    domain = models.CharField(max_length=20, choices=Domain.choices, default=Domain.NATURAL)
    source = models.CharField(max_length=50, default="yt8m")
    source_id = models.CharField(max_length=200, blank=True)
    question = models.TextField(blank=True)
    answer = models.TextField(blank=True)
    distractors = models.JSONField(default=list, blank=True)
    similarity = models.FloatField(null=True, blank=True)
    similarity_model = models.CharField(max_length=200, blank=True, help_text="Fingerprint of the model.")
    similarity_override_reason = models.TextField(blank=True)
    similarity_override_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    similarity_override_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT, db_index=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, null=True, blank=True, related_name="pairs")
    client_key = models.CharField(max_length=64, null=True, blank=True, unique=True)
    version = models.PositiveIntegerField(default=1)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    objects = PairQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]
        constraints = [
            models.UniqueConstraint(
                fields=["category", "source", "source_id"],
                condition=~models.Q(source_id=""),
                name="pair_unique_item_id",
            )
        ]

    def __str__(self):
        return f"{self.category} {self.source}/{self.source_id or self.pk}"

    @property
    def options(self) -> list[str]:
        return [self.answer, *self.distractors]

    @property
    def similarity_status(self) -> str:
        """'pending' (not computed), 'stale' (computed by another model: treated like pending), 'pass',
        'fail' (below the threshold) or 'override' (failed, overridden)."""
        from annotator.similarity import current_fingerprint

        if self.similarity is None:
            return "pending"
        if self.similarity_model != current_fingerprint():
            return "stale"
        if self.similarity >= settings.SIMILARITY_THRESHOLD:
            return "pass"
        return "override" if self.similarity_override_reason else "fail"

    def similarity_problem(self) -> str | None:
        """Why the subtlety rule keeps this pair from being accepted or exported, or None."""
        status = self.similarity_status
        if status == "pending":
            return "The DINOv3 similarity of this pair is not computed yet."
        if status == "stale":
            return (
                f"The similarity {self.similarity:.3f} came from another model ({self.similarity_model}); "
                "it is not computed yet with the current model."
            )
        if status == "fail":
            return (
                f"Similarity {self.similarity:.3f} is below the threshold {settings.SIMILARITY_THRESHOLD}: "
                "only a coordinator can override this, with a written reason."
            )
        return None


class Review(models.Model):
    class Decision(models.TextChoices):
        ACCEPT = "accept"
        REJECT = "reject"
        CORRECT = "correct", "correct and accept"

    pair = models.ForeignKey(Pair, models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="reviews")
    decision = models.CharField(max_length=20, choices=Decision.choices)
    reason = models.TextField(blank=True)
    changes = models.JSONField(default=dict, blank=True, help_text="Fields the reviewer corrected: old and new.")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created"]

    def __str__(self):
        return f"{self.decision} of pair {self.pair_id} by {self.reviewer_id}"


class Caption(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        SUBMITTED = "submitted"
        ACCEPTED = "accepted"
        REJECTED = "rejected"

    pair = models.ForeignKey(Pair, models.CASCADE, related_name="captions")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="captions")
    text = models.TextField(blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT, db_index=True)
    client_key = models.CharField(max_length=64, null=True, blank=True, unique=True)
    chosen = models.BooleanField(default=False, help_text="The accepted caption the export uses for its pair.")
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [
            models.UniqueConstraint(
                fields=["pair"], condition=models.Q(chosen=True), name="caption_one_chosen_per_pair"
            )
        ]

    def __str__(self):
        return f"caption {self.pk} of pair {self.pair_id}"


class Job(models.Model):
    """A long-running job (import, similarity, export): the page polls this row for its progress."""

    class Kind(models.TextChoices):
        IMPORT = "import"
        SIMILARITY = "similarity"
        EXPORT = "export"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    kind = models.CharField(max_length=20, choices=Kind.choices)
    title = models.CharField(max_length=300)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)
    result = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self):
        return f"{self.kind}: {self.title}"

    @property
    def percent(self) -> int:
        if self.status == self.Status.SUCCEEDED:
            return 100
        return int(100 * self.done / self.total) if self.total else 0

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)

    def start(self, total: int | None = None) -> None:
        self.status = self.Status.RUNNING
        self.started = self.started or timezone.now()
        if total is not None:
            self.total = total
        self.save(update_fields=["status", "started", "total"])

    def advance(self, steps: int = 1, error: str | None = None) -> None:
        """Count progress with an UPDATE so concurrent workers of one job never lose a step."""
        updates = {"done": models.F("done") + steps}
        if error:
            appended = models.Value([error], output_field=models.JSONField())
            updates["errors"] = CombinedExpression(models.F("errors"), "||", appended)
        Job.objects.filter(pk=self.pk).update(**updates)
        self.refresh_from_db(fields=["done", "errors"])

    def finish(self, result: dict | None = None, error: str | None = None) -> None:
        self.refresh_from_db(fields=["done", "errors"])
        if error:
            self.errors = [*self.errors, error]
        self.status = self.Status.FAILED if error else self.Status.SUCCEEDED
        self.result = result or {}
        self.finished = timezone.now()
        self.save(update_fields=["status", "result", "errors", "finished"])


# --- Similarity (DINOv3) ------------------------------------------------------------------------------------


class ImageEmbedding(models.Model):
    """One image's DINOv3 embedding under one model fingerprint, or why that image could not be embedded.

    The vector is L2-normalised and stored as float16 bytes (`dim` values); a failed image has no vector and
    an `error`. No row for the current fingerprint means the image is pending.
    """

    image = models.ForeignKey(Image, models.CASCADE, related_name="embeddings")
    fingerprint = models.CharField(max_length=200, help_text="Which weights, input size and dtype.")
    vector = models.BinaryField(null=True, blank=True)
    dim = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["image", "fingerprint"], name="image_embedding_unique_fingerprint")
        ]

    def __str__(self):
        return f"embedding of image {self.image_id} ({'failed' if self.failed else self.dim})"

    @property
    def failed(self) -> bool:
        return self.vector is None

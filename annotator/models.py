"""Videos, their sampled frames, standalone images, pairs with their questions, captions, reviews, jobs."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
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
    # Pair picking: who holds the video now (a lease renewed by heartbeats), and whom a coordinator gave it to.
    leased_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="leased_videos"
    )
    lease_heartbeat = models.DateTimeField(null=True, blank=True)
    lease_expires = models.DateTimeField(null=True, blank=True, db_index=True)
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="assigned_videos"
    )

    class Meta:
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

    def mark_sampling(self) -> None:
        """Only a video without frames shows 'sampling': a sampled one keeps its status while re-sampled."""
        if self.status != self.Status.SAMPLED:
            self.status = self.Status.SAMPLING
            self.error = ""
            self.save(update_fields=["status", "error", "updated"])

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

    def reviewable_by(self, user):
        """Submitted pairs a reviewer may decide: never their own work."""
        return self.awaiting_review().exclude(author=user)

    def with_caption(self):
        """Annotate `caption_text`: the chosen accepted caption the export uses, or None (captions, issue 5)."""
        chosen = Caption.objects.exported().filter(pair=models.OuterRef("pk")).values("text")[:1]
        return self.annotate(caption_text=models.Subquery(chosen))


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
    # Pair picking: the app orders the two frames to balance answer positions; this records the mapping.
    swapped = models.BooleanField(
        default=False, help_text="The annotator's frame A became image_2 (answer-position balancing)."
    )

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

    @property
    def chosen_caption(self) -> Caption | None:
        """The accepted caption chosen for the export (`has_caption` / `caption`), or None."""
        return self.captions.exported().first()

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


class CaptionQuerySet(models.QuerySet):
    def written(self):
        """Captions past the draft stage (submitted, accepted or rejected)."""
        return self.exclude(status=Caption.Status.DRAFT)

    def awaiting_review(self):
        return self.filter(status=Caption.Status.SUBMITTED)

    def reviewable_by(self, user):
        """Submitted captions this user may review: never their own."""
        return self.awaiting_review().exclude(author=user)

    def exported(self):
        """The caption the export uses for each pair (`has_caption` / `caption`): accepted and chosen."""
        return self.filter(status=Caption.Status.ACCEPTED, chosen=True)


class Caption(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        SUBMITTED = "submitted"
        ACCEPTED = "accepted"
        REJECTED = "rejected"

    class Flag(models.TextChoices):
        SHORT = "short", "very short"
        DUPLICATE = "duplicate", "duplicate of another item's caption"
        NEAR_DUPLICATE = "near_duplicate", "nearly identical to another annotator's caption"

    pair = models.ForeignKey(Pair, models.CASCADE, related_name="captions")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="captions")
    text = models.TextField(blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT, db_index=True)
    client_key = models.CharField(max_length=64, null=True, blank=True, unique=True)
    chosen = models.BooleanField(default=False, help_text="The accepted caption the export uses for its pair.")
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    # Captions (issue 5): the task it was written for, its review, and what the quality signals compare.
    task = models.ForeignKey("CaptionTask", models.SET_NULL, null=True, blank=True, related_name="captions")
    decided_at = models.DateTimeField(null=True, blank=True)
    normalized = models.TextField(blank=True, db_index=True, help_text="Lowercased words: exact duplicates.")
    tokens = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    prefix_tokens = ArrayField(
        models.CharField(max_length=100), default=list, blank=True, help_text="Candidate filter for near duplicates."
    )
    flags = ArrayField(models.CharField(max_length=20, choices=Flag.choices), default=list, blank=True)
    flag_detail = models.JSONField(default=dict, blank=True, help_text="Per flag: the caption it resembles.")

    objects = CaptionQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]
        constraints = [
            models.UniqueConstraint(
                fields=["pair"], condition=models.Q(chosen=True), name="caption_one_chosen_per_pair"
            ),
            models.CheckConstraint(
                condition=models.Q(chosen=False) | models.Q(status="accepted"), name="caption_chosen_is_accepted"
            ),
        ]
        indexes = [GinIndex(fields=["prefix_tokens"], name="caption_prefix_tokens_gin")]

    def __str__(self):
        return f"caption {self.pk} of pair {self.pair_id}"

    @staticmethod
    def length_problem(text: str) -> str | None:
        """Why this caption text cannot be submitted (empty, too short, too long), or None."""
        text = text.strip()
        if not text:
            return "The caption is empty: describe what changed from the first image to the second."
        if len(text) < settings.CAPTION_MIN_CHARS:
            return f"The caption is {len(text)} characters long; write at least {settings.CAPTION_MIN_CHARS}."
        if len(text) > settings.CAPTION_MAX_CHARS:
            return f"The caption is {len(text)} characters long; keep it to {settings.CAPTION_MAX_CHARS} at most."
        return None


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


# --- Pair picking: skip records and drafts ------------------------------------------------------------------


class VideoSkip(models.Model):
    """An annotator gave a video back with a reason; they are not offered it again (nobody is, if it is bad)."""

    class Reason(models.TextChoices):
        DONE = "done", "done with this video"
        NO_PAIR = "no_pair", "no usable pair"
        BAD_VIDEO = "bad_video", "bad video"
        INAPPROPRIATE = "inappropriate", "inappropriate content"

    # Reasons that take the video out of everyone's queue, not just the skipper's.
    FOR_EVERYONE = (Reason.BAD_VIDEO, Reason.INAPPROPRIATE)

    video = models.ForeignKey(Video, models.CASCADE, related_name="skips")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="video_skips")
    reason = models.CharField(max_length=20, choices=Reason.choices)
    note = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["video", "user"], name="videoskip_video_user")]

    def __str__(self):
        return f"{self.user_id} skipped {self.video_id}: {self.reason}"


class PairDraft(models.Model):
    """The workbench state of one annotator on one video, autosaved as they work, restored on reload."""

    author = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="pair_drafts")
    video = models.ForeignKey(Video, models.CASCADE, related_name="pair_drafts")
    state = models.JSONField(default=dict, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["author", "video"], name="pairdraft_one_per_video")]

    def __str__(self):
        return f"draft of {self.author_id} on {self.video_id}"


# --- Captions (issue 5): batches of pairs to caption, leased caption tasks, reviews and skips ------------------


class CaptionBatchQuerySet(models.QuerySet):
    def with_progress(self):
        """Annotate tasks_total, tasks_done, pairs_total and captions_accepted for the batch list."""
        done = models.Q(tasks__status=CaptionTask.Status.DONE)
        accepted = models.Q(tasks__caption__status=Caption.Status.ACCEPTED)
        return self.annotate(
            tasks_total=models.Count("tasks"),
            tasks_done=models.Count("tasks", filter=done),
            pairs_total=models.Count("tasks__pair", distinct=True),
            captions_accepted=models.Count("tasks", filter=accepted),
        )


class CaptionBatch(models.Model):
    """Which accepted pairs get captions, how many each, and how the workbench shows them."""

    class Selection(models.TextChoices):
        ALL = "all", "all accepted pairs"
        LIST = "list", "a list of pair ids"
        SAMPLE = "sample", "a stratified random fraction per category"

    title = models.CharField(max_length=200)
    selection = models.CharField(max_length=20, choices=Selection.choices)
    fraction = models.FloatField(null=True, blank=True, help_text="Sample: the fraction of each category.")
    seed = models.BigIntegerField(null=True, blank=True, help_text="Sample: the random seed (reproducible).")
    captions_per_item = models.PositiveSmallIntegerField(default=1)
    show_question = models.BooleanField(default=False, help_text="Show the pair's question and answer.")
    allow_own_pairs = models.BooleanField(default=False, help_text="Annotators may caption pairs they authored.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    objects = CaptionBatchQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self):
        return self.title

    @property
    def percent(self) -> int:
        """Share of the batch's tasks with a submitted caption (needs with_progress())."""
        return int(100 * self.tasks_done / self.tasks_total) if self.tasks_total else 0


class CaptionTaskQuerySet(models.QuerySet):
    def open(self):
        return self.filter(status=CaptionTask.Status.OPEN)

    def leased_to(self, user, now=None):
        return self.open().filter(leased_by=user, leased_until__gt=now or timezone.now())

    def available_to(self, user, now=None):
        """Open tasks nobody holds, on pairs this user may caption and has not captioned or skipped."""
        now = now or timezone.now()
        free = models.Q(leased_until__isnull=True) | models.Q(leased_until__lte=now)
        may_caption = ~models.Q(pair__author=user) | models.Q(batch__allow_own_pairs=True)
        written = Caption.objects.written().filter(author=user).values("pair_id")
        skipped = CaptionSkip.objects.filter(user=user).values("task_id")
        return (
            self.open()
            .filter(free, may_caption, pair__status=Pair.Status.ACCEPTED)
            .exclude(pair_id__in=written)
            .exclude(pk__in=skipped)
        )


class CaptionTask(models.Model):
    """One caption a batch needs for one pair (slot 1..captions_per_item), leased to one annotator at a time."""

    class Status(models.TextChoices):
        OPEN = "open"
        DONE = "done"

    batch = models.ForeignKey(CaptionBatch, models.CASCADE, related_name="tasks")
    pair = models.ForeignKey(Pair, models.CASCADE, related_name="caption_tasks")
    slot = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN, db_index=True)
    caption = models.OneToOneField(
        Caption, models.SET_NULL, null=True, blank=True, related_name="+", help_text="The submitted caption."
    )
    leased_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="caption_leases"
    )
    leased_until = models.DateTimeField(null=True, blank=True)

    objects = CaptionTaskQuerySet.as_manager()

    class Meta:
        ordering = ["batch", "pair", "slot"]
        constraints = [models.UniqueConstraint(fields=["batch", "pair", "slot"], name="caption_task_unique_slot")]

    def __str__(self):
        return f"caption task {self.pk} (pair {self.pair_id}, slot {self.slot})"

    def is_leased_to(self, user, now=None) -> bool:
        now = now or timezone.now()
        return self.leased_by_id == user.pk and self.leased_until is not None and self.leased_until > now

    def is_free(self, now=None) -> bool:
        now = now or timezone.now()
        return self.leased_until is None or self.leased_until <= now


class CaptionSkip(models.Model):
    """An annotator passed on a caption task, with a reason; the task is not offered to them again."""

    task = models.ForeignKey(CaptionTask, models.CASCADE, related_name="skips")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    reason = models.TextField()
    created = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return f"skip of caption task {self.task_id} by {self.user_id}"


class CaptionReview(models.Model):
    class Decision(models.TextChoices):
        ACCEPT = "accept"
        REJECT = "reject"
        EDIT = "edit", "edit and accept"

    caption = models.ForeignKey(Caption, models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="caption_reviews")
    decision = models.CharField(max_length=10, choices=Decision.choices)
    reason = models.TextField(blank=True)
    original_text = models.TextField(blank=True, help_text="The text before an edit.")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created"]

    def __str__(self):
        return f"{self.decision} of caption {self.caption_id} by {self.reviewer_id}"


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

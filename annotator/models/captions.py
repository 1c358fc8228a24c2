"""Difference captions: batches of pairs to caption, leased caption tasks, skips and reviews."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector
from django.db import models
from django.utils import timezone

from annotator.models.leases import Leasable, LeaseQuerySet
from annotator.models.pairs import Pair
from annotator.models.picking import next_draft_version
from subtlebench.text import CAPTION_TEXT_MAX, NAME_MAX, NOTE_MAX, single_line, text_validators


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
    text = models.TextField(blank=True, max_length=CAPTION_TEXT_MAX, validators=text_validators(CAPTION_TEXT_MAX))
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT, db_index=True)
    # Each autosave names the draft version it was based on (annotator/authoring/drafts.py): a second tab's is refused.
    draft_version = models.PositiveBigIntegerField(default=0)
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
        ordering = ["-created", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["pair"], condition=models.Q(chosen=True), name="caption_one_chosen_per_pair"
            ),
            models.CheckConstraint(
                condition=models.Q(chosen=False) | models.Q(status="accepted"), name="caption_chosen_is_accepted"
            ),
        ]
        indexes = [
            GinIndex(fields=["prefix_tokens"], name="caption_prefix_tokens_gin"),
            GinIndex(SearchVector("text", config="english"), name="caption_text_search"),
        ]

    def __str__(self):
        return f"caption {self.pk} of pair {self.pair_id}"

    def bump_draft_version(self) -> None:
        self.draft_version = next_draft_version(self.draft_version)

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

    title = models.CharField(max_length=NAME_MAX, validators=[single_line])
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
        ordering = ["-created", "-pk"]

    def __str__(self):
        return self.title

    @property
    def percent(self) -> int:
        """Share of the batch's tasks with a submitted caption (needs with_progress())."""
        return int(100 * self.tasks_done / self.tasks_total) if self.tasks_total else 0


class CaptionTaskQuerySet(LeaseQuerySet):
    def open(self):
        return self.filter(status=CaptionTask.Status.OPEN)

    def to_caption_by(self, user):
        """Open tasks on pairs this user may caption and has not captioned, whoever holds them and whatever was
        skipped (the caption queue adds both: annotator/captions/services.py, caption_tasks_open_to)."""
        may_caption = ~models.Q(pair__author=user) | models.Q(batch__allow_own_pairs=True)
        written = Caption.objects.written().filter(author=user).values("pair_id")
        return self.open().filter(may_caption, pair__status=Pair.Status.ACCEPTED).exclude(pair_id__in=written)


class CaptionTask(Leasable):
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

    objects = CaptionTaskQuerySet.as_manager()

    class Meta(Leasable.Meta):
        ordering = ["batch", "pair", "slot"]
        constraints = [
            *Leasable.Meta.constraints,
            models.UniqueConstraint(fields=["batch", "pair", "slot"], name="caption_task_unique_slot"),
        ]

    def __str__(self):
        return f"caption task {self.pk} (pair {self.pair_id}, slot {self.slot})"

    @property
    def title(self) -> str:
        """The task as pages name it, by what its pair shows rather than by ids: "caption of the temporal pair on
        beach_walk" (select_related("pair__video") to read it without queries)."""
        pair = self.pair
        where = pair.video.yt8m_id if pair.video_id else (pair.source_id or f"{pair.source} item")
        return f"caption of the {pair.category} pair on {where}"


class CaptionSkip(models.Model):
    """An annotator passed on a caption task, with a reason; the task is not offered to them again."""

    task = models.ForeignKey(CaptionTask, models.CASCADE, related_name="skips")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    reason = models.TextField(max_length=NOTE_MAX, validators=text_validators(NOTE_MAX))
    created = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return f"skip of caption task {self.task_id} by {self.user_id}"


class CaptionReview(models.Model):
    class Decision(models.TextChoices):
        ACCEPT = "accept"
        REJECT = "reject"
        EDIT = "edit", "edit and accept"
        # The record that a reviewer or coordinator took a decision back (with why): the caption is waiting for
        # review again.
        REOPEN = "reopen", "reopen"

    caption = models.ForeignKey(Caption, models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="caption_reviews")
    decision = models.CharField(max_length=10, choices=Decision.choices)
    reason = models.TextField(blank=True, max_length=NOTE_MAX, validators=text_validators(NOTE_MAX))
    original_text = models.TextField(
        blank=True,
        max_length=CAPTION_TEXT_MAX,
        validators=text_validators(CAPTION_TEXT_MAX),
        help_text="The text before an edit.",
    )
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self):
        return f"{self.decision} of caption {self.caption_id} by {self.reviewer_id}"

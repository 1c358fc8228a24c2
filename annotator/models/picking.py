"""Pair picking: skip records and autosaved workbench drafts."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import models
from django.db.models.functions import Greatest
from django.utils import timezone

from annotator.models.videos import Video
from subtlebench.text import NOTE_MAX, text_validators


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
    note = models.TextField(blank=True, max_length=NOTE_MAX, validators=text_validators(NOTE_MAX))
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-pk"]
        indexes = [models.Index(fields=["video", "user"], name="videoskip_video_user")]

    def __str__(self):
        return f"{self.user_id} skipped {self.video_id}: {self.reason}"


def next_draft_version(current: int) -> int:
    """The draft version after `current` (pair drafts and caption drafts). It grows with the clock (microseconds),
    not from 1, because a submit or a skip deletes a draft: one made after it must never reuse a version that a
    stale tab still holds."""
    return max(current + 1, time.time_ns() // 1000)


class PairDraft(models.Model):
    """The workbench state of one annotator on one video, autosaved as they work, restored on reload."""

    author = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="pair_drafts")
    video = models.ForeignKey(Video, models.CASCADE, null=True, blank=True, related_name="pair_drafts")
    # Or a candidate pair of a collection (issue 27): the same workbench, one draft per candidate.
    candidate = models.ForeignKey(
        "annotator.PairCandidate", models.CASCADE, null=True, blank=True, related_name="pair_drafts"
    )
    state = models.JSONField(default=dict, blank=True)
    # Optimistic versioning, as for pairs: each save names the version it was based on, and a save from a tab that
    # did not see the latest one is refused (409, annotator/drafts.py).
    version = models.PositiveBigIntegerField(default=0)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["author", "video"], name="pairdraft_one_per_video"),
            models.UniqueConstraint(fields=["author", "candidate"], name="pairdraft_one_per_candidate"),
            models.CheckConstraint(
                condition=models.Q(video__isnull=False, candidate__isnull=True)
                | models.Q(video__isnull=True, candidate__isnull=False),
                name="pairdraft_video_or_candidate",
            ),
        ]

    def __str__(self):
        return f"draft of {self.author_id} on {self.video_id or f'candidate {self.candidate_id}'}"

    @staticmethod
    def next_version_expression():
        """`next_draft_version` of the row's own version, for an UPDATE that sets it in the database."""
        return Greatest(models.F("version") + 1, models.Value(next_draft_version(0)))


class VideoHandover(models.Model):
    """A coordinator gave a video someone held to another annotator: whose lease ended, and the draft that went with
    the video to the new holder (copied: the first holder keeps theirs)."""

    video = models.ForeignKey(Video, models.CASCADE, related_name="handovers")
    from_user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    to_user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, null=True, blank=True, related_name="+")
    by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, related_name="+")
    draft_saved = models.DateTimeField(null=True, blank=True, help_text="When the first holder last saved the draft.")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self):
        return f"video {self.video_id} from {self.from_user_id} to {self.to_user_id}"

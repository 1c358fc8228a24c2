"""Pair picking: skip records and autosaved workbench drafts."""

from __future__ import annotations

from django.conf import settings
from django.db import models
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

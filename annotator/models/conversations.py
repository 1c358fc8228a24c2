"""Conversations on a pair or a caption: comments by reviewers and annotators, and who has yet to read them."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from subtlebench.text import NOTE_MAX, text_validators


class Comment(models.Model):
    """One message of the thread on a pair or a caption (exactly one of the two)."""

    class Kind(models.TextChoices):
        COMMENT = "comment"
        REJECTION = "rejection"  # the reviewer's reason, posted by the rejection itself
        FIXED = "fixed", "fixed, please look again"  # the author sent the item back to review

    pair = models.ForeignKey("annotator.Pair", models.CASCADE, null=True, blank=True, related_name="comments")
    caption = models.ForeignKey("annotator.Caption", models.CASCADE, null=True, blank=True, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="comments")
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.COMMENT)
    body = models.TextField(max_length=NOTE_MAX, validators=text_validators(NOTE_MAX))
    created = models.DateTimeField(default=timezone.now)
    resolved = models.DateTimeField(null=True, blank=True, help_text="When someone marked the point settled.")
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")

    class Meta:
        ordering = ["created", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(pair__isnull=False, caption__isnull=True)
                | models.Q(pair__isnull=True, caption__isnull=False),
                name="comment_pair_or_caption",
            )
        ]

    def __str__(self):
        return (
            f"comment {self.pk} on {'pair ' + str(self.pair_id) if self.pair_id else 'caption ' + str(self.caption_id)}"
        )


class CommentNotice(models.Model):
    """A comment someone should read (the item's author, an earlier participant, a mentioned user); `read` set once
    they opened the thread."""

    comment = models.ForeignKey(Comment, models.CASCADE, related_name="notices")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="comment_notices")
    mentioned = models.BooleanField(default=False)
    read = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["comment", "user"], name="commentnotice_once_per_user")]
        indexes = [models.Index(fields=["user", "read"], name="commentnotice_user_read")]

    def __str__(self):
        return f"notice of comment {self.comment_id} for {self.user_id}"

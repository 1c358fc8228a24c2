"""What a bulk action of the data manager changed, item by item, so the whole action can be taken back.

A `BulkAction` is made with its bulk job; a `BulkChange` per item that went through is written in the transaction
that changed the item: the fields the action may touch before and after it, and the rows it created (a review, the
caption tasks). Undo (annotator.datamanager.undo) restores `before` on each item still as `after` left it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from annotator.models.jobs import Job


class BulkAction(models.Model):
    job = models.OneToOneField(Job, models.CASCADE, related_name="bulk_action")
    table = models.CharField(max_length=20)
    action = models.CharField(max_length=30)
    created = models.DateTimeField(default=timezone.now)
    undo_until = models.DateTimeField(help_text="The action can be undone until then (BULK_UNDO_HOURS after it).")
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    undo_report = models.JSONField(
        default=dict, blank=True, help_text="restored: the count; kept: [{id, why}] for items that changed since."
    )

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self):
        return f"bulk {self.action} on {self.table} (job {self.job_id})"

    def can_undo(self, now=None) -> bool:
        return self.undone_at is None and (now or timezone.now()) < self.undo_until


class BulkChange(models.Model):
    bulk_action = models.ForeignKey(BulkAction, models.CASCADE, related_name="changes")
    item_id = models.BigIntegerField()
    before = models.JSONField(help_text="The item's fields the action may change, as they were.")
    after = models.JSONField(help_text="The same fields as the action left them.")
    created_rows = models.JSONField(default=dict, blank=True, help_text='{"reviews": [ids], "caption_tasks": [ids]}')

    class Meta:
        ordering = ["bulk_action", "item_id"]
        constraints = [models.UniqueConstraint(fields=["bulk_action", "item_id"], name="bulk_change_once")]

    def __str__(self):
        return f"item {self.item_id} of {self.bulk_action}"

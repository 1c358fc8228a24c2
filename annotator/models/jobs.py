"""Long-running jobs (import, similarity, export) whose progress the pages poll."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.expressions import CombinedExpression
from django.utils import timezone


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

    def save(self, *args, **kwargs):
        # Titles are made of what a user typed (a folder, a path, file names): clipped, never a failed INSERT.
        title_max = self._meta.get_field("title").max_length
        if len(self.title) > title_max:
            self.title = self.title[: title_max - 1] + "…"
        super().save(*args, **kwargs)

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

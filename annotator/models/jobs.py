"""Long-running jobs (import, similarity, export) whose progress the pages poll, and their units of work.

A `JobTask` is one Celery task of a job (one video to sample, one embedding run, one export), written in the same
transaction as the rows it works on: the outbox. It is handed to the broker after the commit; when the broker is
away it stays pending with the reason, and the sweeper (annotator.jobs.services.jobs_sweep) hands it over later.
A worker claims it with a compare-and-set and beats its heartbeat while it runs, so a unit is run and counted once,
and one whose worker vanished is found and requeued or failed.
"""

from __future__ import annotations

from functools import cached_property

from django.conf import settings
from django.db import models
from django.db.models.expressions import CombinedExpression
from django.utils import timezone

from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, has_role

ACTIVE = ("queued", "running")


class JobCancelled(Exception):
    """The job was cancelled (or finished) while this worker ran a unit of it: stop at the next unit."""


class JobQuerySet(models.QuerySet):
    def visible_to(self, user):
        """The jobs of the kinds this user's roles may see (Job.KIND_ROLES); none for a user without a role."""
        return self.filter(kind__in=[kind for kind, roles in Job.KIND_ROLES.items() if has_role(user, *roles)])

    def with_pauses(self):
        """Each job's paused units read with the jobs, in one query (Job.pause)."""
        paused = JobTask.objects.paused().order_by("paused_until", "pk")
        return self.prefetch_related(models.Prefetch("tasks", queryset=paused, to_attr="paused_units"))


class Job(models.Model):
    """A long-running job (import, similarity, export): the page polls this row for its progress."""

    class Kind(models.TextChoices):
        IMPORT = "import"
        SIMILARITY = "similarity"
        EXPORT = "export"
        MODEL_EVAL = "model_eval", "model evaluation"
        BULK = "bulk"
        ZIP = "zip", "export zip"
        MINE = "mine", "pair mining"
        SWEEP = "sweep", "synthetic sweep"
        EDIT = "edit", "model edits"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    # Who may see a job of each kind, on the pages and in the API. Imports and exports are the coordinators' work,
    # and their results and errors name server folders and files; a similarity run concerns everyone's pairs.
    KIND_ROLES = {
        Kind.IMPORT: (COORDINATOR,),
        Kind.SIMILARITY: (ANNOTATOR, REVIEWER, COORDINATOR),
        Kind.EXPORT: (COORDINATOR,),
        Kind.MODEL_EVAL: (COORDINATOR,),
        Kind.BULK: (REVIEWER, COORDINATOR),
        Kind.ZIP: (COORDINATOR,),
        Kind.MINE: (COORDINATOR,),
        Kind.SWEEP: (COORDINATOR,),
        Kind.EDIT: (COORDINATOR,),
    }

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
    heartbeat = models.DateTimeField(null=True, blank=True, help_text="When a worker last reported progress.")
    # A client's key for "create this job": the same key again returns the job it made instead of a second one.
    idempotency_key = models.CharField(max_length=100, blank=True, default="")

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["created_by", "kind", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="job_unique_idempotency_key",
            )
        ]

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
        return min(100, int(100 * self.done / self.total)) if self.total else 0

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE

    @cached_property
    def pause(self) -> JobTask | None:
        """The unit of this active job that waits out an outage (the next to try again); None when none does."""
        if not self.is_active:
            return None
        units = getattr(self, "paused_units", None)
        if units is None:
            units = list(self.tasks.paused().order_by("paused_until", "pk")[:1])
        return units[0] if units else None

    @property
    def state(self) -> str:
        """The status in one word for the pages: "paused" while a unit waits out an outage, else the status."""
        return "paused" if self.pause is not None else self.status

    @property
    def state_label(self) -> str:
        """The state as the pages write it: a job that ended with errors says so, never a plain "succeeded"."""
        if self.status == self.Status.SUCCEEDED and self.errors:
            count = len(self.errors)
            return f"succeeded with {count} error{'s' if count != 1 else ''}"
        return self.state

    @property
    def badge(self) -> str:
        """The state's colour on the pages (badge-<this>, progress <this>): a success with errors is a warning."""
        return "warn" if self.status == self.Status.SUCCEEDED and self.errors else self.state

    @property
    def paused_until(self):
        return self.pause.paused_until if self.pause else None

    @property
    def pause_reason(self) -> str:
        return self.pause.error if self.pause else ""

    @property
    def can_retry(self) -> bool:
        # A model run that succeeded may still hold failed items (before issue 25) or be asked again, and an edit job
        # that succeeded its failed images: any ended one.
        ended = (self.Status.FAILED, self.Status.CANCELLED)
        again = (self.Kind.MODEL_EVAL, self.Kind.EDIT)
        return self.status in ended or (self.kind in again and self.status == self.Status.SUCCEEDED)

    def start(self, total: int | None = None) -> None:
        """Mark the job running (from queued: a compare-and-set); a finished or cancelled job raises JobCancelled."""
        now = timezone.now()
        fields = {"status": self.Status.RUNNING, "started": self.started or now, "heartbeat": now}
        if total is not None:
            fields["total"] = total
        if not Job.objects.filter(pk=self.pk, status__in=ACTIVE).update(**fields):
            self.refresh_from_db()
            raise JobCancelled(f"job {self.pk} is {self.status}")
        for name, value in fields.items():
            setattr(self, name, value)

    def count_afresh(self) -> None:
        """Set the progress back to nothing done: a single unit that does its whole work again (its first run died
        midway) counts its steps from zero, not on top of what the dead run counted."""
        Job.objects.filter(pk=self.pk).update(done=0)
        self.done = 0

    def advance(self, steps: int = 1, error: str | None = None) -> None:
        """Count progress with an UPDATE so concurrent workers of one job never lose a step; beats the heartbeat.
        Raises JobCancelled when the job is no longer active, so a cancelled job's work stops at its next unit."""
        updates = {"done": models.F("done") + steps, "heartbeat": timezone.now()}
        if error:
            appended = models.Value([error], output_field=models.JSONField())
            updates["errors"] = CombinedExpression(models.F("errors"), "||", appended)
        changed = Job.objects.filter(pk=self.pk, status__in=ACTIVE).update(**updates)
        self.refresh_from_db(fields=["done", "errors", "status"])
        if not changed:
            raise JobCancelled(f"job {self.pk} is {self.status}")

    # The key of an export's result that says when its files first left the server (downloaded, or written out
    # again): from then on its pairs count as public (Pair.objects.already_public, issue 24).
    PUBLIC_SINCE = "public_since"

    def mark_files_public(self, now=None) -> None:
        """Record, once, that this export's files left the server. One UPDATE that adds the key to the stored result,
        so a concurrent change of the result (a later export replacing it) is never overwritten."""
        stamp = models.Value({self.PUBLIC_SINCE: (now or timezone.now()).isoformat()}, output_field=models.JSONField())
        Job.objects.filter(pk=self.pk).exclude(**{"result__has_key": self.PUBLIC_SINCE}).update(
            result=CombinedExpression(models.F("result"), "||", stamp)
        )
        self.refresh_from_db(fields=["result"])

    def finish(self, result: dict | None = None, error: str | None = None) -> bool:
        """Succeed or fail the job, once: a job already finished or cancelled is left as it is (False)."""
        self.refresh_from_db(fields=["done", "errors", "status"])
        if not self.is_active:
            return False
        errors = [*self.errors, error] if error else self.errors
        fields = {
            "status": self.Status.FAILED if error else self.Status.SUCCEEDED,
            "result": result or {},
            "errors": errors,
            "finished": timezone.now(),
        }
        if not Job.objects.filter(pk=self.pk, status__in=ACTIVE).update(**fields):
            self.refresh_from_db()
            return False
        for name, value in fields.items():
            setattr(self, name, value)
        return True


class JobTaskQuerySet(models.QuerySet):
    def paused(self):
        """Units queued again after an outage, waiting for their time to try again (`paused_until`)."""
        waiting = (JobTask.Status.PENDING, JobTask.Status.QUEUED)  # pending: the broker was away when it was re-sent
        return self.filter(status__in=waiting, paused_until__isnull=False)

    def unsent(self, before):
        """Pending units whose commit-time hand-over to the broker failed (they say why), or never ran (created
        before `before`)."""
        return self.filter(status=JobTask.Status.PENDING).filter(models.Q(created__lt=before) | ~models.Q(error=""))

    def held(self, since):
        """Running units whose claim showed life since `since`: a progress beat (`heartbeat`), or its process saying
        it still runs the claim (`alive`, annotator/jobs/liveness.py)."""
        return self.filter(status=JobTask.Status.RUNNING).filter(
            models.Q(heartbeat__gte=since) | models.Q(alive__gte=since)
        )

    def stale(self, before):
        """Running units whose worker is gone: no progress beat since `before`, and no process has said since then
        that it still runs the claim (it died, or its task ended without ending the unit). A step that is only slow
        keeps its unit: its process says so while it runs."""
        return self.filter(status=JobTask.Status.RUNNING, heartbeat__lt=before).exclude(alive__gte=before)

    def lost(self, before):
        """Units the broker accepted before `before` that no worker ever started (their message was lost)."""
        return self.filter(status=JobTask.Status.QUEUED, queued_at__lt=before)


class JobTask(models.Model):
    """One unit of a job's work and the Celery task that runs it (the outbox row; see the module docstring)."""

    class Status(models.TextChoices):
        PENDING = "pending"  # written, not yet accepted by the broker
        QUEUED = "queued"  # accepted by the broker
        RUNNING = "running"  # claimed by a worker (`token`), which beats `heartbeat`
        DONE = "done"  # its outcome is counted on the job
        FAILED = "failed"  # given up (attempts used up), counted as a failure
        CANCELLED = "cancelled"

    job = models.ForeignKey(Job, models.CASCADE, related_name="tasks")
    name = models.CharField(max_length=200, help_text="The Celery task's name.")
    kwargs = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0, help_text="How many times a worker claimed it.")
    sends = models.PositiveIntegerField(default=0, help_text="How many times the broker accepted it.")
    token = models.CharField(max_length=32, blank=True, help_text="The current claim's token.")
    celery_id = models.CharField(max_length=64, blank=True, help_text="The Celery task id of the current claim.")
    worker = models.CharField(max_length=200, blank=True, help_text="The worker of the current claim.")
    heartbeat = models.DateTimeField(null=True, blank=True, help_text="When the current claim last made progress.")
    alive = models.DateTimeField(
        null=True, blank=True, help_text="When the process of the current claim last said it still runs it."
    )
    # A unit paused for an outage (annotator.jobs.services.job_task_pause) is queued again for `paused_until`, with the
    # reason in `error`; `paused_since` (its first pause since it last made progress) bounds the wait.
    paused_until = models.DateTimeField(null=True, blank=True)
    paused_since = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="The last reason it was not sent, requeued, paused or failed.")
    created = models.DateTimeField(default=timezone.now)
    finished = models.DateTimeField(null=True, blank=True)

    objects = JobTaskQuerySet.as_manager()

    class Meta:
        ordering = ["pk"]

    def __str__(self):
        return f"{self.name} #{self.pk} of job {self.job_id} ({self.status})"


class JobItem(models.Model):
    """One item (a pair, a video) a bulk job dealt with, written in the transaction that changed it: a unit run again
    after its worker died skips the items already done, so no item is processed twice."""

    job = models.ForeignKey(Job, models.CASCADE, related_name="items")
    item_id = models.BigIntegerField()
    ok = models.BooleanField()
    message = models.TextField(blank=True, max_length=2000, help_text="Why the item was refused.")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["job", "item_id"]
        constraints = [models.UniqueConstraint(fields=["job", "item_id"], name="job_item_once")]

    def __str__(self):
        return f"item {self.item_id} of job {self.job_id} ({'ok' if self.ok else 'refused'})"

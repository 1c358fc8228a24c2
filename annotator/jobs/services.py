"""Jobs: their units queued reliably (the outbox), claimed and beaten by workers, swept when stuck; cancel, retry.

- `job_task_add` records a unit in the caller's transaction and hands it to the broker after the commit; a broker
  error never undoes that work: the unit stays pending with the reason, and `jobs_sweep` sends it later.
- `job_task_claim` is the compare-and-set that starts a unit (and its job): a second delivery of a unit that is
  running or done finds it taken and exits. `JobRun` beats the heartbeat, stops when the job was cancelled, and
  completes the unit once, in the transaction that counts its outcome.
- `jobs_sweep` (beat, every JOB_SWEEP_SECONDS) sends pending units, requeues units whose worker is gone (no progress
  beat and no word from its process for JOB_STALE_SECONDS: annotator/jobs/liveness.py) or fails them after
  JOB_MAX_ATTEMPTS claims, with the reason.
- `job_task_pause` queues a unit that met an outage again after a countdown, with the reason on its job's page; it
  resumes by itself (model runs pause so for their endpoint, any task for the storage, broker or database:
  `job_task_failed`, called as the task ends).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from annotator.jobs import liveness
from annotator.jobs.outages import outage_reason
from annotator.models import Job, JobCancelled, JobTask
from annotator.models.jobs import ACTIVE
from subtlebench.errors import Conflict, Forbidden
from subtlebench.models import Tick
from subtlebench.roles import COORDINATOR, has_role

log = logging.getLogger(__name__)

# The commit hook sends a unit at once; the sweeper leaves a pending unit this long to it before sending it itself.
SEND_GRACE_SECONDS = 5
OPEN = (JobTask.Status.PENDING, JobTask.Status.QUEUED, JobTask.Status.RUNNING)
# How a unit that is given up is counted, by task name (default: the job fails with the reason).
ABANDON = {"annotator.tasks.sample_video": "annotator.videos.services.video_sample_abandon"}


class JobTaskLost(JobCancelled):
    """Another worker claimed this unit (the sweeper judged this one gone): stop without writing its outcome."""


class PausedTooLong(Exception):
    """A unit has been paused for an outage longer than its job may wait: the message says since when, and why."""


# --- Creating jobs and queueing their units -------------------------------------------------------------------


def job_for_key(*, user, kind: str, key: str) -> Job | None:
    """The job this user already created with this idempotency key, if any."""
    if not key or user is None or not getattr(user, "pk", None):
        return None
    return Job.objects.filter(created_by=user, kind=kind, idempotency_key=key).first()


def job_create_once(create, *, user, kind: str, key: str) -> tuple[Job, bool]:
    """Run `create()` (a function that creates the job and its units in one transaction) unless this user's key
    already made a job; (job, created). Of two requests with one key at once, the unique key lets one through."""
    existing = job_for_key(user=user, kind=kind, key=key)
    if existing is not None:
        return existing, False
    try:
        return create(), True
    except IntegrityError:
        existing = job_for_key(user=user, kind=kind, key=key)
        if existing is None:
            raise
        return existing, False


def clean_idempotency_key(raw) -> str:
    return str(raw or "").strip()[: Job._meta.get_field("idempotency_key").max_length]


def job_task_add(*, job: Job, name: str, kwargs: dict, send: bool = True) -> JobTask:
    """Record a unit of the job's work in the caller's transaction; it goes to the broker after the commit."""
    task = JobTask.objects.create(job=job, name=name, kwargs=kwargs)
    if send:
        # robust: a failing hook must not keep the other hooks of this commit (e.g. another unit) from running.
        transaction.on_commit(partial(job_task_send, task_id=task.pk), robust=True)
    return task


def job_task_send(*, task_id: int, countdown: float | None = None) -> bool:
    """Hand a unit to the broker (to run in `countdown` seconds: a paused model run). Never raises: a broker error
    leaves the unit pending with the reason, for the sweeper; the committed work it follows stays as it is."""
    from subtlebench.celery import app

    task = JobTask.objects.filter(pk=task_id, status__in=(JobTask.Status.PENDING, JobTask.Status.QUEUED)).first()
    if task is None:
        return False
    # The message's task id is recorded (celery_id, until a worker's claim writes its own): the sweeper looks for it
    # in the broker to tell a lost message from one that waits (jobs_resend_lost).
    message_id = str(uuid.uuid4())
    try:
        app.send_task(task.name, kwargs={**task.kwargs, "unit_id": task.pk}, task_id=message_id, countdown=countdown)
    except Exception as error:  # kombu and redis raise many kinds for "the broker is away"
        reason = f"not queued at {timezone.now():%Y-%m-%d %H:%M:%S}: the broker refused it ({type(error).__name__}: "
        reason += f"{error}); the sweeper queues it when the broker is back"
        log.warning("job %s, unit %s (%s): %s", task.job_id, task.pk, task.name, reason)
        JobTask.objects.filter(pk=task.pk, status=task.status).update(error=reason[:2000])
        return False
    # The send counts whatever the unit's status is now: a worker may have taken the message and claimed the unit (or
    # even finished it) before this line, and then only the marks of a waiting unit stay as the claim wrote them.
    JobTask.objects.filter(pk=task.pk).update(sends=models.F("sends") + 1)
    JobTask.objects.filter(pk=task.pk, status__in=(JobTask.Status.PENDING, JobTask.Status.QUEUED)).update(
        status=JobTask.Status.QUEUED, queued_at=timezone.now(), celery_id=message_id
    )
    return True


# --- Running a unit (in the worker) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class UnitRef:
    """Which unit a task message runs, and who runs it (the task's id and worker). A message also says what it was
    sent for (its task's name and arguments): the unit it names must be that one (`names_the_unit`)."""

    unit_id: int | None
    celery_id: str = ""
    worker: str = ""
    name: str = ""
    kwargs: dict | None = None

    def names_the_unit(self, task: JobTask) -> bool:
        """Whether this message was sent for `task` (the row its unit id names here), or says nothing to tell."""
        return not self.name or (task.name == self.name and task.kwargs == self.kwargs)


def unit_of(task, unit_id: int | None) -> UnitRef:
    """The UnitRef of a bound Celery task's current message: its unit, the task's name and the arguments it
    carries besides the unit's id (job_task_send sent the unit's own). A task called as a function in this process
    has no message: only its unit."""
    request = task.request
    if request.called_directly:
        return UnitRef(unit_id, worker=request.hostname or "")
    kwargs = {key: value for key, value in (request.kwargs or {}).items() if key != "unit_id"}
    return UnitRef(unit_id, celery_id=request.id or "", worker=request.hostname or "", name=task.name, kwargs=kwargs)


def job_unit(job_id: int, unit: UnitRef | None) -> UnitRef:
    """The unit to claim: the message's own, or, called in this process (or by a message of an older version, which
    names none), the job's last unit."""
    if unit is not None and unit.unit_id is not None:
        return unit
    task = JobTask.objects.filter(job_id=job_id).order_by("pk").last()
    return UnitRef(task.pk if task else None, worker=unit.worker if unit else "this process")


@dataclass
class JobRun:
    """A claimed unit: beats its heartbeat, stops when the job ended, completes the unit once."""

    task_id: int
    job: Job
    token: str
    attempts: int = 1
    last_beat: float = field(default_factory=time.monotonic)
    paused: bool = False  # the unit had been paused for an outage: its first progress ends that pause's count

    def beat(self, *, force: bool = False) -> None:
        """Record that the worker is alive (at most every JOB_HEARTBEAT_SECONDS unless forced); raise JobCancelled
        when the job was cancelled or finished, JobTaskLost when another worker took the unit over."""
        if not force and time.monotonic() - self.last_beat < settings.JOB_HEARTBEAT_SECONDS:
            return
        now = timezone.now()
        self.last_beat = time.monotonic()
        if not JobTask.objects.filter(pk=self.task_id, token=self.token, status=JobTask.Status.RUNNING).update(
            heartbeat=now
        ):
            raise JobTaskLost(f"unit {self.task_id} of job {self.job.pk} was taken over or ended")
        if not Job.objects.filter(pk=self.job.pk, status__in=ACTIVE).update(heartbeat=now):
            raise JobCancelled(f"job {self.job.pk} is no longer active")

    # The progress interface the services report to (export, embedding): the job's, plus the heartbeat.
    def start(self, total: int | None = None) -> None:
        self.job.start(total)
        self.beat(force=True)

    def advance(self, steps: int = 1, error: str | None = None) -> None:
        self.job.advance(steps, error)
        self.beat()
        if self.paused:  # it moves again: what it waited for is back, a later outage is counted from its start
            JobTask.objects.filter(pk=self.task_id, token=self.token).update(paused_since=None)
            self.paused = False

    def complete(self, status: str = JobTask.Status.DONE) -> bool:
        """End the unit, once (call it in the transaction that counts its outcome); False: already ended, or the
        unit is no longer this run's, so the outcome must not be counted."""
        liveness.claim_dropped(self.token)
        return bool(
            JobTask.objects.filter(pk=self.task_id, token=self.token, status=JobTask.Status.RUNNING).update(
                status=status, finished=timezone.now(), heartbeat=timezone.now(), paused_since=None
            )
        )

    def cancel(self) -> None:
        liveness.claim_dropped(self.token)
        JobTask.objects.filter(pk=self.task_id, token=self.token, status=JobTask.Status.RUNNING).update(
            status=JobTask.Status.CANCELLED, finished=timezone.now()
        )


class TransferBeats:
    """The progress of one long transfer of a unit (boto3's `Callback`, called from the transfer's threads with the
    bytes moved): its process's liveness thread beats the unit's heartbeat while bytes move, and the transfer stops
    (JobTaskLost) once the unit is no longer this claim's. `run` None (a command's export): nothing to beat."""

    def __init__(self, run: JobRun | None):
        self.run = run if isinstance(run, JobRun) else None
        self.moved = 0

    def __call__(self, bytes_amount: int) -> None:
        self.moved += bytes_amount
        if self.run is not None and not liveness.claim_moved(self.run.token):
            raise JobTaskLost(f"unit {self.run.task_id} of job {self.run.job.pk} was taken over or ended")

    def file_done(self) -> None:
        """One file moved whole: beat from the calling thread too (a process without the liveness thread)."""
        if self.run is not None:
            self.run.beat()


def job_task_claim(*, unit: UnitRef) -> JobRun | None:
    """Start the unit: a compare-and-set from pending/queued (or from running when its worker is gone, or when this
    is the same task retrying), and its job from queued to running. None: someone else runs or ran it, its job
    is over, or the message was sent for another unit than the one its number names here; the caller exits without
    doing anything."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.JOB_STALE_SECONDS)
    token = uuid.uuid4().hex
    fields = {
        "status": JobTask.Status.RUNNING,
        "token": token,
        "celery_id": unit.celery_id,
        "worker": unit.worker[:200],
        "heartbeat": now,
        "alive": None,
        "paused_until": None,
    }
    with transaction.atomic():
        # The unit's row is locked and its state read under the lock: a compare-and-set UPDATE whose condition
        # names the job (a join) would be checked against a snapshot taken before the lock, and two deliveries
        # racing for one unit could then both win.
        task = JobTask.objects.select_for_update(of=("self",)).select_related("job").filter(pk=unit.unit_id).first()
        if task is None:
            return None
        if not unit.names_the_unit(task):
            # A message the broker kept from another database (one restored from a backup, or made anew while the
            # broker kept its queues): here its unit number is another unit, which it must not run with its own
            # arguments, nor end.
            log.warning(
                "unit %s is %s %s here; this message (%s %s) was sent for another database's unit: it does nothing",
                task.pk,
                task.name,
                task.kwargs,
                unit.name,
                unit.kwargs,
            )
            return None
        waiting = task.status in (JobTask.Status.PENDING, JobTask.Status.QUEUED)
        running = task.status == JobTask.Status.RUNNING
        if task.job.status not in ACTIVE:
            if waiting:
                JobTask.objects.filter(pk=task.pk).update(status=JobTask.Status.CANCELLED, finished=now)
            log.info("unit %s: already taken, done or cancelled; this delivery does nothing", unit.unit_id)
            return None
        if running and unit.celery_id and task.celery_id == unit.celery_id:
            # A retry of this very task (after a database error) takes its unit back, as the same attempt: the
            # visibility timeout exceeds every time limit, so a message is delivered again only once its run is over.
            JobTask.objects.filter(pk=task.pk).update(**fields)
        elif waiting or (running and JobTask.objects.stale(stale).filter(pk=task.pk).exists()):
            # A running unit is taken over only when its worker is gone (JobTaskQuerySet.stale), never because one
            # of its steps is slow.
            JobTask.objects.filter(pk=task.pk).update(**fields, attempts=models.F("attempts") + 1)
        else:
            log.info("unit %s: already taken, done or cancelled; this delivery does nothing", unit.unit_id)
            return None
        task.refresh_from_db()
        Job.objects.filter(pk=task.job_id, status=Job.Status.QUEUED).update(
            status=Job.Status.RUNNING, started=now, heartbeat=now
        )
        task.job.refresh_from_db()
    liveness.claim_held(task_id=task.pk, token=token, celery_id=unit.celery_id)
    return JobRun(
        task_id=task.pk, job=task.job, token=token, attempts=task.attempts, paused=task.paused_since is not None
    )


# The class of the advisory locks that serialise the writes of one job's unit (`job_write_lock`): "JOBW".
JOB_WRITE_LOCK = 0x4A4F4257


def job_write_lock(job_id: int) -> None:
    """Hold, until the caller's transaction ends, the right to write the outcome of this job's unit: two runs of one
    unit (a worker judged gone that was not) write one after the other, and the second finds the job ended by the
    first. An advisory lock, not the job's row: beats go on updating the row meanwhile."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [JOB_WRITE_LOCK, job_id % 2**31])


# --- Pausing a unit for an outage -----------------------------------------------------------------------------


def job_task_pause(*, run: JobRun, reason: str, countdown: float, max_seconds: float, since=None):
    """Queue the unit again in `countdown` seconds (not a lost claim: its attempt is not counted), with the reason
    and when it tries again on its job's page; returns the first pause's time. PausedTooLong once it has been paused
    `max_seconds` since `since` (default: the unit's own first pause since it last made progress). JobTaskLost when
    the unit is no longer this run's."""
    now = timezone.now()
    task = JobTask.objects.filter(pk=run.task_id).values("paused_since").first() or {}
    since = since or task.get("paused_since") or now
    down = (now - since).total_seconds()
    if down >= max_seconds:
        raise PausedTooLong(
            f"{reason}; paused since {timezone.localtime(since):%Y-%m-%d %H:%M:%S} ({down:.0f} s), longer than "
            f"the {max_seconds:g} s a job waits"
        )
    until = now + timedelta(seconds=countdown)
    shown = f"paused at {timezone.localtime(now):%Y-%m-%d %H:%M:%S}: {reason}; tries again at "
    shown += f"{timezone.localtime(until):%H:%M:%S}"
    with transaction.atomic():
        requeued = JobTask.objects.filter(pk=run.task_id, token=run.token, status=JobTask.Status.RUNNING).update(
            status=JobTask.Status.QUEUED,
            token="",
            queued_at=now,
            heartbeat=now,
            paused_until=until,
            paused_since=since,
            error=shown[:2000],
            attempts=models.Case(
                models.When(attempts__gt=0, then=models.F("attempts") - 1),
                default=models.F("attempts"),
                output_field=models.PositiveIntegerField(),
            ),
        )
        if not requeued:
            raise JobTaskLost(f"unit {run.task_id} was taken over while pausing")
        transaction.on_commit(partial(_send_after_pause, task_id=run.task_id, countdown=countdown), robust=True)
    liveness.claim_dropped(run.token)
    log.warning("job %s, unit %s paused for %g s: %s", run.job.pk, run.task_id, countdown, reason)
    return since


def _send_after_pause(*, task_id: int, countdown: float) -> None:
    if not job_task_send(task_id=task_id, countdown=countdown):
        # The broker refused it: pending, the sweeper sends it when the broker is back (the unit then meets its
        # dependency again and pauses anew if it is still away).
        JobTask.objects.filter(pk=task_id, status=JobTask.Status.QUEUED).update(status=JobTask.Status.PENDING)


def job_task_failed(*, task_id: int, token: str, error: BaseException) -> str:
    """A unit's task raised `error` and left the unit running under this claim: settle it now rather than leave it
    for the sweeper to find silent. An outage (annotator.jobs.outages) pauses it with the reason (JOB_PAUSE_SECONDS,
    for at most JOB_PAUSE_MAX_SECONDS); a cancelled job's unit is cancelled; any other error requeues it with the
    error as the reason, or gives it up after JOB_MAX_ATTEMPTS claims. Returns what was done."""
    task = JobTask.objects.select_related("job").filter(pk=task_id, token=token, status=JobTask.Status.RUNNING).first()
    if task is None or isinstance(error, JobTaskLost):
        return "ended"
    run = JobRun(task_id=task.pk, job=task.job, token=token, attempts=task.attempts)
    if isinstance(error, JobCancelled):
        run.cancel()
        return "cancelled"
    reason = outage_reason(error)
    if reason is not None:
        try:
            job_task_pause(
                run=run, reason=reason, countdown=settings.JOB_PAUSE_SECONDS, max_seconds=settings.JOB_PAUSE_MAX_SECONDS
            )
        except PausedTooLong as too_long:
            job_task_abandon(task=task, reason=f"{task.job.title}: given up: {too_long}")
            return "given up"
        except JobTaskLost:
            return "ended"
        return "paused"
    text = " ".join(str(error).split())[:1000]
    reason = f"its task raised {type(error).__name__}: {text} (claim {task.attempts}"
    if task.attempts >= settings.JOB_MAX_ATTEMPTS:
        job_task_abandon(task=task, reason=f"{task.job.title}: given up: {reason} of {settings.JOB_MAX_ATTEMPTS})")
        return "given up"
    return "requeued" if job_task_requeue(task=task, reason=f"{reason})") else "ended"


def job_task_requeue(*, task: JobTask, reason: str) -> bool:
    """Put a running unit back for another worker (its claim ended without its outcome) and send it."""
    requeued = JobTask.objects.filter(pk=task.pk, status=JobTask.Status.RUNNING, token=task.token).update(
        status=JobTask.Status.PENDING, token="", error=f"requeued: {reason}"[:2000]
    )
    if requeued:
        log.warning("job %s, unit %s: requeued: %s", task.job_id, task.pk, reason)
        liveness.claim_dropped(task.token)
        job_task_send(task_id=task.pk)
    return bool(requeued)


# --- The sweeper ----------------------------------------------------------------------------------------------


def jobs_sweep(*, now=None, resent: list | None = None) -> dict:
    """Send pending units, requeue (or give up) units whose worker vanished, send again units the broker lost,
    finish jobs whose every unit ended; the counts. Safe to run anywhere, any number of times at once. The units
    sent again are appended to `resent` when given (`manage.py sweep` names them)."""
    resent = [] if resent is None else resent
    now = now or timezone.now()
    counts = {"sent": 0, "requeued": 0, "given_up": 0, "resent": 0, "finished": 0}
    for task in JobTask.objects.unsent(now - timedelta(seconds=SEND_GRACE_SECONDS)):
        counts["sent"] += job_task_send(task_id=task.pk)
    for task in JobTask.objects.stale(now - timedelta(seconds=settings.JOB_STALE_SECONDS)).select_related("job"):
        last = max(moment for moment in (task.heartbeat, task.alive) if moment is not None)
        # Neither progress nor its process's word since then (JobTaskQuerySet.stale): the worker is gone.
        reason = f"its worker ({task.worker or 'unknown'}) stopped beating at "
        reason += f"{timezone.localtime(last):%Y-%m-%d %H:%M:%S}, claim {task.attempts}"
        if task.attempts >= settings.JOB_MAX_ATTEMPTS:
            counts["given_up"] += job_task_abandon(
                task=task, reason=f"{task.job.title}: given up: {reason} of {settings.JOB_MAX_ATTEMPTS}"
            )
            continue
        counts["requeued"] += job_task_requeue(task=task, reason=reason)
    resent.extend(jobs_resend_lost(now=now))
    for task in JobTask.objects.lost(now - timedelta(seconds=settings.JOB_LOST_SECONDS)):
        task.error = f"sent again: no worker started it within {settings.JOB_LOST_SECONDS:.0f} s"
        JobTask.objects.filter(pk=task.pk, status=JobTask.Status.QUEUED).update(error=task.error)
        if job_task_send(task_id=task.pk):
            resent.append(task)
    counts["resent"] = len(resent)
    # A job whose units all ended but that is still active (e.g. its last unit was given up): finish it.
    idle = Job.objects.filter(status__in=ACTIVE, tasks__isnull=False).exclude(tasks__status__in=OPEN).distinct()
    for job in idle:
        failed = job.tasks.filter(status=JobTask.Status.FAILED).values_list("error", flat=True)
        counts["finished"] += job.finish(result=job.result, error="; ".join(failed) or None)
    Tick.record(Tick.SWEEP)
    return counts


def jobs_resend_lost(*, now=None) -> list[JobTask]:
    """Send again the queued units whose message the broker no longer holds: in none of the queue lists and not
    unacknowledged (a broker flushed or restarted empty). A unit is looked for once it has waited
    JOB_BROKER_CHECK_SECONDS, or at once when the broker lost the sweeper's marker key. Returns the units sent again.

    A message that was only slow, or that a worker took between the two reads, is harmless to send again: a unit is
    claimed under a lock on its row (job_task_claim), so the second delivery finds it taken and does nothing."""
    from annotator.jobs.broker import broker_marker_lost, broker_task_ids, task_queue

    now = now or timezone.now()
    waiting = list(JobTask.objects.filter(status=JobTask.Status.QUEUED).order_by("pk"))
    if not waiting:
        return []
    checked_before = now - timedelta(seconds=settings.JOB_BROKER_CHECK_SECONDS)
    try:
        emptied = broker_marker_lost()
        suspects = [task for task in waiting if emptied or task.queued_at < checked_before]
        held = broker_task_ids({task_queue(task.name) for task in suspects}) if suspects else set()
    except Exception as error:  # redis raises many kinds for "the broker is away"; the next sweep asks again
        log.warning("queued units not checked against the broker: %s: %s", type(error).__name__, error)
        return []
    if emptied:
        log.warning(
            "the broker lost its data (restarted empty or flushed) since the last sweep, or this is the first sweep: "
            "every queued unit is looked for in it now"
        )
    resent = []
    for task in suspects:
        if task.celery_id in held:
            continue
        reason = f"sent again at {timezone.localtime(now):%Y-%m-%d %H:%M:%S}: its message ({task.celery_id or '?'}) "
        reason += "was in no queue of the broker and not unacknowledged (the broker lost it)"
        # Only if it is still queued under that message: a unit a worker claimed meanwhile is left alone.
        if not JobTask.objects.filter(pk=task.pk, status=JobTask.Status.QUEUED, celery_id=task.celery_id).update(
            error=reason
        ):
            continue
        if job_task_send(task_id=task.pk):
            log.warning("job %s, unit %s (%s): %s", task.job_id, task.pk, task.name, reason)
            task.error = reason
            resent.append(task)
    return resent


def job_task_abandon(*, task: JobTask, reason: str) -> bool:
    """Give a unit up: count it as failed on its job, with the reason (by the task's own rule, see ABANDON)."""
    run = JobRun(task_id=task.pk, job=task.job, token=task.token)
    handler = ABANDON.get(task.name)
    log.error("job %s, unit %s: %s", task.job_id, task.pk, reason)
    with transaction.atomic():
        if handler:
            counted = import_string(handler)(run=run, kwargs=task.kwargs, reason=reason)
        else:
            counted = run.complete(JobTask.Status.FAILED)
            if counted:
                task.job.finish(result=task.job.result, error=reason)
        if counted:
            JobTask.objects.filter(pk=task.pk).update(error=reason[:2000])
    return counted


# --- Cancel and retry (the job's page, the API) ---------------------------------------------------------------


def _check_coordinator(user) -> None:
    if not has_role(user, COORDINATOR):
        raise Forbidden("Only a coordinator can cancel or retry a job.")


@transaction.atomic
def job_cancel(*, job: Job, user) -> Job:
    """Cancel an active job: units not started never run, running ones stop at their next unit of work."""
    _check_coordinator(user)
    locked = Job.objects.select_for_update().get(pk=job.pk)
    if not locked.is_active:
        raise Conflict(f"Job {locked.pk} is {locked.status}: only a queued or running job can be cancelled.")
    now = timezone.now()
    locked.status = Job.Status.CANCELLED
    locked.finished = now
    locked.errors = [*locked.errors, f"cancelled by {user.get_username()} at {timezone.localtime(now):%H:%M:%S}"]
    locked.save(update_fields=["status", "finished", "errors"])
    locked.tasks.filter(status__in=(JobTask.Status.PENDING, JobTask.Status.QUEUED)).update(
        status=JobTask.Status.CANCELLED, finished=now
    )
    return locked


RESULT_KEPT = ("source", "every", "frames_per_video", "options")
# A bulk job's record of what it does (annotator/datamanager/bulk.py): its retry does the same.
RESULT_KEPT += ("table", "action", "by", "at", "selection", "filter", "items", "reason", "target")
# A zip job's export (annotator/export/services.py, export_zip_start): its retry zips the same files.
RESULT_KEPT += ("export_job", "manifest_sha256")
# A synthetic sweep's job (annotator/synthetic/services.py): its retry makes the same sweep's missing pairs.
RESULT_KEPT += ("sweep", "cells", "items_per_cell")


@transaction.atomic
def job_retry(*, job: Job, user) -> Job:
    """Run a failed or cancelled job again as a new job with the same units (a unit that finished its work before
    finds it done: sampled videos are skipped, embedded images are not embedded again). A model run can be retried
    once it ended however it ended: its failed items are asked again."""
    _check_coordinator(user)
    locked = Job.objects.select_for_update().get(pk=job.pk)
    if not locked.can_retry:
        raise Conflict(
            f"Job {locked.pk} is {locked.status}: only a failed or cancelled job (or a finished model run or edit "
            "job) can be retried."
        )
    units = list(locked.tasks.all())
    if not units:
        raise Conflict(f"Job {locked.pk} has no recorded units to run again (it was made by an older version).")
    if locked.kind == Job.Kind.MODEL_EVAL:
        runs = [unit.kwargs.get("evaluation_id") for unit in units]
        # Only a run on a release has items to ask; an imported run (a results file, or a run whose items predate
        # releases) keeps its answers and is never asked again.
        if Job.objects.filter(model_evaluation__pk__in=runs).exclude(model_evaluation__source="release").exists():
            raise Conflict(
                f"Job {locked.pk} ran a model run that is an imported run now (its items predate releases): its "
                "answers are kept, it is not run again. Start a run on a release's split instead."
            )
    result = {key: value for key, value in locked.result.items() if key in RESULT_KEPT}
    if locked.kind == Job.Kind.IMPORT:
        result.update(videos_ok=0, videos_skipped=0, videos_failed=0, frames=0, seconds=0.0)
    result["retry_of"] = locked.pk
    again = Job.objects.create(
        kind=locked.kind, title=f"Retry: {locked.title}"[:300], created_by=user, result=result, total=len(units)
    )
    if locked.kind == Job.Kind.IMPORT:
        again.start(total=len(units))
    for unit in units:
        job_task_add(job=again, name=unit.name, kwargs={**unit.kwargs, "job_id": again.pk})
    return again


def job_units_with_problems(job: Job):
    """The units a coordinator should see on the job's page: requeued, unsent, given up."""
    return job.tasks.exclude(error="").order_by("pk")


ATTENTION_DAYS = 7  # failed jobs older than this have been seen to (or will not be)
ATTENTION_SHOWN = 6


def jobs_needing_attention(*, user, now=None) -> list[dict]:
    """The jobs this user may see that need someone (the home page): failed in the last ATTENTION_DAYS, paused on an
    outage (Job.pause), or with a unit on a worker that looks dead (`jobs_on_dead_workers`). Newest first; each
    {"job", "why"}."""
    now = now or timezone.now()
    visible = Job.objects.visible_to(user)
    stuck = {unit.job_id for unit in jobs_on_dead_workers(answered=None, now=now)}
    found: dict[int, dict] = {}
    for job in visible.filter(status__in=ACTIVE).with_pauses().order_by("-created", "-pk")[:50]:
        if job.pk in stuck:
            found[job.pk] = {"job": job, "why": "stuck"}
        elif job.pause is not None:
            found[job.pk] = {"job": job, "why": "paused"}
    failed = visible.filter(status=Job.Status.FAILED, finished__gte=now - timedelta(days=ATTENTION_DAYS))
    for job in failed.order_by("-finished", "-pk")[:ATTENTION_SHOWN]:
        found[job.pk] = {"job": job, "why": "failed"}
    return sorted(found.values(), key=lambda entry: -entry["job"].pk)[:ATTENTION_SHOWN]


# --- What waits for the sweeper (the jobs page, /healthz?deep=1) ------------------------------------------------


def jobs_waiting(*, now=None) -> dict:
    """Beat's last tick and the units that wait on the sweeper: pending units it should have sent by now, and
    queued units no worker started within JOB_BROKER_CHECK_SECONDS. `stale`: beat looks down."""
    now = now or timezone.now()
    beat_age = Tick.age(Tick.BEAT, now=now)
    # The sweeper sends a pending unit within SEND_GRACE_SECONDS plus one sweep; two sweeps late is waiting.
    late = now - timedelta(seconds=SEND_GRACE_SECONDS + 2 * settings.JOB_SWEEP_SECONDS)
    pending = models.Q(status=JobTask.Status.PENDING, created__lt=late)
    queued = models.Q(
        status=JobTask.Status.QUEUED, queued_at__lt=now - timedelta(seconds=settings.JOB_BROKER_CHECK_SECONDS)
    )
    counts = JobTask.objects.filter(pending | queued).aggregate(
        pending=models.Count("pk", filter=pending),
        pending_since=models.Min("created", filter=pending),
        queued=models.Count("pk", filter=queued),
    )
    return {"beat_age": beat_age, "beat_stale": beat_age is None or beat_age > settings.BEAT_STALE_SECONDS, **counts}


def jobs_on_dead_workers(*, answered: set[str] | None, now=None) -> list[JobTask]:
    """Running units whose worker looks dead: silent (JobTaskQuerySet.stale) for JOB_STALE_SECONDS, which the sweeper
    should have requeued by now, or for two heartbeats while their worker is not among those that `answered` the deep
    check's broadcast (None: the workers could not be asked). Oldest beat first."""
    now = now or timezone.now()
    stuck = JobTask.objects.stale(now - timedelta(seconds=settings.JOB_STALE_SECONDS))
    if answered is not None:
        silent = JobTask.objects.stale(now - timedelta(seconds=2 * settings.JOB_HEARTBEAT_SECONDS))
        stuck = stuck | silent.exclude(worker__in=answered)
    return list(stuck.order_by("heartbeat", "pk"))


# The units a deep health check names one by one; the count says how many there are.
DEAD_WORKER_UNITS_NAMED = 3


def jobs_health_part(answered: set[str] | None = None) -> dict:
    """The "jobs" part of /healthz?deep=1: degraded while units wait for a sweeper that does not come, or run on a
    worker that looks dead (`answered`: the workers that answered the deep check's broadcast, None: not asked)."""
    from subtlebench.health import DEGRADED, OK, part, tick_text

    waiting = jobs_waiting()
    stuck = jobs_on_dead_workers(answered=answered)
    sweep_age = Tick.age(Tick.SWEEP)
    # The sweep runs on a `default` worker: beat ticking but no sweep means no worker takes beat's messages.
    swept = "the sweeper never ran" if sweep_age is None else f"the sweeper last ran {sweep_age:.0f} s ago"
    detail = f"beat {tick_text(waiting['beat_age'])}, {swept}"
    counts = {
        "pending_waiting": waiting["pending"],
        "queued_not_started": waiting["queued"],
        "running_on_dead_workers": len(stuck),
        "sweep_last_ran_seconds_ago": sweep_age,
    }
    if stuck:
        named = "; ".join(
            f"unit {task.pk} of job {task.job_id} on {task.worker or 'an unnamed worker'}, silent since "
            f"{task.heartbeat:%Y-%m-%d %H:%M:%S} UTC"
            for task in stuck[:DEAD_WORKER_UNITS_NAMED]
        )
        detail = (
            f"{len(stuck)} unit(s) running on a worker that looks dead (silent for two heartbeats while the worker "
            f"does not answer, or for JOB_STALE_SECONDS={settings.JOB_STALE_SECONDS:.0f} s, after which the sweeper "
            f"requeues a unit): {named}; {detail}"
        )
    if waiting["pending"]:
        detail = (
            f"{waiting['pending']} unit(s) pending since {waiting['pending_since']:%Y-%m-%d %H:%M:%S} UTC, not sent; "
            f"{detail}"
        )
        if waiting["beat_stale"]:
            detail += ": beat looks down; start it, or run `manage.py sweep`"
    if waiting["pending"] or stuck:
        return part(DEGRADED, detail, **counts)
    return part(OK, detail, **counts)

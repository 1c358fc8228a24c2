"""Which units' claims this worker process runs, said from a thread of its own, so that the sweeper takes a unit from a
worker only when that worker is gone, never because one step of it was slow.

Every JOB_HEARTBEAT_SECONDS the thread writes `alive` on the units of the claims this process holds, and `heartbeat`
on those whose transfers moved bytes since (`claim_moved`, called from boto3's transfer threads: no database there).
A unit whose process died, or whose task ended without ending it, falls silent; the task's end settles its claim at
once (`task_ended`: paused for an outage, requeued with the error). Celery worker processes turn this on as their
first task starts (annotator/jobs/tasks.py); anywhere else (a command, a test) nothing is recorded, and a unit's own
progress beats alone keep it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

log = logging.getLogger(__name__)


@dataclass
class Claim:
    task_id: int
    token: str
    celery_id: str
    moved: bool = False  # bytes moved since the thread's last beat
    lost: bool = False  # the unit is no longer this claim's (taken over, cancelled, ended): the thread found it so


_claims: dict[str, Claim] = {}
# Claims whose task raised and whose unit could not be settled then (the database was away): the thread retries.
_unsettled: list[tuple] = []  # (claim, error, settle)
_lock = threading.Lock()
_enabled = False
_thread_wanted = False
_thread: threading.Thread | None = None
_thread_pid: int | None = None


def enable(*, thread: bool = True) -> None:
    """Record the claims this process runs from now on (and beat them from a thread: `thread`)."""
    global _enabled, _thread_wanted
    _enabled = True
    _thread_wanted = _thread_wanted or thread


def disable() -> None:
    """Forget every claim and stop recording (tests)."""
    global _enabled, _thread_wanted
    with _lock:
        _claims.clear()
        _unsettled.clear()
    _enabled = _thread_wanted = False


def claim_held(*, task_id: int, token: str, celery_id: str) -> None:
    if not _enabled:
        return
    with _lock:
        _claims[token] = Claim(task_id=task_id, token=token, celery_id=celery_id)
    _ensure_thread()


def claim_dropped(token: str) -> None:
    """The claim ended here (its unit completed, cancelled or paused): nothing more to say about it."""
    with _lock:
        _claims.pop(token, None)


def claim_moved(token: str) -> bool:
    """A transfer of this claim moved bytes (from any thread; no database). False when the thread found the unit no
    longer this claim's: the caller stops."""
    with _lock:
        claim = _claims.get(token)
        if claim is None:
            return True
        claim.moved = True
        return not claim.lost


def held_tokens() -> list[str]:
    with _lock:
        return sorted(_claims)


def task_ended(*, celery_id: str, error: BaseException | None = None, retrying: bool = False, settle=None) -> None:
    """A task ended in this process (Celery's task_postrun): its claims are no longer run here. A claim it left
    running because it raised is settled now by `settle(task_id=, token=, error=)` (job_task_failed; retried by the
    thread while the database is away); a task that retries claims its unit again."""
    if not celery_id:
        return
    with _lock:
        ended = [claim for claim in _claims.values() if claim.celery_id == celery_id]
        for claim in ended:
            del _claims[claim.token]
    if retrying or error is None or settle is None:
        return
    for claim in ended:
        _settle(claim, error, settle)


def _settle(claim: Claim, error: BaseException, settle) -> bool:
    try:
        settle(task_id=claim.task_id, token=claim.token, error=error)
    except DatabaseError as away:
        log.warning("unit %s: its task's end is settled when the database answers again (%s)", claim.task_id, away)
        with _lock:
            _unsettled.append((claim, error, settle))
        return False
    return True


def beat_once() -> None:
    """Say which claims this process still runs (`alive`), with progress for those that moved (`heartbeat`); mark
    the claims whose unit is no longer theirs; settle the claims left from a database outage."""
    from annotator.models import Job, JobTask

    with _lock:
        claims = list(_claims.values())
        moved = [claim.token for claim in claims if claim.moved]
        for claim in claims:
            claim.moved = False
        unsettled = list(_unsettled)
        _unsettled.clear()
    now = timezone.now()
    try:
        if claims:
            running = JobTask.objects.filter(token__in=[c.token for c in claims], status=JobTask.Status.RUNNING)
            running.update(alive=now)
            held = set(running.values_list("token", flat=True))
            if moved:
                running.filter(token__in=moved).update(heartbeat=now)
                Job.objects.filter(tasks__token__in=moved, status__in=("queued", "running")).update(heartbeat=now)
            with _lock:
                for claim in claims:
                    claim.lost = claim.token not in held
    except DatabaseError as error:
        log.warning("claims not beaten: the database is away (%s)", error)
        connection.close()
    for claim, error, settle in unsettled:
        if not _settle(claim, error, settle):
            break


def _beat_forever() -> None:
    while True:
        time.sleep(settings.JOB_HEARTBEAT_SECONDS)
        try:
            beat_once()
        except Exception:  # the thread must outlive anything one beat meets; the next beat tries again
            log.exception("claims not beaten")


def _ensure_thread() -> None:
    """One beating thread per process, started with the process's first claim (a forked worker process starts its
    own: threads do not survive a fork)."""
    global _thread, _thread_pid
    if not _thread_wanted:
        return
    with _lock:
        if _thread is not None and _thread_pid == os.getpid() and _thread.is_alive():
            return
        _thread_pid = os.getpid()
        _thread = threading.Thread(target=_beat_forever, name="unit-liveness", daemon=True)
        _thread.start()

"""The clean-up after crashes in Celery: beat's `clean_up` task (every CLEANUP_MINUTES, on one worker) and the
remote-control command it broadcasts, which every worker answers by cleaning its own host."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.worker.control import control_command

from annotator.cleanup.services import HOST_COMMAND

log = logging.getLogger(__name__)


@shared_task(name="annotator.tasks.clean_up", acks_late=False, time_limit=3600, soft_time_limit=3500)
def clean_up() -> dict:
    """The shared part once (orphaned frame files, videos missing theirs); each host's temporary paths by a broadcast
    to every worker, since one worker sees only its own disk. All older than CLEANUP_GRACE_MINUTES."""
    from annotator.cleanup.services import hosts_clean_up, shared_clean_up

    hosts_clean_up()
    return shared_clean_up()


@control_command(name=HOST_COMMAND, args=[("grace_minutes", float)], signature="[grace_minutes]")
def clean_up_host(state, grace_minutes: float | None = None) -> dict:
    """A worker's part of the clean-up (annotator.cleanup.services.host_clean_up), run in its main process between the
    messages it consumes. A failure is logged and answered, never fatal to the worker."""
    from django.db import connections

    from annotator.cleanup.services import host_clean_up

    try:
        return {"ok": host_clean_up(grace_minutes=grace_minutes)}
    except Exception as error:  # noqa: BLE001 - a clean-up that fails must not take the worker's consumer down
        log.exception("clean-up of this host failed")
        return {"error": f"{type(error).__name__}: {error}"}
    finally:
        # The main process of a prefork worker forks new pool processes later: it keeps no connection open for them.
        connections.close_all()

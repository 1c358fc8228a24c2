"""Clean-up after crashes: releases whose export died between making the release and switching its files (put in
place) or before making it (the number given back, its staging removed), every temporary path the app made (the
ledger of annotator/jobs/scratch.py: export staging folders wherever their target is, zip parts, downloads, S3
staging), frame files no row references, and the check that every sampled video still has its frame files (one that
lacks some is marked `missing`: never leased).

Temporary paths are on each host's own disk, so each host cleans its own (`host_clean_up`: every worker, when beat's
`clean_up` broadcasts it); the media storage and the database are shared, so they are cleaned once (`shared_clean_up`).
Nothing is removed that a live owner holds (a claimed unit or job with a fresh heartbeat, a running process), and
nothing touched in the last CLEANUP_GRACE_MINUTES.
"""

from __future__ import annotations

import logging
import socket

from django.conf import settings

from annotator.export.services import export_staging_remove_stale, releases_finish_abandoned
from annotator.jobs.scratch import scratch_remove_stale
from annotator.models import Video
from annotator.videos.services import frames_remove_orphans, video_check_files

log = logging.getLogger(__name__)

# The remote-control command every worker answers with its host's part (registered in annotator/cleanup/tasks.py).
HOST_COMMAND = "clean_up_host"


def grace_seconds(grace_minutes: float | None) -> float:
    return 60.0 * (settings.CLEANUP_GRACE_MINUTES if grace_minutes is None else grace_minutes)


def host_clean_up(*, grace_minutes: float | None = None) -> dict:
    """This host's part: the releases whose export died here with a local target (put in place, or their number
    given back), then the temporary paths of dead owners in its ledger (under its SCRATCH_ROOT) and the stale
    export staging folders on its disk; returns what was done and removed, by kind, and the host."""
    grace = grace_seconds(grace_minutes)
    # First: a made release's staging is switched into place before the ledger would remove it as a dead owner's.
    releases = releases_finish_abandoned(in_bucket=False)
    temporary = scratch_remove_stale(older_than=grace)
    staging = export_staging_remove_stale(older_than=grace)
    if temporary or staging:
        log.warning(
            "clean-up of %s removed %s temporary path(s) and %s staging folder(s)",
            socket.gethostname(),
            len(temporary),
            len(staging),
        )
    return {"host": socket.gethostname(), "releases": releases, "temporary": temporary, "staging_folders": staging}


def shared_clean_up(*, grace_minutes: float | None = None) -> dict:
    """The shared part, once for the whole deployment: the releases whose export to S3 died (put in place, or their
    number given back), orphaned frame files in the media storage, and sampled videos whose frame files are gone
    marked `missing`."""
    releases = releases_finish_abandoned(in_bucket=True)
    frames = frames_remove_orphans(older_than=grace_seconds(grace_minutes))
    if frames:
        log.warning("clean-up removed %s orphaned frame file(s)", len(frames))
    missing = [
        video.yt8m_id
        for video in Video.objects.filter(status=Video.Status.SAMPLED).iterator()
        if not video_check_files(video=video)
    ]
    return {"releases_in_bucket": releases, "frame_files": frames, "videos_missing_files": missing}


def storage_clean_up(*, grace_minutes: float | None = None) -> dict:
    """The whole clean-up as one host sees it (`manage.py cleanup`): this host's temporary paths and the shared part;
    returns what was removed and found, by kind."""
    return {**host_clean_up(grace_minutes=grace_minutes), **shared_clean_up(grace_minutes=grace_minutes)}


def hosts_clean_up(*, grace_minutes: float | None = None, reply: bool = False, timeout: float = 1.0) -> list[dict]:
    """Ask every worker to clean its own host's temporary paths (a broadcast: no other host sees its disk). With
    `reply`, wait up to `timeout` seconds for the answers: [{worker name: what its host_clean_up removed}, ...]."""
    from celery import current_app

    arguments = {"grace_minutes": grace_minutes}
    return current_app.control.broadcast(HOST_COMMAND, arguments=arguments, reply=reply, timeout=timeout) or []

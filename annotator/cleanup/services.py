"""Clean-up after crashes: every temporary path the app made (the ledger of annotator/jobs/scratch.py: export
staging folders wherever their target is, zip parts, downloads, S3 staging), frame files no row references, and the
check that every sampled video still has its frame files (one that lacks some is marked `missing`: never leased).

Nothing is removed that a live owner holds (a claimed unit or job with a fresh heartbeat, a running process), and
nothing touched in the last CLEANUP_GRACE_MINUTES.
"""

from __future__ import annotations

import logging

from django.conf import settings

from annotator.export.services import export_staging_remove_stale
from annotator.jobs.scratch import scratch_remove_stale
from annotator.models import Video
from annotator.videos.services import frames_remove_orphans, video_check_files

log = logging.getLogger(__name__)


def storage_clean_up(*, grace_minutes: float | None = None) -> dict:
    """Remove the temporary paths of dead owners, orphaned frame files and stale export staging folders, and mark
    sampled videos whose frame files are gone `missing`; returns what was removed and found, by kind."""
    grace = 60.0 * (settings.CLEANUP_GRACE_MINUTES if grace_minutes is None else grace_minutes)
    temporary = scratch_remove_stale(older_than=grace)
    frames = frames_remove_orphans(older_than=grace)
    staging = export_staging_remove_stale(older_than=grace)
    if frames or staging or temporary:
        log.warning(
            "clean-up removed %s temporary path(s), %s orphaned frame file(s) and %s staging folder(s)",
            len(temporary),
            len(frames),
            len(staging),
        )
    missing = [
        video.yt8m_id
        for video in Video.objects.filter(status=Video.Status.SAMPLED).iterator()
        if not video_check_files(video=video)
    ]
    return {"temporary": temporary, "frame_files": frames, "staging_folders": staging, "videos_missing_files": missing}

"""Clean-up after crashes: frame files no row references and export staging folders left by killed runs, and the
check that every sampled video still has its frame files (one that lacks some is marked `missing`: never leased).

Removal waits CLEANUP_GRACE_MINUTES (longer than any task's time limit), so the files of a run still going are safe.
"""

from __future__ import annotations

import logging

from django.conf import settings

from annotator.export.services import export_staging_remove_stale
from annotator.models import Video
from annotator.videos.services import frames_remove_orphans, video_check_files

log = logging.getLogger(__name__)


def storage_clean_up(*, grace_minutes: float | None = None) -> dict:
    """Remove orphaned frame files and stale export staging folders, and mark sampled videos whose frame files are
    gone `missing`; returns what was removed and found, by kind."""
    grace = 60.0 * (settings.CLEANUP_GRACE_MINUTES if grace_minutes is None else grace_minutes)
    frames = frames_remove_orphans(older_than=grace)
    staging = export_staging_remove_stale(older_than=grace)
    if frames or staging:
        log.warning("clean-up removed %s orphaned frame file(s) and %s staging folder(s)", len(frames), len(staging))
    missing = [
        video.yt8m_id
        for video in Video.objects.filter(status=Video.Status.SAMPLED).iterator()
        if not video_check_files(video=video)
    ]
    return {"frame_files": frames, "staging_folders": staging, "videos_missing_files": missing}

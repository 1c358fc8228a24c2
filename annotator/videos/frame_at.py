"""Any frame of a video at its exact time: the source file for the workbench's player (a local file served by range
requests, or a signed S3 URL), the frame at a time decoded on the server (sampling.frame_at_time, cached), and a
frame an annotator takes as A or B, stored as a picked Frame of the video and embedded at once.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from pathlib import Path

from django.conf import settings
from django.core.cache import cache
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Max

from annotator.models import Frame, Image, Video
from annotator.models.videos import PICKED_INDEX_BASE
from annotator.similarity.services import images_queue_embeddings
from annotator.videos import sampling
from annotator.videos.services import ImportPathError, resolve_import_path
from subtlebench.errors import Conflict, Invalid

logger = logging.getLogger(__name__)

# A decoded frame is kept this long: the same time asked again (the fallback's preview, then "take") decodes nothing.
FRAME_CACHE_SECONDS = 3600


def video_location(video: Video) -> str | Path:
    """Where the decoder reads the source: a local path under IMPORT_ROOTS, or a signed URL of the S3 object (read by
    range requests, never downloaded whole)."""
    if video.source.startswith("s3://"):
        return signed_source_url(video)
    try:
        path = resolve_import_path(video.source)
    except ImportPathError as error:
        raise Conflict(f"The source of video {video.yt8m_id} cannot be read: {video.source} {error}.") from error
    if not path.is_file():
        raise Conflict(f"The source of video {video.yt8m_id} is gone: {video.source} is not a file.")
    return path


def signed_source_url(video: Video) -> str:
    """A signed, expiring GET URL of an S3 source (the browser's player and the decoder both use it)."""
    from subtlebench.storage import s3_client, split_s3_uri

    bucket, key = split_s3_uri(video.source)
    return s3_client().generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=settings.S3_URL_EXPIRY
    )


def parse_seconds(raw, video: Video) -> float:
    """A time in the video from a request: a finite number of seconds within its duration; Invalid otherwise."""
    try:
        seconds = float(raw)
    except (TypeError, ValueError):
        raise Invalid({"t": [f"Send the time as a number of seconds, not {str(raw)[:40]!r}."]}) from None
    if not math.isfinite(seconds) or seconds < 0:
        raise Invalid({"t": [f"The time must be 0 s or later, not {raw}."]})
    if video.duration is not None and seconds > video.duration:
        raise Invalid({"t": [f"Video {video.yt8m_id} lasts {video.duration:.3f} s: {seconds:.3f} s is past its end."]})
    return seconds


def _cache_key(video: Video, seconds: float) -> str:
    source = hashlib.sha256(video.source.encode()).hexdigest()[:16]
    return f"frame-at:{video.pk}:{source}:{settings.FRAME_MAX_SIDE}:{round(seconds * 1000)}"


def video_frame_at(*, video: Video, seconds: float) -> sampling.SampledFrame:
    """The frame on screen at `seconds`, decoded from the source at its exact presentation time (one GOP's work),
    kept in the cache for an hour under the time to the millisecond."""
    key = _cache_key(video, seconds)
    cached = cache.get(key)
    if cached is not None:
        return cached
    try:
        frame = sampling.frame_at_time(
            video_location(video),
            seconds,
            max_side=settings.FRAME_MAX_SIDE,
            thumbnail_side=settings.THUMBNAIL_MAX_SIDE,
            quality=settings.FRAME_JPEG_QUALITY,
        )
    except sampling.SamplingError as error:
        source = re.sub(r"\?.*", "", video.source)  # never a signature in a message
        raise Conflict(f"Video {video.yt8m_id} ({source}) {error}.") from error
    cache.set(key, frame, FRAME_CACHE_SECONDS)
    return frame


def video_frame_pick(*, video: Video, seconds: float, user) -> tuple[Frame, bool]:
    """Take the frame on screen at `seconds` as a frame of the video: (frame, created). Its files are written first,
    then the Image and Frame rows (picked, at the decoded pts) and the embedding unit in one transaction; the same
    pts again returns the frame that has it (a sampled one too). The annotator must hold the video."""
    if not Video.objects.held_by(user).filter(pk=video.pk).exists():
        raise Conflict(f"You do not hold video {video.yt8m_id}: ask for work (or reload) before taking a frame.")
    decoded = video_frame_at(video=video, seconds=seconds)
    existing = Frame.objects.filter(video=video, pts=decoded.pts).select_related("image").first()
    if existing is not None:
        return existing, False
    name = f"frames/{video.yt8m_id}/picked/{decoded.pts:012d}"
    written = []
    try:
        image_name = default_storage.save(f"{name}.jpg", ContentFile(decoded.jpeg))
        written.append(image_name)
        thumbnail_name = default_storage.save(f"{name}_thumb.jpg", ContentFile(decoded.thumbnail))
        written.append(thumbnail_name)
        with transaction.atomic():
            locked = Video.objects.select_for_update().get(pk=video.pk)
            existing = Frame.objects.filter(video=locked, pts=decoded.pts).select_related("image").first()
            if existing is not None:  # a twin request took it meanwhile: its files are the ones kept
                transaction.on_commit(lambda: _delete_quietly(written))
                return existing, False
            top = Frame.objects.filter(video=locked).aggregate(top=Max("index"))["top"] or 0
            image = Image.objects.create(
                file=image_name,
                thumbnail=thumbnail_name,
                width=decoded.width,
                height=decoded.height,
                source="yt8m",
                original_name=f"{video.yt8m_id}_pts{decoded.pts}.jpg",
                sha256=hashlib.sha256(decoded.jpeg).hexdigest(),
            )
            frame = Frame.objects.create(
                video=locked,
                index=max(top + 1, PICKED_INDEX_BASE),
                timestamp=decoded.timestamp,
                pts=decoded.pts,
                image=image,
                picked=True,
            )
            # Embedded at once on the similarity worker: the page shows A and B's similarity as soon as it exists.
            images_queue_embeddings(images=[image], user=user)
    except BaseException:
        _delete_quietly(written)
        raise
    return frame, True


def _delete_quietly(names: list[str]) -> None:
    for name in names:
        try:
            default_storage.delete(name)
        except Exception:  # noqa: BLE001 - left to the clean-up of unreferenced frame files
            logger.warning("could not delete %s", name)


def frame_row(frame: Frame) -> dict:
    """A frame as the workbench's strip lists it (annotator.picking.services.VideoSource.frames)."""
    image = frame.image
    row = {
        "i": frame.index,
        "t": round(frame.timestamp, 3),
        "im": image.pk,
        "src": default_storage.url(image.file.name),
        "th": default_storage.url(image.thumbnail.name or image.file.name),
    }
    if frame.picked:
        row["picked"] = True
        row["pts"] = frame.pts
    return row

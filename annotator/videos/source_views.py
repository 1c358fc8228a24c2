"""The source video on the pair workbench (static/js/timeline.js): the file for its player (a local file by range
requests, an S3 object by a signed URL), the frame at any time as a JPEG (for a codec the browser cannot play), and
taking the frame on screen as A or B (annotator/videos/frame_at.py)."""

from __future__ import annotations

import mimetypes
import re
from pathlib import Path

from django.http import FileResponse, Http404, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_GET

from annotator.models import Video
from annotator.videos import frame_at
from subtlebench.errors import Conflict, Invalid, page_detail
from subtlebench.pages import error_response, post_only
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, role_required

RANGE = re.compile(r"bytes=(\d*)-(\d*)")
RANGE_CHUNK = 64 * 1024


def _video_for(video_id: int) -> Video:
    video = get_object_or_404(Video, pk=video_id)
    if not video.source:
        raise Http404("This video has no source file.")
    return video


def _file_range(request, path: Path, content_type: str) -> HttpResponse:
    """The file, or the byte range the Range header asks for (206), as a browser's <video> seeks in it."""
    size = path.stat().st_size
    match = RANGE.fullmatch(request.headers.get("Range", "").strip())
    if not match or not (match[1] or match[2]):
        response = FileResponse(path.open("rb"), content_type=content_type)
        response["Accept-Ranges"] = "bytes"
        return response
    if match[1]:
        start, end = int(match[1]), int(match[2]) if match[2] else size - 1
    else:
        start, end = max(0, size - int(match[2])), size - 1
    end = min(end, size - 1)
    if start > end:
        response = HttpResponse(status=416)
        response["Content-Range"] = f"bytes */{size}"
        return response

    def chunks():
        with path.open("rb") as handle:
            handle.seek(start)
            left = end - start + 1
            while left > 0:
                data = handle.read(min(RANGE_CHUNK, left))
                if not data:
                    return
                left -= len(data)
                yield data

    response = StreamingHttpResponse(chunks(), status=206, content_type=content_type)
    response["Content-Length"] = str(end - start + 1)
    response["Content-Range"] = f"bytes {start}-{end}/{size}"
    response["Accept-Ranges"] = "bytes"
    return response


@role_required(ANNOTATOR, REVIEWER, COORDINATOR)
@require_GET
def video_source(request, video_id: int):
    """The source file for the workbench's player: a local file by range requests, an S3 one by a signed URL."""
    video = _video_for(video_id)
    try:
        location = frame_at.video_location(video)
    except Conflict as error:
        raise Http404(page_detail(error)) from None
    if isinstance(location, str):
        return redirect(location)
    content_type = mimetypes.guess_type(location.name)[0] or "video/mp4"
    response = _file_range(request, location, content_type)
    response["Cache-Control"] = "private, max-age=3600"
    return response


@role_required(ANNOTATOR, REVIEWER, COORDINATOR)
@require_GET
def video_frame_at(request, video_id: int):
    """The frame on screen at ?t= seconds as a JPEG, decoded on the server (for a codec the browser cannot play);
    its exact time and pts in the X-Frame-Time and X-Frame-Pts headers."""
    video = _video_for(video_id)
    try:
        seconds = frame_at.parse_seconds(request.GET.get("t"), video)
        decoded = frame_at.video_frame_at(video=video, seconds=seconds)
    except (Invalid, Conflict) as error:
        return error_response(request, error)
    response = HttpResponse(decoded.jpeg, content_type="image/jpeg")
    response["X-Frame-Time"] = f"{decoded.timestamp:.6f}"
    response["X-Frame-Pts"] = str(decoded.pts)
    response["Cache-Control"] = "private, max-age=3600"
    return response


@role_required(ANNOTATOR)
@post_only("picking-workbench")
def video_frame_pick(request, video_id: int):
    """Take the frame on screen at the posted time (`t`, seconds) as a frame of the video, for A or B: JSON of the
    frame as the strip lists it, with `created`."""
    video = _video_for(video_id)
    try:
        seconds = frame_at.parse_seconds(request.POST.get("t"), video)
        frame, created = frame_at.video_frame_pick(video=video, seconds=seconds, user=request.user)
    except (Invalid, Conflict) as error:
        return error_response(request, error)
    return JsonResponse({**frame_at.frame_row(frame), "created": created}, status=201 if created else 200)

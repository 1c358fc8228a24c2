"""Frame sampling with PyAV: probe a video file, decode the frames nearest to target times (seeking to the
keyframe before a target when that skips decoding work) and encode them as JPEG with a thumbnail.

Pure decoding: no Django, no ORM. Everything that goes wrong with the file becomes a SamplingError whose
message says what is wrong in words a coordinator understands.
"""

from __future__ import annotations

import bisect
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
from PIL import Image as PILImage

from annotator.images import image_limits


class SamplingError(Exception):
    """The file cannot be sampled: empty, not a video, corrupt or truncated."""


@dataclass(frozen=True)
class VideoInfo:
    duration: float
    fps: float
    width: int
    height: int
    size_bytes: int
    keyframe_interval: float | None
    """Mean seconds between keyframes, from the container's packet flags (None: a single keyframe)."""


@dataclass(frozen=True)
class SampledFrame:
    index: int
    pts: int
    timestamp: float
    """Seconds from the start of the stream: (pts - start pts) x time base."""
    width: int
    height: int
    jpeg: bytes
    thumbnail: bytes


@dataclass
class SamplingStats:
    seeks: int = 0
    decoded: int = 0


def sample_times(duration: float, *, every: float | None = None, count: int | None = None) -> list[float]:
    """Target times in seconds: one every `every` seconds from 0, or `count` evenly spaced from 0."""
    if (every is None) == (count is None):
        raise ValueError("give exactly one of every and count")
    if every is not None:
        if every <= 0:
            raise ValueError("every must be positive")
        return [i * every for i in range(max(1, math.ceil(duration / every - 1e-9)))]
    if count <= 0:
        raise ValueError("count must be positive")
    return [duration * i / count for i in range(count)]


def _open(path: Path):
    size = path.stat().st_size
    if size == 0:
        raise SamplingError("is empty (0 bytes)")
    try:
        container = av.open(str(path), metadata_errors="ignore")
    except av.error.FFmpegError as error:
        raise SamplingError(
            f"cannot be read as a video ({error.strerror or error}): it is truncated, corrupt or not a video"
        ) from error
    if not container.streams.video:
        container.close()
        raise SamplingError("has no video stream (not a video file)")
    return container, container.streams.video[0], size


def _keyframe_pts(container, stream) -> list[int]:
    """Presentation timestamps of the keyframes, read from packet flags (demuxing only, nothing is decoded)."""
    keys = []
    for packet in container.demux(stream):
        if packet.is_keyframe and packet.pts is not None:
            keys.append(packet.pts)
    return sorted(keys)


def _facts(container, stream, size: int, keys: list[int]) -> VideoInfo:
    time_base = stream.time_base
    if stream.duration:
        duration = float(stream.duration * time_base)
    elif container.duration:
        duration = container.duration / av.time_base
    else:
        raise SamplingError("its duration is unknown (no duration in the container or the stream)")
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    fps = float(rate) if rate else 0.0
    width, height = stream.codec_context.width, stream.codec_context.height
    if not width or not height or duration <= 0:
        raise SamplingError("has no picture size or no duration: it is corrupt or not a video")
    max_pixels = image_limits()[1]
    if width * height > max_pixels:  # from the stream's header: each decoded frame would be this large
        raise SamplingError(
            f"has frames of {width}x{height} = {width * height} pixels, over the limit of {max_pixels} pixels "
            "(IMPORT_MAX_IMAGE_PIXELS); nothing was decoded"
        )
    interval = float((keys[-1] - keys[0]) * time_base) / (len(keys) - 1) if len(keys) > 1 else None
    return VideoInfo(duration, fps, width, height, size, interval)


def probe(path: Path) -> VideoInfo:
    """The video's duration, frame rate, size and keyframe interval, without decoding a frame."""
    container, stream, size = _open(path)
    try:
        return _facts(container, stream, size, _keyframe_pts(container, stream))
    except av.error.FFmpegError as error:
        raise SamplingError(f"is corrupt ({error.strerror or error})") from error
    finally:
        container.close()


def _encode(picture: PILImage.Image, max_side: int, quality: int) -> tuple[bytes, int, int]:
    if max(picture.size) > max_side:
        picture = picture.copy()
        picture.thumbnail((max_side, max_side), PILImage.Resampling.LANCZOS)
    buffer = io.BytesIO()
    picture.save(buffer, "JPEG", quality=quality, optimize=False)
    return buffer.getvalue(), picture.width, picture.height


def sample(
    path: Path,
    *,
    every: float | None = None,
    count: int | None = None,
    max_side: int = 1280,
    thumbnail_side: int = 240,
    quality: int = 92,
    stats: SamplingStats | None = None,
) -> tuple[VideoInfo, Iterator[SampledFrame]]:
    """Probe the file and return its facts and an iterator over the sampled frames, in time order.

    For each target time the frame taken is the first one at or after it. Decided per target: when the keyframe
    before the target lies after the last decoded frame, the sampler seeks to it (the frames in between need not be
    decoded); otherwise it decodes on from where it is (a seek would go back to that keyframe and decode the same
    frames again). So it decodes about what the keyframes require (`required_decodes`), whatever the step.
    """
    path = Path(path)
    stats = stats if stats is not None else SamplingStats()
    container, stream, size = _open(path)
    try:
        stream.thread_type = "AUTO"
        keys = _keyframe_pts(container, stream)
        info = _facts(container, stream, size, keys)
    except av.error.FFmpegError as error:
        container.close()
        raise SamplingError(f"is corrupt ({error.strerror or error})") from error
    except BaseException:
        container.close()
        raise
    time_base: Fraction = stream.time_base
    start = stream.start_time or 0
    targets = [
        start + round(Fraction(t).limit_denominator(10**6) / time_base)
        for t in sample_times(info.duration, every=every, count=count)
    ]
    keys = keys or [start]

    def frames() -> Iterator[SampledFrame]:
        decoder = None
        last_pts = None  # pts of the last decoded frame
        emitted_pts = None
        index = 0
        try:
            for target in targets:
                if emitted_pts is not None and emitted_pts >= target:
                    continue  # the frame already taken is also the first one at or after this target
                key = keys[max(0, bisect.bisect_right(keys, target) - 1)]
                if decoder is None or last_pts is None or key > last_pts:
                    container.seek(key, stream=stream, backward=True, any_frame=False)
                    decoder = container.decode(stream)
                    stats.seeks += 1
                found = None
                for frame in decoder:
                    if frame.pts is None:
                        continue
                    stats.decoded += 1
                    last_pts = frame.pts
                    if frame.pts >= target:
                        found = frame
                        break
                if found is None:
                    _check_not_truncated(info, last_pts, start, time_base, target)
                    return
                picture = found.to_image()
                jpeg, width, height = _encode(picture, max_side, quality)
                thumbnail, _, _ = _encode(picture, thumbnail_side, quality)
                emitted_pts = found.pts
                yield SampledFrame(
                    index=index,
                    pts=found.pts,
                    timestamp=float((found.pts - start) * time_base),
                    width=width,
                    height=height,
                    jpeg=jpeg,
                    thumbnail=thumbnail,
                )
                index += 1
            if index == 0:
                raise SamplingError("no frame could be decoded: it is corrupt")
        except av.error.FFmpegError as error:
            at = f" near {float((last_pts - start) * time_base):.2f} s" if last_pts is not None else ""
            raise SamplingError(f"is corrupt: decoding failed{at} ({error.strerror or error})") from error
        finally:
            container.close()

    return info, frames()


def _check_not_truncated(info: VideoInfo, last_pts, start: int, time_base: Fraction, target: int) -> None:
    """The stream ended before a target: fine within a few frames of the end, a truncated file otherwise."""
    reached = float((last_pts - start) * time_base) if last_pts is not None else 0.0
    slack = max(3 / info.fps if info.fps else 0.0, 0.5)
    if last_pts is None or info.duration - reached > slack:
        raise SamplingError(
            f"is truncated: its frames stop at {reached:.2f} s but it says it lasts {info.duration:.2f} s"
        )


def decode_all(path: Path) -> int:
    """Decode every frame (the baseline the sampler is measured against in bench/sample_frames.py)."""
    container, stream, _ = _open(Path(path))
    stream.thread_type = "AUTO"
    try:
        return sum(1 for _ in container.decode(stream))
    finally:
        container.close()


@dataclass
class FrameAtTimeStats:
    """What decoding one frame at a time cost: the keyframe seeked to and the frames decoded from it."""

    keyframe_pts: int | None = None
    decoded: int = 0


def frame_at_time(
    location: str | Path,
    seconds: float,
    *,
    max_side: int = 1280,
    thumbnail_side: int = 240,
    quality: int = 92,
    stats: FrameAtTimeStats | None = None,
) -> SampledFrame:
    """The frame on screen at `seconds` (the last one whose presentation time is at or before it, within a
    millisecond) of a video file or an http(s) address (a signed S3 URL: the demuxer reads it by range requests), at
    its exact presentation timestamp. Seeks to the keyframe before the time and decodes forward, as `sample` does:
    the cost is one group of pictures, whatever the video's length. `index` is 0 (a picked frame has none).
    """
    stats = stats if stats is not None else FrameAtTimeStats()
    remote = str(location).startswith(("http://", "https://"))
    if remote:
        try:
            container = av.open(str(location), metadata_errors="ignore", timeout=30)
        except av.error.FFmpegError as error:
            raise SamplingError(f"cannot be read ({error.strerror or error})") from error
        if not container.streams.video:
            container.close()
            raise SamplingError("has no video stream (not a video file)")
        stream = container.streams.video[0]
    else:
        container, stream, _ = _open(Path(location))
    try:
        stream.thread_type = "AUTO"
        time_base: Fraction = stream.time_base
        start = stream.start_time or 0
        duration = float(stream.duration * time_base) if stream.duration else None
        if duration is None and container.duration:
            duration = container.duration / av.time_base
        if seconds < 0 or (duration is not None and seconds > duration):
            limit = f"0 to {duration:.3f} s" if duration is not None else "0 s or later"
            raise SamplingError(f"has no frame at {seconds:.3f} s (its frames run from {limit})")
        target = start + round(Fraction(seconds).limit_denominator(10**6) / time_base)
        tolerance = max(1, round(Fraction(1, 1000) / time_base))
        container.seek(target, stream=stream, backward=True, any_frame=False)
        found = None
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            stats.decoded += 1
            if stats.keyframe_pts is None:
                stats.keyframe_pts = frame.pts
            if frame.pts > target + tolerance:
                break
            found = frame
            if frame.pts >= target - tolerance:
                break  # the frame starts at the time itself: the next one cannot be on screen then
        if found is None:
            raise SamplingError(f"has no frame at or before {seconds:.3f} s: it is corrupt")
        picture = found.to_image()
        jpeg, width, height = _encode(picture, max_side, quality)
        thumbnail, _, _ = _encode(picture, thumbnail_side, quality)
        return SampledFrame(
            index=0,
            pts=found.pts,
            timestamp=float((found.pts - start) * time_base),
            width=width,
            height=height,
            jpeg=jpeg,
            thumbnail=thumbnail,
        )
    except av.error.FFmpegError as error:
        raise SamplingError(f"is corrupt: decoding failed near {seconds:.2f} s ({error.strerror or error})") from error
    finally:
        container.close()


def required_decodes(path: Path, *, every: float | None = None, count: int | None = None) -> int:
    """The fewest frames a sampler decodes to take the frames `sample` takes: for each target, the frames from the
    keyframe before it to the first frame at or after it, each frame counted once however many targets need it.
    Read from the packets (nothing is decoded): the figure bench/sample_frames.py measures the sampler against."""
    container, stream, _ = _open(Path(path))
    try:
        packets = [(p.pts, p.is_keyframe) for p in container.demux(stream) if p.pts is not None]
        duration = _facts(container, stream, 0, sorted(pts for pts, key in packets if key)).duration
        start, time_base = stream.start_time or 0, stream.time_base
    finally:
        container.close()
    frames = sorted(pts for pts, _ in packets)
    keys = sorted(pts for pts, key in packets if key) or frames[:1]
    needed: set[int] = set()
    for seconds in sample_times(duration, every=every, count=count):
        target = start + round(Fraction(seconds).limit_denominator(10**6) / time_base)
        first = bisect.bisect_left(frames, target)
        if first == len(frames):
            break
        key = keys[max(0, bisect.bisect_right(keys, target) - 1)]
        needed.update(range(bisect.bisect_left(frames, key), first + 1))
    return len(needed)

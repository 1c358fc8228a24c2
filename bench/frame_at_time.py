"""Time "take this frame" on the workbench: the frame at a time far from a keyframe, decoded at its exact pts from
the source as the server does it, beside the decode of the whole group of pictures (GOP) it lies in.

    python bench/frame_at_time.py [--seconds 300] [--repeat 5] [--video PATH]

The video is the one bench/sample_frames.py generates (a 5-minute 1280x720 H.264 pan, a keyframe every 4 s; made once
with PyAV and cached under var/bench/). The time taken is the last frame before a keyframe, in the middle of the
video: 99 frames after the keyframe before it, the farthest a frame can be. Prints, as medians of `--repeat` runs
(take and GOP in turns):
- take: `annotator.videos.frame_at.video_frame_at` with an empty cache: open the file, seek to the keyframe before,
  decode forward to the frame, encode the JPEG and the thumbnail (what the pick-frame request waits for, besides
  writing the two files and three rows);
- take, cached: the same time again (the cache hit the fallback's preview and then "take" share);
- GOP: seek to the same keyframe and decode all of its frames, nothing encoded (the floor any exact decoder pays).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
sys.path.insert(0, str(BASE_DIR / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")

import django  # noqa: E402

django.setup()

import av  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.test import override_settings  # noqa: E402
from sample_frames import FPS, KEYFRAME_EVERY, bench_video  # noqa: E402

from annotator.models import Video  # noqa: E402
from annotator.videos import frame_at, sampling  # noqa: E402

LOCAL_CACHE = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "frame-at-bench"}}


def decode_gop(path: Path, keyframe_seconds: float) -> int:
    """Seek to the keyframe and decode every frame up to the next keyframe; the number of frames decoded."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        start = stream.start_time or 0
        key = start + round(Fraction(keyframe_seconds).limit_denominator(10**6) / stream.time_base)
        container.seek(key, stream=stream, backward=True, any_frame=False)
        decoded = 0
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            if decoded and frame.key_frame:
                break
            decoded += 1
        return decoded


def median_ms(function, repeat: int) -> tuple[float, object]:
    times, value = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        value = function()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=300, help="Length of the generated video.")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--video", type=Path, help="Another video (its keyframe interval is read from the file).")
    args = parser.parse_args()
    path = args.video or bench_video(args.seconds)
    info = sampling.probe(path)
    interval = info.keyframe_interval or KEYFRAME_EVERY / FPS
    gop = round(interval * info.fps)
    keyframe = (int(info.duration / 2 / interval)) * interval
    if keyframe + interval > info.duration:  # a short video: its first GOP
        keyframe = 0.0
    seconds = keyframe + (gop - 1) / info.fps  # the last frame before the next keyframe
    print(
        f"video: {path.name}, {info.duration:.0f} s, {info.width}x{info.height}, {info.fps:g} fps, a keyframe every "
        f"{interval:g} s ({gop} frames)"
    )
    video = Video(pk=0, yt8m_id="bench", source=str(path), duration=info.duration, fps=info.fps)

    with override_settings(CACHES=LOCAL_CACHE, IMPORT_ROOTS=[str(path.parent)]):
        stats = sampling.FrameAtTimeStats()
        sampling.frame_at_time(path, seconds, stats=stats)

        def take():
            cache.clear()
            return frame_at.video_frame_at(video=video, seconds=seconds)

        # Take and the GOP's decode in turns, so that a shared machine's load weighs on both alike.
        takes, gops = [], []
        for _ in range(args.repeat):
            took, frame = median_ms(take, 1)
            decoded_ms, decoded = median_ms(lambda: decode_gop(path, keyframe), 1)
            takes.append(took)
            gops.append(decoded_ms)
        take_ms, gop_ms = statistics.median(takes), statistics.median(gops)
        cached_ms, _ = median_ms(lambda: frame_at.video_frame_at(video=video, seconds=seconds), args.repeat)
    print(
        f"take this frame at {seconds:.3f} s (keyframe at {keyframe:.3f} s, {stats.decoded} frames decoded from it): "
        f"{take_ms:.0f} ms to the frame decoded at pts {frame.pts} ({frame.timestamp:.3f} s), JPEG {frame.width}x"
        f"{frame.height} {len(frame.jpeg) // 1024} KiB"
    )
    print(f"take, cached (the same time again): {cached_ms:.1f} ms")
    print(f"decode of its GOP ({decoded} frames, nothing encoded): {gop_ms:.0f} ms")
    print(f"take / GOP decode: {take_ms / gop_ms:.2f}")


if __name__ == "__main__":
    main()

"""Time frame sampling against decoding every frame, on a 5-minute 720p H.264 video.

    python bench/sample_frames.py [--every 10] [--seconds 300] [--video PATH]

The video is generated once (a camera panning over a textured scene, a keyframe every 4 s as in typical
uploads) and cached under var/bench/. Prints both times and their ratio; the target is a ratio of at most 25%.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402

from annotator.videos import sampling  # noqa: E402
from demo.videos import textured_scene, write_video  # noqa: E402

SECONDS = 300
FPS = 25
KEYFRAME_EVERY = 4 * FPS
SIZE = (1280, 720)


def bench_video(seconds: int = SECONDS) -> Path:
    path = BASE_DIR / "var" / "bench" / f"pan_{SIZE[1]}p_{seconds}s_gop{KEYFRAME_EVERY}.mp4"
    if not path.exists():
        print(f"Generating {path} ({seconds} s, {SIZE[0]}x{SIZE[1]}, {FPS} fps; once) ...", flush=True)
        started = time.perf_counter()

        def back_and_forth():
            width, height = SIZE
            leg = min(30, seconds) * FPS  # frames per sweep across a scene and back
            for sweep in range(seconds * FPS // leg):
                scene = textured_scene(width * 3, height, seed=sweep)
                travel = scene.shape[1] - width
                for i in range(leg):
                    x = round(travel * (1 - abs(1 - 2 * i / leg)))
                    yield np.ascontiguousarray(scene[:, x : x + width])

        write_video(path, back_and_forth(), fps=FPS, keyframe_every=KEYFRAME_EVERY)
        print(f"  encoded in {time.perf_counter() - started:.1f} s", flush=True)
    return path


def timed(function, repeat: int = 2):
    best, value = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - started)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=10.0, help="seconds between sampled frames")
    parser.add_argument("--seconds", type=int, default=SECONDS, help="length of the generated video")
    parser.add_argument("--video", type=Path, help="a video of your own instead of the generated one")
    args = parser.parse_args()
    path = args.video or bench_video(args.seconds)
    info = sampling.probe(path)
    print(
        f"Video: {path.name}: {info.duration:.1f} s, {info.width}x{info.height}, {info.fps:.2f} fps, "
        f"{info.size_bytes / 1e6:.1f} MB, a keyframe every {info.keyframe_interval:.2f} s"
    )

    full_seconds, decoded = timed(lambda: sampling.decode_all(path))
    stats = sampling.SamplingStats()

    def sample_once():
        stats.seeks = stats.decoded = 0
        _, frames = sampling.sample(path, every=args.every, stats=stats)
        return sum(1 for _ in frames)

    sample_seconds, sampled = timed(sample_once)
    print(f"Decode every frame:        {full_seconds:7.2f} s  ({decoded} frames)")
    print(
        f"Sample one every {args.every:g} s:    {sample_seconds:7.2f} s  ({sampled} frames as JPEG + thumbnail; "
        f"{stats.seeks} seeks, {stats.decoded} frames decoded)"
    )
    print(f"Ratio sampling / full decode: {sample_seconds / full_seconds:.1%} (target: at most 25%)")


if __name__ == "__main__":
    main()

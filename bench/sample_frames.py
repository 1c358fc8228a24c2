"""Time frame sampling against decoding every frame, on a 5-minute 720p H.264 video.

    python bench/sample_frames.py [--steps 1,4,10] [--seconds 300] [--video PATH]

The videos are generated once (a camera panning over a textured scene, a keyframe every 4 s as in typical
uploads; and a 60 s clip with a single keyframe) and cached under var/bench/. For each step, prints the frames the
sampler decoded, their share of a full decode (and of its time), and the fewest decodes the keyframes require for
those targets (`sampling.required_decodes`). Targets: every 4 s within 1.5x the minimum; every 10 s at most 15% of
a full decode.
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


def bench_video(seconds: int = SECONDS, keyframe_every: int = KEYFRAME_EVERY) -> Path:
    name = f"pan_{SIZE[1]}p_{seconds}s_gop{keyframe_every}.mp4"
    path = BASE_DIR / "var" / "bench" / name
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

        write_video(path, back_and_forth(), fps=FPS, keyframe_every=keyframe_every)
        print(f"  encoded in {time.perf_counter() - started:.1f} s", flush=True)
    return path


def timed(function, repeat: int = 2):
    best, value = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - started)
    return best, value


def rows(path: Path, steps: list[float]) -> None:
    """One row per step: the sampler's frames decoded and time against a full decode, and the fewest decodes the
    keyframes require for those targets."""
    info = sampling.probe(path)
    keys = f"a keyframe every {info.keyframe_interval:.2f} s" if info.keyframe_interval else "one keyframe"
    print(
        f"Video: {path.name}: {info.duration:.1f} s, {info.width}x{info.height}, {info.fps:.2f} fps, "
        f"{info.size_bytes / 1e6:.1f} MB, {keys}"
    )
    full_seconds, decoded = timed(lambda: sampling.decode_all(path), repeat=1)
    print(f"  decode every frame: {full_seconds:.2f} s ({decoded} frames)")
    print("  step   frames  seeks  decoded  share of full decode (frames, time)  minimum decodes  decoded/minimum")
    for step in steps:
        stats = sampling.SamplingStats()

        def sample_once(step=step, stats=stats):
            stats.seeks = stats.decoded = 0
            _, frames = sampling.sample(path, every=step, stats=stats)
            return sum(1 for _ in frames)

        seconds, sampled = timed(sample_once, repeat=1)
        minimum = sampling.required_decodes(path, every=step)
        print(
            f"  {step:4g} s {sampled:7d} {stats.seeks:6d} {stats.decoded:8d}  {stats.decoded / decoded:14.1%}, "
            f"{seconds / full_seconds:6.1%}            {minimum:15d}  {stats.decoded / minimum:15.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="1,4,10", help="seconds between sampled frames, comma-separated")
    parser.add_argument("--seconds", type=int, default=SECONDS, help="length of the generated video")
    parser.add_argument("--video", type=Path, help="a video of your own instead of the generated ones")
    args = parser.parse_args()
    steps = [float(step) for step in args.steps.split(",")]
    if args.video:
        rows(args.video, steps)
        return
    rows(bench_video(args.seconds), steps)
    # A clip with a single keyframe (a screen recording, a badly cut upload): every frame hangs on the first.
    single = min(args.seconds, 60)
    rows(bench_video(single, keyframe_every=single * FPS + 1), steps)
    print("Targets: every 4 s decodes within 1.5x the minimum; every 10 s at most 15% of a full decode.")


if __name__ == "__main__":
    main()

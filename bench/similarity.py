"""CPU benchmark: similarities of 256 pairs among 64 frames, (a) naive vs (b) the app's way.

(a) each pair embeds its two images (decode, preprocess, forward) and takes their cosine;
(b) each frame is embedded once, in batches, by the worker's Embedder, stored as float16 like the app does,
    and every pair is one dot product of two stored vectors (numpy, as in the web process).
Random DINOv3 with ViT-S/16 sizes (384-d, 12 layers, 6 heads) at 224 px, fp32 on CPU. Prints images/s,
pairs/s and the ratio b/a (target: at least 8). No Django needed.

    python bench/similarity.py [--frames 64] [--pairs 256] [--batch 32]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from annotator.similarity.embedder import Embedder, build_random_model, decode_image, preprocess  # noqa: E402

VIT_S16 = dict(
    hidden_size=384,
    intermediate_size=1536,
    num_hidden_layers=12,
    num_attention_heads=6,
    patch_size=16,
    image_size=224,
    num_register_tokens=4,
    layerscale_value=1.0,
)


def make_frames(folder: Path, count: int) -> list[str]:
    """Frames of a 'video': a scene with an object that moves a little from frame to frame."""
    paths = []
    rng = np.random.default_rng(0)
    background = (rng.random((360, 640, 3)) * 60 + 120).astype(np.uint8)
    for index in range(count):
        picture = Image.fromarray(background)
        draw = ImageDraw.Draw(picture)
        draw.ellipse([100 + 3 * index, 120, 220 + 3 * index, 240], fill=(200, 60, 40))
        draw.rectangle([400, 50 + index, 520, 170 + index], fill=(40, 90, 200))
        buffer = io.BytesIO()
        picture.save(buffer, "JPEG", quality=90)
        path = folder / f"frame_{index:04d}.jpg"
        path.write_bytes(buffer.getvalue())
        paths.append(str(path))
    return paths


def naive(model: torch.nn.Module, paths: list[str], pairs: np.ndarray) -> np.ndarray:
    values = []
    with torch.inference_mode():
        for first, second in pairs:
            batch = torch.stack([torch.from_numpy(decode_image(paths[i], 224).copy()) for i in (first, second)])
            pooled = model(pixel_values=preprocess(batch, 224)).pooler_output
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
            values.append(float(pooled[0] @ pooled[1]))
    return np.array(values)


def app_way(embedder: Embedder, paths: list[str], pairs: np.ndarray) -> np.ndarray:
    stored = np.concatenate([batch.vectors for batch in embedder.embed(paths)]).astype("<f2")  # float16 rows
    vectors = stored.astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.einsum("ij,ij->i", vectors[pairs[:, 0]], vectors[pairs[:, 1]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()

    model = build_random_model(seed=0, **VIT_S16)
    rng = np.random.default_rng(1)
    pairs = np.array([sorted(rng.choice(args.frames, size=2, replace=False)) for _ in range(args.pairs)])
    with tempfile.TemporaryDirectory() as folder:
        paths = make_frames(Path(folder), args.frames)
        embedder = Embedder(model, image_size=224, batch_size=args.batch, decode_threads=os.cpu_count())
        naive(model, paths, pairs[:2])  # warm-up
        started = time.perf_counter()
        expected = naive(model, paths, pairs)
        naive_seconds = time.perf_counter() - started
        started = time.perf_counter()
        got = app_way(embedder, paths, pairs)
        app_seconds = time.perf_counter() - started

    print(f"CPU: {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads)")
    print("model: random DINOv3 ViT-S/16 sizes (384-d, 12 layers), 224 px, fp32")
    print(f"{args.pairs} pairs among {args.frames} frames (640x360 JPEG)")
    print(
        f"(a) naive, each pair embeds its two images: {2 * args.pairs / naive_seconds:7.1f} images/s, "
        f"{args.pairs / naive_seconds:8.1f} pairs/s ({naive_seconds:.2f} s)"
    )
    print(
        f"(b) app, each frame once in batches of {args.batch}: {args.frames / app_seconds:7.1f} images/s, "
        f"{args.pairs / app_seconds:8.1f} pairs/s ({app_seconds:.2f} s)"
    )
    print(f"ratio b/a (pairs/s): {naive_seconds / app_seconds:.1f} (target >= 8)")
    print(f"largest difference between (a) and (b) similarities: {np.abs(expected - got).max():.2e}")


if __name__ == "__main__":
    main()

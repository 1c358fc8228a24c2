"""What both GPU benchmarks embed: synthetic 640x360 video frames with photo-like entropy (the JPEGs of
bench/gpu_similarity.py and the videos bench/gpu_worker.py samples) and the random DINOv3 configs (ViT-L/16 at
224, and a tiny one for BENCH_TINY=1). numpy and Pillow only."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

# layerscale 1.0: with the default tiny layerscale a random model returns 1.0 for every pair.
VIT_L16 = dict(
    hidden_size=1024,
    intermediate_size=4096,
    num_hidden_layers=24,
    num_attention_heads=16,
    patch_size=16,
    image_size=224,
    num_register_tokens=4,
    layerscale_value=1.0,
)
TINY_CONFIG = dict(VIT_L16, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2)

WIDTH, HEIGHT = 640, 360
_NOISE = np.random.default_rng(0).normal(0, 8, size=(HEIGHT + 64, WIDTH + 64, 3)).astype(np.float32)
_Y, _X = np.mgrid[0:HEIGHT, 0:WIDTH]
_BASE = np.stack([_X * 0.3 + 40, _Y * 0.4 + 60, (_X + _Y) * 0.15 + 80], axis=-1).astype(np.float32)


def frame_pixels(index: int) -> np.ndarray:
    """An RGB frame (360, 640, 3): a gradient with sensor-like noise (a different crop per index) and shapes that
    move with the index: distinct frames, made fast enough for thousands."""
    dy, dx = (index * 7) % 64, (index * 13) % 64
    pixels = np.clip(_BASE + _NOISE[dy : dy + HEIGHT, dx : dx + WIDTH], 0, 255).astype(np.uint8)
    picture = Image.fromarray(pixels)
    draw = ImageDraw.Draw(picture)
    shift = index % 200
    draw.ellipse([80 + shift, 100, 200 + shift, 220], fill=(210, 70, 40))
    draw.rectangle([380, 40 + shift // 2, 520, 180 + shift // 2], fill=(40, 90, 200))
    return np.asarray(picture)

"""GPU benchmark: DINOv3 ViT-L/16 at 224 in bf16, end to end from JPEG files against the forward pass alone.

End to end = the worker's `annotator.similarity.embedder.Embedder.embed` over JPEG files on disk: decode on CPU threads
(PIL, `draft`), pinned host buffers, copies on a side stream, resize + normalise on the GPU, forward, vectors
back on the host. Forward only = the same model on preprocessed tensors already on the GPU.
Targets: >= 2,500 images/s end to end, and >= 80% of the forward-only rate. Needs no Django and no network.

Environment: BENCH_TINY=1 (tiny model, few images, runs on CPU: a check that the script works),
BENCH_IMAGES (default 8192), BENCH_BATCH (256), BENCH_THREADS (CPU cores - 1), BENCH_DIR (/tmp/sb-gpu-bench).
"""

from __future__ import annotations

import io
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from annotator.similarity.embedder import Embedder, build_random_model, decode_image  # noqa: E402
from bench.synthetic_frames import TINY_CONFIG, VIT_L16, frame_pixels  # noqa: E402

TINY = os.getenv("BENCH_TINY") == "1"
IMAGES = int(os.getenv("BENCH_IMAGES", "96" if TINY else "8192"))
BATCH = int(os.getenv("BENCH_BATCH", "16" if TINY else "256"))
THREADS = int(os.getenv("BENCH_THREADS", str(max(1, (os.cpu_count() or 2) - 1))))
FOLDER = Path(os.getenv("BENCH_DIR", "/tmp/sb-gpu-bench-tiny" if TINY else "/tmp/sb-gpu-bench"))


def write_jpeg(index: int) -> Path:
    """One synthetic frame as a JPEG file (quality 90), written once and kept for the next run."""
    path = FOLDER / f"frame_{index:05d}.jpg"
    if path.exists():
        return path
    picture = Image.fromarray(frame_pixels(index))
    buffer = io.BytesIO()
    picture.save(buffer, "JPEG", quality=90)
    path.write_bytes(buffer.getvalue())
    return path


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    device = torch.device("cpu" if TINY else "cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA GPU visible to torch (set BENCH_TINY=1 for the CPU check)")
    FOLDER.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        paths = [str(path) for path in pool.map(write_jpeg, range(IMAGES))]
    megabytes = sum(os.path.getsize(path) for path in paths) / 1e6
    print(f"{IMAGES} JPEGs 640x360 in {FOLDER} ({megabytes:.0f} MB), ready in {time.perf_counter() - started:.1f} s")

    model = build_random_model(seed=0, attention="sdpa", device=str(device), **(TINY_CONFIG if TINY else VIT_L16))
    dtype = torch.float32 if TINY else torch.bfloat16
    model = model.to(device=device, dtype=dtype).eval()
    parameters = sum(p.numel() for p in model.parameters()) / 1e6
    embedder = Embedder(model, image_size=224, batch_size=BATCH, decode_threads=THREADS, prefetch=3)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"device: {name}; torch {torch.__version__}; model: random DINOv3 {parameters:.0f}M parameters, "
        f"{model.config.hidden_size}-d, {dtype}, attention {model.config._attn_implementation}; "
        f"batch {BATCH}; {THREADS} decode threads"
    )

    # Forward only: preprocessed tensors already on the device.
    pixels = torch.randn(BATCH, 3, 224, 224, device=device, dtype=dtype)
    for _ in range(3):
        embedder.forward(pixels)
    synchronize(device)
    rounds = max(4, IMAGES // BATCH)
    started = time.perf_counter()
    for _ in range(rounds):
        embedder.forward(pixels)
    synchronize(device)
    forward_rate = rounds * BATCH / (time.perf_counter() - started)

    # End to end from the JPEG files, through the worker's pipeline. The warm-up pass fills the pinned-memory
    # cache (as many buffers as batches in flight) so the measured pass does not pay for cudaHostAlloc.
    for _ in embedder.embed(paths[: 6 * BATCH]):
        pass
    synchronize(device)
    started = time.perf_counter()
    embedded = failed = 0
    for batch in embedder.embed(paths):
        embedded += len(batch.indices)
        failed += len(batch.failures)
    synchronize(device)
    end_to_end_rate = embedded / (time.perf_counter() - started)
    assert embedded == IMAGES and failed == 0, (embedded, failed)

    # Decoding alone on the same threads (a diagnostic: the ceiling the CPU side puts on end to end).
    started = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        for _ in pool.map(lambda path: decode_image(path, 224), paths):
            pass
    decode_rate = IMAGES / (time.perf_counter() - started)

    ratio = end_to_end_rate / forward_rate
    print(f"decode only ({THREADS} CPU threads):      {decode_rate:8.0f} images/s")
    print(f"forward only (tensors on the device): {forward_rate:8.0f} images/s")
    print(f"end to end (JPEG files -> vectors):   {end_to_end_rate:8.0f} images/s")
    print(f"end to end / forward only: {ratio:.0%}")
    if not TINY:
        verdict = "PASS" if end_to_end_rate >= 2500 and ratio >= 0.8 else "BELOW TARGET"
        print(f"targets: >= 2500 images/s end to end and >= 80% of forward only: {verdict}")
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB")


if __name__ == "__main__":
    main()

"""DINOv3 image embeddings with torch and transformers: the only module of the app that imports them.

Pure torch/transformers/PIL/numpy (no Django), so the similarity worker and `bench/gpu_similarity.sh` run the
same code. JPEG decoding runs on CPU threads ahead of the model; resizing and normalising run on the model's
device; on CUDA the model runs in bf16 with SDPA attention and host-to-device copies use pinned memory on a
side stream, so the GPU never waits for decoding.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import simplejpeg
import torch
import torch.nn.functional as F

from annotator.images import ImageLimitError, image_limits, open_within_limits
from annotator.jobs.outages import outage_of

log = logging.getLogger(__name__)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
MODEL_TYPE = "dinov3_vit"

# A source is a file path, raw bytes, or a callable returning either (e.g. a read from S3 storage).
Source = str | os.PathLike | bytes | Callable[[], "str | os.PathLike | bytes"]


class ModelLoadError(Exception):
    """The model folder cannot be loaded as DINOv3 weights; the message says why and where."""


@dataclass
class BatchResult:
    """Embeddings of one batch: `indices` into the input sequence, their L2-normalised float32 vectors,
    and the inputs that failed (index -> message)."""

    indices: list[int]
    vectors: np.ndarray
    failures: dict[int, str] = field(default_factory=dict)


def dtype_for(device: str) -> torch.dtype:
    """bf16 on CUDA (fp16 overflows with these models), fp32 on CPU."""
    return torch.bfloat16 if str(device).startswith("cuda") else torch.float32


def decode_image(source: Source, image_size: int) -> np.ndarray:
    """Decode one image to an RGB uint8 array (H, W, 3).

    JPEGs go through simplejpeg, which releases the GIL for the whole decode and writes straight into a numpy
    array: decoder threads then run truly in parallel (PIL's array conversion holds the GIL and capped them at
    about 900 images/s on 15 threads of an H200 host). Both ask libjpeg for the smallest DCT scale that is
    still at least `image_size` on both sides: less decoding work for large frames, never less detail than the
    model's input. Anything else (PNG, CMYK JPEG, ...) goes through Pillow.
    """
    if callable(source):
        source = source()
    if isinstance(source, str | os.PathLike):
        source = read_regular_file(source)
    # The header is checked against the pixel limit before either decoder sees a pixel.
    with open_within_limits(source) as picture:
        if picture.format == "JPEG":
            try:
                return simplejpeg.decode_jpeg(source, colorspace="RGB", min_height=image_size, min_width=image_size)
            except ValueError:
                pass  # e.g. a CMYK or otherwise unusual JPEG: Pillow knows more variants
        picture.draft("RGB", (image_size, image_size))
        if picture.mode != "RGB":
            picture = picture.convert("RGB")
        return np.asarray(picture)


def read_regular_file(path: str | os.PathLike) -> bytes:
    """The bytes of a regular file. Anything else at the path (a named pipe, a device, a socket) is refused at
    once: opening a pipe for reading would wait for a writer forever, and the embedding transaction with it."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a pipe opens at once instead of waiting for a writer
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(f"{os.fspath(path)} is not a regular file ({file_kind(mode)})")
        size, max_bytes = os.fstat(descriptor).st_size, image_limits()[0]
        if size > max_bytes:  # refused before it is read into memory
            raise ImageLimitError(
                f"{os.fspath(path)} is {size} bytes, over the limit of {max_bytes} bytes (IMPORT_MAX_IMAGE_BYTES)"
            )
        os.set_blocking(descriptor, True)
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(descriptor)


def file_kind(mode: int) -> str:
    kinds = [(stat.S_ISFIFO, "a named pipe"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket")]
    kinds += [(stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")]
    return next((name for test, name in kinds if test(mode)), "not a file")


@functools.cache
def normalisation(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """ImageNet mean and std as (1, 3, 1, 1) tensors on the device, made once: building them per batch would
    be a synchronous copy that makes the host wait for the GPU."""
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1).to(device)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1).to(device)
    return mean, std


def preprocess(images: torch.Tensor, image_size: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """uint8 (N, H, W, 3) on any device -> normalised (N, 3, S, S): the model's input.

    Scale to [0, 1], resize to a fixed square (bilinear, antialiased), normalise with the ImageNet mean and
    std. The arithmetic is float32 whatever the model dtype, so CPU and GPU inputs agree closely.
    """
    pixels = images.permute(0, 3, 1, 2).float().div_(255.0)
    if pixels.shape[-2:] != (image_size, image_size):
        pixels = F.interpolate(pixels, size=(image_size, image_size), mode="bilinear", antialias=True)
    mean, std = normalisation(pixels.device)
    pixels = pixels.sub_(mean).div_(std)
    return pixels.to(dtype) if dtype is not None else pixels


def load_model(model_dir: str | os.PathLike, device: str = "cpu"):
    """DINOv3ViTModel from a local folder only (never downloads), in eval mode on `device`."""
    from transformers import DINOv3ViTModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    folder = Path(model_dir)
    if not (folder / "config.json").is_file():
        raise ModelLoadError(f"{folder}: no config.json here; this is not a HuggingFace model folder.")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"device {device!r} was asked for, but torch sees no CUDA GPU on this machine.")
    try:
        model = DINOv3ViTModel.from_pretrained(
            folder, local_files_only=True, dtype=dtype_for(device), attn_implementation="sdpa"
        )
    except Exception as error:
        raise ModelLoadError(f"{folder}: cannot load DINOv3 weights: {error}") from error
    if getattr(model.config, "model_type", "") != MODEL_TYPE:
        raise ModelLoadError(f"{folder}: model_type is {model.config.model_type!r}, not {MODEL_TYPE!r}.")
    return model.eval().to(device)


def build_random_model(
    folder: str | os.PathLike | None = None, *, seed: int = 0, attention: str = "sdpa", device: str = "cpu", **config
) -> torch.nn.Module:
    """A randomly initialised DINOv3ViTModel (tests, the demo, the benchmarks), built on `device`; saved to
    `folder` if given."""
    from transformers import DINOv3ViTConfig, DINOv3ViTModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    torch.manual_seed(seed)
    model_config = DINOv3ViTConfig(**config)
    model_config._attn_implementation = attention
    with torch.device(device):
        model = DINOv3ViTModel(model_config).eval()
    if folder is not None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        model.save_pretrained(folder)
    return model


@dataclass
class _Collated:
    """A decoded batch, grouped by image shape (each group one uint8 tensor, pinned on CUDA)."""

    start: int
    groups: list[tuple[list[int], torch.Tensor]]
    failures: dict[int, str]


class Embedder:
    """Embeds images with one DINOv3 model: the CLS token after the final norm, L2-normalised.

    `embed(sources)` yields one BatchResult per batch. Decoding runs `decode_threads` ahead on a thread pool
    (up to `prefetch` batches); a corrupt image fails alone. When the device runs out of memory the forward
    batch halves and the batch is retried. `oom_above` makes any forward larger than that raise an
    out-of-memory error, the way a smaller GPU would (tests of the halving).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        image_size: int = 224,
        batch_size: int = 64,
        decode_threads: int | None = None,
        prefetch: int = 2,
        oom_above: int | None = None,
        compile: bool | None = None,
        decode_timeout: float = 60.0,
    ):
        self.model = model
        parameter = next(model.parameters())
        self.device = parameter.device
        self.dtype = parameter.dtype
        self.cuda = self.device.type == "cuda"
        self.image_size = image_size
        self.batch_size = batch_size
        self.forward_batch = batch_size
        self.decode_threads = decode_threads or max(1, (os.cpu_count() or 2) - 1)
        self.prefetch = max(1, prefetch)
        self.oom_above = oom_above
        self.decode_timeout = decode_timeout
        self.abandoned = 0  # decode threads left hanging in a read, over this embedder's life
        self.dim = model.config.hidden_size
        self._copy_stream = torch.cuda.Stream(self.device) if self.cuda else None
        # On CUDA the forward pass is compiled (fused kernels: ~1.65x the eager ViT-L/16 rate on an H200). The
        # first batch pays the compile time once per worker process; batches are padded to one fixed size so
        # the compiled graph is reused and never recompiled for a short last batch.
        self.compiled = self.cuda if compile is None else compile
        self._model_call = torch.compile(model, dynamic=False) if self.compiled else model

    @classmethod
    def load(cls, model_dir: str | os.PathLike, *, device: str = "cpu", **options) -> Embedder:
        return cls(load_model(model_dir, device), **options)

    # --- the model -----------------------------------------------------------------------------------------

    @torch.inference_mode()
    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """Preprocessed pixels (N, 3, S, S) -> L2-normalised float32 embeddings (N, D) on the device."""
        if self.oom_above is not None and pixels.shape[0] > self.oom_above:
            raise torch.cuda.OutOfMemoryError(
                f"out of memory: a forward batch of {pixels.shape[0]} is above this device's {self.oom_above}"
            )
        count = pixels.shape[0]
        if self.compiled and count < self.forward_batch:
            pixels = torch.cat([pixels, pixels.new_zeros((self.forward_batch - count, *pixels.shape[1:]))])
        pooled = self._model_call(pixel_values=pixels.to(self.dtype)).pooler_output[:count]
        return F.normalize(pooled.float(), dim=-1)

    @torch.inference_mode()
    def embed_pixels(self, *images: torch.Tensor) -> torch.Tensor:
        """uint8 (N, H, W, 3) tensors of any sizes, already on the device -> embeddings of all, in order.

        Each is resized to the square input, so images of different sizes share forward batches; when the
        device runs out of memory the forward batch halves and the whole batch is tried again.
        """
        while True:
            try:
                size, dtype, step = self.image_size, self.dtype, self.forward_batch
                pixels = torch.cat([preprocess(chunk, size, dtype) for group in images for chunk in group.split(step)])
                return torch.cat([self.forward(chunk) for chunk in pixels.split(step)])
            except torch.cuda.OutOfMemoryError:
                if self.forward_batch <= 1:
                    raise
                self.forward_batch = max(1, self.forward_batch // 2)
                log.warning("out of memory: forward batch halved to %d, retrying", self.forward_batch)
                if self.cuda:
                    torch.cuda.empty_cache()

    # --- the pipeline --------------------------------------------------------------------------------------

    def _decode(self, source: Source) -> np.ndarray | str:
        try:
            array = decode_image(source, self.image_size)
        except Exception as error:  # any unreadable image fails alone; the batch goes on
            if outage_of(error) is not None:
                raise  # the storage is away, not this image: the job's unit pauses and embeds it later
            return f"cannot decode image: {type(error).__name__}: {error}"
        if array.ndim != 3 or array.shape[2] != 3 or min(array.shape[:2]) < 1:
            return f"cannot decode image: unexpected pixel array of shape {array.shape}"
        return array

    def _collate(self, start: int, decoded: list[Future]) -> _Collated:
        by_shape: dict[tuple[int, ...], list[tuple[int, np.ndarray]]] = {}
        failures: dict[int, str] = {}
        for offset, future in enumerate(decoded):
            # An image whose read never returns (a hung network mount, a stuck object store) fails alone after
            # the deadline: its thread is abandoned, the batch and the transaction around it go on.
            try:
                result = future.result(timeout=self.decode_timeout)
            except FutureTimeout:
                future.cancel()
                self.abandoned += 1
                result = f"reading the image took longer than {self.decode_timeout:g} s; left behind"
            if isinstance(result, str):
                failures[start + offset] = result
            else:
                by_shape.setdefault(result.shape, []).append((start + offset, result))
        groups = []
        for shape, members in by_shape.items():
            # Pinned host memory lets the copy to the GPU run asynchronously, beside the model.
            buffer = torch.empty((len(members), *shape), dtype=torch.uint8, pin_memory=self.cuda)
            view = buffer.numpy()
            for row, (_, array) in enumerate(members):
                view[row] = array
            groups.append(([index for index, _ in members], buffer))
        return _Collated(start, groups, failures)

    def _to_device(self, collated: _Collated) -> list[tuple[list[int], torch.Tensor]]:
        if not self.cuda:
            return collated.groups
        moved = []
        compute = torch.cuda.current_stream(self.device)
        with torch.cuda.stream(self._copy_stream):
            for indices, buffer in collated.groups:
                moved.append((indices, buffer.to(self.device, non_blocking=True)))
        compute.wait_stream(self._copy_stream)
        for _, tensor in moved:
            tensor.record_stream(compute)
        return moved

    def _run(self, collated: _Collated):
        """Queue one batch on the device; returns what `_finish` needs (asynchronous on CUDA)."""
        groups = self._to_device(collated)
        if not groups:
            return collated, [], None, None
        indices = [index for group_indices, _ in groups for index in group_indices]
        vectors = self.embed_pixels(*(tensor for _, tensor in groups))
        if not self.cuda:
            return collated, indices, vectors, None
        host = torch.empty(vectors.shape, dtype=vectors.dtype, pin_memory=True)
        host.copy_(vectors, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        return collated, indices, host, done

    def _finish(self, running) -> BatchResult:
        collated, indices, vectors, done = running
        if done is not None:
            done.synchronize()
        array = vectors.numpy() if vectors is not None else np.zeros((0, self.dim), dtype=np.float32)
        order = np.argsort(indices) if indices else np.zeros(0, dtype=int)
        return BatchResult([indices[i] for i in order], array[order], collated.failures)

    def embed(self, sources: Sequence[Source]) -> Iterator[BatchResult]:
        """Embed all sources in batches of `batch_size`; yields one BatchResult per batch, in order."""
        starts = list(range(0, len(sources), self.batch_size))
        if not starts:
            return
        # Not `with`: its exit would wait for a decode thread that hangs in a read; a fresh pool per call, closed
        # without waiting, leaves such a thread behind instead of the worker.
        decoders = ThreadPoolExecutor(self.decode_threads, thread_name_prefix="decode")
        collator = ThreadPoolExecutor(1, thread_name_prefix="collate")
        try:
            queued: deque[Future] = deque()

            def queue(start: int) -> None:
                batch = sources[start : start + self.batch_size]
                decoded = [decoders.submit(self._decode, source) for source in batch]
                queued.append(collator.submit(self._collate, start, decoded))

            upcoming = iter(starts)
            for start in upcoming:
                queue(start)
                if len(queued) > self.prefetch:
                    break
            running = None
            while queued:
                collated = queued.popleft().result()
                next_start = next(upcoming, None)
                if next_start is not None:
                    queue(next_start)
                # Queue this batch on the device before waiting for the previous one's vectors: the GPU
                # always has the next batch while the CPU hands back results.
                current = self._run(collated)
                if running is not None:
                    yield self._finish(running)
                running = current
            if running is not None:
                yield self._finish(running)
        finally:
            collator.shutdown(wait=self.abandoned == 0, cancel_futures=True)
            decoders.shutdown(wait=self.abandoned == 0, cancel_futures=True)

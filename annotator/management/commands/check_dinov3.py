"""`manage.py check_dinov3 [FOLDER]`: validate a DINOv3 model folder before pointing the app at it."""

from __future__ import annotations

import io
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from PIL import Image as PILImage
from PIL import ImageDraw

from annotator.similarity.services import fingerprint_of, model_dir, model_problem, weight_files


def test_card(shift: int = 0, hue: int = 0) -> bytes:
    """A small synthetic photo-like card; `shift` moves its shapes a little, `hue` changes its colours."""
    picture = PILImage.new("RGB", (320, 240), (30 + hue, 120, 200 - hue))
    draw = ImageDraw.Draw(picture)
    for x in range(0, 320, 24):
        draw.line([(x, 0), (x + 60, 240)], fill=(220, 220 - hue, 180), width=3)
    draw.ellipse([80 + shift, 60, 180 + shift, 160], fill=(240, 200, 40 + hue))
    draw.rectangle([200, 140 + shift, 280, 220 + shift], fill=(hue, 60, 60))
    buffer = io.BytesIO()
    picture.save(buffer, "JPEG", quality=92)
    return buffer.getvalue()


class Command(BaseCommand):
    help = (
        "Validate a DINOv3 folder (default: DINOV3_MODEL_DIR): load it the way the worker does and print its "
        "size, embedding width, fingerprint and a self-similarity check."
    )

    def add_arguments(self, parser):
        parser.add_argument("folder", nargs="?", help="model folder (default: DINOV3_MODEL_DIR)")
        parser.add_argument("--device", default=None, help="cpu or cuda (default: DINOV3_DEVICE)")

    def handle(self, *args, folder=None, device=None, **options):
        path = Path(folder) if folder else model_dir()
        problem = model_problem(path)
        if problem:
            raise CommandError(problem)
        device = device or settings.DINOV3_DEVICE
        from annotator.similarity.embedder import Embedder, ModelLoadError

        try:
            embedder = Embedder.load(path, device=device, image_size=settings.DINOV3_IMAGE_SIZE, batch_size=4)
        except ModelLoadError as error:
            raise CommandError(str(error))
        config = embedder.model.config
        parameters = sum(p.numel() for p in embedder.model.parameters())
        size = sum(p.stat().st_size for p in weight_files(path))
        dtype = "bf16" if device.startswith("cuda") else "fp32"
        cards = [test_card(), test_card(), test_card(shift=6), test_card(hue=90)]
        (batch,) = list(embedder.embed(cards))
        if batch.failures:
            raise CommandError(f"the test images failed: {batch.failures}")
        vectors = batch.vectors
        same, near, other = (float(vectors[0] @ vectors[i]) for i in (1, 2, 3))
        self.stdout.write(f"folder:          {path}")
        self.stdout.write(f"fingerprint:     {fingerprint_of(path, settings.DINOV3_IMAGE_SIZE, dtype)}")
        self.stdout.write(f"parameters:      {parameters / 1e6:.1f}M ({size / 1e6:.1f} MB of weights)")
        self.stdout.write(f"embedding width: {config.hidden_size} ({config.num_hidden_layers} layers)")
        self.stdout.write(f"device, input:   {embedder.device} {embedder.dtype}, {settings.DINOV3_IMAGE_SIZE}px")
        self.stdout.write(f"self-similarity: {same:.4f} (an image with itself: must be 1)")
        self.stdout.write(f"shifted copy:    {near:.4f}; another image: {other:.4f}")
        if abs(same - 1.0) > 1e-3:
            raise CommandError(f"an image with itself scores {same:.4f}, not 1: the model is not deterministic.")
        if other > 0.999:
            self.stderr.write("warning: two different images score 1: untrained or broken weights?")
        self.stdout.write(self.style.SUCCESS("OK: this folder works as DINOV3_MODEL_DIR."))

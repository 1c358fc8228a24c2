"""`manage.py check_dinov3 [FOLDER]`: check a DINOv3 model folder; `--activate FOLDER` also makes it current."""

from __future__ import annotations

import getpass
import io
import socket
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from PIL import Image as PILImage
from PIL import ImageDraw

from annotator.similarity.services import (
    dtype_name,
    embedding_model_activate,
    embedding_model_active,
    fingerprint_of,
    model_problem,
    weight_files,
)


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
        "Check a DINOv3 folder: load it the way the similarity worker does and print its size, embedding width, "
        "fingerprint and a self-similarity check. With --activate FOLDER, then make it the current embedding "
        "model (similarities of the previous model turn stale until the worker re-embeds). Run it where the "
        "worker runs (same device), e.g. docker compose run gpu-worker python manage.py check_dinov3 --activate "
        "/models/dinov3 --device cuda."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "folder", nargs="?", help="model folder to check (default: DINOV3_MODEL_DIR, else the active model's)"
        )
        parser.add_argument("--activate", metavar="FOLDER", help="check this folder, then make it the current model")
        parser.add_argument("--device", default=None, help="cpu or cuda (default: DINOV3_DEVICE)")
        parser.add_argument(
            "--image-size", type=int, default=None, help="square input size in pixels (default: DINOV3_IMAGE_SIZE)"
        )

    def handle(self, *args, folder=None, activate=None, device=None, image_size=None, **options):
        if folder and activate and Path(folder).resolve() != Path(activate).resolve():
            raise CommandError(f"two different folders: {folder} and --activate {activate}; give one.")
        path = self.folder_to_check(activate or folder)
        problem = model_problem(path)
        if problem:
            raise CommandError(problem)
        device = device or settings.DINOV3_DEVICE
        image_size = image_size or settings.DINOV3_IMAGE_SIZE
        if image_size < 16:
            raise CommandError(f"--image-size {image_size}: too small for a ViT with 16-pixel patches.")
        from annotator.similarity.embedder import Embedder, ModelLoadError

        try:
            # Loaded as the worker loads it; not compiled: four test images are not worth a compile (~45 s, ViT-L).
            embedder = Embedder.load(path, device=device, image_size=image_size, batch_size=4, compile=False)
        except ModelLoadError as error:
            raise CommandError(str(error))
        config = embedder.model.config
        parameters = sum(p.numel() for p in embedder.model.parameters())
        size = sum(p.stat().st_size for p in weight_files(path))
        cards = [test_card(), test_card(), test_card(shift=6), test_card(hue=90)]
        (batch,) = list(embedder.embed(cards))
        if batch.failures:
            raise CommandError(f"the test images failed: {batch.failures}")
        vectors = batch.vectors
        same, near, other = (float(vectors[0] @ vectors[i]) for i in (1, 2, 3))
        self.stdout.write(f"folder:          {path}")
        self.stdout.write(f"fingerprint:     {fingerprint_of(path, image_size, dtype_name(device))}")
        self.stdout.write(f"parameters:      {parameters / 1e6:.1f}M ({size / 1e6:.1f} MB of weights)")
        self.stdout.write(f"embedding width: {config.hidden_size} ({config.num_hidden_layers} layers)")
        self.stdout.write(f"device, input:   {embedder.device} {embedder.dtype}, {image_size}px")
        self.stdout.write(f"self-similarity: {same:.4f} (an image with itself: must be 1)")
        self.stdout.write(f"shifted copy:    {near:.4f}; another image: {other:.4f}")
        if abs(same - 1.0) > 1e-3:
            raise CommandError(f"an image with itself scores {same:.4f}, not 1: the model is not deterministic.")
        if other > 0.999:
            self.stderr.write("warning: two different images score 1: untrained or broken weights?")
        if not activate:
            self.stdout.write(self.style.SUCCESS("OK: this folder works; make it current with --activate FOLDER."))
            return
        self.activate(path, device, image_size)

    def folder_to_check(self, folder: str | None) -> Path:
        if folder:
            return Path(folder)
        if settings.DINOV3_MODEL_DIR:
            return Path(settings.DINOV3_MODEL_DIR)
        active = embedding_model_active(fresh=True)
        if active is None:
            raise CommandError("no folder given, DINOV3_MODEL_DIR is not set and no embedding model is active.")
        return Path(active.folder)

    def activate(self, path: Path, device: str, image_size: int) -> None:
        previous = embedding_model_active(fresh=True)
        try:
            model = embedding_model_activate(
                folder=path,
                device=device,
                image_size=image_size,
                activated_by=f"{getpass.getuser()}@{socket.gethostname()} (check_dinov3)",
            )
        except ValidationError as error:
            raise CommandError(" ".join(error.messages))
        if previous is not None and previous.pk == model.pk:
            self.stdout.write(self.style.SUCCESS(f"Already the active model: {model.fingerprint}"))
            return
        self.stdout.write(self.style.SUCCESS(f"Active embedding model: {model.fingerprint}"))
        if previous is not None:
            self.stdout.write(
                f"Previous model: {previous.fingerprint}. Its similarities are stale until the similarity worker "
                "re-embeds (its periodic catch-up, or manage.py compute_embeddings --all)."
            )
        self.stdout.write(
            f"The similarity worker loads {model.folder} (or its DINOV3_MODEL_DIR) and must run with "
            f"DINOV3_DEVICE={'cuda' if model.dtype == 'bf16' else 'cpu'}, or it refuses to embed."
        )

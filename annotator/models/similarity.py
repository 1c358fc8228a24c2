"""DINOv3 embeddings of images, stored per model fingerprint, and the embedding model that is current."""

from __future__ import annotations

import time

from django.db import models
from django.utils import timezone

from annotator.models.videos import Image

NO_ACTIVE_MODEL = "no embedding model is active: run manage.py check_dinov3 --activate FOLDER"
# How long a process trusts the active row it read: every pair's status asks for the current fingerprint.
ACTIVE_MODEL_CACHE_SECONDS = 1.0


class EmbeddingModelManager(models.Manager):
    """The current model, cached for a second per process: another process's activation is seen within a second."""

    _cache: dict = {"at": None, "model": None}

    def current(self, *, fresh: bool = False) -> EmbeddingModel | None:
        """The active row, or None while no model is active; `fresh` skips the cache."""
        now = time.monotonic()
        cache = EmbeddingModelManager._cache
        if fresh or cache["at"] is None or now - cache["at"] >= ACTIVE_MODEL_CACHE_SECONDS:
            cache.update(at=now, model=self.filter(active=True).first())
        return cache["model"]

    def current_fingerprint(self, *, fresh: bool = False) -> str | None:
        """Similarities and vectors under any other fingerprint are stale. None: no model is active."""
        model = self.current(fresh=fresh)
        return model.fingerprint if model is not None else None

    def forget_cached(self) -> None:
        EmbeddingModelManager._cache.update(at=None, model=None)


class EmbeddingModel(models.Model):
    """A DINOv3 model folder that `manage.py check_dinov3 --activate` checked and recorded, with what it is.

    The active row is the current model: every process reads its fingerprint from here (the web process and
    beat never open the weights); a pair scored under another fingerprint is stale. The similarity worker
    loads the active row's folder and refuses to embed unless its own fingerprint of the folder is this one.
    """

    fingerprint = models.CharField(max_length=200, unique=True, help_text="Which weights, input size and dtype.")
    dim = models.PositiveIntegerField(help_text="Embedding width (the model's hidden size).")
    layers = models.PositiveIntegerField()
    dtype = models.CharField(max_length=10, help_text="bf16 (CUDA) or fp32 (CPU): the worker must match it.")
    image_size = models.PositiveIntegerField(help_text="The square input size images are resized to, in pixels.")
    folder = models.CharField(max_length=1000, help_text="The folder it was activated from.")
    demo = models.BooleanField(default=False, help_text="An untrained demo model: its similarities mean nothing.")
    active = models.BooleanField(default=False)
    activated_at = models.DateTimeField(null=True, blank=True)
    activated_by = models.CharField(max_length=200, blank=True, help_text="Who activated it, and how.")
    created = models.DateTimeField(default=timezone.now)

    objects = EmbeddingModelManager()

    class Meta:
        ordering = ["-activated_at", "-pk"]
        constraints = [
            # At most one current model, whatever races between two activations.
            models.UniqueConstraint(
                fields=["active"], condition=models.Q(active=True), name="embedding_model_one_active"
            )
        ]

    def __str__(self):
        return self.fingerprint


class ImageEmbedding(models.Model):
    """One image's DINOv3 embedding under one model fingerprint, or why that image could not be embedded.

    The vector is L2-normalised and stored as float16 bytes (`dim` values); a failed image has no vector and
    an `error`. No row for the current fingerprint means the image is pending.
    """

    image = models.ForeignKey(Image, models.CASCADE, related_name="embeddings")
    fingerprint = models.CharField(max_length=200, help_text="Which weights, input size and dtype.")
    vector = models.BinaryField(null=True, blank=True)
    dim = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["image", "fingerprint"], name="image_embedding_unique_fingerprint")
        ]

    def __str__(self):
        return f"embedding of image {self.image_id} ({'failed' if self.failed else self.dim})"

    @property
    def failed(self) -> bool:
        return self.vector is None

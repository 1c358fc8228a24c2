"""DINOv3 embeddings of images, stored per model fingerprint."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from annotator.models.videos import Image


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

"""What the units of a mining job spread over workers leave for its merge: each block pair's exactly scored pairs."""

from __future__ import annotations

from django.db import models


class MinedBlock(models.Model):
    """The in-range pairs of one block pair of a mining job (rows of block `row_block` against rows of block
    `column_block`, or one block's own pairs): image ids and exact similarities as little-endian int64 / float64
    arrays. Written once per unit (a run again replaces it), read by the job's merge, deleted when the job ends."""

    job = models.ForeignKey("annotator.Job", on_delete=models.CASCADE, related_name="mined_blocks")
    row_block = models.PositiveIntegerField()
    column_block = models.PositiveIntegerField()
    first_ids = models.BinaryField()
    second_ids = models.BinaryField()
    similarities = models.BinaryField()
    checked = models.PositiveBigIntegerField(default=0)  # pairs the matrix products let through to exact scoring
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "row_block", "column_block"], name="mined_block_once_per_job")
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} blocks {self.row_block} x {self.column_block}"

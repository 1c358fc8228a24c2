"""Synthetic sweeps (issue 29): the paper's controlled experiments, one family of synthetic pairs generated over the
levels of one or two factors (benchmark/synthetic.py), `items_per_cell` pairs per cell, by a job.

Each generated pair is an ordinary Pair (domain synthetic, its factors in `generation_info`), tied to its cell by a
SweepItem: the unique (sweep, cell, index) lets a unit run again after its worker died skip what was made.
"""

from __future__ import annotations

import itertools

from django.conf import settings
from django.db import models
from django.utils import timezone

from annotator.models.jobs import Job
from annotator.models.pairs import Pair
from subtlebench.text import NAME_MAX, single_line


class Sweep(models.Model):
    class Landing(models.TextChoices):
        REVIEW = "review", "submitted for review"
        ACCEPTED = "accepted", "accepted directly"

    title = models.CharField(max_length=NAME_MAX, validators=[single_line])
    family = models.CharField(max_length=20, help_text="attribute, existence, quantity, spatial or viewpoint.")
    factors = models.JSONField(default=dict, help_text="The fixed factors (every cell), defaults filled in.")
    # [{"factor": "object_size", "levels": [10, 20, 30]}, ...]: one axis (a heatmap row) or two (a grid).
    axes = models.JSONField(default=list)
    items_per_cell = models.PositiveIntegerField()
    seed = models.IntegerField(default=0)
    size = models.PositiveIntegerField(default=512, help_text="Image side, pixels.")
    landing = models.CharField(max_length=10, choices=Landing.choices, default=Landing.REVIEW)
    # Kept apart: never in the benchmark's own exports (so never in their releases and studies); models and humans
    # answer its own experiment release (an export with `ExportOptions.sweep`).
    experiment = models.BooleanField(default=True, help_text="Kept apart from the benchmark's exports.")
    job = models.ForeignKey(Job, models.SET_NULL, null=True, blank=True, related_name="sweeps")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    archived_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Archived: not published again; its pairs and releases are kept.",
    )

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self):
        return f"sweep {self.pk}: {self.title}"

    @property
    def factor_names(self) -> list[str]:
        return [axis["factor"] for axis in self.axes]

    def cells(self) -> list[dict]:
        """Every cell's factor levels, in order (cell numbers are positions in this list): the first axis varies
        slowest."""
        names = self.factor_names
        return [
            dict(zip(names, levels, strict=True)) for levels in itertools.product(*(a["levels"] for a in self.axes))
        ]

    @property
    def total(self) -> int:
        return len(self.cells()) * self.items_per_cell


class SweepItem(models.Model):
    """One generated pair of a sweep: its cell (position in `Sweep.cells()`), its index in the cell, its levels."""

    sweep = models.ForeignKey(Sweep, models.CASCADE, related_name="items")
    cell = models.PositiveIntegerField()
    index = models.PositiveIntegerField()
    levels = models.JSONField(default=dict)
    pair = models.OneToOneField(Pair, models.PROTECT, related_name="sweep_item")

    class Meta:
        ordering = ["sweep", "cell", "index", "pk"]
        constraints = [models.UniqueConstraint(fields=["sweep", "cell", "index"], name="sweepitem_once")]

    def __str__(self):
        return f"sweep {self.sweep_id} cell {self.cell} #{self.index}"

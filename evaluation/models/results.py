"""Other benchmarks, for the release report's correlation section: a benchmark's score per model (entered or imported
from a CSV), and optionally its items' similarity and accuracy, drawn beside ours (evaluation.results.correlation).

A score is keyed by the model's name as runs give it (`ModelEvaluation.model_name`: the endpoint's model id, or an
imported file's model), so one entry serves every release the model ran on.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from subtlebench.text import NAME_MAX, NOTE_MAX, single_line, text_validators


class OtherBenchmark(models.Model):
    name = models.CharField(max_length=NAME_MAX, unique=True, validators=[single_line])
    description = models.TextField(blank=True, max_length=NOTE_MAX, validators=text_validators(NOTE_MAX))
    higher_is_better = models.BooleanField(default=True, help_text="Off for an error rate: its scores are negated.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class OtherBenchmarkScore(models.Model):
    benchmark = models.ForeignKey(OtherBenchmark, models.CASCADE, related_name="scores")
    model = models.CharField(max_length=NAME_MAX, validators=[single_line], help_text="As runs name the model.")
    score = models.FloatField(help_text="The model's score on that benchmark, in its own unit.")

    class Meta:
        ordering = ["benchmark", "model"]
        constraints = [models.UniqueConstraint(fields=["benchmark", "model"], name="otherbenchmarkscore_one_per_model")]

    def __str__(self) -> str:
        return f"{self.benchmark}: {self.model} {self.score:g}"


class OtherBenchmarkItem(models.Model):
    """One item of the other benchmark: its image pair's similarity and the models' accuracy on it (0..1)."""

    benchmark = models.ForeignKey(OtherBenchmark, models.CASCADE, related_name="items")
    item_id = models.CharField(max_length=300, blank=True)
    similarity = models.FloatField(validators=[MinValueValidator(-1.0), MaxValueValidator(1.0)])
    accuracy = models.FloatField(validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])

    class Meta:
        ordering = ["benchmark", "pk"]

    def __str__(self) -> str:
        return f"{self.benchmark} item {self.item_id or self.pk}: similarity {self.similarity:g}, {self.accuracy:.0%}"

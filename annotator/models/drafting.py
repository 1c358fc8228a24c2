"""Models that draft, people who decide: one model's draft of a question for the two images A and B of the pair
editor, on a video's frames or on a candidate pair of an image collection.

Each "Draft with a model" stores one row, whatever became of it: the endpoint and model asked, the prompt as sent,
the reply and the drafted texts (or why the reply was unusable). A pair submitted from it names it (`Pair.drafted_by`)
and records what the person changed (`Pair.draft_changes`, `benchmark.drafting.draft_changes`).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from annotator.models.llm import ModelEndpoint
from annotator.models.taxonomy import Category
from annotator.models.videos import Video
from subtlebench.text import NAME_MAX, NOTE_MAX


class ModelDraft(models.Model):
    author = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="model_drafts")
    # What the draft was asked on: a video's frames, or a candidate pair of a collection (its images 0 and 1).
    video = models.ForeignKey(Video, models.CASCADE, null=True, blank=True, related_name="model_drafts")
    candidate = models.ForeignKey(
        "annotator.PairCandidate", models.CASCADE, null=True, blank=True, related_name="model_drafts"
    )
    endpoint = models.ForeignKey(ModelEndpoint, models.SET_NULL, null=True, blank=True, related_name="drafts")
    # The names as they were when asked: the endpoint may be renamed or removed later.
    endpoint_name = models.CharField(max_length=NAME_MAX)
    model_id = models.CharField(max_length=NAME_MAX)
    category = models.CharField(max_length=20, choices=Category.choices)
    index_a = models.PositiveIntegerField(help_text="Frame A's index (a candidate's image: 0 or 1): the first image.")
    index_b = models.PositiveIntegerField(help_text="Frame B's index: sent as the second image.")
    prompt = models.JSONField(default=dict, help_text="The system text and the user text as sent.")
    parameters = models.JSONField(default=dict, blank=True)
    response_text = models.TextField(blank=True, max_length=20000)
    # The draft; empty when the reply was unusable (then `failure` says why).
    question = models.TextField(blank=True, max_length=2000)
    answer = models.TextField(blank=True, max_length=500)
    distractors = models.JSONField(default=list, blank=True)
    answer_frame = models.CharField(max_length=1, blank=True, help_text="Binary categories: a (first image) or b.")
    failure = models.TextField(blank=True, max_length=NOTE_MAX)
    latency_ms = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(video__isnull=False, candidate__isnull=True)
                | models.Q(video__isnull=True, candidate__isnull=False),
                name="modeldraft_video_or_candidate",
            ),
        ]

    def __str__(self):
        return f"draft {self.pk} by {self.endpoint_name} for {self.author_id}"

    @property
    def label(self) -> str:
        return f"{self.endpoint_name} ({self.model_id})"

    @property
    def texts(self) -> dict:
        """What the person's changes are measured against (`benchmark.drafting.draft_changes`)."""
        return {
            "category": self.category,
            "question": self.question,
            "answer": self.answer,
            "distractors": list(self.distractors),
            "answer_frame": self.answer_frame,
        }

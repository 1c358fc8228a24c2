"""The /stats/ figures of models that draft: acceptance of model-drafted against hand-written pairs, with intervals,
and how often the person edited or replaced what the model drafted."""

from __future__ import annotations

from fractions import Fraction

from django.db.models import Count, Exists, OuterRef, Q

from annotator.models import ModelDraft, Pair, PairCandidate
from benchmark.drafting import EDITED, REPLACED, taken_as_drafted
from benchmark.intervals import Scored, accuracy_interval, micro_mean

FIELDS = ("question", "answer", "distractors")


def _acceptance(rows: list[tuple[int, int | None, str]]) -> dict:
    """Accepted out of decided, with the 95% interval (pairs of one video are one cluster: benchmark/intervals.py)."""
    scores = [
        Scored(Fraction(int(status == Pair.Status.ACCEPTED)), ("video", video) if video else ("pair", pk))
        for pk, video, status in rows
    ]
    accepted = sum(status == Pair.Status.ACCEPTED for _, _, status in rows)
    mean = micro_mean(scores)
    interval = accuracy_interval(mean, answers=len(scores)) if mean else None
    return {
        "decided": len(rows),
        "accepted": accepted,
        "rate": accepted / len(rows) if rows else None,
        "low": interval[0] if interval else None,
        "high": interval[1] if interval else None,
    }


def drafting_figures() -> dict:
    """Acceptance of model-drafted against hand-written pairs (made in the pair editor), and how often drafts were
    edited: per field, the submitted drafted pairs whose question, answer or distractors the person edited or
    replaced, and those taken as drafted."""
    # Made in the pair editor: of a video's frames, or authored from a collection's candidate pair (not imported).
    authored = Exists(PairCandidate.objects.filter(pair=OuterRef("pk")))
    made = (
        Pair.objects.filter(author__isnull=False)
        .filter(Q(video__isnull=False) | authored)
        .exclude(status__in=(Pair.Status.DRAFT, Pair.Status.WITHDRAWN))
    )
    decided = made.filter(status__in=(Pair.Status.ACCEPTED, Pair.Status.REJECTED)).order_by("pk")
    drafted_rows = list(decided.filter(drafted_by__isnull=False).values_list("pk", "video_id", "status"))
    hand_rows = list(decided.filter(drafted_by__isnull=True).values_list("pk", "video_id", "status"))
    changes = list(made.filter(drafted_by__isnull=False).order_by("pk").values_list("draft_changes", flat=True))
    fields = {
        name: {
            "edited": sum(c.get(name, {}).get("change") == EDITED for c in changes),
            "replaced": sum(c.get(name, {}).get("change") == REPLACED for c in changes),
        }
        for name in FIELDS
    }
    requests = ModelDraft.objects.aggregate(
        all=Count("pk", distinct=True),
        failed=Count("pk", filter=~Q(failure=""), distinct=True),
        used=Count("pk", filter=Q(pairs__isnull=False), distinct=True),
    )
    drafted, hand = _acceptance(drafted_rows), _acceptance(hand_rows)
    return {
        "drafted": drafted,
        "hand": hand,
        "rows": [("model-drafted", drafted), ("hand-written", hand)],
        "submitted_drafted": len(changes),
        "as_drafted": sum(taken_as_drafted(c) for c in changes),
        "fields": fields,
        "requests": requests,
    }

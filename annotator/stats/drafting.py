"""The /stats/ figures of models that draft: acceptance of model-drafted against hand-written pairs, with intervals,
and how often the person edited or replaced what the model drafted."""

from __future__ import annotations

from django.db.models import BigIntegerField, Case, Count, Exists, F, OuterRef, Q, When

from annotator.models import ModelDraft, Pair, PairCandidate
from benchmark.drafting import EDITED, REPLACED, taken_as_drafted
from benchmark.intervals import accuracy_interval, micro_mean_of_sums

FIELDS = ("question", "answer", "distractors")


def _acceptance(clusters: list[tuple[int, int]]) -> dict:
    """Accepted out of decided, with the 95% interval (pairs of one video are one cluster: benchmark/intervals.py),
    from each cluster's (accepted, decided)."""
    decided = sum(n for _, n in clusters)
    accepted = sum(a for a, _ in clusters)
    mean = micro_mean_of_sums(clusters)
    interval = accuracy_interval(mean, answers=decided) if mean else None
    return {
        "decided": decided,
        "accepted": accepted,
        "rate": accepted / decided if decided else None,
        "low": interval[0] if interval else None,
        "high": interval[1] if interval else None,
    }


def _decided_clusters(decided) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(accepted, decided) per cluster of the model-drafted and of the hand-written decided pairs, in one GROUP BY:
    a video's pairs are one cluster, a pair without a video its own."""
    lone = Case(When(video__isnull=True, then=F("pk")), output_field=BigIntegerField())
    drafted, hand = [], []
    for is_drafted, _, _, accepted, n in (
        decided.order_by()
        .annotate(is_drafted=Q(drafted_by__isnull=False), lone=lone)
        .values_list("is_drafted", "video_id", "lone")
        .annotate(accepted=Count("pk", filter=Q(status=Pair.Status.ACCEPTED)), n=Count("pk"))
    ):
        (drafted if is_drafted else hand).append((accepted, n))
    return drafted, hand


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
    decided = made.filter(status__in=(Pair.Status.ACCEPTED, Pair.Status.REJECTED))
    drafted_clusters, hand_clusters = _decided_clusters(decided)
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
    drafted, hand = _acceptance(drafted_clusters), _acceptance(hand_clusters)
    return {
        "drafted": drafted,
        "hand": hand,
        "rows": [("model-drafted", drafted), ("hand-written", hand)],
        "submitted_drafted": len(changes),
        "as_drafted": sum(taken_as_drafted(c) for c in changes),
        "fields": fields,
        "requests": requests,
    }

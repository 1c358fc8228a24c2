"""A run's running totals and its summary (counts, accuracy, the distinct failure reasons, tokens and cost, what its
strategy did), as the run's page, its job and the API show them."""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.utils import timezone

from annotator.llm.profiles import RequestProfile
from evaluation.models import ModelEvaluation, ModelItemResult

REASONS_SHOWN = 10  # distinct failure messages, each with its count, on a run's page and in its summary


def evaluation_totals(evaluation: ModelEvaluation) -> dict:
    counts = ModelItemResult.objects.filter(evaluation=evaluation).aggregate(
        answered=models.Count("pk", filter=models.Q(is_correct__isnull=False)),
        correct=models.Count("pk", filter=models.Q(is_correct=True)),
        failed=models.Count("pk", filter=models.Q(is_correct__isnull=True)),
        unparsable=models.Count("pk", filter=models.Q(parse_outcome=ModelItemResult.Parse.UNPARSABLE)),
        extracted_correct=models.Count(
            "pk",
            filter=models.Q(
                parse_outcome=ModelItemResult.Parse.UNPARSABLE,
                extraction=ModelItemResult.Extraction.LETTER,
                extracted_letter=models.F("correct_letter"),
            ),
        ),
        prompt_tokens=models.Sum("prompt_tokens", default=0),
        completion_tokens=models.Sum("completion_tokens", default=0),
        reasoning_tokens=models.Sum("reasoning_tokens", default=0),
    )
    return counts


def evaluation_summary(evaluation: ModelEvaluation) -> dict:
    """Counts of the run: answered, failed and not yet asked items, accuracy over the answered ones (overall and per
    category: a failed request is no answer, never a wrong one), failures by kind, tokens, the state (paused:
    why and the next try)."""
    evaluation.refresh_from_db()
    results = ModelItemResult.objects.filter(evaluation=evaluation).order_by()
    per_category = {}
    for row in (
        results.values("category")
        .annotate(
            answered=models.Count("pk", filter=models.Q(is_correct__isnull=False)),
            correct=models.Count("pk", filter=models.Q(is_correct=True)),
            failed=models.Count("pk", filter=models.Q(is_correct__isnull=True)),
            unparsable=models.Count("pk", filter=models.Q(parse_outcome=ModelItemResult.Parse.UNPARSABLE)),
        )
        .order_by("category")
    ):
        answered, correct = row["answered"], row["correct"]
        per_category[row["category"]] = {
            "count": answered + row["failed"],  # items with a result (kept for API clients): answered + failed
            "answered": answered,
            "correct": correct,
            "failed": row["failed"],
            "unparsable": row["unparsable"],
            "accuracy": correct / answered if answered else None,
        }
    failures = {
        row["failure"]: row["count"]
        for row in results.exclude(failure="").values("failure").annotate(count=models.Count("pk")).order_by("failure")
    }
    reasons = [
        {"failure": row["failure"], "message": row["failure_message"], "count": row["count"]}
        for row in results.exclude(failure="")
        .values("failure", "failure_message")
        .annotate(count=models.Count("pk"))
        .order_by("-count", "failure", "failure_message")[:REASONS_SHOWN]
    ]
    job = evaluation.job
    job.refresh_from_db(fields=["started", "finished", "result", "status"])
    end = job.finished or timezone.now()
    return {
        **{key: value for key, value in (job.result or {}).items() if key in ("skipped",)},
        "state": evaluation.state,
        "total": evaluation.items,
        "answered": evaluation.answered,
        "correct": evaluation.correct,
        "failed": evaluation.failed,
        "not_asked": evaluation.not_asked,
        "accuracy": evaluation.accuracy,
        **strategy_summary(evaluation, results),
        "per_category": per_category,
        "failures": failures,
        "paused_until": evaluation.paused_until.isoformat() if evaluation.paused_until else None,
        "pause_reason": evaluation.pause_reason if evaluation.paused_until else "",
        "prompt_tokens": evaluation.prompt_tokens,
        "completion_tokens": evaluation.completion_tokens,
        "reasoning_tokens": evaluation.reasoning_tokens,
        "cost": run_cost(evaluation),
        "reasons": reasons,
        "seconds": round((end - job.started).total_seconds(), 1) if job.started else 0.0,
    }


def run_cost(evaluation: ModelEvaluation) -> float | None:
    """What the run's tokens cost at the prices of the profile it was created with (None without prices)."""
    stored = evaluation.parameters.get("profile") or {}
    prices = [stored.get("price_prompt"), stored.get("price_completion")]
    if prices == [None, None]:
        return None
    profile = RequestProfile(
        price_prompt=Decimal(prices[0]) if prices[0] is not None else None,
        price_completion=Decimal(prices[1]) if prices[1] is not None else None,
    )
    return profile.cost(evaluation.prompt_tokens, evaluation.completion_tokens)


def strategy_summary(evaluation: ModelEvaluation, results) -> dict:
    """Issue 28's part of the summary: the strategy, the unparsable replies (in the accuracy as wrong answers, as
    the official evaluator scores them; in a circular run, the items with such a reply in some rotation), with an
    extraction pass its outcomes and the second figure, and for an oracle strategy the items it had no stored
    region to draw for (`without_regions`; None for the other strategies)."""
    extraction = None
    if evaluation.extraction_endpoint_id:
        counts = dict(
            results.filter(parse_outcome=ModelItemResult.Parse.UNPARSABLE)
            .values_list("extraction")
            .annotate(n=models.Count("pk"))
            .order_by("extraction")
        )
        extraction = {
            "endpoint": evaluation.extraction_endpoint.name,
            "read": counts.get(ModelItemResult.Extraction.LETTER, 0),
            "none": counts.get(ModelItemResult.Extraction.NONE, 0),
            "failed": counts.get(ModelItemResult.Extraction.FAILED, 0),
            "not_read": counts.get("", 0),
            "correct": evaluation.extracted_correct,
        }
    return {
        "strategy": evaluation.strategy,
        "unparsable": evaluation.unparsable,
        "extraction": extraction,
        "accuracy_with_extraction": evaluation.accuracy_with_extraction,
        "without_regions": evaluation.parameters.get("without_regions"),
    }

"""The LLM judge checked by people: reviewers judge a sample of a description run's descriptions against the human
caption, blind to the judge's verdict, and the judge's agreement with them (Cohen's kappa with its interval,
benchmark.paired) is shown on the release report.

The sample is the run's answered descriptions in an order drawn from the server's secret (an HMAC of SECRET_KEY over
the run and the item id): the same for every reviewer, unknown to them, and unrelated to the judge's verdicts. Each
reviewer judges the next description of the sample they have not judged yet. Each judged description is one unit of
the kappa, however many people judged it: the judge's verdict on it counts once, and its people's verdicts share it
(benchmark.paired.panel_kappa).
"""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings
from django.contrib import messages
from django.db import IntegrityError, transaction
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from annotator.models import Release
from benchmark.description import captioned
from benchmark.paired import panel_kappa
from evaluation.models import JudgeVerdict, ModelEvaluation, ModelItemResult
from evaluation.runs.naming import run_names
from subtlebench.errors import Conflict, Invalid
from subtlebench.roles import COORDINATOR, REVIEWER, role_required

SAMPLE_SIZE = 100  # descriptions per run offered to people; enough for a kappa interval of about +-0.15


def _rank(evaluation: ModelEvaluation, question_id: str) -> str:
    message = f"judge-check:{evaluation.pk}:{question_id}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()


def judge_sample(evaluation: ModelEvaluation) -> list[int]:
    """The ids of the run's sampled results: its answered descriptions in the secret order, SAMPLE_SIZE at most."""
    rows = ModelItemResult.objects.filter(evaluation=evaluation, is_correct__isnull=False).values_list(
        "pk", "question_id"
    )
    ranked = sorted(rows.order_by("pk"), key=lambda row: (_rank(evaluation, row[1]), row[0]))
    return [pk for pk, _ in ranked[:SAMPLE_SIZE]]


def description_run(run_id: int) -> ModelEvaluation:
    evaluation = get_object_or_404(ModelEvaluation.objects.select_related("endpoint", "judge", "release"), pk=run_id)
    if evaluation.task != "description":
        raise Http404(f"run {run_id} is not a description run: it has no judge to check")
    return evaluation


def judge_check_next(*, evaluation: ModelEvaluation, user) -> tuple[ModelItemResult | None, int, int]:
    """The next sampled result `user` has not judged (None when none is left), how many they judged, of how many."""
    sample = judge_sample(evaluation)
    done = set(
        JudgeVerdict.objects.filter(result_id__in=sample, reviewer=user).order_by().values_list("result_id", flat=True)
    )
    left = [pk for pk in sample if pk not in done]
    result = ModelItemResult.objects.select_related("release_item").get(pk=left[0]) if left else None
    return result, len(done), len(sample)


@transaction.atomic
def judge_verdict_record(*, evaluation: ModelEvaluation, user, result_id: int, matches: bool) -> JudgeVerdict:
    """Store `user`'s verdict on one sampled description; a second verdict of one person on it is a conflict."""
    if result_id not in judge_sample(evaluation):
        raise Invalid({"result": [f"Result {result_id} is not in the sample of run {evaluation.pk}."]})
    try:
        with transaction.atomic():
            return JudgeVerdict.objects.create(result_id=result_id, reviewer=user, matches=matches)
    except IntegrityError:
        raise Conflict({"result": ["You have judged this description already."]}) from None


def judge_agreement(evaluation: ModelEvaluation) -> dict:
    """The judge against people on the run's descriptions people judged: units (the distinct descriptions, each
    weighing one), agreement, Cohen's kappa and its 95% interval (None where undefined), and how many verdicts and
    people stand behind them."""
    rows = list(
        JudgeVerdict.objects.filter(result__evaluation=evaluation, result__is_correct__isnull=False)
        .order_by("pk")
        .values_list("result__is_correct", "matches", "result_id", "reviewer_id")
    )
    kappa = panel_kappa((result, judge, person) for judge, person, result, _ in rows)
    return {
        "units": kappa.units if kappa else 0,
        "verdicts": len(rows),
        "descriptions": len({row[2] for row in rows}),
        "people": len({row[3] for row in rows}),
        "agreement": float(kappa.observed) if kappa else None,
        "kappa": kappa.kappa if kappa else None,
        "low": kappa.low if kappa else None,
        "high": kappa.high if kappa else None,
    }


def release_judge_agreement(release: Release) -> list[dict]:
    """Per description run on the release (oldest first): its judge and the judge's agreement with people."""
    runs = list(
        ModelEvaluation.objects.filter(release=release, task="description")
        .select_related("endpoint", "judge", "job")
        .order_by("created", "pk")
    )
    labels = run_names(runs)
    return [
        {"run": run, "label": labels[run.pk], "judge": run.judge.name if run.judge_id else "", **judge_agreement(run)}
        for run in runs
    ]


# --- The page ----------------------------------------------------------------------------------------------------


@role_required(COORDINATOR, REVIEWER)
@require_http_methods(["GET", "POST"])
def judge_check_page(request, run_id: int):
    """One sampled description at a time with the item's caption, the judge's verdict hidden; Post/Redirect/Get."""
    evaluation = description_run(run_id)
    if request.method == "POST":
        verdict = request.POST.get("verdict")
        result = request.POST.get("result", "")
        try:
            if verdict not in ("yes", "no") or not result.isdigit() or len(result) > 12:
                raise Invalid({"verdict": ["Say whether the description matches the caption: yes or no."]})
            judge_verdict_record(
                evaluation=evaluation, user=request.user, result_id=int(result), matches=verdict == "yes"
            )
        except (Invalid, Conflict) as error:
            messages.error(request, " ".join(text for texts in error.errors.values() for text in texts))
        return redirect("judge-check", run_id=evaluation.pk)
    result, done, total = judge_check_next(evaluation=evaluation, user=request.user)
    caption = None
    if result is not None and result.release_item_id:
        caption = captioned(result.release_item.record)
    context = {"evaluation": evaluation, "result": result, "caption": caption, "done": done, "total": total}
    return render(request, "evaluation/judge_check.html", context)

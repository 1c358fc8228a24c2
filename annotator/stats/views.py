"""Pages of team analytics (/stats/, coordinators) and of the blind second review (reviewers)."""

from __future__ import annotations

from django.contrib import messages
from django.core.files.storage import default_storage
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from annotator.models import Category, Domain, DoubleReview
from annotator.stats import figures
from annotator.stats import services as stats
from annotator.stats.drafting import drafting_figures
from subtlebench.errors import Invalid
from subtlebench.pages import error_response, post_only
from subtlebench.roles import COORDINATOR, REVIEWER, role_required


def _days(request) -> int:
    raw = request.GET.get("days", "")
    if not raw:
        return figures.DEFAULT_DAYS
    try:
        days = int(raw)
    except ValueError:
        raise Invalid({"days": [f"days must be a whole number of days, not {raw!r}."]})
    if not 1 <= days <= figures.MAX_DAYS:
        raise Invalid({"days": [f"days must be from 1 to {figures.MAX_DAYS}, not {days}."]})
    return days


@role_required(COORDINATOR)
@require_GET
def stats_page(request):
    """Throughput and quality per annotator and reviewer per day, review agreement, targets."""
    try:
        days = _days(request)
    except Invalid as error:
        messages.error(request, error.message_dict["days"][0])
        days = figures.DEFAULT_DAYS
    team = figures.team_figures(days=days)
    context = {
        "figures": team,
        "rate_percent": f"{100 * team['settings'].double_review_rate:g}",
        "grid": figures.target_grid(),
        "domains": Domain.values,
        "day_choices": (7, 14, 30, 90),
        "region_categories": [
            (category, category in team["settings"].regions_required) for category in Category.values
        ],
        "drafting": drafting_figures(),  # models that draft: templates/drafting/_stats.html
    }
    return render(request, "stats/stats.html", context)


@role_required(COORDINATOR)
@post_only("stats")
def stats_settings(request):
    """Set the double-review rate (percent)."""
    try:
        row = stats.team_settings_update(rate_percent=request.POST.get("rate", ""), by=request.user)
    except Invalid as error:
        return error_response(request, error, back_to="stats")
    messages.success(request, f"From now on {row.double_review_rate:.1%} of submitted pairs get a blind second review.")
    return redirect("stats")


@role_required(COORDINATOR)
@post_only("stats")
def stats_regions(request):
    """Set which categories need at least one difference region (the checked boxes)."""
    try:
        row = stats.team_regions_required_set(categories=request.POST.getlist("categories"), by=request.user)
    except Invalid as error:
        return error_response(request, error, back_to="stats")
    named = ", ".join(row.regions_required) or "no category"
    messages.success(request, f"From now on a submitted pair needs a difference region in: {named}.")
    return redirect("stats")


@role_required(COORDINATOR)
@post_only("stats")
def stats_targets(request):
    """Set the targets of every category x domain cell from the form (empty or 0: no target)."""
    counts, problems = {}, []
    for category in Category.values:
        for domain in Domain.values:
            raw = request.POST.get(f"t-{category}-{domain}", "").strip()
            if not raw:
                counts[(category, domain)] = None
                continue
            try:
                counts[(category, domain)] = int(raw)
            except ValueError:
                problems.append(f"{category} x {domain}: {raw!r} is not a whole number.")
    try:
        if problems:
            raise Invalid({"targets": problems})
        stats.targets_set(counts=counts)
    except Invalid as error:
        return error_response(request, error, back_to="stats")
    messages.success(request, "Targets saved.")
    return redirect("stats")


@role_required(REVIEWER)
@require_GET
def second_review_next(request):
    """Go to the next pair waiting for your blind second review."""
    item = stats.second_review_next(user=request.user)
    if item is None:
        messages.info(request, "No pair waits for a second review from you.")
        return redirect("picking-review-queue")
    return redirect("second-review", double_review_id=item.pk)


@role_required(REVIEWER)
@require_http_methods(["GET", "POST"])
def second_review(request, double_review_id: int):
    """One pair of the double-review sample, blind: images, question and options; never the first decision, the
    pair's status or its history (they would tell the first reviewer's decision)."""
    item = get_object_or_404(
        DoubleReview.objects.select_related("pair", "pair__image_1", "pair__image_2", "pair__video"),
        pk=double_review_id,
    )
    if not DoubleReview.objects.waiting_for(request.user).filter(pk=item.pk).exists():
        messages.info(request, f"Pair {item.pair_id} has no second review waiting for you.")
        return redirect("picking-review-queue")
    if request.method == "POST":
        try:
            stats.second_review_submit(
                double_review=item,
                reviewer=request.user,
                decision=request.POST.get("decision", ""),
                reason=request.POST.get("reason", ""),
            )
        except Invalid as error:
            return error_response(request, error, back_to=request.path)
        messages.success(request, f"Second review of pair {item.pair_id} recorded.")
        return redirect("second-review-next")
    pair = item.pair
    context = {
        "item": item,
        "pair": pair,
        "image_1_url": default_storage.url(pair.image_1.file.name),
        "image_2_url": default_storage.url(pair.image_2.file.name),
        "waiting": DoubleReview.objects.waiting_for(request.user).count(),
    }
    return render(request, "stats/second_review.html", context)

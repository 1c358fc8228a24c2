"""Team analytics services: the double-review draw and the blind second review, the team settings, the targets.

The picking submit draws each submitted pair; the stats pages and the API call the rest.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from annotator.models import Category, Domain, DoubleReview, Pair, Review, Target, TeamSettings
from subtlebench.errors import Conflict, Forbidden, Invalid

DRAW_SALT = "annotator.stats.double_review"


def double_review_score(pair_id: int, version: int) -> float:
    """A uniform number in [0, 1) for one version of a pair, from an HMAC under the server's SECRET_KEY: nobody
    who sees only what the client sees can tell or steer which pairs are drawn, and the draw is reproducible."""
    digest = salted_hmac(DRAW_SALT, f"{pair_id}:{version}", algorithm="sha256").digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def double_review_drawn(pair_id: int, version: int, rate: float) -> bool:
    """Whether this version of the pair is in the sample at this rate (rate 0: never; rate 1: always)."""
    return double_review_score(pair_id, version) < rate


def double_review_draw(*, pair: Pair) -> DoubleReview | None:
    """Draw a just-submitted pair (its current version) into the double-review sample, at the configured rate.
    Called inside the submit's transaction; a retried submit of the same version draws the same way."""
    rate = TeamSettings.current().double_review_rate
    if not double_review_drawn(pair.pk, pair.version, rate):
        return None
    drawn, _ = DoubleReview.objects.get_or_create(pair=pair, pair_version=pair.version, defaults={"rate": rate})
    return drawn


def team_settings_update(*, rate_percent, by) -> TeamSettings:
    """Set the double-review rate, given in percent (0 to 100)."""
    try:
        percent = float(rate_percent)
    except (TypeError, ValueError):
        raise Invalid({"rate": [f"The double-review rate must be a number of percent; {rate_percent!r} is not."]})
    if not 0 <= percent <= 100:
        raise Invalid({"rate": [f"The double-review rate is a percentage from 0 to 100, not {percent:g}."]})
    with transaction.atomic():
        row = TeamSettings.current()
        row.double_review_rate = percent / 100
        row.updated_by = by
        row.save()
    return row


def team_regions_required_set(*, categories, by) -> TeamSettings:
    """Set the categories whose pairs must mark at least one difference region (none: no category must)."""
    unknown = [str(category) for category in categories if category not in Category.values]
    if unknown:
        raise Invalid(
            {"categories": [f"Unknown category {', '.join(map(repr, unknown))}: use {', '.join(Category.values)}."]}
        )
    with transaction.atomic():
        row = TeamSettings.current()
        row.regions_required = [category for category in Category.values if category in set(categories)]
        row.updated_by = by
        row.save()
    return row


def targets_set(*, counts: dict[tuple[str, str], int | None]) -> list[Target]:
    """Set the targets of some category x domain cells; 0 or None removes a cell's target."""
    problems = []
    for (category, domain), count in counts.items():
        if category not in Category.values or domain not in Domain.values:
            problems.append(f"{category} x {domain}: no such category or domain.")
        elif count is not None and not (isinstance(count, int) and 0 <= count <= 1_000_000):
            problems.append(f"{category} x {domain}: the target must be a whole number from 0 to 1,000,000.")
    if problems:
        raise Invalid({"targets": problems})
    with transaction.atomic():
        for (category, domain), count in counts.items():
            if not count:
                Target.objects.filter(category=category, domain=domain).delete()
            else:
                Target.objects.update_or_create(category=category, domain=domain, defaults={"count": count})
    return list(Target.objects.all())


def second_review_next(*, user) -> DoubleReview | None:
    return DoubleReview.objects.waiting_for(user).order_by("drawn_at", "pk").first()


def second_review_submit(*, double_review: DoubleReview, reviewer, decision: str, reason: str = "") -> DoubleReview:
    """Record the blind second review. It never changes the pair: the first decision stands, and a disagreement is
    listed for the coordinator on /stats/. Only a reviewer who is neither the author nor the first reviewer may."""
    if decision not in DoubleReview.Decision.values:
        raise Invalid({"decision": [f"Unknown decision {decision!r}: accept or reject."]})
    reason = (reason or "").strip()
    if decision == DoubleReview.Decision.REJECT and not reason:
        raise Invalid({"reason": ["Say why you would reject the pair."]})
    with transaction.atomic():
        locked = DoubleReview.objects.select_for_update().select_related("pair").get(pk=double_review.pk)
        if locked.pair.author_id == reviewer.pk:
            raise Forbidden("You cannot review your own pair.")
        first = first_review_of(locked)
        if first is None:
            raise Conflict(f"Pair {locked.pair_id} has no first decision yet: its second review comes after it.")
        if Review.objects.filter(pair=locked.pair_id, reviewer=reviewer).exists():
            raise Forbidden(f"You decided pair {locked.pair_id} already: its second review is someone else's.")
        if locked.second_decision:
            raise Conflict(f"Pair {locked.pair_id} has had its second review already.")
        locked.first_review = first
        locked.second_reviewer = reviewer
        locked.second_decision = decision
        locked.second_reason = reason
        locked.second_at = timezone.now()
        locked.save()
    return locked


def first_review_of(double_review: DoubleReview) -> Review | None:
    """The first decision on the drawn version: the earliest review made after the draw."""
    return (
        Review.objects.filter(pair=double_review.pair_id, created__gte=double_review.drawn_at)
        .order_by("created", "pk")
        .first()
    )


def as_accept_reject(decision: str) -> str:
    """A first review's decision on the second review's scale: correct-and-accept is an accept."""
    return DoubleReview.Decision.REJECT if decision == Review.Decision.REJECT else DoubleReview.Decision.ACCEPT

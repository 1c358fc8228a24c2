"""Team analytics: the coordinator's settings row (the double-review rate), targets per category x domain, and the
blind second reviews of the double-review sample."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from annotator.models.pairs import Pair, Review
from annotator.models.taxonomy import Category, Domain
from subtlebench.text import NOTE_MAX, text_validators

DEFAULT_DOUBLE_REVIEW_RATE = 0.05


class TeamSettings(models.Model):
    """One row (pk 1): what a coordinator sets for the whole team."""

    double_review_rate = models.FloatField(
        default=DEFAULT_DOUBLE_REVIEW_RATE,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="The probability that a submitted pair is drawn for a second, blind review.",
    )
    # Categories whose pairs must mark where the images differ (at least one region): submit refuses without one.
    regions_required = ArrayField(
        models.CharField(max_length=20, choices=Category.choices),
        default=list,
        blank=True,
        help_text="Categories whose pairs need at least one difference region.",
    )
    updated = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")

    class Meta:
        verbose_name_plural = "team settings"

    def __str__(self):
        return f"double review {self.double_review_rate:.1%}"

    @classmethod
    def current(cls) -> TeamSettings:
        return cls.objects.get_or_create(pk=1)[0]


class Target(models.Model):
    """How many accepted pairs the benchmark needs in one category x domain cell."""

    category = models.CharField(max_length=20, choices=Category.choices)
    domain = models.CharField(max_length=20, choices=Domain.choices)
    count = models.PositiveIntegerField()
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["category", "domain"]
        constraints = [models.UniqueConstraint(fields=["category", "domain"], name="target_one_per_cell")]

    def __str__(self):
        return f"{self.category} x {self.domain}: {self.count}"


class DoubleReviewQuerySet(models.QuerySet):
    def waiting(self):
        """Drawn, decided once, not reviewed a second time yet."""
        return self.filter(second_decision="").filter(
            models.Exists(Review.objects.filter(pair=models.OuterRef("pair")))
        )

    def waiting_for(self, user):
        """Second reviews this user may give: never on their own pair, never on a pair they decided first."""
        first_by_user = Review.objects.filter(pair=models.OuterRef("pair"), reviewer=user)
        return (
            self.filter(second_decision="")
            .filter(models.Exists(Review.objects.filter(pair=models.OuterRef("pair"))))
            .exclude(pair__author=user)
            .exclude(models.Exists(first_by_user))
        )

    def done(self):
        return self.exclude(second_decision="")


class DoubleReview(models.Model):
    """A submitted pair (one version of it) drawn into the double-review sample.

    Its first review is the ordinary one (annotator.models.Review), which alone sets the pair's status. The second
    review is given blind (the page and the API hide the first decision) and only measures agreement: it never
    changes the pair; a disagreement is listed for the coordinator on /stats/.
    """

    class Decision(models.TextChoices):
        ACCEPT = "accept"
        REJECT = "reject"

    pair = models.ForeignKey(Pair, models.CASCADE, related_name="double_reviews")
    pair_version = models.PositiveIntegerField()
    rate = models.FloatField(help_text="The rate in force when the pair was drawn.")
    drawn_at = models.DateTimeField(default=timezone.now)
    second_reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.PROTECT, null=True, blank=True, related_name="second_reviews"
    )
    second_decision = models.CharField(max_length=10, choices=Decision.choices, blank=True)
    second_reason = models.TextField(blank=True, max_length=NOTE_MAX, validators=text_validators(NOTE_MAX))
    second_at = models.DateTimeField(null=True, blank=True)
    # The first decision the second one is compared with, set when the second review is given.
    first_review = models.ForeignKey(Review, models.SET_NULL, null=True, blank=True, related_name="+")

    objects = DoubleReviewQuerySet.as_manager()

    class Meta:
        ordering = ["drawn_at", "pk"]
        constraints = [models.UniqueConstraint(fields=["pair", "pair_version"], name="doublereview_one_per_version")]

    def __str__(self):
        return f"double review of pair {self.pair_id} v{self.pair_version}"

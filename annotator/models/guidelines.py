"""Guidelines for pairs, per category and domain: written by coordinators in Markdown, each edit a new version, with
example pairs taken from accepted ones. A pair records the version in force when it was submitted; a rejection may
cite one."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from annotator.models.taxonomy import Category, Domain

GUIDELINE_BODY_MAX = 20_000
EXAMPLE_NOTE_MAX = 500


class GuidelineQuerySet(models.QuerySet):
    def for_pair(self, *, category: str, domain: str):
        """The guideline a pair of this category and domain follows: the domain's own, else the category's for every
        domain (an empty domain); at most one row."""
        return self.filter(category=category, domain__in=(domain, "")).order_by("-domain", "pk")[:1]


class Guideline(models.Model):
    """The rules of one category, for one domain or (domain empty) for every domain without its own."""

    category = models.CharField(max_length=20, choices=Category.choices)
    domain = models.CharField(max_length=20, choices=Domain.choices, blank=True, help_text="Empty: every domain.")
    created = models.DateTimeField(default=timezone.now)

    objects = GuidelineQuerySet.as_manager()

    class Meta:
        ordering = ["category", "domain", "pk"]
        constraints = [models.UniqueConstraint(fields=["category", "domain"], name="guideline_unique_category_domain")]

    def __str__(self):
        return f"{self.category} · {self.domain or 'every domain'}"

    @property
    def current(self) -> GuidelineVersion | None:
        """Its latest version (the one in force)."""
        return self.versions.order_by("-number").first()


class GuidelineVersion(models.Model):
    """One edit of a guideline: its text never changes once written."""

    guideline = models.ForeignKey(Guideline, models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    body = models.TextField(max_length=GUIDELINE_BODY_MAX, help_text="Markdown; HTML in it is shown as text.")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["guideline", "-number"]
        constraints = [models.UniqueConstraint(fields=["guideline", "number"], name="guideline_version_unique_number")]

    def __str__(self):
        return f"{self.guideline} v{self.number}"


class GuidelineExample(models.Model):
    """An accepted pair shown with a guideline as a good or a bad example, with a note saying why."""

    class Kind(models.TextChoices):
        GOOD = "good"
        BAD = "bad"

    guideline = models.ForeignKey(Guideline, models.CASCADE, related_name="examples")
    pair = models.ForeignKey("annotator.Pair", models.CASCADE, related_name="+")
    kind = models.CharField(max_length=4, choices=Kind.choices)
    note = models.CharField(max_length=EXAMPLE_NOTE_MAX, blank=True)
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["guideline", "kind", "pk"]
        constraints = [models.UniqueConstraint(fields=["guideline", "pair"], name="guideline_example_unique_pair")]

    def __str__(self):
        return f"{self.kind} example: pair {self.pair_id} for {self.guideline_id}"

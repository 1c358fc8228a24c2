"""Pairs of images with their multiple-choice question, and their reviews."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector
from django.db import models
from django.utils import timezone

from annotator.models.collections import GROUP_KEY_MAX, regions_validator
from annotator.models.similarity import NO_ACTIVE_MODEL, EmbeddingModel
from annotator.models.taxonomy import Category, Domain
from annotator.models.videos import Image, Video
from subtlebench.text import NOTE_MAX, QUESTION_MAX, SHORT_TEXT_MAX, options_validator, text_validators

if TYPE_CHECKING:
    from collections.abc import Iterable


# A share like 0.29 is not exact in binary: 0.29 * 100 is 28.999..., which would drop a pair 29 of 100 models got
# right although 29 / 100 is at most 0.29.
SHARE_TOLERANCE = 1e-9


class _LatestModelAnswers(models.Subquery):
    """Counts over the latest answer per endpoint (a DISTINCT ON subquery): all of them, or the correct ones."""

    template = "(SELECT COUNT(*) FILTER (WHERE %(where)s) FROM (%(subquery)s) latest_answer)"
    output_field = models.IntegerField()

    def __init__(self, queryset, *, correct_only: bool):
        self.where = "latest_answer.is_correct" if correct_only else "TRUE"
        super().__init__(queryset)

    def as_sql(self, compiler, connection, template=None, **extra_context):
        return super().as_sql(compiler, connection, template=template, where=self.where, **extra_context)


def related_model(name: str) -> type[models.Model]:
    """The model of a relation that points at a pair (release items, captions, a model run's results): those models
    import this module, so this module reaches them through the relation, never by importing them back."""
    return Pair._meta.get_field(name).related_model


def items_showing(pair):
    """Release items a participant shown `pair` (a pair id or an OuterRef to one) sees the pictures of: the pair's
    own, and any other pair's with the same two images, either way round, the same rows or the same bytes. A pixel
    search of a release's files finds the record of either, and for a binary question its answer is which image."""
    inner = models.OuterRef(pair) if isinstance(pair, models.OuterRef) else pair
    ref = models.OuterRef
    same_pictures = Pair.objects.filter(pk=inner).filter(
        models.Q(image_1=ref("image_1"), image_2=ref("image_2"))
        | models.Q(image_1=ref("image_2"), image_2=ref("image_1"))
        | models.Q(image_1__sha256=ref("image_1_sha256"), image_2__sha256=ref("image_2_sha256"))
        | models.Q(image_1__sha256=ref("image_2_sha256"), image_2__sha256=ref("image_1_sha256"))
    )
    return related_model("release_items").objects.filter(models.Q(pair=pair) | models.Exists(same_pictures))


def public_since_of(pair):
    """A subquery: when a release showing `pair` (a pair id or an OuterRef to one; `items_showing`) was first
    published, else None."""
    first = (
        items_showing(pair)
        .filter(release__publications__isnull=False)
        .order_by("release__publications__when", "release__publications__pk")
        .values("release__publications__when")[:1]
    )
    return models.Subquery(first, output_field=models.DateTimeField())


class PairQuerySet(models.QuerySet):
    def awaiting_review(self):
        return self.filter(status=Pair.Status.SUBMITTED)

    def accepted(self):
        return self.filter(status=Pair.Status.ACCEPTED)

    def passing_similarity(self):
        """Pairs whose similarity under the current model meets the threshold, or whose failure a coordinator
        overrode. A similarity from another model (stale) counts as not computed; none passes while no
        embedding model is active."""
        fingerprint = EmbeddingModel.objects.current_fingerprint()
        if fingerprint is None:
            return self.none()
        meets = models.Q(similarity__gte=settings.SIMILARITY_THRESHOLD)
        overridden = ~models.Q(similarity_override_reason="")
        current = self.filter(similarity__isnull=False, similarity_model=fingerprint)
        return current.filter(meets | overridden)

    def needing_similarity(self):
        """Pairs whose similarity is not computed yet or was computed by another model (stale); all of them
        while no embedding model is active."""
        fingerprint = EmbeddingModel.objects.current_fingerprint()
        if fingerprint is None:
            return self.all()
        return self.filter(models.Q(similarity__isnull=True) | ~models.Q(similarity_model=fingerprint))

    def exportable(self):
        return self.accepted().passing_similarity()

    def experiments(self):
        """Pairs of synthetic sweeps kept apart as experiments: their sweep's own pages and releases count them."""
        return self.filter(sweep_item__sweep__experiment=True)

    def outside_experiments(self):
        """The benchmark's pairs in any state: every pair but the experiments'. The team's work, the answer-position
        balance and the pools drawn for the benchmark read these."""
        return self.exclude(sweep_item__sweep__experiment=True)

    def in_benchmark(self):
        """The pairs in the benchmark: what an export of it contains before its own filters (accepted, passing the
        similarity check, no experiment's). Every count of the benchmark (targets, overview, team stats, models
        right) counts these, so no figure claims a pair the released files lack."""
        return self.exportable().outside_experiments()

    def already_public(self, at=None):
        """Pairs a published release shows (holds them, or another pair of the same two images: `items_showing`):
        from the first time a release's files left the server (a ReleasePublication, whatever the pair's source) a
        participant shown the pair could look it up by its pixels. `at`: as things stood then (publications recorded
        as happening later do not count)."""
        published = items_showing(models.OuterRef("pk")).filter(release__publications__isnull=False)
        if at is not None:
            published = published.filter(release__publications__when__lte=at)
        return self.filter(models.Exists(published))

    def with_public_since(self):
        """Annotate `public_since`: when a release holding the pair was first published (None: not public)."""
        return self.annotate(public_since=public_since_of(models.OuterRef("pk")))

    def reviewable_by(self, user):
        """Submitted pairs a reviewer may decide: never their own work."""
        return self.awaiting_review().exclude(author=user)

    def with_caption(self):
        """Annotate `caption_text`: the chosen accepted caption the export uses, or None (captions, issue 5)."""
        chosen = related_model("captions").objects.exported().filter(pair=models.OuterRef("pk")).values("text")[:1]
        return self.annotate(caption_text=models.Subquery(chosen))

    def with_model_score(self, endpoints: Iterable[int] | None = None):
        """Annotate "models correct k of n": `model_answered` (n), the endpoints with an answer to this pair, and
        `model_correct` (k), those whose answer was right. Each endpoint counts once, with its latest answer
        (from its most recent run that answered the pair); a failed request is no answer, so it neither counts
        as wrong nor hides an earlier answer. `endpoints`: ids to count (None: every endpoint). Two subqueries
        in the one SELECT: no query per row."""
        # Endpoints only: an imported results file (no endpoint) is no model the data filters can name. Multiple
        # choice only: a description run's judged descriptions answer no question.
        answers = related_model("model_results").objects.filter(
            pair=models.OuterRef("pk"),
            is_correct__isnull=False,
            evaluation__endpoint__isnull=False,
            evaluation__task="multiple_choice",
        )
        if endpoints is not None:
            endpoints = list(endpoints)
            if not endpoints:  # no model chosen: nothing answered (an empty IN would make the counts NULL)
                zero = models.Value(0, output_field=models.IntegerField())
                return self.annotate(model_answered=zero, model_correct=zero)
            answers = answers.filter(evaluation__endpoint_id__in=endpoints)
        latest = (
            answers.order_by("evaluation__endpoint_id", "-evaluation__created", "-evaluation_id", "-pk")
            .distinct("evaluation__endpoint_id")
            .values("is_correct")
        )
        return self.annotate(
            model_answered=_LatestModelAnswers(latest, correct_only=False),
            model_correct=_LatestModelAnswers(latest, correct_only=True),
        )

    def model_accuracy_at_most(self, share: float, *, endpoints: Iterable[int] | None = None):
        """Pairs that at most `share` (0 to 1) of the models got right: k <= share * n. A pair no model answered
        is kept (nothing says models find it easy). Annotates as `with_model_score` does."""
        limit = models.ExpressionWrapper(
            models.Value(float(share)) * models.F("model_answered") + models.Value(SHARE_TOLERANCE),
            output_field=models.FloatField(),
        )
        scored = self.with_model_score(endpoints)
        return scored.filter(models.Q(model_answered=0) | models.Q(model_correct__lte=limit))

    def model_score_between(
        self,
        *,
        correct_min: int | None = None,
        correct_max: int | None = None,
        answered_min: int | None = None,
        endpoints: Iterable[int] | None = None,
    ):
        """Pairs whose "models correct k of n" lies in a range: correct_min <= k <= correct_max, n >= answered_min
        (each bound left out when None). Annotates as `with_model_score` does."""
        bounds = models.Q()
        if correct_min is not None:
            bounds &= models.Q(model_correct__gte=correct_min)
        if correct_max is not None:
            bounds &= models.Q(model_correct__lte=correct_max)
        if answered_min is not None:
            bounds &= models.Q(model_answered__gte=answered_min)
        return self.with_model_score(endpoints).filter(bounds)


class Pair(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        SUBMITTED = "submitted"
        ACCEPTED = "accepted"
        REJECTED = "rejected"
        # The author took it back before any decision: the record stays, it is never reviewed, exported or
        # sampled, and its frames are free for another pair (the unique item id leaves it out).
        WITHDRAWN = "withdrawn"

    image_1 = models.ForeignKey(Image, models.PROTECT, related_name="+")
    image_2 = models.ForeignKey(Image, models.PROTECT, related_name="+")
    video = models.ForeignKey(Video, models.SET_NULL, null=True, blank=True, related_name="pairs")
    category = models.CharField(max_length=20, choices=Category.choices)
    domain = models.CharField(max_length=20, choices=Domain.choices, default=Domain.NATURAL)
    source = models.CharField(max_length=50, default="yt8m")
    source_id = models.CharField(max_length=200, blank=True)
    # Imported pairs have no video: this keeps their grouping (e.g. "yt8m:<video>", a collection's
    # "<collection>:<class or scene>"), so an export never splits pairs of one video (or one scene) across test and val.
    group_key = models.CharField(
        max_length=GROUP_KEY_MAX,
        blank=True,
        help_text="Pairs with one group key always land in one split of an export.",
    )
    # An imported record's own raw_folder and generation_info, exported as they came (a round trip keeps them);
    # empty / null for pairs made in the app, which export `<source>_<category>_pairs` and null.
    raw_folder = models.CharField(max_length=200, blank=True)
    generation_info = models.JSONField(null=True, blank=True)
    question = models.TextField(
        blank=True, max_length=QUESTION_MAX, validators=text_validators(QUESTION_MAX, lines="single")
    )
    answer = models.TextField(
        blank=True, max_length=SHORT_TEXT_MAX, validators=text_validators(SHORT_TEXT_MAX, lines="single")
    )
    distractors = models.JSONField(default=list, blank=True, validators=[options_validator])
    # Where the two images differ: boxes on image 1 and/or 2 (benchmark/regions.py); exported in the provenance
    # sidecar only, never in the official records.
    regions = models.JSONField(default=list, blank=True, validators=[regions_validator])
    # The guideline of its category and domain in force when it was submitted (annotator/picking/guidelines.py).
    guideline_version = models.ForeignKey(
        "annotator.GuidelineVersion", models.PROTECT, null=True, blank=True, related_name="pairs"
    )
    similarity = models.FloatField(null=True, blank=True)
    similarity_model = models.CharField(max_length=200, blank=True, help_text="Fingerprint of the model.")
    similarity_override_reason = models.TextField(blank=True, max_length=NOTE_MAX, validators=text_validators(NOTE_MAX))
    similarity_override_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    similarity_override_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT, db_index=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, null=True, blank=True, related_name="pairs")
    client_key = models.CharField(max_length=64, null=True, blank=True, unique=True)
    version = models.PositiveIntegerField(default=1)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # Pair picking: the app orders the two frames to balance answer positions; this records the mapping.
    # Team analytics: the workbench's active time (visible tab, input in the last minute) spent on this pair, summed
    # over its submitted versions; null for imported pairs and for pairs from before it was measured.
    active_ms = models.PositiveIntegerField(null=True, blank=True, help_text="Active workbench time, milliseconds.")
    swapped = models.BooleanField(
        default=False, help_text="The annotator's frame A became image_2 (answer-position balancing)."
    )
    # Data manager (issue 15): a coordinator keeps a pair out of every study's pool; the split the latest export
    # put it in ("" when the latest export left it out, or none ran yet).
    excluded_from_studies = models.BooleanField(default=False, help_text="Never drawn into a study's pool.")
    export_split = models.CharField(max_length=4, blank=True, help_text="test or val in the latest export.")
    # Models that draft (annotator/drafting): the model's draft this pair started from, and what the person changed
    # of it per field (benchmark.drafting.draft_changes); null and {} for a hand-written pair.
    drafted_by = models.ForeignKey("annotator.ModelDraft", models.SET_NULL, null=True, blank=True, related_name="pairs")
    draft_changes = models.JSONField(default=dict, blank=True)

    objects = PairQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["category", "source", "source_id"],
                condition=~models.Q(source_id="") & ~models.Q(status="withdrawn"),
                name="pair_unique_item_id",
            )
        ]
        indexes = [
            # Full-text search of the data manager (annotator/datamanager/tables.py uses the same expression).
            GinIndex(SearchVector("question", config="english"), name="pair_question_search"),
            # The pairs table sorted newest first (`created DESC, id DESC`, read backwards).
            models.Index(fields=["created", "id"], name="pair_created_id"),
        ]

    def __str__(self):
        return f"{self.category} {self.source}/{self.source_id or self.pk}"

    def model_score(self) -> tuple[int, int]:
        """(k, n): k of the n models that answered this pair got it right (see `with_model_score`); read from the
        annotation when the queryset has it, else one query."""
        if not hasattr(self, "model_answered"):
            row = Pair.objects.filter(pk=self.pk).with_model_score().values("model_correct", "model_answered")
            found = row.first() or {"model_correct": 0, "model_answered": 0}
            self.model_correct, self.model_answered = found["model_correct"], found["model_answered"]
        return self.model_correct, self.model_answered

    @property
    def options(self) -> list[str]:
        return [self.answer, *self.distractors]

    @property
    def similarity_status(self) -> str:
        """'pending' (not computed, or no embedding model is active), 'stale' (computed by another model:
        treated like pending), 'pass', 'fail' (below the threshold) or 'override' (failed, overridden)."""
        fingerprint = EmbeddingModel.objects.current_fingerprint()
        if self.similarity is None or fingerprint is None:
            return "pending"
        if self.similarity_model != fingerprint:
            return "stale"
        if self.similarity >= settings.SIMILARITY_THRESHOLD:
            return "pass"
        return "override" if self.similarity_override_reason else "fail"

    @property
    def chosen_caption(self) -> models.Model | None:
        """The accepted caption chosen for the export (`has_caption` / `caption`), or None."""
        return self.captions.exported().first()

    def similarity_problem(self) -> str | None:
        """Why the subtlety rule keeps this pair from being accepted or exported, or None."""
        status = self.similarity_status
        if status == "pending":
            if EmbeddingModel.objects.current_fingerprint() is None:
                return f"The DINOv3 similarity of this pair cannot be computed: {NO_ACTIVE_MODEL}."
            return "The DINOv3 similarity of this pair is not computed yet."
        if status == "stale":
            return (
                f"The similarity {self.similarity:.3f} came from another model ({self.similarity_model}); "
                "it is not computed yet with the current model."
            )
        if status == "fail":
            return (
                f"Similarity {self.similarity:.3f} is below the threshold {settings.SIMILARITY_THRESHOLD}: "
                "only a coordinator can override this, with a written reason."
            )
        return None


class Review(models.Model):
    class Decision(models.TextChoices):
        ACCEPT = "accept"
        REJECT = "reject"
        CORRECT = "correct", "correct and accept"
        # Not a decision: the record that a reviewer or coordinator took one back (with why); the pair went back
        # to the review queue.
        REOPEN = "reopen", "reopen"

    pair = models.ForeignKey(Pair, models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="reviews")
    decision = models.CharField(max_length=20, choices=Decision.choices)
    reason = models.TextField(blank=True, max_length=NOTE_MAX, validators=text_validators(NOTE_MAX))
    changes = models.JSONField(default=dict, blank=True, help_text="Fields the reviewer corrected: old and new.")
    # The guideline (version) a rejection cites: the author reads the rule beside the reason.
    guideline_version = models.ForeignKey(
        "annotator.GuidelineVersion", models.PROTECT, null=True, blank=True, related_name="reviews"
    )
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self):
        return f"{self.decision} of pair {self.pair_id} by {self.reviewer_id}"

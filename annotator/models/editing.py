"""Model-edited pairs: an image of a collection sent to an image-editing model with an instruction (written from an
editable template of its kind of change), the edited image made into a candidate pair, and people's check of the
edit itself (is the change what was asked, is the rest intact) before the candidate enters the authoring queue.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from annotator.models.taxonomy import Category
from subtlebench.text import NOTE_MAX, text_validators

INSTRUCTION_MAX = 1000
OBJECT_MAX = 100


class EditKind(models.TextChoices):
    """The kinds of change an edit job asks for, each with the benchmark category its pairs are authored under."""

    COLOUR = "colour"
    STATE = "state"
    ADDED = "added", "Existence: added"
    REMOVED = "removed", "Existence: removed"
    COUNT = "count"
    POSITION = "position"


KIND_CATEGORY = {
    EditKind.COLOUR: Category.ATTRIBUTE,
    EditKind.STATE: Category.STATE,
    EditKind.ADDED: Category.EXISTENCE,
    EditKind.REMOVED: Category.EXISTENCE,
    EditKind.COUNT: Category.QUANTITY,
    EditKind.POSITION: Category.SPATIAL,
}


class EditTemplate(models.Model):
    """How an edit job words its instruction for one kind of change, and the draft question the pair starts from.
    `{object}` is the object (named by a vision model or by hand), `{value}` what it becomes (a colour, a state, a
    direction); both are filled in per image."""

    kind = models.CharField(max_length=20, choices=EditKind.choices, unique=True)
    instruction = models.TextField(max_length=INSTRUCTION_MAX, validators=text_validators(INSTRUCTION_MAX))
    question = models.CharField(max_length=300, blank=True, help_text="The draft question of its pairs.")
    answer = models.CharField(max_length=300, blank=True, help_text="The draft answer of its pairs.")
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["kind"]

    def __str__(self):
        return f"{self.get_kind_display()} template"

    @property
    def category(self) -> str:
        return KIND_CATEGORY[self.kind]


class ImageEditQuerySet(models.QuerySet):
    def to_check(self):
        """Edits made and waiting for a person to accept or refuse them."""
        return self.filter(status=ImageEdit.Status.TO_CHECK)


class ImageEdit(models.Model):
    """One image of an edit job: its instruction, and what came of it (the candidate pair, or why it failed), then
    whether a person accepted the edit or refused it (with the reason)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        FAILED = "failed"
        TO_CHECK = "to_check", "to check"
        ACCEPTED = "accepted"
        REFUSED = "refused"

    class RefuseReason(models.TextChoices):
        NOT_ASKED = "not_asked", "the change is not what was asked"
        NOT_INTACT = "not_intact", "the rest of the image changed"
        NO_CHANGE = "no_change", "nothing (visible) changed"
        OTHER = "other", "something else (say what in the note)"

    job = models.ForeignKey("annotator.Job", models.CASCADE, related_name="image_edits")
    image = models.ForeignKey("annotator.Image", models.PROTECT, related_name="edits")
    kind = models.CharField(max_length=20, choices=EditKind.choices)
    object_name = models.CharField(max_length=OBJECT_MAX, blank=True)
    value = models.CharField(max_length=OBJECT_MAX, blank=True)
    instruction = models.TextField(max_length=INSTRUCTION_MAX, blank=True)
    question = models.CharField(max_length=300, blank=True)
    answer = models.CharField(max_length=300, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    error = models.TextField(blank=True, max_length=2000, help_text="Why this image failed.")
    edited_image = models.ForeignKey("annotator.Image", models.PROTECT, null=True, blank=True, related_name="+")
    candidate = models.OneToOneField(
        "annotator.PairCandidate", models.SET_NULL, null=True, blank=True, related_name="edit"
    )
    checked_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    checked = models.DateTimeField(null=True, blank=True)
    refuse_reason = models.CharField(max_length=20, choices=RefuseReason.choices, blank=True)
    refuse_note = models.TextField(blank=True, max_length=NOTE_MAX, validators=text_validators(NOTE_MAX))
    created = models.DateTimeField(default=timezone.now)

    objects = ImageEditQuerySet.as_manager()

    class Meta:
        ordering = ["job", "pk"]
        constraints = [models.UniqueConstraint(fields=["job", "image"], name="image_edit_once_per_job")]

    def __str__(self):
        return f"edit {self.pk} of image {self.image_id} ({self.status})"

    @property
    def category(self) -> str:
        return KIND_CATEGORY[self.kind]

"""The license and citation of each source, by the name pairs export under (`Pair.source`): a collection's name,
`yt8m` for video frames, an imported folder's source, `synthetic`. The export carries them into the dataset card.

A source without a row takes its defaults: a known dataset's terms (benchmark.licenses: MVTec-AD, YouTube-8M, and
an MVTec-AD-shaped collection by its layout), BENCHMARK_LICENSE for the pairs the app draws itself, else unknown.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from benchmark.licenses import GENERATED_SOURCE, KNOWN_SOURCES, LICENSE_MAX, MVTEC_AD, UNKNOWN, SourceTerms
from benchmark.licenses import license_problem as hub_license_problem
from subtlebench.text import NAME_MAX, NOTE_MAX, single_line, text_validators


def license_validator(value) -> None:
    problem = hub_license_problem(value)
    if problem:
        raise ValidationError(problem)


class SourceLicenseQuerySet(models.QuerySet):
    def terms_of(self, sources) -> dict[str, SourceTerms]:
        """The terms of each named source: its row, else its defaults (`default_terms`)."""
        from annotator.models.collections import Collection

        sources = sorted(set(sources))
        rows = {row.source: row.terms for row in self.filter(source__in=sources)}
        layouts = dict(Collection.objects.filter(name__in=sources).values_list("name", "layout"))
        return {source: rows.get(source) or default_terms(source, layouts.get(source)) for source in sources}


def default_terms(source: str, layout: str | None = None) -> SourceTerms:
    """A source's terms when no one has recorded them: a known dataset's by its name or its collection's layout, the
    benchmark's own license for the pairs the app draws, else unknown."""
    if source in KNOWN_SOURCES:
        return KNOWN_SOURCES[source]
    if layout == "mvtec":  # Collection.Layout.MVTEC: the folder layout only MVTec-AD has
        return MVTEC_AD
    if source == GENERATED_SOURCE:
        return SourceTerms(license=settings.BENCHMARK_LICENSE, note="drawn by the app (BENCHMARK_LICENSE)")
    return SourceTerms(license=UNKNOWN, note="no license recorded for this source")


class SourceLicense(models.Model):
    source = models.CharField(
        max_length=50, unique=True, validators=[single_line], help_text="The source name pairs export under."
    )
    license = models.CharField(
        max_length=LICENSE_MAX,
        validators=[license_validator],
        help_text="A Hugging Face Hub license id: cc-by-4.0, cc-by-nc-sa-4.0, mit, other, unknown, ...",
    )
    citation = models.TextField(
        blank=True,
        max_length=NOTE_MAX,
        validators=text_validators(NOTE_MAX),
        help_text="How to cite the source (BibTeX or plain text).",
    )
    note = models.CharField(
        max_length=NAME_MAX,
        blank=True,
        validators=[single_line],
        help_text="Shown beside the license in the card: what it covers, whose rights stay whose.",
    )
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    updated = models.DateTimeField(default=timezone.now)

    objects = SourceLicenseQuerySet.as_manager()

    class Meta:
        ordering = ["source", "pk"]

    def __str__(self):
        return f"{self.source}: {self.license}"

    @property
    def terms(self) -> SourceTerms:
        return SourceTerms(license=self.license, citation=self.citation, note=self.note)

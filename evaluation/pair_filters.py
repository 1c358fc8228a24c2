"""Filters evaluation adds to the data manager's pairs table (annotator must not import evaluation: it registers them).

A filter is one `Filter` (annotator/datamanager/tables.py): how its value parses and how it narrows the queryset.
"""

from __future__ import annotations

from django.db.models import Exists, OuterRef

from annotator.datamanager.tables import PAIRS, yes_no_filter
from evaluation.models import StudyItem


def in_a_study():
    return Exists(StudyItem.objects.filter(pair=OuterRef("pk")))


def register() -> None:
    PAIRS.add_filter(yes_no_filter("study", "In a study", in_a_study))

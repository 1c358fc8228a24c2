"""The benchmark's difference types (categories) and image domains as model choices: `benchmark.taxonomy` defines
them, these enums only let fields, forms and queries name them (`Category.TEMPORAL`)."""

from __future__ import annotations

from django.db import models

from benchmark.taxonomy import ABBREVIATIONS, CATEGORIES, DOMAINS

Category = models.TextChoices("Category", [(value.upper(), value) for value in CATEGORIES])
Domain = models.TextChoices("Domain", [(value.upper(), value) for value in DOMAINS])

# The paper's column abbreviations, in the paper's order.
CATEGORY_ABBREVIATIONS = ABBREVIATIONS

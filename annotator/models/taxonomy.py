"""The benchmark's difference types (categories) and image domains, as BENCHMARK.md names them."""

from __future__ import annotations

from django.db import models


class Category(models.TextChoices):
    ATTRIBUTE = "attribute"
    STATE = "state"
    EMOTION = "emotion"
    TEMPORAL = "temporal"
    SPATIAL = "spatial"
    EXISTENCE = "existence"
    QUANTITY = "quantity"
    QUALITY = "quality"
    VIEWPOINT = "viewpoint"
    ACTION = "action"


# The paper's column abbreviations, in the paper's order.
CATEGORY_ABBREVIATIONS = {
    Category.ATTRIBUTE: "AT",
    Category.STATE: "ST",
    Category.EMOTION: "EM",
    Category.TEMPORAL: "TM",
    Category.SPATIAL: "SP",
    Category.EXISTENCE: "EX",
    Category.QUANTITY: "QN",
    Category.QUALITY: "QL",
    Category.VIEWPOINT: "VP",
    Category.ACTION: "AC",
}


class Domain(models.TextChoices):
    NATURAL = "natural"
    GAMING = "gaming"
    INDUSTRIAL = "industrial"
    AERIAL = "aerial"
    MEDICAL = "medical"
    SYNTHETIC = "synthetic"

"""Serializer fields with their bounds always stated, so the schema documents them and no value reaches a column
it does not fit (a seed beyond a 32-bit integer was a 500 `DataError`): `whole_number(...)` and `free_text(...)`.

`tests/api/test_api_contract.py` holds every request field to it: integers have a minimum and a maximum, strings a
maxLength, lists a maxItems. Values have the schema's type too: a number is not taken for a text (`free_text`), nor
0 or "yes" for a boolean (`yes_no`), nor false for a number (`number`), as the fuzz test's negative data checks.
"""

from __future__ import annotations

import math

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from subtlebench.text import multi_line, single_line

INT32_MAX = 2**31 - 1  # an IntegerField column
SMALL_MAX = 32767  # a PositiveSmallIntegerField column
ID_MAX = 2**63 - 1  # a BigAutoField primary key


def whole_number(*, low: int = 0, high: int = INT32_MAX, **kwargs) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=low, max_value=high, **kwargs)


class TextField(serializers.CharField):
    """A string, as the schema says: DRF's CharField would take 0 or 1.5 and store "0"."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class YesNoField(serializers.BooleanField):
    """A boolean, as the schema says: true or false (in a form, "true" or "false"); not 0, 1, "yes" or "on"."""

    FORM_VALUES = {"true": True, "false": False}

    def to_internal_value(self, data):
        if isinstance(data, bool):
            return data
        if isinstance(data, str) and data.lower() in self.FORM_VALUES:
            return self.FORM_VALUES[data.lower()]
        self.fail("invalid", input=data)


class NumberField(serializers.FloatField):
    """A number, as the schema says: DRF's FloatField would take false as 0.0; infinity and NaN are no numbers."""

    def to_internal_value(self, data):
        if isinstance(data, bool):
            self.fail("invalid")
        value = super().to_internal_value(data)
        if not math.isfinite(value):
            self.fail("invalid")
        return value


def number(**kwargs) -> NumberField:
    return NumberField(**kwargs)


def yes_no(**kwargs) -> YesNoField:
    return YesNoField(**kwargs)


def free_text(max_length: int, *, lines: str = "multi", **kwargs) -> serializers.CharField:
    """Free text up to `max_length` characters; `lines="single"` for names, titles and labels (no line break)."""
    validators = [*kwargs.pop("validators", []), multi_line if lines == "multi" else single_line]
    return TextField(max_length=max_length, validators=validators, **kwargs)


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": ID_MAX})
class ObjectIdField(serializers.PrimaryKeyRelatedField):
    """The id of an existing row (400 when there is none), documented with its bounds."""

"""Serializer fields with their bounds always stated, so the schema documents them and no value reaches a column
it does not fit (a seed beyond a 32-bit integer was a 500 `DataError`): `whole_number(...)` and `free_text(...)`.

`tests/api/test_api_contract.py` holds every request field to it: integers have a minimum and a maximum, strings a
maxLength, lists a maxItems.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from subtlebench.text import multi_line, single_line

INT32_MAX = 2**31 - 1  # an IntegerField column
SMALL_MAX = 32767  # a PositiveSmallIntegerField column
ID_MAX = 2**63 - 1  # a BigAutoField primary key


def whole_number(*, low: int = 0, high: int = INT32_MAX, **kwargs) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=low, max_value=high, **kwargs)


def free_text(max_length: int, *, lines: str = "multi", **kwargs) -> serializers.CharField:
    """Free text up to `max_length` characters; `lines="single"` for names, titles and labels (no line break)."""
    validators = [*kwargs.pop("validators", []), multi_line if lines == "multi" else single_line]
    return serializers.CharField(max_length=max_length, validators=validators, **kwargs)


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": ID_MAX})
class ObjectIdField(serializers.PrimaryKeyRelatedField):
    """The id of an existing row (400 when there is none), documented with its bounds."""

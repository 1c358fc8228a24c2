"""The API's body parsers: DRF's own, then every string of the body (keys too) checked for control characters.
A JSON body is read with its nesting bounded (`benchmark.jsonlimits`): a 400, never a RecursionError.

Set as REST_FRAMEWORK DEFAULT_PARSER_CLASSES, so every endpoint, present and future, refuses a NUL (or another
C0 control) in any field, a JSONField such as a draft's state included, with a 400 naming the field. Query strings
are checked by `subtlebench.middleware`, before any view.
"""

from __future__ import annotations

import json

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError

from benchmark import jsonlimits
from subtlebench.text import query_fields, refuse_control_characters


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = stream.read().decode(encoding)
            data = jsonlimits.loads(text)
        except json.JSONDecodeError as error:
            raise ParseError(f"JSON parse error - {error.msg}.") from None
        except ValueError as error:  # not the encoding, NaN or Infinity
            raise ParseError(f"JSON parse error - {error}.") from None
        refuse_control_characters(data)
        return data


class FormParser(parsers.FormParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        refuse_control_characters(query_fields(data))
        return data


class MultiPartParser(parsers.MultiPartParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parsed = super().parse(stream, media_type, parser_context)
        refuse_control_characters(query_fields(parsed.data))
        return parsed

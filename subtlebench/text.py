"""Text in, safely: control characters are refused wherever text comes in, and every free text has a length limit.

PostgreSQL cannot store NUL (a query with one fails), and the other C0 controls (and DEL) have no place in a
question, a caption or a name: they hide text, break exports and terminals. The request layers refuse them all
(`ControlCharacterMiddleware` for query strings and form bodies, `api.parsers` for API bodies), keeping tab and
newline for multi-line fields; `single_line` also refuses those in fields of one line (names, titles, labels).

The limits live here so that the model, the serializer, the form and the editor's `maxlength` agree.
"""

from __future__ import annotations

import re

from django.core.validators import MaxLengthValidator
from django.db import models
from django.utils.deconstruct import deconstructible

from benchmark.questions import OPTION_MAX_CHARS, QUESTION_MAX_CHARS
from subtlebench.errors import Invalid

# Lengths of free text, in characters.
NAME_MAX = 200  # names, titles, labels: one line
SHORT_TEXT_MAX = OPTION_MAX_CHARS  # an answer, one option (the benchmark format's limit), other short texts
QUESTION_MAX = QUESTION_MAX_CHARS
NOTE_MAX = 2000  # reasons, notes, comments
PAGE_TEXT_MAX = 5000  # a study's texts for participants (instructions, consent, withdrawal)
CAPTION_TEXT_MAX = 5000  # the hard ceiling; CAPTION_MAX_CHARS is the configured (lower) limit of a caption
OPTIONS_MAX = 20  # distractors of one question
EXPORT_NAME_MAX = 100  # a folder name under EXPORT_ROOT (file systems allow 255 bytes)


def text_limits() -> dict[str, int]:
    """The limits by name, for templates (`maxlength="{{ limits.question }}"`)."""
    from django.conf import settings

    return {
        "name": NAME_MAX,
        "question": QUESTION_MAX,
        "option": SHORT_TEXT_MAX,
        "note": NOTE_MAX,
        "page_text": PAGE_TEXT_MAX,
        "caption": min(settings.CAPTION_MAX_CHARS, CAPTION_TEXT_MAX),
        "export_name": EXPORT_NAME_MAX,
        "username": 150,
        "password": 4096,
        "key": 64,
    }


# C0 controls and DEL; tab, newline and carriage return are the whitespace of multi-line text.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
LINE_BREAKS = re.compile(r"[\t\n\r]")


def control_character(text: str, *, multi_line: bool = True) -> str | None:
    """The first forbidden control character of `text` (as U+XXXX), or None when there is none."""
    found = CONTROL.search(text) or (None if multi_line else LINE_BREAKS.search(text))
    return f"U+{ord(found.group()):04X}" if found else None


def control_message(character: str) -> str:
    name = "NUL" if character == "U+0000" else "a control character"
    return f"Contains {name} ({character}); remove it."


def control_characters_in(data, where: str = "") -> dict[str, list[str]]:
    """Every string in nested data (keys included) with a forbidden control character, by field path.

    `{"corrections": {"question": "a\\x00"}}` gives `{"corrections.question": ["Contains NUL (U+0000); remove it."]}`.
    """
    found: dict[str, list[str]] = {}
    if isinstance(data, str):
        if character := control_character(data):
            found[where or "body"] = [control_message(character)]
    elif isinstance(data, dict):
        for key, value in data.items():
            path = f"{where}.{key}" if where else str(key)
            if isinstance(key, str) and (character := control_character(key)):
                found[where or "body"] = [f"A field name: {control_message(character)}"]
            found.update(control_characters_in(value, path))
    elif isinstance(data, list | tuple):
        for index, value in enumerate(data):
            found.update(control_characters_in(value, f"{where}.{index}" if where else str(index)))
    return found


def query_fields(query) -> dict:
    """A QueryDict as plain data to check: a value per field, a list for a repeated field (`x.1` names its second)."""
    return {key: values if len(values := query.getlist(key)) > 1 else values[0] if values else "" for key in query}


def refuse_control_characters(data, where: str = "") -> None:
    """Raise Invalid naming each field of `data` that holds a forbidden control character."""
    if found := control_characters_in(data, where):
        raise Invalid(found)


@deconstructible
class SingleLineValidator:
    """Model, form and serializer validator: one line of text, no control character (tab and newline neither)."""

    def __call__(self, value) -> None:
        if isinstance(value, str) and (character := control_character(value, multi_line=False)):
            if LINE_BREAKS.match(chr(int(character[2:], 16))):
                raise Invalid(f"Write it on one line: contains a line break or tab ({character}).")
            raise Invalid(control_message(character))

    def __eq__(self, other) -> bool:
        return isinstance(other, SingleLineValidator)


@deconstructible
class MultiLineValidator:
    """Model, form and serializer validator: text that may have tabs and line breaks, but no other control."""

    def __call__(self, value) -> None:
        if isinstance(value, str) and (character := control_character(value)):
            raise Invalid(control_message(character))

    def __eq__(self, other) -> bool:
        return isinstance(other, MultiLineValidator)


single_line = SingleLineValidator()
multi_line = MultiLineValidator()


def text_validators(max_length: int, *, lines: str = "multi") -> list:
    """The validators of a free-text model field: its length limit and its control characters."""
    return [MaxLengthValidator(max_length), multi_line if lines == "multi" else single_line]


def options_validator(value) -> None:
    """A question's distractors (a JSON list): at most OPTIONS_MAX texts of one line, each SHORT_TEXT_MAX long."""
    if not isinstance(value, list):
        raise Invalid("The options must be a list of texts.")
    if len(value) > OPTIONS_MAX:
        raise Invalid(f"{len(value)} options; at most {OPTIONS_MAX}.")
    for text in value:
        if not isinstance(text, str):
            raise Invalid("Each option must be a text.")
        if len(text) > SHORT_TEXT_MAX:
            raise Invalid(f"An option has {len(text)} characters; at most {SHORT_TEXT_MAX}.")
        single_line(text)


def refuse_bad_text(sender, instance, update_fields=None, raw=False, **kwargs) -> None:
    """pre_save: a text field longer than its max_length, or holding NUL, raises Invalid naming the field, instead
    of a DataError from the database (a TextField's max_length is otherwise only a hint to forms)."""
    if raw:  # fixtures load as they are
        return
    errors: dict[str, list[str]] = {}
    for field in sender._meta.concrete_fields:
        if (update_fields is not None and field.name not in update_fields) or field.generated:
            continue  # a generated column is the database's to fill
        value = getattr(instance, field.attname)
        # A list of texts (labels, tokens) is held to its item field's column.
        texts, column = (value, getattr(field, "base_field", None)) if isinstance(value, list) else ([value], field)
        if not isinstance(column, models.CharField | models.TextField):
            continue
        for text in texts:
            if not isinstance(text, str):
                continue
            if column.max_length is not None and len(text) > column.max_length:
                errors[field.name] = [f"{len(text)} characters; at most {column.max_length}."]
            elif "\x00" in text:
                errors[field.name] = [control_message("U+0000")]
    if errors:
        raise Invalid(errors)

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
from django.utils.deconstruct import deconstructible

from subtlebench.errors import Invalid

# Lengths of free text, in characters.
NAME_MAX = 200  # names, titles, labels: one line
SHORT_TEXT_MAX = 300  # an answer, one option, an export's folder name
QUESTION_MAX = 1000
NOTE_MAX = 2000  # reasons, notes, comments
CAPTION_TEXT_MAX = 5000  # the hard ceiling; CAPTION_MAX_CHARS is the configured (lower) limit of a caption
OPTIONS_MAX = 20  # distractors of one question
EXPORT_NAME_MAX = 100  # a folder name under EXPORT_ROOT (file systems allow 255 bytes)
DRAFT_STATE_MAX_BYTES = 64 * 1024  # an autosaved workbench state, as JSON

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

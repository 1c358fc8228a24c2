"""JSON from outside the app (request bodies, uploaded files), read with its nesting bounded and without the
non-standard NaN and Infinity: a body nested a thousand deep is a clear parse error, never a RecursionError."""

from __future__ import annotations

import json
import re

MAX_DEPTH = 32  # every JSON the app takes is a few levels deep (a results file: 4)
_STRINGS = {str: re.compile(r'"(?:[^"\\]|\\.)*"', re.S), bytes: re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)}
_BRACKETS = {str: re.compile(r"[\[{]|[\]}]"), bytes: re.compile(rb"[\[{]|[\]}]")}
_OPENING = {str: ("[", "{"), bytes: (b"[", b"{")}


def check_depth(text: str | bytes, max_depth: int = MAX_DEPTH) -> None:
    """json.JSONDecodeError when the text opens more than `max_depth` arrays or objects inside each other (counted
    outside strings, before any parsing recurses)."""
    kind = bytes if isinstance(text, (bytes, bytearray)) else str
    depth = 0
    for match in _BRACKETS[kind].finditer(_STRINGS[kind].sub(b"" if kind is bytes else "", text)):
        if match.group() in _OPENING[kind]:
            depth += 1
            if depth > max_depth:
                raise json.JSONDecodeError(f"nested deeper than {max_depth} levels", "", 0)
        else:
            depth -= 1


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def loads(text: str | bytes, max_depth: int = MAX_DEPTH):
    """json.loads for text from outside: bounded depth, NaN and Infinity refused (a ValueError either way)."""
    check_depth(text, max_depth)
    return json.loads(text, parse_constant=_refuse_constant)

"""JSON from outside the app (request bodies, uploaded files, folders to import), read with its nesting bounded and
without the non-standard NaN and Infinity: a body nested a thousand deep is a clear parse error, never a
RecursionError. `text_lines` reads a file from outside line by line with each line's size bounded and its
encoding checked, so a hostile line is one clear error with its line and byte offset, never a traceback."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import BinaryIO

MAX_DEPTH = 32  # every JSON the app takes is a few levels deep (a results file: 4)
_STRINGS = {str: re.compile(r'"(?:[^"\\]|\\.)*"', re.S), bytes: re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)}
_BRACKETS = {str: re.compile(r"[\[{]|[\]}]"), bytes: re.compile(rb"[\[{]|[\]}]")}
_OPENING = {str: ("[", "{"), bytes: (b"[", b"{")}
BOM = b"\xef\xbb\xbf"


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


def _finite_float(text: str) -> float:
    """1e999 is valid JSON that Python reads as infinity: refused like the literal Infinity."""
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is too large for a number")
    return number


def loads(text: str | bytes, max_depth: int = MAX_DEPTH):
    """json.loads for text from outside: bounded depth, NaN and Infinity refused (a ValueError either way)."""
    check_depth(text, max_depth)
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)


def raw_decode(text: str, max_depth: int = MAX_DEPTH) -> tuple[object, int]:
    """json.JSONDecoder().raw_decode for text from outside (the first JSON value of a model's reply and where it
    ends), with the same bounds as `loads`: the whole text's nesting is checked first."""
    check_depth(text, max_depth)
    decoder = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
    return decoder.raw_decode(text)


def text_lines(
    stream: BinaryIO, *, max_bytes: int, limit_name: str = "", allow_bom: bool = False
) -> Iterator[tuple[int, str | None, str]]:
    """(line number, text without its line ending, '') for each line of a binary stream, or (line number, None, why)
    for a line that cannot be read as text: longer than `max_bytes` (skipped without ever being held whole), not
    UTF-8 (with the byte offset in the line and in the file), or a first line that starts with a byte order mark
    (Python's json.loads and sha256sum refuse it; `allow_bom` drops it, as a CSV reader should: Excel writes one).
    Lines end at b"\\n"; a "\\r" before it is dropped (CRLF)."""
    number = offset = 0
    limit = f" ({limit_name})" if limit_name else ""
    while line := stream.readline(max_bytes + 1):
        number += 1
        start, offset = offset, offset + len(line)
        if len(line) > max_bytes and not line.endswith(b"\n"):
            while (rest := stream.readline(1 << 16)) and not rest.endswith(b"\n"):
                offset += len(rest)
            offset += len(rest)
            yield number, None, f"the line is longer than the limit of {max_bytes} bytes{limit}"
            continue
        if number == 1 and line.startswith(BOM) and allow_bom:
            line = line[len(BOM) :]
        elif number == 1 and line.startswith(BOM):
            yield number, None, "the file starts with a UTF-8 byte order mark (BOM): save it as UTF-8 without one"
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as error:
            yield (
                number,
                None,
                f"not UTF-8: byte 0x{line[error.start]:02x} at byte offset {error.start} of the line "
                f"(offset {start + error.start} of the file)",
            )
            continue
        yield number, text.removesuffix("\n").removesuffix("\r"), ""

"""Reading JSON and lines from outside: bounded depth, no infinities, each line bounded and checked for UTF-8."""

from __future__ import annotations

import io

import pytest

from benchmark import jsonlimits


def lines(data: bytes, max_bytes: int = 64, **options) -> list:
    return list(jsonlimits.text_lines(io.BytesIO(data), max_bytes=max_bytes, **options))


def test_it_refuses_a_number_too_large_for_a_float_like_infinity():
    with pytest.raises(ValueError, match="1e999 is too large for a number"):
        jsonlimits.loads('{"score": 1e999}')
    assert jsonlimits.loads('{"score": 1.5e3}') == {"score": 1500.0}


def test_it_refuses_nesting_deeper_than_the_limit_without_recursing():
    with pytest.raises(ValueError, match="nested deeper than 32 levels"):
        jsonlimits.loads("[" * 200_000 + "]" * 200_000)


def test_a_line_over_the_limit_is_one_error_and_the_next_lines_keep_their_numbers():
    data = b'{"a": 1}\n' + b"x" * 1000 + b"\n" + b'{"b": 2}\r\n' + b"\n" + b"last"
    assert lines(data, limit_name="IMPORT_MAX_LINE_BYTES") == [
        (1, '{"a": 1}', ""),
        (2, None, "the line is longer than the limit of 64 bytes (IMPORT_MAX_LINE_BYTES)"),
        (3, '{"b": 2}', ""),
        (4, "", ""),
        (5, "last", ""),
    ]


def test_a_line_of_exactly_the_limit_is_read():
    assert lines(b"y" * 64 + b"\n") == [(1, "y" * 64, "")]


def test_bytes_that_are_not_utf8_name_their_offset_in_the_line_and_the_file():
    assert lines(b"ok\ncaf\xe9\n") == [
        (1, "ok", ""),
        (2, None, "not UTF-8: byte 0xe9 at byte offset 3 of the line (offset 6 of the file)"),
    ]


def test_a_byte_order_mark_is_refused_unless_allowed():
    assert lines(b"\xef\xbb\xbf{}\n")[0][2].startswith("the file starts with a UTF-8 byte order mark")
    assert lines(b"\xef\xbb\xbf{}\n", allow_bom=True) == [(1, "{}", "")]

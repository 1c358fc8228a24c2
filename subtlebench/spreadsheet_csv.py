"""CSV downloads that people open in a spreadsheet: every text cell a spreadsheet would run as a formula is
neutralised, as OWASP advises for CSV injection (a leading single quote makes it plain text), and every download is
UTF-8 with a byte order mark (`csv_download`), so that Excel shows non-ASCII text as written."""

from __future__ import annotations

import csv
from collections.abc import Iterable

from django.http import HttpResponse

# Excel reads a CSV file without a byte order mark in the machine's legacy code page: non-ASCII text is garbled.
BOM = "\ufeff"
CONTENT_TYPE = "text/csv; charset=utf-8"

# The characters that make Excel, LibreOffice and Google Sheets read a cell as a formula (or a DDE call).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralised(value):
    """The value as a spreadsheet should show it: text starting like a formula gets a leading single quote.

    Numbers pass as they are: a negative number is not a formula, and the quote would turn it into text.
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class SafeCsvWriter:
    """csv.writer with every cell neutralised; the one way the app writes a CSV file."""

    def __init__(self, handle, **kwargs):
        self._writer = csv.writer(handle, **kwargs)

    def writerow(self, row: Iterable) -> None:
        self._writer.writerow([neutralised(value) for value in row])

    def writerows(self, rows: Iterable[Iterable]) -> None:
        for row in rows:
            self.writerow(row)


def csv_download(content: str | bytes, file_name: str) -> HttpResponse:
    """A CSV file as a download: UTF-8 with a byte order mark, its charset declared, saved under `file_name`."""
    text = content.decode("utf-8") if isinstance(content, bytes) else content
    response = HttpResponse((BOM + text.removeprefix(BOM)).encode("utf-8"), content_type=CONTENT_TYPE)
    response["Content-Disposition"] = f'attachment; filename="{file_name}"'
    return response

"""The errors services raise: invalid (400), forbidden (403), not found (404), conflict (409); and unavailable
(503), which nothing raises on purpose: it is what a database or broker that cannot be reached becomes
(`dependency_unavailable`), so the API and the pages say so instead of answering a bare 500.

Services raise one of these four kinds (or a subclass naming the case, e.g. `LeaseLost` is a `Conflict`);
the API's exception handler and the pages' `error_response` turn them into a response with `status`.
Each is also the Django exception of its kind (`Invalid` a ValidationError, `Forbidden` a PermissionDenied,
`NotFound` an Http404), so forms, the admin and Django's own 403/404 pages take them as they are.

Every error reads as `detail` (one text that says what and where) and `errors` (the messages by field,
`{}` when no single field is at fault): `Invalid({"reason": ["Say why."]})` or `Invalid("No pairs yet.")`.
"""

from __future__ import annotations

import errno
import os

from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.http import Http404


class ServiceError(Exception):
    """Base of the four kinds; not raised itself."""

    status = 400

    @property
    def detail(self) -> str:
        return " ".join(str(arg) for arg in self.args)

    @property
    def errors(self) -> dict[str, list[str]]:
        return {}

    def __str__(self) -> str:
        return self.detail


class Invalid(ServiceError, ValidationError):
    """The request is wrong as sent: a field (`Invalid({"field": ["message"]})`) or as a whole (`Invalid("...")`)."""

    status = 400

    @property
    def detail(self) -> str:
        return validation_detail(self)

    @property
    def errors(self) -> dict[str, list[str]]:
        return validation_fields(self)


class Forbidden(ServiceError, PermissionDenied):
    """This user may not do this (their role, or someone else's object)."""

    status = 403


class NotFound(ServiceError, Http404):
    """The object the request names does not exist (or is not this user's to see)."""

    status = 404


class Conflict(ServiceError):
    """The object moved on since the client saw it (someone else holds it, it was decided, it changed)."""

    status = 409


class Unavailable(ServiceError):
    """A service this request needs (the database, the broker) cannot be reached: try again shortly."""

    status = 503


def dependency_unavailable(error: BaseException) -> Unavailable | None:
    """The `Unavailable` a lost database or broker connection means; None for any other exception."""
    from django.db import InterfaceError, OperationalError
    from kombu.exceptions import OperationalError as BrokerError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    if isinstance(error, OperationalError | InterfaceError):
        return Unavailable("The database cannot be reached right now. Try again in a minute.")
    if isinstance(error, BrokerError | RedisConnectionError | RedisTimeoutError):
        return Unavailable("The task queue (Redis) cannot be reached right now. Try again in a minute.")
    return None


# Why a file operation failed, in words an operator acts on; the errno's own name follows in brackets.
FILE_ERROR_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "the file is too large for this file system",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOENT: "no such file or folder",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder, not a file",
    errno.EEXIST: "a file is in the way where a folder should be",
    errno.EIO: "input/output error (a failing disk or a lost network mount)",
}


def is_file_error(error: BaseException) -> bool:
    """Whether `error` is a failed operation on this host's files (a full disk, a read-only folder: one of
    FILE_ERROR_REASONS), not a network connection's (refused, reset, timed out), which is an OSError too."""
    return isinstance(error, OSError) and error.errno in FILE_ERROR_REASONS


def file_error_detail(error: OSError, *, what: str, where: str | os.PathLike | None = None) -> str:
    """One line for a failed file operation: what failed, why in words, and where (the file the error names, or
    `where` when it names none, as a write() that hit a full disk does). E.g. "Export to /data/exports/b failed:
    the disk is full, writing under /data/exports [ENOSPC]"."""
    path = error.filename or where
    reason = FILE_ERROR_REASONS.get(error.errno, (error.strerror or str(error) or type(error).__name__).lower())
    place = f", at {path}" if error.filename else (f", writing under {path}" if path else "")
    code = f" [{errno.errorcode[error.errno]}]" if error.errno in errno.errorcode else ""
    return f"{what} failed: {reason}{place}{code}"


def validation_fields(error: ValidationError) -> dict[str, list[str]]:
    """A Django ValidationError's messages by field; the messages of no field are left to the detail."""
    if not hasattr(error, "error_dict"):
        return {}
    return {field: messages for field, messages in error.message_dict.items() if field != NON_FIELD_ERRORS}


def validation_detail(error: ValidationError) -> str:
    """One text for a ValidationError: its field messages as 'field: message', the others as they are."""
    if not hasattr(error, "error_dict"):
        return " ".join(error.messages)
    return " ".join(
        message if field == NON_FIELD_ERRORS else f"{field}: {message}"
        for field, messages in error.message_dict.items()
        for message in messages
    )


# --- Errors on pages ---------------------------------------------------------------------------------------------
# The API's bodies keep each field's name ("text: ..."): clients and tests read them. A page shows a person the
# field in words before its message ("Frames: must be at least 1."), or the message alone when it names the field
# itself ("The caption is empty"). static/js/refusal.js does the same in pages' scripts.
FIELD_WORDS = {"text": "Caption", "yt8m_id": "YouTube-8M id", "base_url": "Base URL", "api_key": "API key"}


def field_in_words(field: str) -> str:
    if field.isupper():  # a parameter of the address as the sender wrote it (PROLIFIC_PID): its own name is the clue
        return field
    return FIELD_WORDS.get(field) or field.replace("_", " ").capitalize()


def page_message(field: str, message: str) -> str:
    """One field's message as a page shows it: never the raw field name, and never without the field unless the
    message names it itself ("The caption is empty" for `text`)."""
    words = field_in_words(field)
    if field == NON_FIELD_ERRORS or words.casefold() in message.casefold():
        return message
    return f"{words}: {message}"


def page_detail(error: Exception) -> str:
    """One line for a page (a flashed message, an error above a form): like `detail`, without raw field names."""
    if isinstance(error, ValidationError) and hasattr(error, "error_dict"):
        return " ".join(
            page_message(field, message) for field, messages in error.message_dict.items() for message in messages
        )
    return error_body(error)["detail"]


def error_status(error: Exception) -> int:
    if isinstance(error, ServiceError):
        return error.status
    if isinstance(error, ValidationError):
        return 400
    if isinstance(error, PermissionDenied):
        return 403
    if isinstance(error, Http404):
        return 404
    raise TypeError(f"{type(error).__name__} is not one of the service errors")


def error_body(error: Exception) -> dict:
    """The one error body: {"detail": text, "errors": {field: [messages]}}; also for Django's own errors."""
    if isinstance(error, ServiceError):
        return {"detail": error.detail, "errors": error.errors}
    if isinstance(error, ValidationError):
        return {"detail": validation_detail(error), "errors": validation_fields(error)}
    return {"detail": str(error), "errors": {}}

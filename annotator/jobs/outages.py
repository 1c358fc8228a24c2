"""Which errors say that a dependency is away (the media storage, the broker, the database) rather than that the work
is wrong: a unit that meets one pauses and resumes by itself (annotator.jobs.services.job_task_pause), where any other
error fails it with its reason."""

from __future__ import annotations

STORAGE = "the S3 storage"
BROKER = "the broker (Redis)"
DATABASE = "the database"
# S3 answers that mean "not now" rather than "never": the server's trouble or throttling.
STORAGE_BUSY_CODES = {"InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout", "503", "500"}


class DependencyDown(Exception):
    """Raised where an outage is recognised before it reaches the unit's task (a model run's image reads, an upload
    that used up its tries): `what` is away, `error` says how."""

    def __init__(self, what: str, error: BaseException):
        self.what = what
        self.error = error
        super().__init__(f"{what} does not answer ({type(error).__name__}: {error})")


def _causes(error: BaseException):
    """The error and what it wraps (raised from, raised while handling, boto3's last exception of its retries)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__ or getattr(error, "last_exception", None)


def outage_of(error: BaseException) -> str | None:
    """Which dependency `error` says is away, or None: an error of the work itself."""
    from botocore.exceptions import ClientError, HTTPClientError, IncompleteReadError
    from botocore.exceptions import ConnectionError as StorageConnectionError
    from django.db import InterfaceError, OperationalError
    from kombu.exceptions import OperationalError as BrokerError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    for cause in _causes(error):
        if isinstance(cause, DependencyDown):
            return cause.what
        # No connection, a connection cut or timed out mid-request (HTTPClientError: ReadTimeoutError,
        # ConnectionClosedError, ResponseStreamingError), a body cut short.
        if isinstance(cause, StorageConnectionError | HTTPClientError | IncompleteReadError):
            return STORAGE
        if isinstance(cause, ClientError):
            code = str(cause.response.get("Error", {}).get("Code", ""))
            status = cause.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
            if code in STORAGE_BUSY_CODES or status >= 500:
                return STORAGE
            return None  # no bucket, no access, no such key: the work's own problem
        if isinstance(cause, RedisConnectionError | RedisTimeoutError | BrokerError):
            return BROKER
        if isinstance(cause, OperationalError | InterfaceError):
            return DATABASE
    return None


def outage_reason(error: BaseException) -> str | None:
    """The outage in words for the job's page: which dependency, and the error that said so. None: not an outage."""
    what = outage_of(error)
    if what is None:
        return None
    shown = error.error if isinstance(error, DependencyDown) else error
    text = " ".join(str(shown).split())[:500]
    return f"{what} does not answer ({type(shown).__name__}: {text})"

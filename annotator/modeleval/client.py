"""HTTP to an OpenAI-compatible chat completions API (stdlib http.client: one kept-alive connection per thread).

Each request has the endpoint's timeout; 429, 5xx and connection errors are retried with exponential backoff and
full jitter (a Retry-After header is honoured, up to MODEL_EVAL_BACKOFF_MAX_SECONDS); a timeout, an unknown model
or another 4xx is not retried. A failure is a `RequestFailed` with its kind (ModelItemResult.Failure) and a clear
message, from which the API key is scrubbed.

Every connection goes to an address `hosts.endpoint_addresses` has just checked; redirects are not followed. A
failure's message never quotes the answer's body and says no more than "could not reach the endpoint" or "the
endpoint answered HTTP 503": a run is not a port scanner, nor a way to read an internal service's answers.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from annotator.modeleval.hosts import HostRefused, pinned_connection
from annotator.models import ModelItemResult

Failure = ModelItemResult.Failure
RETRIED = (Failure.UNREACHABLE, Failure.RATE_LIMITED, Failure.SERVER_ERROR)
MESSAGE_MAX = 500
REDACTED = "[redacted]"


class RequestFailed(Exception):
    def __init__(self, kind: str, message: str, attempts: int = 1):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.attempts = attempts


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    latency_ms: int


def scrub(text: str, secret: str) -> str:
    """The text without the secret (an error body or message may echo the key back)."""
    return text.replace(secret, REDACTED) if secret and len(secret) >= 4 else text


def retry_delay(attempt: int, retry_after: str | None) -> float:
    cap = settings.MODEL_EVAL_BACKOFF_MAX_SECONDS
    if retry_after:
        try:
            return min(cap, max(0.0, float(retry_after)))
        except ValueError:
            pass  # an HTTP date: use our own backoff
    return random.uniform(0, min(cap, settings.MODEL_EVAL_BACKOFF_SECONDS * 2**attempt))


def model_missing(status: int, body: str) -> bool:
    lowered = body.lower()
    return status == 404 or ("model" in lowered and ("not found" in lowered or "does not exist" in lowered))


class ChatClient:
    """One endpoint's client, shared by the threads of a run (each thread keeps its own connection)."""

    def __init__(self, *, base_url: str, model_id: str, api_key: str = "", timeout: float = 120):
        parts = urlsplit(base_url.rstrip("/"))
        self.scheme, self.host, self.port = parts.scheme, parts.hostname or "", parts.port
        self.path = parts.path
        self.model_id = model_id
        self.api_key = api_key
        self.timeout = timeout
        self.local = threading.local()

    # --- connections

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        connection = getattr(self.local, "connection", None)
        if connection is None:
            if self.scheme == "https":
                connection = http.client.HTTPSConnection(
                    self.host, self.port, timeout=timeout, context=ssl.create_default_context()
                )
            else:
                connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            connection._create_connection = pinned_connection
            self.local.connection = connection
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection

    def _drop(self) -> None:
        connection = getattr(self.local, "connection", None)
        if connection is not None:
            connection.close()
            self.local.connection = None

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _send(self, method: str, path: str, body: bytes | None, timeout: float) -> tuple[int, dict, str]:
        """One HTTP exchange; a stale kept-alive connection is reopened once."""
        for reuse in (True, False):
            connection = self._connection(timeout)
            fresh = connection.sock is None
            try:
                if fresh:
                    connection.connect()
                    # A request is one write (http.client joins headers and a bytes body); no Nagle delay on it.
                    connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                connection.request(method, self.path + path, body=body, headers=self._headers())
                response = connection.getresponse()
                text = response.read().decode("utf-8", errors="replace")
                if response.getheader("Connection", "").lower() == "close":
                    self._drop()
                return response.status, {k.lower(): v for k, v in response.getheaders()}, text
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self._drop()
                if fresh or not reuse:
                    raise
            except Exception:
                self._drop()
                raise
        raise AssertionError("unreachable")

    def _fail(self, kind: str, message: str, attempts: int) -> RequestFailed:
        return RequestFailed(kind, scrub(message, self.api_key)[:MESSAGE_MAX], attempts)

    def _exchange(self, method: str, path: str, body: bytes | None, *, timeout: float, retries: int):
        """(status, headers, text) of a 2xx answer, after retries; RequestFailed otherwise."""
        attempt = 0
        while True:
            attempt += 1
            retry_after = None
            try:
                status, headers, text = self._send(method, path, body, timeout)
            except HostRefused as refused:
                raise self._fail(Failure.REFUSED, f"the endpoint's host is refused: {refused}", attempt) from None
            except TimeoutError:
                raise self._fail(Failure.TIMEOUT, f"no answer from the endpoint within {timeout:g} s", attempt)
            except (OSError, http.client.HTTPException):
                # Refused, reset, or not HTTP at all: one message, so a run tells nothing of what listens there.
                kind, message = Failure.UNREACHABLE, "could not reach the endpoint"
            else:
                if 200 <= status < 300:
                    return status, headers, text, attempt
                if status == 429:
                    kind, message = Failure.RATE_LIMITED, "the endpoint is rate limiting (HTTP 429)"
                    retry_after = headers.get("retry-after")
                elif status >= 500:
                    kind, message = Failure.SERVER_ERROR, f"the endpoint answered HTTP {status}"
                    retry_after = headers.get("retry-after")
                elif 300 <= status < 400:
                    raise self._fail(
                        Failure.OTHER, f"the endpoint answered HTTP {status} (a redirect, not followed)", attempt
                    )
                elif model_missing(status, text):
                    raise self._fail(
                        Failure.UNKNOWN_MODEL,
                        f"the endpoint does not serve the model {self.model_id!r} (HTTP {status})",
                        attempt,
                    )
                else:
                    raise self._fail(Failure.OTHER, f"the endpoint answered HTTP {status}", attempt)
            if attempt > retries:
                tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                raise self._fail(kind, message + tries, attempt)
            time.sleep(retry_delay(attempt - 1, retry_after))

    # --- operations

    def probe(self) -> None:
        """GET {base}/models once, no retries: RequestFailed(unreachable/timeout) when nothing answers there. Any
        HTTP answer counts as reachable (a server without /models still serves chat completions)."""
        try:
            self._exchange("GET", "/models", None, timeout=min(self.timeout, 10), retries=0)
        except RequestFailed as failed:
            if failed.kind in (Failure.UNREACHABLE, Failure.TIMEOUT, Failure.REFUSED):
                raise

    def complete(self, messages: list[dict], parameters: dict) -> Completion:
        body = json.dumps({"model": self.model_id, "messages": messages, **parameters}).encode()
        started = time.monotonic()
        _, _, text, attempts = self._exchange(
            "POST", "/chat/completions", body, timeout=self.timeout, retries=settings.MODEL_EVAL_RETRIES
        )
        latency_ms = int(1000 * (time.monotonic() - started))
        try:
            data = json.loads(text)
            content = data["choices"][0]["message"]["content"]
        except (json.JSONDecodeError, KeyError, IndexError, TypeError, RecursionError):
            raise self._fail(Failure.MALFORMED, "not a chat completion answer", attempts)
        if not isinstance(content, str):
            raise self._fail(Failure.MALFORMED, "the answer's message content is not text", attempts)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}

        def count(name: str) -> int:
            value = usage.get(name)
            return value if isinstance(value, int) and 0 <= value < 2**31 else 0

        return Completion(
            text=content,
            prompt_tokens=count("prompt_tokens"),
            completion_tokens=count("completion_tokens"),
            attempts=attempts,
            latency_ms=latency_ms,
        )

    def close(self) -> None:
        self._drop()

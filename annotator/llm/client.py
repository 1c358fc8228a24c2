"""HTTP to an OpenAI-compatible chat completions API (stdlib http.client: one kept-alive connection per thread).

Each request has a deadline, the endpoint's timeout, over the whole exchange (connecting, sending and reading the
full answer): a watchdog thread shuts the socket of a request past its deadline, so a server that trickles its
answer a byte at a time cannot hold a request longer (a socket timeout alone counts per read). `cancel()` shuts every
request in flight at once and ends the backoff waits: a cancelled run frees its worker promptly. 429, 5xx and
connection errors are retried with exponential backoff and full jitter (a Retry-After header is honoured, up to
MODEL_EVAL_BACKOFF_MAX_SECONDS); a timeout, an unknown model or another 4xx is not retried. A failure is a
`RequestFailed` with its kind (Failure) and a clear message, from which the API key is removed (`redact`).

A key goes only to the hosts it is bound to (`key_hosts`: the stored key's own host, or the hosts the operator bound
its variable to): each request checks its host against them before anything is sent, and refuses (Failure.REFUSED)
otherwise, whatever built the client. Every connection goes to an address `hosts.endpoint_addresses` has just
checked; redirects are not followed. A
failure's message says no more than "could not reach the endpoint" or "the endpoint answered HTTP 503": a run is not
a port scanner, nor a way to read an internal service's answers. The one exception is a 4xx whose body is an
OpenAI-style JSON error: its `message` is the endpoint's reason for refusing the request (a field it does not take,
a value it refuses), shown size-limited, on one line and redacted (`redact`).

A reply is read up to MODEL_REPLY_MAX_BYTES, never further: a larger one fails (Failure.TOO_LARGE) without being
held in memory. A request's body is written by the endpoint's request profile (annotator.llm.profiles). A reasoning
model's reasoning (message.reasoning_content or .reasoning, usage.completion_tokens_details.reasoning_tokens) is kept
apart from the answer: returned beside it, never as it.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.db import models

from annotator.llm.hosts import HostRefused, pinned_connection
from annotator.llm.profiles import RequestProfile
from benchmark import jsonlimits
from subtlebench.keybindings import DEFAULT_PORTS, Binding, binding_allows, describe_bindings, describe_host


class Failure(models.TextChoices):
    """Why a request got no usable reply; a run's result stores it (ModelItemResult.failure)."""

    UNREACHABLE = "unreachable"
    UNKNOWN_MODEL = "unknown_model"
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    REFUSED = "refused", "host refused"
    MALFORMED = "malformed", "malformed answer"
    REJECTED = "rejected", "request refused (HTTP 4xx)"
    TOO_LARGE = "too_large", "reply too large"
    OTHER = "other"


RETRIED = (Failure.UNREACHABLE, Failure.RATE_LIMITED, Failure.SERVER_ERROR)
MESSAGE_MAX = 500
REASON_MAX = 300
REDACTED = "[redacted]"
SECRET_MIN = 4  # shorter "secrets" would redact ordinary words
READ_CHUNK = 64 * 1024


class RequestCancelled(Exception):
    """The client was cancelled (its run's job was): the request was cut off, it is no answer and no failure."""


class DeadlinePassed(Exception):
    """The watchdog shut the request's socket: its deadline passed before the whole answer arrived."""


class Watchdog:
    """Shuts the sockets of requests past their deadline, or of every request on cancel (one thread per client)."""

    TICK = 0.05

    def __init__(self):
        self.lock = threading.Lock()
        self.watched: dict[int, list] = {}  # id -> [deadline, connection, fired]
        self.cancelled = threading.Event()
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    def watch(self, connection, deadline: float) -> list:
        entry = [deadline, connection, False]
        with self.lock:
            self.watched[id(entry)] = entry
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="model-eval-deadlines", daemon=True)
                self.thread.start()
        if self.cancelled.is_set():
            self._fire(entry)
        return entry

    def unwatch(self, entry: list) -> None:
        with self.lock:
            self.watched.pop(id(entry), None)

    def cancel(self) -> None:
        self.cancelled.set()
        with self.lock:
            entries = list(self.watched.values())
        for entry in entries:
            self._fire(entry)

    def stop(self) -> None:
        self.stopped.set()

    @staticmethod
    def _fire(entry: list) -> None:
        entry[2] = True
        sock = getattr(entry[1], "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # the blocked read returns at once, in its own thread
            except OSError:
                pass

    def _loop(self) -> None:
        while not self.stopped.wait(self.TICK):
            now = time.monotonic()
            with self.lock:
                late = [entry for entry in self.watched.values() if not entry[2] and entry[0] <= now]
            for entry in late:
                self._fire(entry)


class KeyNotBound(Exception):
    """The client's key is not bound to its host: the request is not sent."""


class ReplyTooLarge(Exception):
    """The reply passed MODEL_REPLY_MAX_BYTES while it was read: the rest was not read."""


class RequestFailed(Exception):
    """`status`: the HTTP status of a refused request (0 otherwise); `reason`: the endpoint's own words for it."""

    def __init__(self, kind: str, message: str, attempts: int = 1, status: int = 0, reason: str = ""):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.attempts = attempts
        self.status = status
        self.reason = reason


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    latency_ms: int
    reasoning_text: str = ""
    reasoning_tokens: int = 0


def configured_secrets() -> list[str]:
    """The secrets this process holds that no page, reply or log may show: SECRET_KEY, the key-encryption keys and
    every model key variable (MODEL_API_KEY_ENV_PREFIX)."""
    secrets = [settings.SECRET_KEY, *settings.MODEL_API_KEY_ENCRYPTION_KEY]
    prefix = settings.MODEL_API_KEY_ENV_PREFIX
    if prefix:
        secrets += [value for name, value in os.environ.items() if name.startswith(prefix)]
    return secrets


def redaction_variants(*keys: str) -> tuple[str, ...]:
    """What `redact` removes: the keys and the configured secrets, each as written and as JSON escapes it, a longer
    one first (it may hold a shorter one)."""
    variants = set()
    for secret in (*keys, *configured_secrets()):
        if secret and len(secret) >= SECRET_MIN:
            variants.add(secret)
            variants.add(json.dumps(secret)[1:-1])
            variants.add(json.dumps(secret)[1:-1].replace("/", "\\/"))
    return tuple(sorted(variants, key=len, reverse=True))


def redact(text: str, *keys: str, variants: tuple[str, ...] | None = None) -> str:
    """The text without the keys nor any configured secret: every path that shows or stores what an endpoint said
    (a reply, a reasoning, an error body, a failure) goes through here. A key is removed as written and as JSON
    escapes it (an endpoint may quote the request back). `variants`: those of `redaction_variants`, worked out once
    by the caller (a client: `ChatClient.redact`)."""
    if not text:
        return text
    for secret in redaction_variants(*keys) if variants is None else variants:
        text = text.replace(secret, REDACTED)
    return text


def endpoint_reason(text: str, *keys: str) -> str:
    """The endpoint's reason for refusing a request: the `message` of an OpenAI-style JSON error body
    ({"error": {"message": ...}}, or vLLM's {"message": ...}), on one line of printable characters, at most
    REASON_MAX, redacted; "" for any other body (an internal service's page is not quoted)."""
    try:
        data = jsonlimits.loads(text)
    except ValueError:  # not JSON, nested too deep, or NaN/Infinity
        return ""
    if not isinstance(data, dict):
        return ""
    error = data.get("error")
    message = error.get("message") if isinstance(error, dict) else data.get("message")
    if not isinstance(message, str):
        message = error if isinstance(error, str) else data.get("detail")
    if not isinstance(message, str):
        return ""
    line = " ".join("".join(ch if ch.isprintable() else " " for ch in message).split())
    line = redact(line, *keys)
    return line if len(line) <= REASON_MAX else line[: REASON_MAX - 1] + "…"


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


def read_bounded(response, limit: int) -> bytes:
    """The response's body, read a chunk at a time; ReplyTooLarge as soon as it passes `limit` bytes (a declared
    Content-Length over it fails before anything is read)."""
    declared = response.getheader("Content-Length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ReplyTooLarge
    chunks, size = [], 0
    while True:
        chunk = response.read(min(READ_CHUNK, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise ReplyTooLarge
        chunks.append(chunk)


class ChatClient:
    """One endpoint's client, shared by the threads of a run (each thread keeps its own connection)."""

    def __init__(
        self,
        *,
        base_url: str,
        model_id: str,
        api_key: str = "",
        timeout: float = 120,
        profile: RequestProfile | None = None,
        key_hosts: tuple[Binding, ...] | None = None,
    ):
        """`key_hosts`: the only hosts `api_key` may be sent to (None: a key given by hand, sent to `base_url`)."""
        parts = urlsplit(base_url.rstrip("/"))
        self.scheme, self.host, self.port = parts.scheme, parts.hostname or "", parts.port
        self.key_hosts = key_hosts
        self.path = parts.path
        self.model_id = model_id
        self.api_key = api_key
        self.timeout = timeout
        self.profile = profile or RequestProfile()
        self.local = threading.local()
        self.watchdog = Watchdog()
        # Worked out once, not per reply: reading the process's variables for the configured secrets cost 30-60 us a
        # reply, 5-10% of a run's CPU per item (bench/model_eval.py). The variables are set when the process starts.
        self.redacted = redaction_variants(api_key)

    def redact(self, text: str) -> str:
        """`redact` with this client's key and the secrets configured when the client was made."""
        return redact(text, variants=self.redacted)

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

    def _headers(self, content_type: str = "application/json") -> dict:
        """The request's headers; KeyNotBound when the key may not go to this client's host."""
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        if self.api_key:
            port = self.port or DEFAULT_PORTS.get(self.scheme, 0)
            if self.key_hosts is not None and not binding_allows(self.key_hosts, self.host, port):
                raise KeyNotBound(
                    f"the API key is bound to {describe_bindings(self.key_hosts)}, not to "
                    f"{describe_host(self.host, port)}: nothing was sent (MODEL_KEY_BINDINGS)"
                )
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _send(
        self, method: str, path: str, body: bytes | None, deadline: float, content_type: str = "application/json"
    ) -> tuple[int, dict, str]:
        """One HTTP exchange, done by `deadline` (time.monotonic()) or DeadlinePassed; a stale kept-alive connection
        is reopened once."""
        headers = self._headers(content_type)  # before any connection: a key not bound to this host goes nowhere
        for reuse in (True, False):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeadlinePassed
            connection = self._connection(remaining)
            fresh = connection.sock is None
            entry = self.watchdog.watch(connection, deadline)
            try:
                if fresh:
                    connection.connect()
                    # A request is one write (http.client joins headers and a bytes body); no Nagle delay on it.
                    connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    if entry[2]:  # fired while connecting: the socket it shut was not there yet
                        raise DeadlinePassed
                connection.request(method, self.path + path, body=body, headers=headers)
                response = connection.getresponse()
                text = read_bounded(response, settings.MODEL_REPLY_MAX_BYTES).decode("utf-8", errors="replace")
                if entry[2]:
                    raise DeadlinePassed  # a body cut off by the watchdog is not an answer
                if response.getheader("Connection", "").lower() == "close":
                    self._drop()
                return response.status, {k.lower(): v for k, v in response.getheaders()}, text
            except (DeadlinePassed, ReplyTooLarge):
                self._drop()
                raise
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self._drop()
                if entry[2]:
                    raise DeadlinePassed from None
                if fresh or not reuse:
                    raise
            except Exception:
                self._drop()
                if entry[2]:
                    raise DeadlinePassed from None
                raise
            finally:
                self.watchdog.unwatch(entry)
        raise AssertionError("unreachable")

    def _fail(self, kind: str, message: str, attempts: int, status: int = 0, reason: str = "") -> RequestFailed:
        return RequestFailed(kind, self.redact(message)[:MESSAGE_MAX], attempts, status, reason)

    def _exchange(
        self,
        method: str,
        path: str,
        body: bytes | None,
        *,
        timeout: float,
        retries: int,
        content_type: str = "application/json",
    ):
        """(status, headers, text) of a 2xx answer, after retries; RequestFailed otherwise."""
        attempt = 0
        while True:
            attempt += 1
            retry_after = None
            if self.watchdog.cancelled.is_set():
                raise RequestCancelled
            try:
                status, headers, text = self._send(method, path, body, time.monotonic() + timeout, content_type)
            except HostRefused as refused:
                raise self._fail(Failure.REFUSED, f"the endpoint's host is refused: {refused}", attempt) from None
            except KeyNotBound as refused:
                raise self._fail(Failure.REFUSED, str(refused), attempt) from None
            except ReplyTooLarge:
                limit = settings.MODEL_REPLY_MAX_BYTES
                raise self._fail(
                    Failure.TOO_LARGE,
                    f"the endpoint's reply is larger than MODEL_REPLY_MAX_BYTES ({limit} bytes): not read further",
                    attempt,
                ) from None
            except (TimeoutError, DeadlinePassed):
                if self.watchdog.cancelled.is_set():
                    raise RequestCancelled from None
                raise self._fail(
                    Failure.TIMEOUT,
                    f"no answer from the endpoint within {timeout:g} s (the deadline covers connecting, sending "
                    "and the whole answer)",
                    attempt,
                ) from None
            except (OSError, http.client.HTTPException):
                if self.watchdog.cancelled.is_set():
                    raise RequestCancelled from None
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
                    reason = endpoint_reason(text, self.api_key)
                    message = f"the endpoint refuses the request (HTTP {status})" + (f": {reason}" if reason else "")
                    raise self._fail(Failure.REJECTED, message, attempt, status, reason)
            if attempt > retries:
                tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                raise self._fail(kind, message + tries, attempt)
            if self.watchdog.cancelled.wait(retry_delay(attempt - 1, retry_after)):
                raise RequestCancelled

    # --- operations

    def served_models(self) -> list[str] | None:
        """GET {base}/models once, no retries: the model ids it lists, or None when it lists none (a server without
        /models still serves chat completions). RequestFailed when the endpoint is down: nothing answers, no
        answer within the deadline, 5xx or 429 (then `kind` says which)."""
        try:
            _, _, text, _ = self._exchange("GET", "/models", None, timeout=min(self.timeout, 10), retries=0)
        except RequestFailed as failed:
            if failed.kind in (Failure.UNREACHABLE, Failure.TIMEOUT, Failure.REFUSED, Failure.SERVER_ERROR):
                raise
            if failed.kind == Failure.RATE_LIMITED:
                raise
            return None  # 404 and other 4xx: no list
        try:
            data = jsonlimits.loads(text)
            listed = [entry["id"] for entry in data["data"]]
        except (ValueError, KeyError, TypeError):
            return None
        return [name for name in listed if isinstance(name, str)]

    def check_model(self, endpoint_name: str) -> list[str] | None:
        """The check before a run sends anything: the endpoint answers, and lists our model when it lists any.
        RequestFailed(UNKNOWN_MODEL) with what it serves when it does not; the ids it lists otherwise."""
        served = self.served_models()
        if served is not None and self.model_id not in served:
            shown = ", ".join(served[:20]) + (f" and {len(served) - 20} more" if len(served) > 20 else "")
            raise self._fail(
                Failure.UNKNOWN_MODEL,
                f"model {self.model_id} is not served by {endpoint_name}; it serves: {shown or 'nothing'}",
                1,
            )
        return served

    def test_connection(self, endpoint_name: str) -> str:
        """ "Test connection": reachable, our model among /models (when listed), one tiny chat request answered.
        A line that says what was checked; RequestFailed with what is wrong otherwise."""
        served = self.check_model(endpoint_name)
        messages = [{"role": "user", "content": [{"type": "text", "text": "Answer with the letter A.\nA. yes"}]}]
        answer = self.complete(messages, {"max_tokens": 1, "temperature": 0}, retries=0)
        listed = "listed by /models" if served is not None else "no /models list"
        took = f"one request answered in {answer.latency_ms} ms"
        sent = ", ".join(sorted(set(self.profile.body({"max_tokens": 1, "temperature": 0})))) or "no settings"
        return f"{endpoint_name} answers: model {self.model_id} ({listed}), {took} (sent: {sent})"

    def request_body(self, messages: list[dict], parameters: dict) -> dict:
        """The body sent for these messages and generic settings (temperature, max_tokens, reasoning_effort), as
        the endpoint's profile writes it."""
        return {"model": self.model_id, "messages": self.profile.messages(messages), **self.profile.body(parameters)}

    def complete(self, messages: list[dict], parameters: dict, retries: int | None = None) -> Completion:
        """One chat request; `parameters` are generic settings, written by the profile (`request_body`)."""
        body = json.dumps(self.request_body(messages, parameters)).encode()
        started = time.monotonic()
        retries = settings.MODEL_EVAL_RETRIES if retries is None else retries
        _, _, text, attempts = self._exchange("POST", "/chat/completions", body, timeout=self.timeout, retries=retries)
        latency_ms = int(1000 * (time.monotonic() - started))
        try:
            data = jsonlimits.loads(text)
        except ValueError as error:  # not JSON, nested deeper than jsonlimits.MAX_DEPTH, or NaN/Infinity
            why = f"not a chat completion answer (the body is not JSON): {error}"
            raise self._fail(Failure.MALFORMED, why, attempts) from None
        try:
            message = data["choices"][0]["message"]
            content = message["content"]
        except (KeyError, IndexError, TypeError):
            raise self._fail(Failure.MALFORMED, "not a chat completion answer (no choices[0].message)", attempts)
        if not isinstance(content, str):
            raise self._fail(Failure.MALFORMED, "the answer's message content is not text", attempts)
        reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        details = usage.get("completion_tokens_details")

        def count(source, name: str) -> int:
            value = source.get(name) if isinstance(source, dict) else None
            return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31 else 0

        return Completion(
            text=content,
            prompt_tokens=count(usage, "prompt_tokens"),
            completion_tokens=count(usage, "completion_tokens"),
            attempts=attempts,
            latency_ms=latency_ms,
            reasoning_text=reasoning if isinstance(reasoning, str) else "",
            reasoning_tokens=count(details, "reasoning_tokens"),
        )

    def cancel(self) -> None:
        """Cut off every request in flight and every backoff wait (from any thread): they raise RequestCancelled."""
        self.watchdog.cancel()

    def close(self) -> None:
        self._drop()
        self.watchdog.stop()

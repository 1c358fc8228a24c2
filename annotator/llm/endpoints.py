"""Model endpoints: register one (its URL checked against the host rules, its key stored encrypted or named by an
environment variable), test its connection, read its key; the request parameters every request starts from.
Drafting (annotator.drafting) and evaluation runs (evaluation.runs) both ask endpoints through these."""

from __future__ import annotations

from decimal import Decimal
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from annotator.llm.client import ChatClient, RequestFailed
from annotator.llm.hosts import HostRefused, check_endpoint_host
from annotator.llm.keys import KeyUnavailable, clean_key_variable, encrypt_key, endpoint_key, key_hosts
from annotator.llm.profiles import (
    DEFAULT_PRESET,
    IMAGE_DETAILS,
    TOKEN_FIELDS,
    clean_extra_body,
    endpoint_profile,
    preset_profile,
)
from annotator.models import ModelEndpoint
from subtlebench.errors import Conflict, Forbidden, Invalid
from subtlebench.roles import COORDINATOR, has_role


class EndpointUnusable(Exception):
    """The endpoint cannot be asked now (its key is unreadable, the connection test failed): one clear message."""


def check_coordinator(user) -> None:
    if user is not None and not has_role(user, COORDINATOR):
        raise Forbidden("Only a coordinator can register models and run evaluations.")


# --- Registering ---------------------------------------------------------------------------------------------


def check_base_url(url: str) -> str:
    """An http(s) URL with a host, without credentials, query or fragment, whose host the worker may reach
    (`hosts.check_endpoint_host`: one of MODEL_ENDPOINT_HOSTS, or with none set a host of public addresses only)."""
    url = (url or "").strip()
    if len(url) > ModelEndpoint._meta.get_field("base_url").max_length:
        raise Invalid({"base_url": ["At most 500 characters."]})
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid({"base_url": ["An http:// or https:// URL with a host, e.g. http://gpu-host:8000/v1."]})
    if parts.username or parts.password or "@" in parts.netloc:
        raise Invalid({"base_url": ["No user or password in the URL: give the API key instead."]})
    if parts.query or parts.fragment:
        raise Invalid({"base_url": ["No query or fragment: the base URL ends where /chat/completions is added."]})
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise Invalid({"base_url": ["The port is not a number from 0 to 65535."]}) from None
    try:
        check_endpoint_host(parts.hostname, port)
    except HostRefused as refused:
        raise Invalid({"base_url": [f"Refused: {refused}."]}) from None
    return url.rstrip("/")


@transaction.atomic
def endpoint_create(
    *,
    user,
    name: str,
    base_url: str,
    model_id: str,
    api_key_env: str = "",
    api_key: str = "",
    concurrency: int = 8,
    timeout_s: int = 120,
    test_connection: bool = False,
    request_preset: str = DEFAULT_PRESET,
    token_field: str | None = None,
    sends_temperature: bool | None = None,
    takes_effort: bool | None = None,
    extra_body: dict | None = None,
    image_detail: str | None = None,
    price_prompt=None,
    price_completion=None,
) -> ModelEndpoint:
    """Register a model endpoint. Its key is `api_key`, stored encrypted and never shown again, or the variable
    `api_key_env` names, which must start with MODEL_API_KEY_ENV_PREFIX and be bound by the operator to the URL's host
    (MODEL_KEY_BINDINGS, `keys`); or none. With `test_connection`
    (the form, the API and `add_model` ask for it by default) it is registered only if `endpoint_test` passes. Its
    request profile is the `request_preset`'s (annotator.llm.profiles), with any field given here in its place."""
    check_coordinator(user)
    if (api_key or "").strip() and (api_key_env or "").strip():
        raise Invalid({"api_key": ["Give the key or the name of its variable, not both."]})
    base_url = check_base_url(base_url)
    endpoint = ModelEndpoint(
        name=(name or "").strip(),
        base_url=base_url,
        model_id=(model_id or "").strip(),
        api_key_env=clean_key_variable(api_key_env, base_url),
        api_key_encrypted=encrypt_key(api_key, base_url),
        concurrency=concurrency,
        timeout_s=timeout_s,
        created_by=user if getattr(user, "pk", None) else None,
    )
    apply_profile(
        endpoint,
        request_preset=request_preset or DEFAULT_PRESET,
        token_field=token_field,
        sends_temperature=sends_temperature,
        takes_effort=takes_effort,
        extra_body=extra_body,
        image_detail=image_detail,
        price_prompt=price_prompt,
        price_completion=price_completion,
    )
    try:
        # base_url: check_base_url's rule (Django's URLValidator refuses single-label hosts such as gpu-host).
        endpoint.full_clean(exclude=["base_url"])
    except ValidationError as error:
        if "name" in error.message_dict and ModelEndpoint.objects.filter(name=endpoint.name).exists():
            raise Conflict({"name": [f"A model named {endpoint.name!r} is already registered."]}) from None
        raise Invalid(error.message_dict) from None
    if test_connection:
        if ModelEndpoint.objects.filter(name=endpoint.name).exists():
            raise Conflict({"name": [f"A model named {endpoint.name!r} is already registered."]})
        try:
            endpoint_test(endpoint, api_key=api_key or None)
        except EndpointUnusable as failed:
            raise Invalid({"base_url": [f"Test connection failed: {failed}"]}) from None
    try:
        with transaction.atomic():
            endpoint.save()
    except IntegrityError:
        raise Conflict({"name": [f"A model named {endpoint.name!r} is already registered."]}) from None
    return endpoint


PROFILE_FIELDS = (
    "token_field",
    "sends_temperature",
    "takes_effort",
    "extra_body",
    "image_detail",
    "price_prompt",
    "price_completion",
)


def apply_profile(endpoint: ModelEndpoint, *, request_preset: str | None = None, **fields) -> None:
    """Set the endpoint's request profile: the preset's fields (when one is named), then each field given (None:
    kept). Invalid names a field that is wrong."""
    if request_preset is not None:
        preset = preset_profile(request_preset)
        endpoint.request_preset = request_preset
        endpoint.token_field, endpoint.sends_temperature = preset.token_field, preset.temperature
        endpoint.takes_effort, endpoint.extra_body = preset.effort, dict(preset.extra_body)
        endpoint.image_detail = preset.image_detail
    for name, value in fields.items():
        if name not in PROFILE_FIELDS:
            raise TypeError(name)
        if value is None and name not in ("price_prompt", "price_completion"):
            continue
        if name == "token_field" and value not in TOKEN_FIELDS:
            raise Invalid({"token_field": [f"One of {', '.join(repr(f) for f in TOKEN_FIELDS)} (empty: none)."]})
        if name == "image_detail" and value not in IMAGE_DETAILS:
            raise Invalid({"image_detail": ["Empty (not sent), low, high or auto."]})
        if name == "extra_body":
            value = clean_extra_body(value)
        if name in ("price_prompt", "price_completion") and value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)) or not 0 <= value < 10**6:
                raise Invalid({name: ["A price per million tokens: a number from 0, under 1000000."]})
            value = Decimal(str(value)).quantize(Decimal("0.000001"))
        setattr(endpoint, name, value)


@transaction.atomic
def endpoint_profile_update(*, user, endpoint: ModelEndpoint, request_preset: str | None = None, **fields):
    """Edit an endpoint's request profile (a preset, then any field given); runs started later use it, and a paused
    run uses it when it resumes."""
    check_coordinator(user)
    endpoint = ModelEndpoint.objects.select_for_update().get(pk=endpoint.pk)
    apply_profile(endpoint, request_preset=request_preset, **fields)
    try:
        endpoint.full_clean(exclude=["base_url"])
    except ValidationError as error:
        raise Invalid(error.message_dict) from None
    endpoint.save(update_fields=["request_preset", *PROFILE_FIELDS])
    return endpoint


def endpoint_client(
    endpoint: ModelEndpoint, api_key: str, *, timeout: float | None = None, client_class: type[ChatClient] = ChatClient
) -> ChatClient:
    """The client of an endpoint: its URL, model, key, deadline and request profile. The key goes only to the hosts
    the endpoint's key is bound to (`keys.key_hosts`), checked again by the client at every request. `client_class`:
    another client of the same rules (an image-editing endpoint's, annotator.llm.edits)."""
    return client_class(
        base_url=endpoint.base_url,
        model_id=endpoint.model_id,
        api_key=api_key,
        timeout=endpoint.timeout_s if timeout is None else timeout,
        profile=endpoint_profile(endpoint),
        key_hosts=key_hosts(endpoint),
    )


def endpoint_test(endpoint: ModelEndpoint, *, api_key: str | None = None) -> str:
    """ "Test connection": the endpoint answers, lists the model id among /models (when it lists any) and answers
    one tiny request written by its profile. A line that says so; EndpointUnusable with what is wrong (a refused
    request: its status and the endpoint's reason)."""
    key = endpoint_api_key(endpoint) if api_key is None else api_key
    client = endpoint_client(endpoint, key)
    try:
        return client.test_connection(endpoint.name or endpoint.base_url)
    except RequestFailed as failed:
        raise EndpointUnusable(failed.message) from None
    finally:
        client.close()


def endpoint_api_key(endpoint: ModelEndpoint) -> str:
    """The key now: decrypted, or read from the endpoint's prefixed variable ("" when it has none)."""
    try:
        return endpoint_key(endpoint)
    except KeyUnavailable as error:
        raise EndpointUnusable(str(error)) from None


def request_parameters() -> dict:
    parameters = {"temperature": settings.MODEL_EVAL_TEMPERATURE}
    if settings.MODEL_EVAL_MAX_TOKENS:
        parameters["max_tokens"] = settings.MODEL_EVAL_MAX_TOKENS
    return parameters

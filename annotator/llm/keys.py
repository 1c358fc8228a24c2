"""Model endpoints' API keys: stored encrypted with the operator's MODEL_API_KEY_ENCRYPTION_KEY, or read from an
environment variable whose name starts with MODEL_API_KEY_ENV_PREFIX and that the operator bound to the endpoint's
host (MODEL_KEY_BINDINGS). No other variable of the process (SECRET_KEY, DATABASE_URL, ...) can be named, and a key
goes only where the operator said: a coordinator picks among the keys bound to a host, never where a key is sent.
A stored key is encrypted together with the host it was given for, and is used for that host only."""

from __future__ import annotations

import os

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from subtlebench.errors import Invalid
from subtlebench.keybindings import Binding, binding_allows, describe_bindings, describe_host, url_host

KEY_MAX = 1000


class KeyUnavailable(Exception):
    """The endpoint's key cannot be used now (a variable outside the prefix, unset, or undecryptable)."""


def _cipher() -> MultiFernet | None:
    keys = settings.MODEL_API_KEY_ENCRYPTION_KEY
    return MultiFernet([Fernet(key) for key in keys]) if keys else None


def key_variable_allowed(name: str) -> bool:
    prefix = settings.MODEL_API_KEY_ENV_PREFIX
    return name.startswith(prefix) and len(name) > len(prefix)


def bound_hosts(name: str) -> tuple[Binding, ...]:
    """The hosts the operator bound the variable to (MODEL_KEY_BINDINGS); none for a variable not bound."""
    return tuple(settings.MODEL_KEY_BINDINGS.get(name, ()))


def bound_variables(base_url: str | None = None) -> list[str]:
    """The key variables the operator bound, sorted; with `base_url`, those bound to its host."""
    names = sorted(name for name in settings.MODEL_KEY_BINDINGS if key_variable_allowed(name))
    if base_url is None:
        return names
    _, host, port = url_host(base_url)
    return [name for name in names if binding_allows(bound_hosts(name), host, port)]


def binding_problem(name: str, base_url: str) -> str:
    """Why the variable's key may not go to the URL's host ("" when it may): the operator's binding, in words."""
    _, host, port = url_host(base_url)
    hosts = bound_hosts(name)
    if not hosts:
        return (
            f"the operator has not bound {name} to any host: add {name}=<host> to MODEL_KEY_BINDINGS (the operator's "
            "setting) to let its key be sent there"
        )
    if not binding_allows(hosts, host, port):
        return (
            f"{name} is bound to {describe_bindings(hosts)} (MODEL_KEY_BINDINGS), not to {describe_host(host, port)}: "
            f"its key goes only to the hosts the operator bound it to"
        )
    return ""


def clean_key_variable(name: str, base_url: str) -> str:
    """The variable's name, if it starts with the operator's prefix (and is more than the prefix) and the operator
    bound it to the host of `base_url`; Invalid on api_key_env otherwise."""
    name = (name or "").strip()
    if not name:
        return name
    if not key_variable_allowed(name):
        prefix = settings.MODEL_API_KEY_ENV_PREFIX
        raise Invalid(
            {
                "api_key_env": [
                    f"The key's variable must be named {prefix}<something> (MODEL_API_KEY_ENV_PREFIX): only the "
                    "variables the operator set for model keys can be sent; or store the key itself instead."
                ]
            }
        )
    problem = binding_problem(name, base_url)
    if problem:
        usable = ", ".join(bound_variables(base_url)) or "none"
        raise Invalid(
            {"api_key_env": [f"Refused: {problem}. Variables bound to this host: {usable}; or store a key instead."]}
        )
    return name


def key_origin(base_url: str) -> str:
    """The host a stored key is given for, as it is sealed with the key: scheme://host:port."""
    scheme, host, port = url_host(base_url)
    return f"{scheme}://{describe_host(host, port)}"


def encrypt_key(key: str, base_url: str) -> str:
    """The key, encrypted for storage together with the host of `base_url` (the only host it will be sent to);
    refused when the operator has set no encryption key, or it is not a key."""
    key = (key or "").strip()
    if not key:
        return ""
    if len(key) > KEY_MAX or any(ch.isspace() or not ch.isprintable() for ch in key):
        raise Invalid({"api_key": [f"An API key is one word of printable characters, at most {KEY_MAX}."]})
    cipher = _cipher()
    if cipher is None:
        raise Invalid(
            {
                "api_key": [
                    "This server cannot store API keys: the operator has not set MODEL_API_KEY_ENCRYPTION_KEY. "
                    f"Name a variable starting with {settings.MODEL_API_KEY_ENV_PREFIX} instead."
                ]
            }
        )
    # A key has no whitespace: the line break cleanly parts the host from the key.
    return cipher.encrypt(f"{key_origin(base_url)}\n{key}".encode()).decode()


def _stored_key(endpoint) -> tuple[str, str]:
    """(host it was given for, key) of the endpoint's stored key; a key stored without its host is taken as
    given for the endpoint's host now."""
    cipher = _cipher()
    if cipher is None:
        raise KeyUnavailable(
            f"The stored API key of model {endpoint.name} cannot be read: MODEL_API_KEY_ENCRYPTION_KEY is not set "
            "where this runs."
        )
    try:
        plain = cipher.decrypt(endpoint.api_key_encrypted.encode()).decode()
    except InvalidToken:
        raise KeyUnavailable(
            f"The stored API key of model {endpoint.name} cannot be read with MODEL_API_KEY_ENCRYPTION_KEY "
            "(was the key replaced rather than rotated?): register the key again."
        ) from None
    origin, newline, key = plain.rpartition("\n")
    return (origin if newline else key_origin(endpoint.base_url)), key


def key_hosts(endpoint) -> tuple[Binding, ...]:
    """The hosts the endpoint's key may be sent to: the stored key's own host, or the hosts its variable is bound
    to; none when it cannot tell (a request with a key then goes nowhere)."""
    if endpoint.api_key_encrypted:
        try:
            origin, _ = _stored_key(endpoint)
        except KeyUnavailable:
            return ()
        _, host, port = url_host(origin)
        return ((host, port),)
    if endpoint.api_key_env and key_variable_allowed(endpoint.api_key_env):
        return bound_hosts(endpoint.api_key_env)
    return ()


def key_problem(endpoint) -> str:
    """Why the endpoint's key would be refused now, from its settings alone (no secret read); "" when none."""
    name = endpoint.api_key_env
    if endpoint.api_key_encrypted or not name:
        return ""
    if not key_variable_allowed(name):
        return f"the variable does not start with MODEL_API_KEY_ENV_PREFIX ({settings.MODEL_API_KEY_ENV_PREFIX})"
    return binding_problem(name, endpoint.base_url)


def endpoint_key(endpoint) -> str:
    """The endpoint's key now ("" when it has none); KeyUnavailable says why it cannot be used: a stored key given
    for another host, a variable outside the prefix, not bound to the endpoint's host, or unset."""
    if endpoint.api_key_encrypted:
        origin, key = _stored_key(endpoint)
        if origin != key_origin(endpoint.base_url):
            raise KeyUnavailable(
                f"The stored API key of model {endpoint.name} was given for {origin}, and the model now points at "
                f"{key_origin(endpoint.base_url)}: it is not sent there. Register the key again for the new host. "
                "Nothing was sent."
            )
        return key
    name = endpoint.api_key_env
    if not name:
        return ""
    if not key_variable_allowed(name):
        raise KeyUnavailable(
            f"Model {endpoint.name} names the variable {name} for its API key, which does not start with "
            f"MODEL_API_KEY_ENV_PREFIX ({settings.MODEL_API_KEY_ENV_PREFIX}): it is not sent. Register the model "
            "again with a key variable of that prefix, or a stored key. Nothing was sent."
        )
    problem = binding_problem(name, endpoint.base_url)
    if problem:
        raise KeyUnavailable(
            f"The API key of model {endpoint.name} is not sent: {problem}; or register the model again with a "
            "variable bound to its host. Nothing was sent."
        )
    key = os.environ.get(name)
    if not key:
        raise KeyUnavailable(
            f"The API key variable {name} of model {endpoint.name} is not set in the worker's environment: set it "
            "where the worker runs, or register the model without a key."
        )
    return key

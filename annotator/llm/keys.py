"""Model endpoints' API keys: stored encrypted with the operator's MODEL_API_KEY_ENCRYPTION_KEY, or read from an
environment variable whose name starts with MODEL_API_KEY_ENV_PREFIX. No other variable of the process (SECRET_KEY,
DATABASE_URL, ...) can be named: a coordinator chooses where a key is sent, the operator chooses which keys exist."""

from __future__ import annotations

import os

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from subtlebench.errors import Invalid

KEY_MAX = 1000


class KeyUnavailable(Exception):
    """The endpoint's key cannot be used now (a variable outside the prefix, unset, or undecryptable)."""


def _cipher() -> MultiFernet | None:
    keys = settings.MODEL_API_KEY_ENCRYPTION_KEY
    return MultiFernet([Fernet(key) for key in keys]) if keys else None


def key_variable_allowed(name: str) -> bool:
    prefix = settings.MODEL_API_KEY_ENV_PREFIX
    return name.startswith(prefix) and len(name) > len(prefix)


def clean_key_variable(name: str) -> str:
    """The variable's name, if it starts with the operator's prefix (and is more than the prefix)."""
    name = (name or "").strip()
    if name and not key_variable_allowed(name):
        prefix = settings.MODEL_API_KEY_ENV_PREFIX
        raise Invalid(
            {
                "api_key_env": [
                    f"The key's variable must be named {prefix}<something> (MODEL_API_KEY_ENV_PREFIX): only the "
                    "variables the operator set for model keys can be sent; or store the key itself instead."
                ]
            }
        )
    return name


def encrypt_key(key: str) -> str:
    """The key, encrypted for storage; refused when the operator has set no encryption key, or it is not a key."""
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
    return cipher.encrypt(key.encode()).decode()


def endpoint_key(endpoint) -> str:
    """The endpoint's key now ("" when it has none); KeyUnavailable says why it cannot be used."""
    if endpoint.api_key_encrypted:
        cipher = _cipher()
        if cipher is None:
            raise KeyUnavailable(
                f"The stored API key of model {endpoint.name} cannot be read: MODEL_API_KEY_ENCRYPTION_KEY is not set "
                "where this runs."
            )
        try:
            return cipher.decrypt(endpoint.api_key_encrypted.encode()).decode()
        except InvalidToken:
            raise KeyUnavailable(
                f"The stored API key of model {endpoint.name} cannot be read with MODEL_API_KEY_ENCRYPTION_KEY "
                "(was the key replaced rather than rotated?): register the key again."
            ) from None
    name = endpoint.api_key_env
    if not name:
        return ""
    if not key_variable_allowed(name):
        raise KeyUnavailable(
            f"Model {endpoint.name} names the variable {name} for its API key, which does not start with "
            f"MODEL_API_KEY_ENV_PREFIX ({settings.MODEL_API_KEY_ENV_PREFIX}): it is not sent. Register the model "
            "again with a key variable of that prefix, or a stored key. Nothing was sent."
        )
    key = os.environ.get(name)
    if not key:
        raise KeyUnavailable(
            f"The API key variable {name} of model {endpoint.name} is not set in the worker's environment: set it "
            "where the worker runs, or register the model without a key."
        )
    return key

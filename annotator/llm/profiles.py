"""An endpoint's request profile: how a request to it is written. Servers differ in what they accept: OpenAI's
reasoning models refuse `max_tokens` (they take `max_completion_tokens`) and any temperature but their default, vLLM
and SGLang take `max_tokens` and a temperature. The profile says which token-limit field the endpoint takes, whether
it takes a temperature, the extra body fields it is sent (from EXTRA_FIELDS only), the detail of its images and,
optionally, its prices. Every request (the connection test, runs, the judge, extraction, drafting, background
answers) is built by `RequestProfile.body` from the same generic settings: temperature, max_tokens, reasoning_effort.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from decimal import Decimal

from subtlebench.errors import Invalid

TOKEN_FIELDS = ("max_tokens", "max_completion_tokens", "")
IMAGE_DETAILS = ("", "low", "high", "auto")
EFFORTS = ("minimal", "low", "medium", "high")
TOKENS_MAX = 65536


def _effort(value):
    return value if value in EFFORTS else None


def _top_p(value):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 < value <= 1
    return float(value) if ok else None


def _seed(value):
    ok = isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31
    return value if ok else None


def _verbosity(value):
    return value if value in ("low", "medium", "high") else None


# The extra body fields an endpoint may be sent, each with its check (None: refused) and what it takes.
EXTRA_FIELDS = {
    "reasoning_effort": (_effort, "one of " + ", ".join(EFFORTS)),
    "top_p": (_top_p, "a number above 0, at most 1"),
    "seed": (_seed, "a whole number (32 bits)"),
    "verbosity": (_verbosity, "low, medium or high"),
}


@dataclass(frozen=True)
class RequestProfile:
    token_field: str = "max_tokens"
    temperature: bool = True  # False: the endpoint takes only its default temperature (none is sent)
    effort: bool = False  # takes a reasoning effort (a run may set one)
    extra_body: dict = field(default_factory=dict)
    image_detail: str = ""
    price_prompt: Decimal | None = None  # per million tokens
    price_completion: Decimal | None = None

    def body(self, parameters: dict) -> dict:
        """The request body's fields for these generic settings: the token limit under the profile's field (or
        none), the temperature only where it takes one, the profile's extra fields, then the run's effort."""
        body = dict(self.extra_body)
        limit = parameters.get("max_tokens")
        if limit and self.token_field:
            body[self.token_field] = limit
        if self.temperature and parameters.get("temperature") is not None:
            body["temperature"] = parameters["temperature"]
        if parameters.get("reasoning_effort") and self.effort:
            body["reasoning_effort"] = parameters["reasoning_effort"]
        return body

    def messages(self, messages: list[dict]) -> list[dict]:
        """The messages with the profile's image detail on every image (the same objects when it has none)."""
        if not self.image_detail:
            return messages
        shown = []
        for message in messages:
            content = message.get("content")
            if isinstance(content, list):
                content = [
                    {**part, "image_url": {**part["image_url"], "detail": self.image_detail}}
                    if part.get("type") == "image_url" and isinstance(part.get("image_url"), dict)
                    else part
                    for part in content
                ]
                message = {**message, "content": content}
            shown.append(message)
        return shown

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """What these tokens cost at the profile's prices (None without prices)."""
        if self.price_prompt is None and self.price_completion is None:
            return None
        prompt = Decimal(prompt_tokens) * (self.price_prompt or 0)
        completion = Decimal(completion_tokens) * (self.price_completion or 0)
        return float((prompt + completion) / 1_000_000)

    def as_dict(self) -> dict:
        stored = asdict(self)
        for name in ("price_prompt", "price_completion"):
            stored[name] = None if stored[name] is None else str(stored[name])
        return stored


# Presets fill the fields when an endpoint is registered; each field stays editable.
PRESETS = {
    "compatible": (
        "OpenAI-compatible (max_tokens, temperature)",
        RequestProfile(),
    ),
    "openai_chat": (
        "OpenAI chat models (max_completion_tokens, temperature)",
        RequestProfile(token_field="max_completion_tokens"),
    ),
    "openai_reasoning": (
        "OpenAI reasoning models (max_completion_tokens, no temperature, reasoning effort)",
        RequestProfile(token_field="max_completion_tokens", temperature=False, effort=True),
    ),
    "vllm": (
        "vLLM / SGLang (max_tokens, temperature, seed)",
        RequestProfile(),
    ),
    "gateway": (
        "An OpenAI-compatible gateway (max_tokens, temperature, image detail auto)",
        RequestProfile(image_detail="auto"),
    ),
}
PRESET_CHOICES = [(name, label) for name, (label, _) in PRESETS.items()]
DEFAULT_PRESET = "compatible"  # what every request was before profiles: max_tokens and a temperature


def preset_profile(name: str) -> RequestProfile:
    if name not in PRESETS:
        raise Invalid({"request_preset": [f"{name!r} is not a preset: one of {', '.join(PRESETS)}."]})
    return PRESETS[name][1]


def clean_extra_body(raw) -> dict:
    """The extra body fields, each from EXTRA_FIELDS and checked; Invalid names the field that is not."""
    if raw in (None, ""):
        return {}
    if not isinstance(raw, dict):
        raise Invalid({"extra_body": ["An object of fields: " + ", ".join(EXTRA_FIELDS) + "."]})
    cleaned = {}
    for name, value in raw.items():
        if name not in EXTRA_FIELDS:
            raise Invalid(
                {"extra_body": [f"{name!r} is not a field the app sends; allowed: {', '.join(EXTRA_FIELDS)}."]}
            )
        check, takes = EXTRA_FIELDS[name]
        checked = check(value)
        if checked is None:
            raise Invalid({"extra_body": [f"{name}: {takes}."]})
        cleaned[name] = checked
    return cleaned


def endpoint_profile(endpoint) -> RequestProfile:
    """The profile an endpoint's fields describe."""
    return RequestProfile(
        token_field=endpoint.token_field,
        temperature=endpoint.sends_temperature,
        effort=endpoint.takes_effort,
        extra_body=dict(endpoint.extra_body or {}),
        image_detail=endpoint.image_detail,
        price_prompt=endpoint.price_prompt,
        price_completion=endpoint.price_completion,
    )


def clean_request(
    profile: RequestProfile,
    endpoint_name: str,
    *,
    temperature=None,
    max_tokens=None,
    effort=None,
    default_temperature=None,
    default_max_tokens=None,
    prefix: str = "",
) -> dict:
    """A run's settings for an endpoint (the answering model, the judge or the extractor), checked against its
    profile: the generic settings stored with the run. A setting given that the endpoint does not take is an Invalid
    naming the field; a default it does not take is left out. `prefix` names the fields ("judge_")."""
    request = {}
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2:
            raise Invalid({f"{prefix}temperature": ["A number from 0 to 2."]})
        if not profile.temperature and temperature != 1:
            raise Invalid(
                {
                    f"{prefix}temperature": [
                        f"Model {endpoint_name} takes no temperature (its profile sends only its default): leave "
                        "the temperature out."
                    ]
                }
            )
        if profile.temperature:
            request["temperature"] = float(temperature)
    elif profile.temperature and default_temperature is not None:
        request["temperature"] = float(default_temperature)
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 0 <= max_tokens <= TOKENS_MAX:
            raise Invalid({f"{prefix}max_tokens": [f"A whole number from 0 (not sent) to {TOKENS_MAX}."]})
        if max_tokens and not profile.token_field:
            raise Invalid(
                {f"{prefix}max_tokens": [f"Model {endpoint_name} takes no token limit (its profile sends none)."]}
            )
    else:
        max_tokens = default_max_tokens
    if max_tokens and profile.token_field:
        request["max_tokens"] = max_tokens
    if effort:
        if effort not in EFFORTS:
            raise Invalid({f"{prefix}effort": [f"One of {', '.join(EFFORTS)}."]})
        if not profile.effort:
            raise Invalid(
                {
                    f"{prefix}effort": [
                        f"Model {endpoint_name} takes no reasoning effort (its profile is not a reasoning model's)."
                    ]
                }
            )
        request["reasoning_effort"] = effort
    return request

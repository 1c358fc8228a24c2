"""A run's settings: its prompting strategy and the exact prompt texts it sends, the request settings (temperature,
token limit, reasoning effort) checked against its endpoint's request profile, and the optional LLM extraction pass
(an endpoint, its texts and its own request settings). Checked once, when the run starts, and stored with it: a run
keeps the texts and settings it used whatever the files say later."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from annotator.llm.profiles import RequestProfile, clean_request, endpoint_profile
from annotator.llm.protocol import configured_prompt
from annotator.models import ModelEndpoint
from evaluation.runs.strategies import DEFAULT_STRATEGY, STRATEGIES, StrategyError, extraction_prompt, run_prompt
from subtlebench.errors import Invalid

TEMPERATURE_MAX = 2.0
MAX_TOKENS_MAX = 65536
# The extractor reads one letter: no sampling, a short reply (a reasoning model gets no limit by default: its
# reasoning counts against it).
EXTRACTION_TEMPERATURE = 0
EXTRACTION_MAX_TOKENS = 16


@dataclass
class RunSettings:
    strategy: str
    prompt: dict
    request: dict
    extraction_endpoint: ModelEndpoint | None
    extraction_prompt: dict
    extraction_request: dict


def clean_run_settings(
    *,
    strategy: str | None = None,
    prompt: dict | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    effort: str | None = None,
    extraction_endpoint: ModelEndpoint | None = None,
    extraction_texts: dict | None = None,
    extraction_max_tokens: int | None = None,
    extraction_effort: str | None = None,
    endpoint: ModelEndpoint | None = None,
) -> RunSettings:
    """The settings as stored: None or blank means the default (MODEL_EVAL_TEMPERATURE, MODEL_EVAL_MAX_TOKENS, the
    strategy's texts; for `standard`, MODEL_EVAL_PROMPT_FILE's where set). Invalid names the field that is wrong."""
    strategy = strategy or DEFAULT_STRATEGY
    if strategy not in STRATEGIES:
        raise Invalid({"strategy": [f"{strategy!r} is not a strategy: one of {', '.join(STRATEGIES)}."]})
    if prompt is not None and not isinstance(prompt, dict):
        raise Invalid({"prompt": ['An object of texts, e.g. {"system": ..., "user": ...}.']})
    try:
        texts = run_prompt(strategy, prompt, standard_default=_deployment_prompt())
    except StrategyError as error:
        raise Invalid({"prompt": [str(error)]}) from None
    if isinstance(temperature, bool) or (
        temperature is not None and (not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2)
    ):
        raise Invalid({"temperature": [f"A number from 0 to {TEMPERATURE_MAX:g}."]})
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 0 <= max_tokens <= MAX_TOKENS_MAX
    ):
        raise Invalid({"max_tokens": [f"A whole number from 0 (not sent) to {MAX_TOKENS_MAX}."]})
    request = request_for(
        endpoint,
        temperature=temperature,
        max_tokens=max_tokens,
        effort=effort,
        default_temperature=settings.MODEL_EVAL_TEMPERATURE,
        default_max_tokens=settings.MODEL_EVAL_MAX_TOKENS,
    )
    extraction_request = {}
    if extraction_endpoint is not None:
        profile = endpoint_profile(extraction_endpoint)
        extraction_request = clean_request(
            profile,
            extraction_endpoint.name,
            max_tokens=extraction_max_tokens,
            effort=extraction_effort,
            default_temperature=EXTRACTION_TEMPERATURE,
            default_max_tokens=0 if profile.effort else EXTRACTION_MAX_TOKENS,
            prefix="extraction_",
        )
    elif extraction_max_tokens is not None or extraction_effort:
        raise Invalid({"extraction_endpoint": ["Name the extraction endpoint its settings are for."]})
    try:
        extraction = extraction_prompt(extraction_texts) if extraction_endpoint is not None else {}
    except StrategyError as error:
        raise Invalid({"extraction_prompt": [str(error)]}) from None
    return RunSettings(strategy, texts, request, extraction_endpoint, extraction, extraction_request)


def request_for(endpoint: ModelEndpoint | None, **given) -> dict:
    """The generic request settings for the endpoint, checked against its profile (`profiles.clean_request`); with
    no endpoint, as a profile of max_tokens and a temperature takes them."""
    if endpoint is None:
        return clean_request(RequestProfile(), "", **given)
    return clean_request(endpoint_profile(endpoint), endpoint.name, **given)


def _deployment_prompt() -> dict | None:
    if not getattr(settings, "MODEL_EVAL_PROMPT_FILE", ""):
        return None
    return configured_prompt().as_dict()

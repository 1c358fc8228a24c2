"""A run's settings (issue 28): its prompting strategy and the exact prompt texts it sends, the request parameters
(temperature, max tokens), and the optional LLM extraction pass (an endpoint and its texts). Checked once, when the
run starts, and stored with it: a run keeps the texts it used whatever the files say later."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from annotator.llm.protocol import configured_prompt
from annotator.models import ModelEndpoint
from evaluation.runs.strategies import DEFAULT_STRATEGY, STRATEGIES, StrategyError, extraction_prompt, run_prompt
from subtlebench.errors import Invalid

TEMPERATURE_MAX = 2.0
MAX_TOKENS_MAX = 65536


@dataclass
class RunSettings:
    strategy: str
    prompt: dict
    request: dict
    extraction_endpoint: ModelEndpoint | None
    extraction_prompt: dict


def clean_run_settings(
    *,
    strategy: str | None = None,
    prompt: dict | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    extraction_endpoint: ModelEndpoint | None = None,
    extraction_texts: dict | None = None,
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
    if temperature is None:
        temperature = settings.MODEL_EVAL_TEMPERATURE
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2:
        raise Invalid({"temperature": [f"A number from 0 to {TEMPERATURE_MAX:g}."]})
    request = {"temperature": float(temperature)}
    if max_tokens is None:
        max_tokens = settings.MODEL_EVAL_MAX_TOKENS
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 0 <= max_tokens <= MAX_TOKENS_MAX:
        raise Invalid({"max_tokens": [f"A whole number from 0 (not sent) to {MAX_TOKENS_MAX}."]})
    if max_tokens:
        request["max_tokens"] = max_tokens
    try:
        extraction = extraction_prompt(extraction_texts) if extraction_endpoint is not None else {}
    except StrategyError as error:
        raise Invalid({"extraction_prompt": [str(error)]}) from None
    return RunSettings(strategy, texts, request, extraction_endpoint, extraction)


def _deployment_prompt() -> dict | None:
    if not getattr(settings, "MODEL_EVAL_PROMPT_FILE", ""):
        return None
    return configured_prompt().as_dict()

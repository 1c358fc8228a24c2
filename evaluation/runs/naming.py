"""A model run's name: what the run is, so that two runs read apart in every table, legend, download and API answer.

A name is the model, then the strategy, the task, the prompt (8 hex digits of the sha256 of the canonical JSON of the
texts the run stored), and the request settings that differ from the deployment's defaults (temperature, token limit,
reasoning effort where the parameters hold one): "gpt-4o · grid · multiple choice · prompt 1a2b3c4d · temperature 0".
A coordinator's label leads it: "baseline — gpt-4o · standard · ...". An imported file sent no prompt and no request
that the app knows of: its name is the model, the strategy and the task.

Two runs with the same settings have the same name. Where runs are shown together (`run_names`), each run whose name
another shares gets its number, " (run 7)", and so does any name equal to one of those; a lone run (its page, the API)
reads its bare name, its number beside it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable

from django.conf import settings

from evaluation.runs.strategies import STRATEGIES

SEPARATOR = " · "
LABEL_SEPARATOR = " — "
PROMPT_DIGITS = 8


def prompt_hash(prompt: dict | None) -> str:
    """8 hex digits of the sha256 of the prompt texts as canonical JSON (keys sorted, no spaces, UTF-8); "" when the
    run stored none."""
    if not prompt:
        return ""
    canonical = json.dumps(prompt, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:PROMPT_DIGITS]


def task_words(run) -> str:
    if run.task == "description":
        return "description" + (f" judged by {run.judge.name}" if run.judge_id else "")
    return "multiple choice, circular" if run.circular else "multiple choice"


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def settings_words(parameters: dict | None) -> list[str]:
    """The stored request settings that differ from the defaults (MODEL_EVAL_TEMPERATURE, MODEL_EVAL_MAX_TOKENS; no
    reasoning effort by default). A run without stored request settings (an imported file) shows none."""
    request = (parameters or {}).get("request")
    if not isinstance(request, dict):
        return []
    words = []
    temperature = request.get("temperature")
    if temperature is not None and float(temperature) != float(settings.MODEL_EVAL_TEMPERATURE):
        words.append(f"temperature {_number(temperature)}")
    # The token limit under the field the endpoint's request profile sends it as.
    max_tokens = request.get("max_tokens") or request.get("max_completion_tokens") or 0
    if max_tokens != (settings.MODEL_EVAL_MAX_TOKENS or 0):
        words.append(f"max {max_tokens} tokens" if max_tokens else "no token limit")
    effort = request.get("reasoning_effort")
    if effort:
        words.append(f"reasoning {effort}")
    return words


def run_description(run) -> str:
    """What the run is, without its label: model, strategy, task, prompt and the settings off their defaults."""
    strategy = run.strategy if run.strategy in STRATEGIES else (run.strategy or "standard")
    parts = [run.model_name, strategy, task_words(run)]
    digest = prompt_hash(run.prompt)
    if digest:
        parts.append(f"prompt {digest}")
    parts += settings_words(run.parameters)
    return SEPARATOR.join(parts)


def run_name(run) -> str:
    """The run's name: its label, if given, leading its description."""
    description = run_description(run)
    return f"{run.label}{LABEL_SEPARATOR}{description}" if run.label else description


def run_names(runs: Iterable) -> dict[int, str]:
    """A name per run, by run id, unique among these runs: a name two runs share gets each run's number."""
    runs = list(runs)
    names = {run.pk: run_name(run) for run in runs}
    counts = Counter(names.values())
    named = {pk: name if counts[name] == 1 else f"{name} (run {pk})" for pk, name in names.items()}
    if len(set(named.values())) < len(named):  # a label that reads like another run's numbered name
        named = {pk: f"{name} (run {pk})" for pk, name in names.items()}
    return named

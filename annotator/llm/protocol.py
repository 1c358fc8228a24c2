"""The prompt this deployment sends: ours (`benchmark.protocol`), or the texts of MODEL_EVAL_PROMPT_FILE.

The protocol itself (option shuffle, letters, message layout, answer parsing) is `benchmark.protocol`.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from benchmark.protocol import DEFAULT_PROMPT, Prompt, PromptFileError, load_prompt


def configured_prompt() -> Prompt:
    """Our prompt texts, or those of MODEL_EVAL_PROMPT_FILE (JSON: {"system": ..., "user": ...})."""
    path = getattr(settings, "MODEL_EVAL_PROMPT_FILE", "")
    if not path:
        return DEFAULT_PROMPT
    try:
        return load_prompt(str(path))
    except PromptFileError as error:
        raise ImproperlyConfigured(f"MODEL_EVAL_PROMPT_FILE {error}") from error

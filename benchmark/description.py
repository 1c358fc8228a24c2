"""The description (free-form) task and its LLM judge, as facts carried over from krafton-ai/VLM-SubtleBench:

- only the items with a caption (`has_caption` true and a `caption` text) are asked;
- one system message, then one user message whose content is one text part (the instruction) followed by the two
  images as `image_url` parts, first then second (the free-form evaluator's order: text first, unlike the
  multiple-choice one), each a base64 `data:image/png;base64,` URL of the raw file bytes;
- its results file (`_finalize_ff_results`) holds `model`, `prompt_type`, `total_pairs`, `evaluated_pairs` and
  `results`: per pair `base_name` (the item id), `caption` (the human's), `differences` and `content` (the reply).

The official code stops at the descriptions; the paper scores them with an LLM judge that decides whether a
description matches the human caption. The judge here is another registered endpoint asked one text-only question
per item (our prompt, stored with the run: {caption} and {description} are filled in), whose reply ends with
"### Verdict" and "yes" or "no" (`parse_verdict`). The prompt texts are ours.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

# Paragraphs are single lines (the texts are shown in a textarea and sent as they are).
DESCRIPTION_SYSTEM = (
    "You compare two nearly identical images and describe how they differ. Look closely: the difference may be "
    "small (a colour, a position, a count, an expression, the image quality, the camera's position). Describe the "
    "second image relative to the first, in one or two plain sentences. Name the object that changed and how it "
    "changed; say nothing about what stayed the same."
)

DESCRIPTION_USER = "What is the difference between the first image and the second image?"

JUDGE_SYSTEM = (
    "You grade descriptions of the difference between two images against a reference written by a person who saw "
    "both images. You do not see the images: compare the texts only.\n\n"
    "A description matches when it names the same change as the reference (the same object or region, and the same "
    "kind of change, in the same direction: what the second image shows relative to the first). Extra details that "
    "do not contradict the reference are fine. It does not match when it names another change, gets the direction "
    'wrong, or is too vague to tell (e.g. "the images are slightly different").\n\n'
    "Reply in exactly this format:\n\n"
    "### Reasoning\n[one or two sentences]\n\n"
    "### Verdict\n[yes or no]"
)

JUDGE_USER = """Reference (the person's caption):
{caption}

Description to grade:
{description}

Does the description match the reference?"""

PLACEHOLDERS = ("{caption}", "{description}")


@dataclass(frozen=True)
class JudgePrompt:
    system: str
    user: str

    def as_dict(self) -> dict:
        return {"system": self.system, "user": self.user}


DEFAULT_JUDGE_PROMPT = JudgePrompt(system=JUDGE_SYSTEM, user=JUDGE_USER)
DEFAULT_DESCRIPTION_PROMPT = {"system": DESCRIPTION_SYSTEM, "user": DESCRIPTION_USER}


class JudgePromptError(ValueError):
    """A judge prompt that cannot be used; the message says which field and what is wrong."""


def judge_prompt_of(data: dict | None) -> JudgePrompt:
    """The judge prompt of {"system": ..., "user": ...} (a missing or empty one: ours); the user template must hold
    {caption} and {description}."""
    if data in (None, ""):
        return DEFAULT_JUDGE_PROMPT
    if not isinstance(data, dict) or set(data) - {"system", "user"}:
        raise JudgePromptError("judge_prompt: an object with system and user texts only.")
    system = data.get("system") or JUDGE_SYSTEM
    user = data.get("user") or JUDGE_USER
    if not isinstance(system, str) or not isinstance(user, str):
        raise JudgePromptError("judge_prompt: system and user must be texts.")
    system, user = system.replace("\r\n", "\n"), user.replace("\r\n", "\n")  # a browser's textarea sends CRLF
    for placeholder in PLACEHOLDERS:
        if placeholder not in user:
            raise JudgePromptError(f"judge_prompt.user: the template lacks {placeholder}.")
    return JudgePrompt(system=system, user=user)


def captioned(record: dict) -> str | None:
    """The record's human caption, or None when it has none (the item is not asked)."""
    caption = record.get("caption")
    if record.get("has_caption") and isinstance(caption, str) and caption.strip():
        return caption.strip()
    return None


def png_part(data: bytes) -> dict:
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(data).decode()}}


def description_messages(image_1: bytes, image_2: bytes, prompt: dict) -> list[dict]:
    return [
        {"role": "system", "content": prompt["system"]},
        {
            "role": "user",
            "content": [{"type": "text", "text": prompt["user"]}, png_part(image_1), png_part(image_2)],
        },
    ]


def judge_messages(caption: str, description: str, prompt: JudgePrompt) -> list[dict]:
    # One pass of replacements: a caption holding "{description}" is not filled in again.
    user = re.sub(
        r"\{(caption|description)\}",
        lambda match: caption if match.group(1) == "caption" else description,
        prompt.user,
    )
    return [{"role": "system", "content": prompt.system}, {"role": "user", "content": user}]


VERDICT_HEADING = re.compile(r"###\s*Verdict\s*[:\-]?\s*\**\s*(yes|no)\b", re.IGNORECASE)
LAST_WORD = re.compile(r"\b(yes|no)\b[\s.!*]*\Z", re.IGNORECASE)


def parse_verdict(text: str | None) -> bool | None:
    """The judge's verdict: the yes or no after "### Verdict"; else a reply that ends with yes or no. None when
    neither is there (the item fails as a malformed answer: no guess)."""
    if not text:
        return None
    found = VERDICT_HEADING.search(text) or LAST_WORD.search(text.strip())
    return None if found is None else found.group(1).lower() == "yes"


def free_form_document(*, model: str, judge: str, prompt: dict, judge_prompt: dict, results: list[dict], **extra):
    """The official free-form results layout (`total_pairs`, `evaluated_pairs`, `results`), with the judge's
    verdicts and our accuracy beside it."""
    return {
        "model": model,
        "prompt_type": "custom",
        "use_structured_output": False,
        "total_pairs": extra.pop("total_pairs"),
        "evaluated_pairs": sum(1 for row in results if "error" not in row),
        "judge_model": judge,
        "prompt": prompt,
        "judge_prompt": judge_prompt,
        **extra,
        "results": results,
    }

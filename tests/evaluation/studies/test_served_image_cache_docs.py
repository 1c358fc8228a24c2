"""The studies guide says how long a participant's encoding of an image is kept, and says what the code does."""

from __future__ import annotations

import re
from pathlib import Path

from evaluation.studies.served_images import CACHE_SECONDS

GUIDE = Path(__file__).resolve().parents[3] / "docs/guides/studies.md"


def test_the_guide_gives_the_cache_time_the_code_keeps():
    text = " ".join(GUIDE.read_text(encoding="utf-8").split())
    stated = re.findall(r"Encodings are cached for (\d+) (minutes?|seconds?|s)\b", text)
    assert len(stated) == 1, stated
    number, unit = stated[0]
    assert int(number) * (60 if unit.startswith("minute") else 1) == CACHE_SECONDS

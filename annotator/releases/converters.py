"""A release's name in a URL (`/releases/v3/`, `/releases/exp-2/`): the benchmark's releases and the experiments are
numbered apart, so a number alone does not name a release."""

from __future__ import annotations

import re

from django.urls import register_converter

from annotator.models import Release


class ReleaseNameConverter:
    regex = r"v[0-9]{1,9}|exp-[0-9]{1,9}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value) -> str:
        """A Release, or its name. A bare number is refused: it would name a benchmark release and an experiment."""
        name = value.name if isinstance(value, Release) else value
        if not isinstance(name, str) or not re.fullmatch(self.regex, name):
            raise ValueError(f"{value!r} is not a release's name (v3, exp-2)")
        return name


register_converter(ReleaseNameConverter, "release")

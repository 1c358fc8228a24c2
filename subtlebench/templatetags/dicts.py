"""Dict lookups that cannot be mistaken for dict methods: `{{ job.result|entries }}`, `{{ preview|entry:"items" }}`.

In a template `result.items` is the key "items" when the dict has one and the `items` method otherwise, so a
result that gains an "items" count breaks a loop over `result.items` (the /jobs/<id>/ 500 of issue 13), and a dict
that lacks the key prints a bound method. Templates use these filters instead; a test holds every template to it.
"""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def entries(mapping) -> list[tuple]:
    """The (key, value) pairs of a dict, in its order; none for anything else."""
    return list(mapping.items()) if isinstance(mapping, dict) else []


@register.filter
def entry(mapping, key):
    """The value under `key`, or None: never one of the dict's methods."""
    return mapping.get(key) if isinstance(mapping, dict) else None

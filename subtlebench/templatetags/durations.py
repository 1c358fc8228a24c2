"""How long something has been held, for people: `{{ since|held_for }}` says "less than a minute" where Django's
`timesince` says "0 minutes"."""

from __future__ import annotations

from datetime import timedelta

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()


@register.filter
def held_for(since, now=None) -> str:
    """'less than a minute', else the time since `since` as `timesince` gives it ('3 minutes', '1 hour, 5 minutes');
    '' without a time."""
    if since is None:
        return ""
    now = now or timezone.now()
    if now - since < timedelta(minutes=1):
        return "less than a minute"
    return timesince(since, now)


@register.filter
def ago(when, now=None) -> str:
    """'less than a minute ago', else '3 minutes ago'; '' without a time."""
    return f"{held_for(when, now)} ago" if when is not None else ""

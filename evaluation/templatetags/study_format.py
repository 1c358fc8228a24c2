"""Number formats of the study dashboard: percentages, intervals, signed differences, durations."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def pct(value, digits: int = 1) -> str:
    if value is None or value == "":
        return "—"
    return f"{100 * float(value):.{int(digits)}f}"


@register.filter
def interval(stats) -> str:
    if not stats or stats.get("low") is None:
        return "—"
    return f"{100 * stats['low']:.1f}–{100 * stats['high']:.1f}"


@register.filter
def signed_pct(value) -> str:
    if value is None:
        return "—"
    return f"{100 * float(value):+.1f}"


@register.filter
def duration(seconds) -> str:
    if seconds is None:
        return "—"
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


@register.filter
def fixed(value, digits: int = 3) -> str:
    if value is None:
        return "—"
    return f"{float(value):.{int(digits)}f}"

"""Participants' screens: the viewport the consent form measures, its device class, and each study's minimum."""

from __future__ import annotations

import math
from dataclasses import dataclass

from evaluation.models import Participant, Study
from evaluation.studies.services import StudyError

# Below this short side a touch screen is a phone (phones are at most ~480 CSS px on their short side,
# the smallest tablets ~600).
PHONE_SHORT_SIDE = 600
# A window narrower or lower than this was not measured from a real browser window.
SMALLEST_VIEWPORT = 100
LARGEST_VIEWPORT = 20000


@dataclass(frozen=True)
class Screen:
    width: int
    height: int
    coarse_pointer: bool
    touch_points: int
    user_agent: str

    @property
    def device_class(self) -> str:
        """phone, tablet or desktop: a touch-first device by its short side (or a phone's user agent), else desktop.

        The primary pointer decides "touch-first": a laptop with a touch screen still reports a fine pointer.
        Without a pointer reading (old browsers), any touch point counts.
        """
        touch_first = self.coarse_pointer or ("Mobi" in self.user_agent and self.touch_points > 0)
        if not touch_first:
            return Participant.Device.DESKTOP
        if min(self.width, self.height) < PHONE_SHORT_SIDE or "Mobi" in self.user_agent:
            return Participant.Device.PHONE
        return Participant.Device.TABLET


def _whole_number(data, field: str, low: int, high: int) -> int:
    raw = (data.get(field) or "").strip()
    if not raw:
        raise StudyError(
            {field: ["the browser did not send its window size: allow JavaScript for this site and reload the page."]}
        )
    try:
        number = float(raw)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):  # inf, 1e309, nan: no size of a window
        raise StudyError({field: [f"expected a whole number of pixels, got {raw[:40]!r}."]})
    value = int(number)
    if not low <= value <= high:
        raise StudyError({field: [f"expected {low} to {high} pixels, got {value}."]})
    return value


def screen_from_form(data, *, user_agent: str) -> Screen:
    """The screen the consent form measured: viewport_width, viewport_height, pointer, touch_points."""
    width = _whole_number(data, "viewport_width", SMALLEST_VIEWPORT, LARGEST_VIEWPORT)
    height = _whole_number(data, "viewport_height", SMALLEST_VIEWPORT, LARGEST_VIEWPORT)
    try:
        touch_points = max(0, min(int(data.get("touch_points") or 0), 100))
    except ValueError:
        touch_points = 0  # only informs the device class; a garbled value means no touch was reported
    return Screen(
        width=width,
        height=height,
        coarse_pointer=data.get("pointer") == "coarse",
        touch_points=touch_points,
        user_agent=(user_agent or "").strip()[:400],  # a header, not typed: kept to its column, never refused
    )


def screen_check(*, study: Study, screen: Screen) -> None:
    """Refuse a window below the study's minimum (the page checks first; this holds for any client)."""
    problem = study.viewport_problem(screen.width, screen.height)
    if problem:
        raise StudyError(problem)

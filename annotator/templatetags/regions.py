"""`{% region_marks pair 1 48 36 %}`: a pair's difference regions on image 1 or 2 as marks over its thumbnail shown
at width × height CSS pixels with `object-fit: cover` (the data manager's rows)."""

from __future__ import annotations

from django import template
from django.utils.html import format_html_join

register = template.Library()


@register.simple_tag
def region_marks(pair, image_number: int, width: int, height: int) -> str:
    image = pair.image_1 if image_number == 1 else pair.image_2
    boxes = [region for region in pair.regions or [] if region["image"] == image_number]
    if not boxes or not image.width or not image.height:
        return ""
    # cover: scaled to fill the box, the overflow cut evenly from both sides
    scale = max(width / image.width, height / image.height)
    left = (width - image.width * scale) / 2
    top = (height - image.height * scale) / 2
    return format_html_join(
        "",
        '<span class="rg-mark rg-mark-{}" style="left:{}px;top:{}px;width:{}px;height:{}px"></span>',
        (
            (
                image_number,
                round(left + box["x"] * scale, 1),
                round(top + box["y"] * scale, 1),
                max(2, round(box["w"] * scale, 1)),
                max(2, round(box["h"] * scale, 1)),
            )
            for box in boxes
        ),
    )

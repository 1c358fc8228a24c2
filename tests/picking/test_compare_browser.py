"""The comparison viewer (static/js/compare.js) in a real Chromium: hold-to-flicker, the difference heat map, 1:1
pixels, drag to pan, the fixed layout with wide viewers, the one-viewer layout, auto flicker and swipe, on the
pair workbench, the review page and the caption workbench."""

from __future__ import annotations

import io
import itertools
import os
import re
from pathlib import Path

import numpy as np
import pytest
from django.core.files.base import ContentFile
from PIL import Image as PILImage
from playwright.sync_api import expect

from annotator.captions import services as captions
from annotator.models import Frame, Image, Pair, Video
from annotator.picking import services as picking
from tests.conftest import browser_login
from tests.factories import make_pair

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Where the screenshots go when someone wants to look at the pages (SCREENSHOT_DIR=/some/folder pytest ...).
SCREENSHOT_DIR = os.environ.get("SCREENSHOT_DIR", "")
CHANGED = (200, 120, 280, 200)
_numbers = itertools.count(1)  # left, top, right, bottom (exclusive) of the one region where B differs from A


def picture(width: int, height: int, changed: bool = False) -> bytes:
    """A lossless textured frame; with `changed`, only the CHANGED rectangle differs (as PNG: no JPEG ringing)."""
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([(x * 255 // width), (y * 255 // height), ((x // 16 + y // 16) % 2) * 120 + 60], axis=-1)
    rgb = rgb.astype(np.uint8)
    if changed:
        left, top, right, bottom = CHANGED
        rgb[top:bottom, left:right] = 255 - rgb[top:bottom, left:right]
    buffer = io.BytesIO()
    PILImage.fromarray(rgb).save(buffer, "PNG")
    return buffer.getvalue()


def comparison_video(width: int = 1280, height: int = 720, frames: int = 3) -> Video:
    """A video whose frame 0 is the base picture and every later frame differs inside CHANGED only."""
    video = Video.objects.create(
        yt8m_id=f"cmp{next(_numbers)}", title="Comparison", source="/videos/cmp.mp4", duration=frames, fps=25,
        width=width, height=height, status=Video.Status.SAMPLED, sample_every=1.0, frame_count=frames,
    )  # fmt: skip
    for index in range(frames):
        name = f"frames/{video.yt8m_id}/{index:06d}.png"
        image = Image(width=width, height=height, source="yt8m", original_name=name.rsplit("/", 1)[-1])
        data = picture(width, height, changed=index > 0)
        image.file.save(name, ContentFile(data), save=False)
        thumb = PILImage.open(io.BytesIO(data))
        thumb.thumbnail((240, 240))
        buffer = io.BytesIO()
        thumb.save(buffer, "PNG")
        image.thumbnail.save(name.replace(".png", "_thumb.png"), ContentFile(buffer.getvalue()), save=False)
        image.save()
        Frame.objects.create(video=video, index=index, timestamp=float(index), pts=index * 1000, image=image)
    return video


def open_workbench(page, annotator, video, size=(1440, 900), login=True) -> None:
    picking.video_lease_next(user=annotator)
    page.set_viewport_size({"width": size[0], "height": size[1]})
    if login:
        browser_login(page, "alice")
    page.goto(f"/work/videos/{video.pk}/")
    expect(page.locator("#img-a")).to_have_attribute("src", video.frames.get(index=0).image.file.url)


def set_a_and_b(page) -> None:
    page.keyboard.press("a")  # frame 0
    page.keyboard.press("ArrowRight")
    page.keyboard.press("b")  # frame 1
    expect(page.locator("#where-b")).to_contain_text("#1 ")


def box(page, selector: str) -> dict:
    return page.locator(selector).bounding_box()


def shot(page, name: str) -> None:
    if SCREENSHOT_DIR:
        Path(SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOT_DIR) / f"{name}.png"))


def test_holding_f_shows_b_only_while_it_is_held_and_the_badge_says_so(page, annotator):
    video = comparison_video()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    open_workbench(page, annotator, video)
    set_a_and_b(page)
    a_url = video.frames.get(index=0).image.file.url
    b_url = video.frames.get(index=1).image.file.url
    badge = page.locator("#viewer-a .cmp-badge")
    expect(badge).to_have_text("A")
    page.keyboard.down("t")  # t held down repeats: it switches auto flicker on once, not on every repeat
    page.keyboard.down("t")
    page.keyboard.up("t")
    expect(page.locator("[data-compare]")).to_have_attribute("data-mode", "auto")
    page.keyboard.press("t")
    expect(page.locator("[data-compare]")).to_have_attribute("data-mode", "two")
    page.keyboard.down("f")
    expect(page.locator("#img-a")).to_have_attribute("src", b_url)
    expect(badge).to_have_text("B")
    expect(page.locator("#where-a")).to_contain_text("#1 ")
    shot(page, "workbench-1440-hold-f")
    page.keyboard.down("f")  # key repeat while held: still B, not toggled back
    page.keyboard.down("f")
    expect(badge).to_have_text("B")
    expect(page.locator("#img-a")).to_have_attribute("src", b_url)
    page.keyboard.up("f")
    expect(page.locator("#img-a")).to_have_attribute("src", a_url)
    expect(badge).to_have_text("A")
    expect(page.locator("#where-a")).to_contain_text("#0 ")
    # Letting go outside the page (the window loses focus) also returns to A.
    page.keyboard.down("f")
    expect(badge).to_have_text("B")
    page.evaluate("() => window.dispatchEvent(new Event('blur'))")
    expect(badge).to_have_text("A")
    page.keyboard.up("f")
    expect(badge).to_have_text("A")
    assert errors == []


def lit_pixels(canvas) -> dict:
    """The count and bounding box of the heat map's bright pixels (red above 64) and the sum of all its channels,
    read back from the canvas."""
    return canvas.evaluate(
        """c => {
          const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let n = 0, s = 0, l = c.width, t = c.height, r = -1, b = -1;
          for (let y = 0; y < c.height; y++) for (let x = 0; x < c.width; x++) {
            const i = (y * c.width + x) * 4;
            s += d[i] + d[i + 1] + d[i + 2];
            if (d[i] > 64) { n++; l = Math.min(l, x); t = Math.min(t, y); r = Math.max(r, x); b = Math.max(b, y); }
          }
          return {n, s, l, t, r, b, w: c.width, h: c.height};
        }"""
    )


def test_the_difference_view_lights_only_the_changed_rectangle(page, annotator):
    video = comparison_video(width=480, height=320)
    open_workbench(page, annotator, video)
    set_a_and_b(page)
    page.keyboard.press("d")
    canvas = page.locator("#cmp-diff")
    expect(canvas).to_be_visible()
    expect(canvas).to_have_attribute("data-ready", re.compile("."))
    expect(page.locator("#viewer-a .cmp-badge")).to_have_text("|A−B|")
    expect(canvas).to_have_attribute("width", "480")
    left, top, right, bottom = CHANGED
    found = lit_pixels(canvas)
    assert (found["w"], found["h"]) == (480, 320)
    assert (found["l"], found["t"], found["r"], found["b"]) == (left, top, right - 1, bottom - 1)
    assert found["n"] > 0.9 * (right - left) * (bottom - top)  # the rectangle itself is lit, not a few pixels
    shot(page, "workbench-1440-difference")
    # The gain scales the map: at the lowest gain it is darker, and still nothing lights outside the rectangle.
    page.locator("[data-cmp=gain]").fill("1")
    expect(page.locator("[data-cmp=gain-value]")).to_have_text("×1")
    expect(canvas).to_have_attribute("data-ready", re.compile(r"\|1$"))
    low = lit_pixels(canvas)
    assert 0 < low["n"] and 0 < low["s"] < found["s"] / 2
    assert left <= low["l"] and top <= low["t"] and low["r"] < right and low["b"] < bottom
    page.keyboard.press("d")  # back to two viewers
    expect(canvas).to_be_hidden()
    expect(page.locator("#viewer-b")).to_be_visible()


def test_one_to_one_shows_the_frames_pixels_unscaled_and_a_drag_pans_both_viewers(page, annotator, reviewer):
    pair_video = comparison_video(width=1920, height=1080)
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator, video=pair_video)
    browser_login(page, "rita")
    page.goto(f"/review/pairs/{pair.pk}/")
    readout = page.locator("[data-cmp=readout]")
    expect(readout).to_contain_text("fit")
    shot(page, "review-1440")
    fitted = box(page, "#img-a")
    assert fitted["width"] < 1000  # fitted into a viewer of about 700 px
    page.keyboard.press("1")
    expect(readout).to_have_text("100%")
    for image in ("#img-a", "#img-b"):
        natural = page.locator(image).evaluate("img => [img.naturalWidth, img.naturalHeight]")
        rendered = box(page, image)
        assert natural == [1920, 1080]
        assert (round(rendered["width"]), round(rendered["height"])) == (1920, 1080)
    shot(page, "review-1440-one-to-one")
    # Moving over the image does nothing; only a drag with the button down pans, both viewers alike.
    before_a, before_b = box(page, "#img-a"), box(page, "#img-b")
    viewer = box(page, "#viewer-a .cmp-box")
    middle = (viewer["x"] + viewer["width"] / 2, viewer["y"] + viewer["height"] / 2)
    page.mouse.move(*middle)
    page.mouse.move(middle[0] + 150, middle[1] + 80)
    assert box(page, "#img-a") == before_a
    page.mouse.down()
    page.mouse.move(middle[0] + 100, middle[1] + 50, steps=4)
    page.mouse.up()
    after_a, after_b = box(page, "#img-a"), box(page, "#img-b")
    assert round(after_a["x"] - before_a["x"]) == round(after_b["x"] - before_b["x"]) == -50
    assert round(after_a["y"] - before_a["y"]) == round(after_b["y"] - before_b["y"]) == -30
    page.keyboard.press("=")
    expect(readout).to_have_text("125%")
    assert round(box(page, "#img-b")["width"]) == 2400
    page.keyboard.press("0")
    expect(readout).to_contain_text("fit")
    page.set_viewport_size({"width": 1280, "height": 720})
    shot(page, "review-1280")


def test_one_to_one_on_a_high_density_screen_is_one_frame_pixel_per_device_pixel(browser_pages, annotator, reviewer):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator, video=comparison_video(width=640, height=360))
    context = browser_pages.new_context(viewport={"width": 1440, "height": 900}, device_scale_factor=2)
    page = context.new_page()
    try:
        browser_login(page, "rita")
        page.goto(f"/review/pairs/{pair.pk}/")
        page.keyboard.press("1")
        expect(page.locator("[data-cmp=readout]")).to_have_text("100%")
        rendered = box(page, "#img-a")
        assert (round(rendered["width"] * 2), round(rendered["height"] * 2)) == (640, 360)
        expect(page.locator("#img-a")).not_to_have_class(re.compile("pixelated"))
        for _ in range(4):
            page.keyboard.press("=")
        expect(page.locator("[data-cmp=readout]")).to_have_text("244%")
        expect(page.locator("#img-a")).to_have_class(re.compile("pixelated"))  # past 2 device px a pixel: no blur
    finally:
        context.route("**/*", lambda route: route.abort())
        context.close()


def test_the_workbench_viewers_are_wide_and_the_layout_does_not_move_when_a_or_b_is_set(page, annotator):
    for size in ((1440, 900), (1280, 720)):
        video = comparison_video()
        open_workbench(page, annotator, video, size, login=size == (1440, 900))
        before = [box(page, s) for s in ("#viewer-a", "#viewer-b", "#filmstrip", "#editor")]
        if size == (1440, 900):
            # Beside the editor's side panel each viewer has a third of the screen; Large (l) gives them the width.
            assert before[0]["width"] >= 460 and before[1]["width"] >= 460
            page.keyboard.press("l")
            expect(page.locator("#wb-large")).to_have_attribute("aria-pressed", "true")
            assert box(page, "#viewer-a")["width"] >= 620 and box(page, "#viewer-b")["width"] >= 620
            page.keyboard.press("l")
            expect(page.locator("#wb-large")).to_have_attribute("aria-pressed", "false")
            assert box(page, "#viewer-a") == before[0]
        shot(page, f"workbench-{size[0]}-unset")
        set_a_and_b(page)
        expect(page.locator("#similarity")).to_contain_text("similarity")
        after = [box(page, s) for s in ("#viewer-a", "#viewer-b", "#filmstrip", "#editor")]
        assert after == before
        # The strip shows the thumbnails, the viewers the full frames.
        thumb = page.locator("#filmstrip .thumb img").first
        expect(thumb).to_have_attribute("src", video.frames.get(index=0).image.thumbnail.url)
        page.keyboard.press("1")  # the plain digits are the viewer's; categories are Shift+digit
        expect(page.locator("[data-cmp=readout]")).to_have_text("100%")
        assert round(box(page, "#img-a")["width"]) == 1280
        page.keyboard.press("z")
        shot(page, f"workbench-{size[0]}-two")
        page.keyboard.press("v")
        expect(page.locator("#viewer-b")).to_be_hidden()
        one = box(page, "#viewer-a")
        assert one["width"] > before[0]["width"] + before[1]["width"]  # the one viewer takes both places
        page.keyboard.down("f")
        expect(page.locator("#viewer-a .cmp-badge")).to_have_text("B")
        assert box(page, "#viewer-a") == one  # B in the same place as A
        page.keyboard.up("f")
        shot(page, f"workbench-{size[0]}-one")
        page.keyboard.press("v")
        expect(page.locator("#viewer-b")).to_be_visible()
        for key, mode in (("d", "diff"), ("w", "swipe"), ("t", "auto")):
            page.keyboard.press(key)
            expect(page.locator("[data-compare]")).to_have_attribute("data-mode", mode)
            assert box(page, "#filmstrip") == before[2]  # no mode moves the strip or the editor
            shot(page, f"workbench-{size[0]}-{mode}")
            page.keyboard.press(key)
        page.locator("#done-video").click()  # give it back: the next size leases the next video
        page.wait_for_url("**/work/")


def test_auto_flicker_and_swipe_show_both_frames_and_say_which(page, annotator):
    video = comparison_video()
    open_workbench(page, annotator, video)
    page.keyboard.press("t")
    expect(page.locator("[data-cmp=note]")).to_contain_text("Set A and B first")
    set_a_and_b(page)
    page.locator("[data-cmp=rate]").select_option("8")
    page.keyboard.press("t")
    badge = page.locator("#viewer-a .cmp-badge")
    expect(page.locator("#viewer-b")).to_be_hidden()
    expect(badge).to_have_text("B")
    expect(badge).to_have_text("A")
    expect(page.locator("#img-a")).to_have_attribute("src", video.frames.get(index=0).image.file.url)
    shot(page, "workbench-1440-auto-flicker")
    page.keyboard.press("t")
    expect(page.locator("#viewer-b")).to_be_visible()
    page.keyboard.press("w")
    over = page.locator(".cmp-over")
    expect(over).to_be_visible()
    expect(badge).to_have_text("A ◂ ▸ B")
    viewer = box(page, "#viewer-a .cmp-box")
    line = box(page, ".cmp-divider")
    assert abs(line["x"] + line["width"] / 2 - (viewer["x"] + viewer["width"] / 2)) < 2
    frame = box(page, ".cmp-over")
    target = frame["x"] + frame["width"] * 0.25  # a quarter into the frame: B shows from there on
    page.mouse.move(line["x"] + line["width"] / 2, line["y"] + 50)
    page.mouse.down()
    page.mouse.move(target, line["y"] + 50, steps=3)
    page.mouse.up()
    line = box(page, ".cmp-divider")
    assert abs(line["x"] + line["width"] / 2 - target) < 2
    clip = over.evaluate("img => img.style.clipPath")  # inset(0px 0px 0px <left>px)
    left = float(clip.split()[-1].removesuffix("px)"))
    assert abs(frame["x"] + left - target) < 2
    shot(page, "workbench-1440-swipe")


def test_the_viewer_keys_do_not_fire_while_typing(page, annotator):
    video = comparison_video()
    open_workbench(page, annotator, video)
    set_a_and_b(page)
    page.keyboard.press("q")
    page.keyboard.type("fdwvt=x")
    expect(page.locator("#question")).to_have_value("fdwvt=x")
    expect(page.locator("[data-compare]")).to_have_attribute("data-mode", "two")
    expect(page.locator("[data-cmp=readout]")).to_contain_text("fit")
    expect(page.locator("#viewer-a .cmp-badge")).to_have_text("A")


def test_the_caption_workbench_uses_the_same_viewer(page, annotator, coordinator):
    video = comparison_video(width=640, height=360, frames=2)
    pair = make_pair(video=video)
    captions.caption_batch_create(created_by=coordinator, title="viewer", selection="list", pair_ids=[pair.pk])
    browser_login(page, "alice")
    page.goto("/captions/work/")
    page.get_by_role("button", name="Start captioning").click()
    page.wait_for_url("**/captions/tasks/*/")
    assert box(page, "#viewer-a")["width"] >= 620 and box(page, "#viewer-b")["width"] >= 620
    page.locator("h1").click()  # out of the caption box: its text takes no viewer keys
    page.keyboard.down("f")
    expect(page.locator("#viewer-a .cmp-badge")).to_have_text("B")
    expect(page.locator("#img-a")).to_have_attribute("src", pair.image_2.file.url)
    page.keyboard.up("f")
    expect(page.locator("#img-a")).to_have_attribute("src", pair.image_1.file.url)
    page.keyboard.press("1")
    assert round(box(page, "#img-a")["width"]) == 640
    page.keyboard.press("0")
    shot(page, "captions-1440")
    page.set_viewport_size({"width": 1280, "height": 720})
    shot(page, "captions-1280")

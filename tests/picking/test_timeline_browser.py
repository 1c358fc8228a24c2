"""The whole video on the workbench in a real Chromium: at 1440x900 the images, the strip and the editor with Submit
are on the first screen; the source video's timeline steps frame by frame to a time between two sampled frames, takes
it as B (decoded on the server at its exact pts), shows its similarity once it is embedded, and the submitted pair's
export names that pts in its provenance; a file the browser cannot play falls back to frames rendered on the server."""

from __future__ import annotations

import copy
import json
import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from annotator.export.services import ExportOptions, benchmark_export
from annotator.models import Frame, JobTask, Pair, Video
from annotator.picking import services as picking
from annotator.similarity.services import embedding_job_create, embeddings_run
from annotator.videos.services import videos_import
from tests import similarity_fixtures
from tests.conftest import browser_login, wait_until
from tests.video_fixtures import *  # noqa: F403 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.torch, pytest.mark.django_db(transaction=True)]
dinov3 = similarity_fixtures.dinov3

FRAME_PTS = 512  # the test clip: 25 fps in a 1/12800 time base


def test_a_frame_between_two_samples_is_taken_as_b_scored_submitted_and_exported(
    page, annotator, reviewer, h264_video, dinov3, settings, tmp_path
):
    settings.SIMILARITY_THRESHOLD = 0.0  # the tiny random model's scores say nothing of subtlety
    videos_import(source=str(h264_video.parent), every=1.0, sync=True)
    video = Video.objects.get()
    embeddings_run(job_id=embedding_job_create(title="sampled frames").pk, video_id=video.pk)
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    browser_login(page, "alice")
    page.goto("/work/")
    page.click("#ask-for-work")
    page.wait_for_url(f"**/work/videos/{video.pk}/")

    # The first screen holds the two images, the strip and the editor down to Submit.
    for selector in (".cmp-stage", "#filmstrip", "#editor", "#submit-pair"):
        box = page.locator(selector).bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= 900, f"{selector} is below the fold: {box}"
    expect(page.locator("#tl-time")).to_contain_text("0.000 s")

    page.keyboard.press("a")  # A: the sampled frame #0 at 0 s
    for _ in range(13):
        page.keyboard.press(".")  # the source video, one frame on: frame 13, between the samples at 0 and 1 s
    expect(page.locator("#tl-time")).to_contain_text("0.520 s · frame 13")
    page.keyboard.press("]")
    expect(page.locator("#where-b")).to_contain_text("picked · 0.520 s")
    expect(page.locator("#tl-status")).to_contain_text(f"pts {13 * FRAME_PTS}")
    picked = Frame.objects.get(video=video, picked=True)
    assert (picked.pts, picked.timestamp) == (13 * FRAME_PTS, 0.52)
    expect(page.locator("#similarity")).to_contain_text("pending")

    # Its embedding was queued at once; the similarity worker's task runs here, in the test's process.
    unit = wait_until(
        lambda: JobTask.objects.filter(name="annotator.tasks.embed_images").first(), 15, "the embedding unit"
    )
    assert unit.kwargs["image_ids"] == [picked.image_id]
    embeddings_run(job_id=unit.job_id, image_ids=unit.kwargs["image_ids"])
    expect(page.locator("#similarity")).to_contain_text(re.compile(r"similarity \d\.\d{3}"), timeout=20000)

    page.keyboard.press("Shift+4")  # temporal: the question is filled in, the answer follows from the times
    page.keyboard.press("Control+Enter")
    pair = wait_until(lambda: Pair.objects.filter(status="submitted").first(), 15, "the submitted pair")
    expect(page.locator("#pairs")).to_contain_text("submitted")
    assert picked.image_id in (pair.image_1_id, pair.image_2_id) and pair.similarity is not None

    # A file the browser cannot play: the timeline shows frames the server renders at the chosen time, and takes them.
    page.route("**/source/", lambda route: route.fulfill(status=200, body=b"no video" * 64, content_type="video/mp4"))
    page.reload()
    expect(page.locator("#tl-status")).to_contain_text("frames are rendered on the server")
    page.keyboard.press("Home")  # the strip's first frame: the timeline goes to its time, 0 s
    page.keyboard.press(".")
    expect(page.locator("#tl-still")).to_have_attribute("src", re.compile(r"/frame-at/\?t=0\.040000$"))
    wait_until(lambda: page.evaluate("document.getElementById('tl-still').naturalWidth") == 320, 15, "the frame")
    page.keyboard.press("[")
    expect(page.locator("#where-a")).to_contain_text("picked · 0.040 s")
    assert Frame.objects.filter(video=video, picked=True, pts=FRAME_PTS).exists()
    assert script_errors == []

    picking.pair_review(pair=pair, reviewer=reviewer, decision="accept", version=pair.version)
    benchmark_export(options=ExportOptions(out=str(tmp_path / "out"), reproducible=True, val_fraction=0))
    [line] = [json.loads(text) for text in (tmp_path / "out/metadata/items.jsonl").read_text().splitlines()]
    assert sorted(line["origin"]["pts"]) == [0, 13 * FRAME_PTS]
    assert sorted(line["origin"]["timestamps"]) == [0.0, 0.52]


def test_the_same_with_the_video_and_the_media_in_s3(
    page, annotator, reviewer, h264_video, dinov3, settings, tmp_path, s3_storage
):
    """The source video in a bucket (the browser plays it from a signed URL, the server decodes the frame from it by
    range requests) and the frames stored in the bucket too: the walk and the export are the same."""
    from subtlebench.storage import s3_client

    settings.SIMILARITY_THRESHOLD = 0.0
    # The policy a deployment on this S3 endpoint starts with (settings.py reads S3_ENDPOINT_URL at start): its
    # presigned URLs' host may serve images and media.
    endpoint = urlsplit(settings.S3_ENDPOINT_URL)
    policy = copy.deepcopy(settings.CONTENT_SECURITY_POLICY)
    for directive in ("img-src", "media-src"):
        policy["DIRECTIVES"][directive].append(f"{endpoint.scheme}://{endpoint.netloc}")
    settings.CONTENT_SECURITY_POLICY = policy
    s3_client().upload_file(str(h264_video), s3_storage, "yt8m/clip.mp4")
    manifest = tmp_path / "manifest.csv"
    manifest.write_text(f"yt8m_id,path,labels\nclip,s3://{s3_storage}/yt8m/clip.mp4,Walk\n")
    videos_import(source=str(manifest), every=1.0, sync=True)
    video = Video.objects.get()
    assert video.source.startswith("s3://")
    embeddings_run(job_id=embedding_job_create(title="sampled frames").pk, video_id=video.pk)
    browser_login(page, "alice")
    page.goto("/work/")
    page.click("#ask-for-work")
    page.wait_for_url(f"**/work/videos/{video.pk}/")
    expect(page.locator("#tl-time")).to_contain_text("0.000 s")
    expect(page.locator("#tl-status")).not_to_contain_text("rendered on the server")  # the browser plays it

    page.keyboard.press("a")
    for _ in range(13):
        page.keyboard.press(".")
    expect(page.locator("#tl-time")).to_contain_text("0.520 s · frame 13")
    page.keyboard.press("]")
    expect(page.locator("#where-b")).to_contain_text("picked · 0.520 s")
    picked = Frame.objects.get(video=video, picked=True)
    assert picked.pts == 13 * FRAME_PTS
    unit = wait_until(
        lambda: JobTask.objects.filter(name="annotator.tasks.embed_images").first(), 15, "the embedding unit"
    )
    embeddings_run(job_id=unit.job_id, image_ids=unit.kwargs["image_ids"])
    expect(page.locator("#similarity")).to_contain_text(re.compile(r"similarity \d\.\d{3}"), timeout=20000)
    page.keyboard.press("Shift+4")
    page.keyboard.press("Control+Enter")
    pair = wait_until(lambda: Pair.objects.filter(status="submitted").first(), 15, "the submitted pair")

    picking.pair_review(pair=pair, reviewer=reviewer, decision="accept", version=pair.version)
    benchmark_export(options=ExportOptions(out=str(tmp_path / "out"), reproducible=True, val_fraction=0))
    [line] = [json.loads(text) for text in (tmp_path / "out/metadata/items.jsonl").read_text().splitlines()]
    assert sorted(line["origin"]["pts"]) == [0, 13 * FRAME_PTS]

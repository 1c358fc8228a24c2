"""The demo's similarities: a seeded demo model whose scores fall on both sides of the 0.8 rule, labelled as demo,
and a seed report whose counts are the pairs' own."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pytest
from PIL import Image as PILImage

from annotator.models import Pair
from annotator.similarity.services import (
    cosines,
    embedding_model_active,
    integer_vectors,
    pair_update_similarity,
    video_suggestions,
)
from demo.similarity import build_demo_model, report_demo_similarity, seed_demo_similarity
from demo.videos import DEMO_FPS, DEMO_SAMPLE_EVERY, daylight_frames, panning_frames
from tests import similarity_fixtures
from tests.factories import make_pair, make_video

pytestmark = [pytest.mark.django_db, pytest.mark.torch]
no_dinov3 = similarity_fixtures.no_dinov3

STEP = int(DEMO_FPS * DEMO_SAMPLE_EVERY)  # frames between two samples, as `seed_demo` samples the demo videos


def sampled_jpegs(frames, count: int) -> list[bytes]:
    """The first `count` samples of a demo video, as the JPEG bytes the embedder reads from storage."""
    out = []
    for picture in itertools.islice(frames, 0, count * STEP, STEP):
        buffer = io.BytesIO()
        PILImage.fromarray(picture).save(buffer, "JPEG", quality=90)
        out.append(buffer.getvalue())
    return out


def similarity_matrix(folder, sources: list[bytes]) -> np.ndarray:
    """Every pair's similarity as the app computes it: the embedder's vectors, stored as float16, exact cosines."""
    from annotator.similarity.embedder import Embedder

    embedder = Embedder.load(folder, image_size=224, batch_size=8, decode_threads=2)
    vectors = {}
    for batch in embedder.embed(sources):
        assert not batch.failures
        vectors.update(zip(batch.indices, batch.vectors, strict=True))
    matrix = integer_vectors(np.stack([vectors[i] for i in range(len(sources))]).astype("<f2"))
    count = len(sources)
    rows, cols = np.triu_indices(count, k=1)
    values = np.full((count, count), np.nan)
    values[rows, cols] = cosines(matrix[rows], matrix[cols])
    return values


def test_the_demo_model_scores_some_frame_pairs_under_the_rule_and_some_over(tmp_path):
    # The seeded demo model, through the embedder real weights go through: the demo's light video (noon to evening)
    # and its camera pan, sampled as seed_demo samples them. Seeded weights, fp32 on the CPU: the same numbers on
    # every run; the bounds below leave wide margins around them.
    folder = build_demo_model(tmp_path / "demo-model")
    light = similarity_matrix(folder, sampled_jpegs(daylight_frames(), 24))
    pan = similarity_matrix(folder, sampled_jpegs(panning_frames(), 12))
    values = np.concatenate([light[~np.isnan(light)], pan[~np.isnan(pan)]])
    under, over = int((values < 0.8).sum()), int((values >= 0.8).sum())
    assert under >= 100 and over >= 100, (under, over)
    # Where the line runs, pair by pair: frames half a second apart pass, noon against evening fails.
    assert light[10, 11] > 0.95 and pan[2, 3] > 0.9
    assert light[0, 6] < 0.5 and light[0, 16] < 0.3
    assert (tmp_path / "demo-model" / "UNTRAINED_DEMO_MODEL").exists()


def test_the_seed_report_counts_the_pairs_scored_after_they_are_made(no_dinov3, tmp_path):
    # seed_demo scores the pairs when they are submitted, after the images are embedded: the report must count
    # them then (it said "0 pairs scored" when it counted at embedding time, before any pair existed).
    video = make_video(frames=3)
    seed_demo_similarity(folder=tmp_path / "demo-model")
    model = embedding_model_active(fresh=True)
    assert model.demo and model.fingerprint.startswith("untrained demo model: ")
    pairs = [make_pair(video=video, similarity=None, similarity_model="") for _ in range(2)]
    for pair in pairs:
        pair_update_similarity(pair=pair)
    Pair.objects.filter(pk=pairs[1].pk).update(similarity=0.42)  # one under the rule, as a far-apart pair is
    out = io.StringIO()
    report_demo_similarity(out)
    line = out.getvalue()
    assert "Similarity (demo model: the numbers show the rule at work, they are not DINOv3 similarities)" in line
    assert "2 pairs scored, 1 under 0.8 and 1 at or over it" in line
    counts = video_suggestions(video=video)["counts"]
    frames = f"{counts['subtle']} subtle, {counts['under_threshold']} under 0.8, {counts['near_duplicate']} near"
    assert sum(counts.values()) == 3 and frames in line


def test_the_seed_report_says_so_when_no_model_is_active(no_dinov3):
    make_pair(similarity=None, similarity_model="")
    out = io.StringIO()
    report_demo_similarity(out)
    assert out.getvalue() == "Similarity: no embedding model is active; every pair is pending."


def test_seed_demo_replaces_an_older_demo_model_that_scored_everything_alike(no_dinov3, tmp_path):
    from annotator.similarity.embedder import build_random_model
    from annotator.similarity.services import DEMO_MARKER, embedding_model_activate
    from demo.similarity import DEMO_CONFIG

    old = tmp_path / "old-demo"
    build_random_model(old, seed=0, **{**DEMO_CONFIG, "initializer_range": 0.02})
    (old / DEMO_MARKER).write_text("the demo model before the wider initialisation\n")
    embedding_model_activate(folder=old, device="cpu", image_size=224, activated_by="an older seed_demo")
    seed_demo_similarity(folder=tmp_path / "demo-model")
    model = embedding_model_active(fresh=True)
    assert model.demo and model.folder == str((tmp_path / "demo-model").resolve())


def test_a_demo_job_left_running_by_a_killed_seed_demo_is_ended_by_the_next_one(no_dinov3, tmp_path):
    from annotator.models import Job
    from annotator.similarity.services import embedding_job_create
    from demo.similarity import DEMO_JOB_TITLE

    make_video(frames=2)
    seed_demo_similarity(folder=tmp_path / "demo-model")
    left = embedding_job_create(title=DEMO_JOB_TITLE)
    left.start(total=96)  # as a seed_demo killed mid-embedding leaves it: running, no unit, nobody to end it
    make_video(frames=2)  # work for the next run
    seed_demo_similarity(folder=tmp_path / "demo-model")
    left.refresh_from_db()
    assert left.status == "failed" and "interrupted: the seed_demo that ran it stopped" in left.errors[-1]
    assert not Job.objects.filter(status__in=("queued", "running")).exists()
    assert Job.objects.filter(title=DEMO_JOB_TITLE, status="succeeded").count() == 2

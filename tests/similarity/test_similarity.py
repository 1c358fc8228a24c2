"""DINOv3 similarity: embeddings through the real model path, pair scores, staleness, overrides, suggestions, API."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction

from annotator.models import EmbeddingModel, Frame, Image, ImageEmbedding, Job, Pair
from annotator.similarity.services import (
    NO_ACTIVE_MODEL,
    current_fingerprint,
    embedding_job_create,
    embedding_model_activate,
    embedding_model_active,
    embedding_model_forget_cached,
    embeddings_compute,
    embeddings_store,
    fingerprint_of,
    model_problem,
    pair_override_similarity,
    pair_update_similarity,
    pairs_update_similarity,
    stored_vectors,
    video_suggestions,
)
from devtools.localservices import BASE_DIR
from tests import similarity_fixtures
from tests.factories import make_image, make_pair, make_video
from tests.similarity_fixtures import store_embedding, vector_with_similarity

# The similarity fixtures, used by name below.
dinov3 = similarity_fixtures.dinov3
no_dinov3 = similarity_fixtures.no_dinov3
other_dinov3_dir = similarity_fixtures.other_dinov3_dir

pytestmark = [pytest.mark.django_db, pytest.mark.torch]


def embed(**scope) -> Job:
    return embeddings_compute(job=embedding_job_create(title="test"), **scope)


# --- The embedder through the worker's code path ----------------------------------------------------------------


def test_it_stores_what_dinov3_computes_directly_on_the_same_preprocessed_tensor(dinov3):
    import torch
    from transformers import DINOv3ViTModel

    from annotator.similarity.embedder import decode_image, preprocess

    image = make_image(shift=3, size=(200, 150))
    job = embed(image_ids=[image.pk])
    assert job.status == Job.Status.SUCCEEDED, job.errors
    stored = stored_vectors([image.pk])[image.pk]

    model = DINOv3ViTModel.from_pretrained(dinov3, local_files_only=True).eval()
    pixels = preprocess(torch.from_numpy(decode_image(default_storage.path(image.file.name), 224).copy())[None], 224)
    with torch.inference_mode():
        direct = torch.nn.functional.normalize(model(pixel_values=pixels).pooler_output, dim=-1)[0].numpy()
    assert stored.shape == (64,)
    assert np.abs(stored - direct).max() < 1e-3
    assert ImageEmbedding.objects.get(image=image).fingerprint.startswith("dinov3 64d 2L ")


def test_an_image_with_itself_scores_one(dinov3, client_for, annotator):
    image = make_image()
    embed(image_ids=[image.pk])
    response = client_for(annotator).get(f"/api/similarity/?image_1={image.pk}&image_2={image.pk}")
    assert response.status_code == 200
    body = response.json()
    assert body["similarity"] == pytest.approx(1.0, abs=1e-6)
    assert body["status"] == "pass"
    assert body["threshold"] == 0.8
    assert body["model"] == current_fingerprint()


def test_it_marks_a_corrupt_image_failed_and_embeds_the_rest_of_the_batch(dinov3):
    images = [make_image(shift=i) for i in range(5)]
    broken = images[2]
    with default_storage.open(broken.file.name, "wb") as handle:
        handle.write(b"not a jpeg at all")
    job = embed(image_ids=[image.pk for image in images])
    assert job.status == Job.Status.SUCCEEDED
    assert job.done == 5
    assert len(job.errors) == 1 and f"image {broken.pk}" in job.errors[0] and "cannot decode" in job.errors[0]
    failed = ImageEmbedding.objects.get(image=broken)
    assert failed.failed and "cannot decode" in failed.error
    assert set(stored_vectors([image.pk for image in images])) == {image.pk for image in images} - {broken.pk}


def test_it_halves_the_forward_batch_when_the_device_runs_out_of_memory(dinov3):
    from annotator.similarity.embedder import Embedder

    images = [make_image(shift=i) for i in range(8)]
    paths = [default_storage.path(image.file.name) for image in images]
    reference = np.concatenate([batch.vectors for batch in Embedder.load(dinov3, batch_size=8).embed(paths)])

    # A device that holds at most 3 images per forward pass: the first tries (8, then 4) run out of memory.
    small = Embedder.load(dinov3, batch_size=8, oom_above=3)
    job = embed(image_ids=[image.pk for image in images], embedder=small)
    assert job.status == Job.Status.SUCCEEDED and not job.errors
    assert small.forward_batch == 2
    stored = stored_vectors([image.pk for image in images])
    assert np.abs(np.stack([stored[image.pk] for image in images]) - reference).max() < 1e-3


# --- Missing or broken model ---------------------------------------------------------------------------------


def test_without_a_model_the_job_fails_clearly_and_items_stay_pending_until_one_is_set(
    no_dinov3, settings, tiny_dinov3_dir
):
    video = make_video(frames=3)
    pair = make_pair(video=video, similarity=None, similarity_model="")
    scored = make_pair(similarity=0.95, similarity_model="dinov3 64d 2L 0123456789ab 224px fp32")
    job = embed(video=video)
    assert job.status == Job.Status.FAILED
    assert NO_ACTIVE_MODEL in job.errors[0]
    assert not ImageEmbedding.objects.exists()
    # Without an active model nothing is current: every pair is pending, with the reason, and none is exported.
    assert scored.similarity_status == "pending" and NO_ACTIVE_MODEL in scored.similarity_problem()
    assert set(Pair.objects.needing_similarity()) == {pair, scored}
    assert not Pair.objects.exportable().exists()

    call_command("check_dinov3", "--activate", str(tiny_dinov3_dir))
    job = embed(video=video)
    assert job.status == Job.Status.SUCCEEDED
    assert job.result["embedded"] == 3 and job.result["pairs_scored"] == 1
    pair.refresh_from_db()
    assert pair.similarity is not None and pair.similarity_model == current_fingerprint()


def test_it_explains_what_is_wrong_with_a_model_folder(tmp_path):
    assert "no such folder" in model_problem(tmp_path / "missing")
    assert "config.json is missing" in model_problem(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "vit"}')
    assert "model_type is 'vit'" in model_problem(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "dinov3_vit"}')
    assert "no weights" in model_problem(tmp_path)


def test_a_folder_that_passes_the_file_checks_but_cannot_load_fails_the_job(settings, tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "dinov3_vit"}')
    (folder / "model.safetensors").write_bytes(b"truncated")
    # The service checks files only (check_dinov3 --activate loads the model first, and would refuse it).
    embedding_model_activate(folder=folder, device="cpu", image_size=224)
    image = make_image()
    job = embed(image_ids=[image.pk])
    assert job.status == Job.Status.FAILED
    assert "cannot load the DINOv3 model" in job.errors[0] and str(folder) in job.errors[0]
    assert not ImageEmbedding.objects.exists()


def test_check_dinov3_prints_the_model_and_a_self_similarity_check(dinov3, other_dinov3_dir, capsys):
    active = embedding_model_active(fresh=True)
    call_command("check_dinov3", str(other_dinov3_dir))
    out = capsys.readouterr().out
    assert "embedding width: 64" in out
    assert "self-similarity: 1.0000" in out
    assert "OK" in out
    assert embedding_model_active(fresh=True) == active  # without --activate it only checks


def test_check_dinov3_refuses_a_folder_that_is_not_dinov3(dinov3, tmp_path):
    active = embedding_model_active(fresh=True)
    with pytest.raises(CommandError, match="config.json is missing"):
        call_command("check_dinov3", str(tmp_path))
    with pytest.raises(CommandError, match="config.json is missing"):
        call_command("check_dinov3", "--activate", str(tmp_path))
    assert embedding_model_active(fresh=True) == active and EmbeddingModel.objects.count() == 1


# --- The model as data: one active row, switched by check_dinov3 --activate, enforced by the worker ----------------


def test_check_dinov3_activate_records_and_switches_the_model_and_older_scores_turn_stale(
    dinov3, other_dinov3_dir, capsys
):
    first = embedding_model_active(fresh=True)
    pair = make_pair(similarity=0.93)
    assert pair.similarity_model == first.fingerprint and pair.similarity_status == "pass"

    call_command("check_dinov3", "--activate", str(other_dinov3_dir))
    out = capsys.readouterr().out
    second = embedding_model_active()
    assert second.fingerprint != first.fingerprint and f"Active embedding model: {second.fingerprint}" in out
    assert f"Previous model: {first.fingerprint}" in out and f"fingerprint:     {second.fingerprint}" in out
    assert (second.dim, second.layers, second.dtype, second.image_size, second.demo) == (64, 2, "fp32", 224, False)
    assert second.folder == str(other_dinov3_dir.resolve()) and "check_dinov3" in second.activated_by
    assert list(EmbeddingModel.objects.filter(active=True)) == [second]
    pair.refresh_from_db()
    assert pair.similarity_status == "stale" and "another model" in pair.similarity_problem()
    assert list(Pair.objects.needing_similarity()) == [pair] and not Pair.objects.exportable().exists()

    call_command("check_dinov3", "--activate", str(dinov3))  # back to the first: its scores count again
    assert embedding_model_active().pk == first.pk and EmbeddingModel.objects.count() == 2
    assert pair.similarity_status == "pass" and list(Pair.objects.exportable()) == [pair]


def test_the_worker_refuses_to_embed_under_a_model_that_is_not_the_active_one(dinov3, other_dinov3_dir, settings):
    active = embedding_model_active(fresh=True)
    video = make_video(frames=2)
    pair = make_pair(video=video, similarity=None, similarity_model="")

    # Other weights at this worker's DINOV3_MODEL_DIR: the job fails naming both fingerprints; nothing stored.
    settings.DINOV3_MODEL_DIR = str(other_dinov3_dir)
    mine = fingerprint_of(other_dinov3_dir, 224, "fp32")
    job = embed(video=video)
    assert job.status == Job.Status.FAILED and job.done == 0
    assert "refusing to embed" in job.errors[0] and mine in job.errors[0] and active.fingerprint in job.errors[0]
    # The active weights, but on another device (bf16 on CUDA): refused before anything is loaded.
    settings.DINOV3_MODEL_DIR = ""
    settings.DINOV3_DEVICE = "cuda"
    job = embed(video=video)
    assert job.status == Job.Status.FAILED and active.fingerprint.replace("fp32", "bf16") in job.errors[0]
    assert not ImageEmbedding.objects.exists()
    pair.refresh_from_db()
    assert pair.similarity_status == "pending"

    # The same weights at another mount point: DINOV3_MODEL_DIR overrides the folder, the fingerprint matches.
    settings.DINOV3_DEVICE = "cpu"
    settings.DINOV3_MODEL_DIR = str(shutil.copytree(dinov3, settings.MEDIA_ROOT.parent / "mounted-elsewhere"))
    job = embed(video=video)
    assert job.status == Job.Status.SUCCEEDED and job.result["embedded"] == 2
    assert set(ImageEmbedding.objects.values_list("fingerprint", flat=True)) == {active.fingerprint}


def test_the_web_process_never_touches_the_weights_nor_reads_a_dinov3_setting(
    dinov3, tmp_path, settings, client_for, coordinator
):
    folder = shutil.copytree(dinov3, tmp_path / "weights")
    model = embedding_model_activate(folder=folder, device="cpu", image_size=224)
    video = make_video(frames=2)
    job = embed(video=video)
    assert job.status == Job.Status.SUCCEEDED, job.errors
    pair = make_pair(video=video, similarity=None, similarity_model="")
    pair_update_similarity(pair=pair)

    folder.rename(tmp_path / "gone")  # the weights are not where they were activated from any more
    settings.DINOV3_MODEL_DIR = str(tmp_path / "nowhere")
    settings.DINOV3_DEVICE, settings.DINOV3_IMAGE_SIZE = "cuda", 512  # settings only the worker reads
    embedding_model_forget_cached()
    pair.refresh_from_db()
    assert pair.similarity_status == "pass" and pair.similarity_model == model.fingerprint
    assert list(Pair.objects.exportable()) == [pair]
    client = client_for(coordinator)
    body = client.get(f"/api/similarity/?image_1={pair.image_1_id}&image_2={pair.image_2_id}").json()
    assert body["status"] == "pass" and body["model"] == model.fingerprint
    assert body["embedding_model"]["fingerprint"] == model.fingerprint and body["embedding_model"]["dim"] == 64
    counts = client.get(f"/api/videos/{video.pk}/embeddings/").json()
    assert (counts["embedded"], counts["model"], counts["model_problem"]) == (2, model.fingerprint, None)
    assert counts["embedding_model"]["image_size"] == 224
    for page in ("/jobs/", "/videos/"):
        assert model.fingerprint in client.get(page).content.decode(), page
    assert "pass" in client.get(f"/review/pairs/{pair.pk}/").content.decode()
    # Only the worker needs the weights: its next job says where they are missing.
    settings.DINOV3_MODEL_DIR, settings.DINOV3_DEVICE = "", "cpu"
    job = embed(image_ids=[make_image().pk])
    assert job.status == Job.Status.FAILED and "no such folder" in job.errors[0]


def test_the_database_holds_at_most_one_active_model(dinov3):
    active = embedding_model_active(fresh=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        EmbeddingModel.objects.create(
            fingerprint="dinov3 64d 2L ffffffffffff 224px fp32", dim=64, layers=2, dtype="fp32", image_size=224,
            folder="/elsewhere", active=True,
        )  # fmt: skip
    assert list(EmbeddingModel.objects.filter(active=True)) == [active]


# --- Pairs: the rule, staleness, overrides ---------------------------------------------------------------------


def test_pair_update_similarity_scores_from_stored_embeddings_or_leaves_it_pending(dinov3):
    pair = make_pair(similarity=None, similarity_model="")
    base = np.random.default_rng(1).normal(size=64)
    store_embedding(pair.image_1, base)
    assert pair_update_similarity(pair=pair) is None
    assert pair.similarity_status == "pending"

    store_embedding(pair.image_2, vector_with_similarity(base, 0.9))
    assert pair_update_similarity(pair=pair) == pytest.approx(0.9, abs=2e-3)
    pair.refresh_from_db()
    assert pair.similarity_status == "pass" and pair.similarity_model == current_fingerprint()


def test_a_similarity_from_another_model_is_stale_until_compute_embeddings_catches_up(dinov3, settings):
    video = make_video(frames=2)
    embed(video=video)
    pair = make_pair(video=video, similarity=None, similarity_model="")
    pair_update_similarity(pair=pair)
    pair.refresh_from_db()
    assert pair.similarity_status == "pass"
    assert list(Pair.objects.exportable()) == [pair]

    call_command("check_dinov3", "--activate", str(dinov3), "--image-size", "256")  # another fingerprint
    assert embedding_model_active().image_size == 256
    assert pair.similarity_status == "stale"
    assert "another model" in pair.similarity_problem()
    assert not Pair.objects.exportable().exists()

    call_command("compute_embeddings", "--all", "--sync")
    pair.refresh_from_db()
    assert pair.similarity_status == "pass"
    assert pair.similarity_model.endswith("256px fp32")
    assert list(Pair.objects.exportable()) == [pair]
    assert ImageEmbedding.objects.filter(fingerprint=current_fingerprint()).count() == 2


def test_a_coordinator_overrides_a_failing_pair_with_a_recorded_reason(dinov3, coordinator, annotator):
    pair = make_pair(similarity=0.5)
    assert not Pair.objects.exportable().exists()
    with pytest.raises(PermissionDenied):
        pair_override_similarity(pair=pair, user=annotator, reason="looks subtle to me")
    with pytest.raises(ValidationError, match="Write why"):
        pair_override_similarity(pair=pair, user=coordinator, reason="   ")
    pair_override_similarity(pair=pair, user=coordinator, reason="close-up; the difference is subtle")
    pair.refresh_from_db()
    assert pair.similarity_status == "override"
    assert pair.similarity_override_by == coordinator and pair.similarity_override_at is not None
    assert list(Pair.objects.exportable()) == [pair]


def test_only_a_failing_pair_can_be_overridden(dinov3, coordinator):
    for pair in (make_pair(similarity=0.9), make_pair(similarity=None)):
        with pytest.raises(ValidationError, match="only a pair that fails"):
            pair_override_similarity(pair=pair, user=coordinator, reason="because")


def test_embedding_a_video_scores_its_pending_pairs(dinov3):
    video = make_video(frames=3)
    pair = make_pair(video=video, similarity=None, similarity_model="")
    other = make_pair(similarity=None, similarity_model="")  # another video: out of scope
    job = embed(video=video)
    assert job.result == {"model": current_fingerprint(), "embedded": 3, "failed": 0, "pairs_scored": 1}
    pair.refresh_from_db()
    other.refresh_from_db()
    assert pair.similarity is not None and other.similarity is None
    assert embed(video=video).result["embedded"] == 0  # a re-run finds nothing pending
    assert ImageEmbedding.objects.count() == 3


# --- Suggestions -----------------------------------------------------------------------------------------------


def frames_with_vectors(count: int, every: float = 0.5, drift: float = 0.12):
    """A video of `count` frames (no files) whose embeddings drift slowly, as frames of one shot do."""
    video = make_video(frames=0)
    images = Image.objects.bulk_create(
        [Image(file=f"frames/x/{i:06d}.jpg", width=640, height=360, source="yt8m") for i in range(count)]
    )
    Frame.objects.bulk_create(
        [Frame(video=video, index=i, timestamp=i * every, pts=i * 1000, image=image) for i, image in enumerate(images)]
    )
    rng = np.random.default_rng(7)
    vectors = [rng.normal(size=64)]
    for _ in range(count - 1):
        vectors.append(vectors[-1] + rng.normal(size=64) * drift)
    vectors = np.stack(vectors)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    embeddings_store(
        fingerprint=current_fingerprint(),
        vectors={image.pk: vector for image, vector in zip(images, vectors, strict=True)},
        failures={},
    )
    return video, images, vectors


def test_suggestions_for_600_frames_rank_subtle_pairs_within_the_gap(dinov3, settings, django_assert_max_num_queries):
    settings.SIMILARITY_THRESHOLD = 0.8
    settings.NEAR_DUPLICATE_CEILING = 0.995
    settings.SUGGESTION_MAX_GAP_SECONDS = 10
    video, images, _ = frames_with_vectors(600)
    with django_assert_max_num_queries(3):
        result = video_suggestions(video=video, limit=20)
    assert result["status"] == "ready"

    # The same ranking the slow way, in plain Python from the stored float16 values: exact integer dot products
    # (each float16 is a whole number of 2**-24 steps), one square root and one division, so the expected values
    # are the app's to the last bit on any machine, and equal similarities are ordered by gap, then frame.
    halves = dict(ImageEmbedding.objects.filter(image__in=images).values_list("image_id", "vector"))
    steps = {
        pk: [int(value * 2**24) for value in np.frombuffer(bytes(raw), dtype="<f2").tolist()]
        for pk, raw in halves.items()
    }

    def exact_cosine(one: list[int], two: list[int]) -> float:
        dot = sum(a * b for a, b in zip(one, two, strict=True))
        return dot / math.sqrt(float(sum(a * a for a in one)) * sum(b * b for b in two))

    expected = []
    for i in range(600):
        for j in range(i + 1, min(600, i + 21)):
            value = exact_cosine(steps[images[i].pk], steps[images[j].pk])
            if 0.8 <= value < 0.995 and (j - i) * 0.5 <= 10:
                expected.append((-value, j - i, i, j))
    expected.sort()
    assert len(expected) > 20
    got = [(row["index_1"], row["index_2"]) for row in result["results"]]
    assert got == [(i, j) for _, _, i, j in expected[:20]]
    first = result["results"][0]
    assert first["similarity"] == round(-expected[0][0], 4)
    assert first["image_1"] == images[first["index_1"]].pk
    assert first["gap"] == pytest.approx((first["index_2"] - first["index_1"]) * 0.5)


def test_suggestions_show_the_closest_pairs_under_the_threshold_with_the_reason(dinov3, settings):
    settings.SIMILARITY_THRESHOLD = 0.8
    settings.NEAR_DUPLICATE_CEILING = 0.995
    settings.SUGGESTION_MAX_GAP_SECONDS = 3
    video, images, _ = frames_with_vectors(40, drift=0.3)
    result = video_suggestions(video=video, limit=500, below_limit=4)
    vectors = stored_vectors([image.pk for image in images])
    under, subtle, duplicates = [], [], 0
    for i in range(40):
        for j in range(i + 1, min(40, i + 7)):
            value = float(vectors[images[i].pk] @ vectors[images[j].pk])
            if value < 0.8:
                under.append((-value, j - i, i, j))
            elif value < 0.995:
                subtle.append((i, j))
            else:
                duplicates += 1
    under.sort()
    assert len(under) > 4 and len(subtle) > 4  # the drift puts pairs on both sides of the line
    assert result["counts"] == {"subtle": len(subtle), "under_threshold": len(under), "near_duplicate": duplicates}
    below = result["below_threshold"]
    assert [(row["index_1"], row["index_2"]) for row in below] == [(i, j) for _, _, i, j in under[:4]]
    for row in below:
        assert row["similarity"] < 0.8
        assert row["reason"] == f"{row['similarity']:.4f} < 0.8: the frames differ too much to count as a subtle pair"
    assert {(row["index_1"], row["index_2"]) for row in result["results"]} == set(subtle)
    for row in result["results"]:
        assert row["similarity"] >= 0.8
        rule = "subtle (at least 0.8, under the near-duplicate ceiling 0.995)"
        assert row["reason"] == f"{row['similarity']:.4f}: {rule}"
    assert result["demo"] is False


def test_suggestions_are_pending_while_frames_are_not_embedded(dinov3, client_for, reviewer):
    video = make_video(frames=3)
    response = client_for(reviewer).get(f"/api/videos/{video.pk}/suggestions/?limit=5")
    assert response.status_code == 200
    assert response.json() == {
        "status": "pending",
        "results": [],
        "below_threshold": [],
        "counts": {"subtle": 0, "under_threshold": 0, "near_duplicate": 0},
        "demo": False,
    }


# --- API -------------------------------------------------------------------------------------------------------


def test_the_embeddings_endpoint_counts_embedded_pending_and_failed_frames(dinov3, client_for, coordinator):
    video = make_video(frames=4)
    frames = list(video.frames.order_by("index"))
    store_embedding(frames[0].image, np.ones(64))
    embeddings_store(fingerprint=current_fingerprint(), vectors={}, failures={frames[1].image_id: "broken"})
    body = client_for(coordinator).get(f"/api/videos/{video.pk}/embeddings/").json()
    assert (body["frames"], body["embedded"], body["failed"], body["pending"]) == (4, 1, 1, 2)
    assert body["model"] == current_fingerprint() and body["model_problem"] is None


def test_the_similarity_endpoint_says_pending_until_both_images_are_embedded(dinov3, client_for, annotator):
    first, second = make_image(), make_image(shift=4)
    url = f"/api/similarity/?image_1={first.pk}&image_2={second.pk}"
    assert client_for(annotator).get(url).json()["status"] == "pending"
    base = np.random.default_rng(3).normal(size=64)
    store_embedding(first, base)
    store_embedding(second, vector_with_similarity(base, 0.5))
    body = client_for(annotator).get(url).json()
    assert body["status"] == "fail" and body["similarity"] == pytest.approx(0.5, abs=2e-3)


def test_the_similarity_endpoint_rejects_an_unknown_image(dinov3, client_for, annotator):
    response = client_for(annotator).get("/api/similarity/?image_1=999999&image_2=1")
    assert response.status_code == 400
    assert "image_1" in response.json()["errors"]


@pytest.mark.parametrize(
    "path",
    ["/api/similarity/?image_1=1&image_2=1", "/api/videos/{video}/suggestions/", "/api/videos/{video}/embeddings/"],
)
def test_similarity_endpoints_need_a_logged_in_role_and_only_answer_get(path, client, client_for, stranger, reviewer):
    video = make_video(frames=1)
    url = path.format(video=video.pk)
    assert client.get(url).status_code == 403
    assert client_for(stranger).get(url).status_code == 403
    assert client_for(reviewer).post(url).status_code == 405


def test_an_unknown_video_is_not_found(client_for, annotator):
    assert client_for(annotator).get("/api/videos/999999/suggestions/").status_code == 404
    assert client_for(annotator).get("/api/videos/999999/embeddings/").status_code == 404


# --- Demo, banner, and the web process without torch -----------------------------------------------------------


def test_seed_demo_builds_a_demo_model_and_completes_the_demo_pairs(no_dinov3, tmp_path, client_for, annotator):
    from demo.similarity import seed_demo_similarity

    video = make_video(frames=3)
    pair = make_pair(video=video, similarity=None, similarity_model="")
    seed_demo_similarity(folder=tmp_path / "dinov3-demo")
    active = embedding_model_active(fresh=True)
    assert active.demo and active.folder == str((tmp_path / "dinov3-demo").resolve())
    assert active.activated_by == "seed_demo"
    pair.refresh_from_db()
    assert pair.similarity_model == active.fingerprint
    assert pair.similarity_model.startswith("untrained demo model: dinov3 64d 2L")
    assert pair.similarity_status == "pass"
    assert list(Pair.objects.exportable()) == [pair]
    assert ImageEmbedding.objects.count() == 3

    jobs = Job.objects.count()
    seed_demo_similarity(folder=tmp_path / "elsewhere")  # safe to re-run: nothing pending, no new job or model
    assert Job.objects.count() == jobs and ImageEmbedding.objects.count() == 3
    assert EmbeddingModel.objects.get() == active

    page = client_for(annotator).get("/")
    assert "similarity from an untrained demo model" in page.content.decode()


def test_no_banner_with_real_weights(dinov3, client_for, annotator):
    assert "untrained demo model" not in client_for(annotator).get("/").content.decode()


def test_seed_demo_keeps_a_model_that_is_already_active(dinov3, tmp_path):
    from demo.similarity import seed_demo_similarity

    active = embedding_model_active(fresh=True)
    seed_demo_similarity(folder=tmp_path / "dinov3-demo")
    assert embedding_model_active(fresh=True) == active and not active.demo
    assert not (tmp_path / "dinov3-demo").exists()


def test_without_an_active_model_coordinators_are_told_how_to_activate_one(no_dinov3, client_for, coordinator):
    for page in ("/", "/jobs/", "/videos/"):
        assert NO_ACTIVE_MODEL in client_for(coordinator).get(page).content.decode(), page


def test_the_web_process_and_the_plain_worker_never_import_torch():
    code = (
        "import sys, django; django.setup();"
        "import subtlebench.urls, api.urls, annotator.urls, annotator.similarity.services, annotator.similarity.tasks;"
        "import annotator.context_processors, demo.similarity;"
        "from django.urls import get_resolver; get_resolver().resolve('/api/similarity/');"
        "from subtlebench.celery import app; app.loader.import_default_modules();"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    services = {name: os.environ[name] for name in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env = {"DJANGO_SETTINGS_MODULE": "subtlebench.settings", "PATH": "/usr/bin:/bin", **services}
    done = subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_pairs_update_similarity_scores_only_pairs_whose_images_are_embedded(dinov3):
    ready = make_pair(similarity=None, similarity_model="")
    waiting = make_pair(similarity=None, similarity_model="")
    base = np.random.default_rng(5).normal(size=64)
    store_embedding(ready.image_1, base)
    store_embedding(ready.image_2, vector_with_similarity(base, 0.85))
    store_embedding(waiting.image_1, base)
    assert pairs_update_similarity() == 1
    ready.refresh_from_db()
    waiting.refresh_from_db()
    assert ready.similarity == pytest.approx(0.85, abs=2e-3) and waiting.similarity is None


def test_store_embedding_helper_gives_other_tests_a_similarity_without_running_the_model(settings, tmp_path):
    settings.DINOV3_MODEL_DIR = str(tmp_path / "no-weights-here")  # nothing reads the weights
    pair = make_pair(similarity=None, similarity_model="")
    store_embedding(pair.image_1, [1.0, 0.0, 0.0])
    store_embedding(pair.image_2, [0.9, 0.1, 0.0])
    assert pair_update_similarity(pair=pair) == pytest.approx(0.9939, abs=1e-3)
    assert pair.similarity_status == "pass"


def test_a_saved_corrupt_file_in_storage_is_reported_with_its_name(dinov3):
    image = make_image()
    image.file.save("images/test/empty.jpg", ContentFile(b""), save=True)
    job = embed(image_ids=[image.pk])
    assert "images/test/empty" in job.errors[0]


def test_images_of_different_sizes_share_a_batch_and_embed_as_they_would_alone(dinov3):
    from annotator.similarity.embedder import Embedder

    images = [make_image(size=(160, 120)), make_image(shift=5, size=(300, 200)), make_image(shift=9)]
    paths = [default_storage.path(image.file.name) for image in images]
    together = np.concatenate([batch.vectors for batch in Embedder.load(dinov3, batch_size=3).embed(paths)])
    alone = np.concatenate([batch.vectors for batch in Embedder.load(dinov3, batch_size=1).embed(paths)])
    assert together.shape == (3, 64)
    assert np.abs(together - alone).max() < 1e-5


def test_compute_embeddings_queues_a_job_on_the_similarity_queue(dinov3, capsys, django_capture_on_commit_callbacks):
    from subtlebench.celery import app

    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge("similarity")
    video = make_video(frames=2)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("compute_embeddings", "--video", str(video.pk))
    job = Job.objects.get()
    assert job.kind == Job.Kind.SIMILARITY and job.status == Job.Status.QUEUED
    assert f"Queued job {job.pk}" in capsys.readouterr().out
    with app.connection_for_write() as connection:
        assert connection.default_channel.queue_purge("similarity") == 1


def test_compute_embeddings_needs_a_scope_and_a_real_video(dinov3):
    with pytest.raises(CommandError):
        call_command("compute_embeddings", "--sync")
    with pytest.raises(CommandError, match="no video with this id"):
        call_command("compute_embeddings", "--video", "999999", "--sync")


def test_the_periodic_catch_up_waits_for_a_model_then_does_the_pending_work(no_dinov3, settings, tiny_dinov3_dir):
    from annotator.similarity.services import embeddings_catch_up

    pair = make_pair(similarity=None, similarity_model="")
    assert embeddings_catch_up() is None  # no model: nothing runs, no job piles up, nothing is lost
    assert not Job.objects.exists()

    embedding_model_activate(folder=tiny_dinov3_dir, device="cpu", image_size=224)
    job = embeddings_catch_up()
    assert job.status == Job.Status.SUCCEEDED and job.result["embedded"] == 2
    pair.refresh_from_db()
    assert pair.similarity_status == "pass"
    assert embeddings_catch_up() is None  # nothing left to do: no empty jobs every few minutes

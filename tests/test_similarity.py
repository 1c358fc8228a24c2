"""DINOv3 similarity: embeddings through the real model path, pair scores, staleness, overrides, suggestions, API."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command

from annotator.models import Frame, Image, ImageEmbedding, Job, Pair
from annotator.similarity.services import (
    current_fingerprint,
    embedding_job_create,
    embeddings_compute,
    embeddings_store,
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
tiny_dinov3_dir = similarity_fixtures.tiny_dinov3_dir
dinov3 = similarity_fixtures.dinov3
no_dinov3 = similarity_fixtures.no_dinov3

pytestmark = pytest.mark.django_db


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
    job = embed(video=video)
    assert job.status == Job.Status.FAILED
    assert "DINOV3_MODEL_DIR is not set" in job.errors[0]
    assert not ImageEmbedding.objects.exists()

    settings.DINOV3_MODEL_DIR = str(tiny_dinov3_dir)
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
    settings.DINOV3_MODEL_DIR = str(folder)
    image = make_image()
    job = embed(image_ids=[image.pk])
    assert job.status == Job.Status.FAILED
    assert "cannot load the DINOv3 model" in job.errors[0] and str(folder) in job.errors[0]
    assert not ImageEmbedding.objects.exists()


def test_check_dinov3_prints_the_model_and_a_self_similarity_check(dinov3, capsys):
    call_command("check_dinov3", str(dinov3))
    out = capsys.readouterr().out
    assert "embedding width: 64" in out
    assert "self-similarity: 1.0000" in out
    assert "OK" in out


def test_check_dinov3_refuses_a_folder_that_is_not_dinov3(tmp_path):
    with pytest.raises(CommandError, match="config.json is missing"):
        call_command("check_dinov3", str(tmp_path))


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

    settings.DINOV3_IMAGE_SIZE = 256  # another input size: another fingerprint
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


def frames_with_vectors(count: int, every: float = 0.5):
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
        vectors.append(vectors[-1] + rng.normal(size=64) * 0.12)
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

    # The same ranking the slow way, from the stored (float16) vectors.
    stored = stored_vectors([image.pk for image in images])
    expected = []
    for i in range(600):
        for j in range(i + 1, min(600, i + 21)):
            value = float(stored[images[i].pk] @ stored[images[j].pk])
            if 0.8 <= value < 0.995 and (j - i) * 0.5 <= 10:
                expected.append((value, i, j))
    expected.sort(key=lambda item: (-item[0], item[2] - item[1]))
    assert len(expected) > 20
    got = [(row["index_1"], row["index_2"]) for row in result["results"]]
    assert got == [(i, j) for _, i, j in expected[:20]]
    first = result["results"][0]
    assert first["similarity"] == pytest.approx(expected[0][0], abs=1e-4)
    assert first["image_1"] == images[first["index_1"]].pk
    assert first["gap"] == pytest.approx((first["index_2"] - first["index_1"]) * 0.5)


def test_suggestions_are_pending_while_frames_are_not_embedded(dinov3, client_for, reviewer):
    video = make_video(frames=3)
    response = client_for(reviewer).get(f"/api/videos/{video.pk}/suggestions/?limit=5")
    assert response.status_code == 200
    assert response.json() == {"status": "pending", "results": []}


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


def test_seed_demo_builds_a_demo_model_and_completes_the_demo_pairs(settings, tmp_path, client_for, annotator):
    from demo.similarity import seed_demo_similarity

    settings.DINOV3_MODEL_DIR = ""
    settings.DINOV3_DEMO_MODEL_DIR = tmp_path / "dinov3-demo"
    video = make_video(frames=3)
    pair = make_pair(video=video, similarity=None, similarity_model="")
    seed_demo_similarity()
    pair.refresh_from_db()
    assert pair.similarity_model.startswith("untrained demo model: dinov3 64d 2L")
    assert pair.similarity_status == "pass"
    assert list(Pair.objects.exportable()) == [pair]
    assert ImageEmbedding.objects.count() == 3

    jobs = Job.objects.count()
    seed_demo_similarity()  # safe to re-run: nothing pending, no new job, no duplicates
    assert Job.objects.count() == jobs and ImageEmbedding.objects.count() == 3

    page = client_for(annotator).get("/")
    assert "similarity from an untrained demo model" in page.content.decode()


def test_no_banner_with_real_weights(dinov3, client_for, annotator):
    assert "untrained demo model" not in client_for(annotator).get("/").content.decode()


def test_the_web_process_and_the_plain_worker_never_import_torch():
    code = (
        "import sys, django; django.setup();"
        "import subtlebench.urls, api.urls, annotator.urls, annotator.similarity.services, annotator.similarity.tasks;"
        "import annotator.context_processors, demo.similarity;"
        "from django.urls import get_resolver; get_resolver().resolve('/api/similarity/');"
        "from subtlebench.celery import app; app.loader.import_default_modules();"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    env = {"DJANGO_SETTINGS_MODULE": "subtlebench.settings", "PATH": "/usr/bin:/bin"}
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


def test_store_embedding_helper_gives_other_tests_a_similarity_without_a_model(no_dinov3):
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

    settings.DINOV3_MODEL_DIR = str(tiny_dinov3_dir)
    job = embeddings_catch_up()
    assert job.status == Job.Status.SUCCEEDED and job.result["embedded"] == 2
    pair.refresh_from_db()
    assert pair.similarity_status == "pass"
    assert embeddings_catch_up() is None  # nothing left to do: no empty jobs every few minutes

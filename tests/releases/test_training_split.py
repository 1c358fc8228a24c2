"""A training split beside a release: drawn from the benchmark's pairs that share nothing with its test and val items
(a pair on a released video is left out), checked again before every export (a planted leak is refused, naming the
item and what it shares, and nothing is written), and written in formats fine-tuning tools read: `datasets` loads
both files with one example per train item and both of its images."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from annotator.export.training import TrainingLeak, training_export, training_leaks, training_set_create
from annotator.models import Pair, TrainingItem
from benchmark.protocol import option_of, parse_answer
from benchmark.records import video_group
from tests.factories import make_pair
from tests.release_factories import make_release

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    released = [make_pair(category="action", question="What did the person do?", answer="sat down",
                          distractors=["stood up", "ran"]) for _ in range(2)]  # fmt: skip
    released.append(make_pair())
    release = make_release(released, split_of=lambda pair: "val" if pair.pk == released[2].pk else "test")
    on_a_released_video = make_pair(video=released[0].video, question="Which image was taken first?",
                                     answer="first image", distractors=["second image"])  # fmt: skip
    fresh = [make_pair() for _ in range(2)]
    fresh.append(make_pair(category="action", question="What did the person do?", answer="waved",
                           distractors=["clapped", "sat down"]))  # fmt: skip
    make_pair(status=Pair.Status.SUBMITTED)  # not accepted: not in the benchmark
    return {"release": release, "released": released, "leaky": on_a_released_video, "fresh": fresh}


def test_the_split_holds_only_pairs_that_share_nothing_with_test_or_val(world):
    training = training_set_create(release=world["release"], seed=1)
    assert sorted(training.items.values_list("pair_id", flat=True)) == sorted(p.pk for p in world["fresh"])
    assert training.item_count == 3 and training.counts == {"action": {"natural": 1}, "temporal": {"natural": 2}}
    assert training.excluded == {
        "the release holds it": 3,
        "shares a video, source group, sweep cell or image with test or val": 1,
    }
    assert training_leaks(training) == []

    limited = training_set_create(release=world["release"], seed=1, limit=2)
    assert limited.item_count == 2 and limited.excluded["over the limit"] == 1


def test_a_planted_leak_is_refused_with_the_item_named_and_nothing_written(world, tmp_path):
    release, leaky = world["release"], world["leaky"]
    with pytest.raises(TrainingLeak) as asked:  # asked for by id: refused, not silently dropped
        training_set_create(release=release, pair_ids=[leaky.pk, world["fresh"][0].pk])
    test_item = release.items.get(pair=world["released"][0])
    assert f"shares the group {video_group(leaky.video.yt8m_id)!r} with test item {test_item.item_id}" in str(
        asked.value
    )
    assert "shares the image" in str(asked.value)

    training = training_set_create(release=release)
    planted = TrainingItem.objects.create(
        training_set=training, pair=leaky, position=99, record=training.items.first().record, groups=[]
    )
    (tmp_path / "out").mkdir()
    with pytest.raises(TrainingLeak) as refused:
        training_export(training, tmp_path / "out" / "train")
    assert f"(pair {leaky.pk}) shares the group {video_group(leaky.video.yt8m_id)!r}" in str(refused.value)
    assert list((tmp_path / "out").iterdir()) == []  # no folder, no staging left
    planted.delete()
    assert training_export(training, tmp_path / "out" / "train")["examples"] == 3


def test_the_export_loads_with_datasets_one_example_per_item_with_both_images(world, tmp_path):
    import datasets

    training = training_set_create(release=world["release"], seed=3)
    out = tmp_path / "train"
    written = training_export(training, out)
    assert written["examples"] == 3
    cache = str(tmp_path / "hf-cache")
    messages = datasets.load_dataset("json", data_files=str(out / "train.jsonl"), split="train", cache_dir=cache)
    sharegpt = datasets.load_dataset(
        "json", data_files=str(out / "train_sharegpt.jsonl"), split="train", cache_dir=cache
    )
    assert len(messages) == len(sharegpt) == 3
    records = {item.record["question"] + item.record["answer"]: item.record for item in training.items.all()}
    for example, shared in zip(messages, sharegpt, strict=True):
        assert len(example["images"]) == 2 and all((out / name).is_file() for name in example["images"])
        assert [m["role"] for m in example["messages"]] == ["system", "user", "assistant"]
        user = example["messages"][1]["content"]
        assert [part["type"] for part in user] == ["image", "image", "text"]
        assert [part["image"] for part in user[:2]] == example["images"]
        text, answer = user[2]["text"], example["messages"][2]["content"][0]["text"]
        options = [line[3:] for line in text.splitlines() if line[:3] in ("A. ", "B. ", "C. ")]
        record = next(r for r in records.values() if f"Question: {r['question']}" in text and r["answer"] in options)
        assert option_of(options, parse_answer(answer)) == record["answer"]  # the evaluation reads the right answer
        assert shared["images"] == example["images"] and shared["conversations"][0]["value"].startswith(
            "<image><image>"
        )
        assert shared["conversations"][1]["value"] == answer
    card = (out / "README.md").read_text()
    assert "release v1" in card.replace("release v1 does", "release v1") and "learning rate 1e-4" in card


def test_the_command_draws_and_writes_a_split(world, tmp_path):
    out = io.StringIO()
    call_command("export_training", "v1", str(tmp_path / "ft"), "--limit", "2", stdout=out)
    assert "2 examples" in out.getvalue() and (tmp_path / "ft" / "train.jsonl").read_text().count("\n") == 2


def test_the_release_page_draws_a_split_and_hands_it_out_as_a_zip(world, client_for, coordinator):
    import zipfile

    client = client_for(coordinator)
    response = client.post("/releases/v1/training/", {"limit": "2", "seed": "5"})
    assert response.status_code == 302
    training = world["release"].training_sets.get()
    assert (training.item_count, training.seed, training.limit) == (2, 5, 2)
    page = client.get("/releases/v1/").content.decode()
    assert 'id="release-training"' in page and f"/releases/v1/training/{training.pk}.zip" in page

    download = client.get(f"/releases/v1/training/{training.pk}.zip")
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content)))
    names = archive.namelist()
    prefix = f"v1-train-{training.pk}/"
    assert {f"{prefix}train.jsonl", f"{prefix}train_sharegpt.jsonl", f"{prefix}README.md"} <= set(names)
    assert archive.read(f"{prefix}train.jsonl").decode().count("\n") == 2
    assert sum(name.startswith(f"{prefix}images/") for name in names) == 4  # both images of each item
    assert client.post("/releases/v1/training/", {"limit": "0"}).status_code == 302  # refused with a message
    assert world["release"].training_sets.count() == 1


def test_an_image_gone_from_storage_is_said_on_the_release_page_and_nothing_is_handed_out(
    world, client_for, coordinator
):
    from django.core.files.storage import default_storage

    training = training_set_create(release=world["release"])
    lost = training.items.order_by("position", "pk").first().pair.image_1
    default_storage.delete(lost.file.name)
    client = client_for(coordinator)
    response = client.get(f"/releases/v1/training/{training.pk}.zip")
    assert response.status_code == 302 and response["Location"] == "/releases/v1/"
    page = client.get("/releases/v1/").content.decode()
    assert f"Training split #{training.pk} failed: " in page and lost.file.name in page

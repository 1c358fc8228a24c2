"""The dataset card: a YAML header the Hub reads (the images as `image` features, a license, only non-empty splits),
the release's name, content hash and counts; and `datasets.load_dataset` on a folder with it gives pictures."""

from __future__ import annotations

import json

import pytest
import yaml
from PIL import Image as PILImage

from benchmark.card import dataset_card
from benchmark.records import FIELDS, build_record, split_path


def card(**changes) -> str:
    arguments = dict(
        name="Subtle v1",
        license="cc-by-4.0",
        counts={"temporal": {"natural": {"test": 2, "val": 0}}},
        answer_first={"temporal": {"test": [1, 2], "val": [0, 0]}},
        sizes={"test": 900, "val": 0},
        images=4,
        release_hash="ab" * 32,
        provenance=["app: test"],
    )
    return dataset_card(**{**arguments, **changes})


def header(text: str) -> dict:
    return yaml.safe_load(text.split("---\n")[1])


def test_the_header_declares_the_images_as_image_features_a_license_and_the_configured_splits():
    meta = header(card())
    features = {f["name"]: f.get("dtype") or f.get("list") for f in meta["dataset_info"]["features"]}
    assert list(features) == list(FIELDS)
    assert features["image_1"] == features["image_2"] == "image" and features["question"] == "string"
    assert meta["license"] == "cc-by-4.0" and meta["pretty_name"] == "Subtle v1"
    assert meta["configs"] == [{"config_name": "default", "data_files": [{"split": "test", "path": "data/test.jsonl"}]}]
    assert meta["dataset_info"]["splits"] == [{"name": "test", "num_bytes": 900, "num_examples": 2}]


def test_the_body_names_the_release_its_content_hash_and_its_counts():
    text = card()
    assert "# Subtle v1" in text and "- name: Subtle v1" in text
    assert f"`{'ab' * 32}`" in text and "items: 2 (test 2, val 0); images: 4" in text
    assert "The val split has no item" in text and "| temporal | 50% (1/2) | - (0/0) |" in text


def test_a_name_that_yaml_would_misread_is_quoted_and_a_license_must_be_a_hub_id():
    assert header(card(name="v2: the hard pairs # draft"))["pretty_name"] == "v2: the hard pairs # draft"
    with pytest.raises(ValueError, match="not a license id"):
        card(license="CC BY 4.0")


@pytest.mark.torch
def test_load_dataset_on_a_folder_with_the_card_gives_pictures(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf/datasets"))
    out = tmp_path / "out"
    (out / "images/yt8m/temporal").mkdir(parents=True)
    (out / "data").mkdir()
    for name, colour in (("a", "red"), ("b", "blue")):
        PILImage.new("RGB", (8, 6), colour).save(out / f"images/yt8m/temporal/{name}.png")
    record = build_record(
        image_1="images/yt8m/temporal/a.png", image_2="images/yt8m/temporal/b.png",
        question="Which image was taken later?", answer="second image", distractors=["first image"], caption=None,
        category="temporal", domain="natural", source="yt8m", source_id="v_1_2",
    )  # fmt: skip
    line = json.dumps(record) + "\n"
    (out / split_path("test")).write_text(line)
    counts = {"temporal": {"natural": {"test": 1, "val": 0}}}
    (out / "README.md").write_text(card(counts=counts, answer_first={}, sizes={"test": len(line), "val": 0}))
    monkeypatch.chdir(out)  # the paths are relative to the folder: `datasets` opens them from the working directory
    loaded = datasets.load_dataset(str(out))
    assert set(loaded) == {"test"} and isinstance(loaded["test"].features["image_2"], datasets.Image)
    row = loaded["test"][0]
    assert isinstance(row["image_1"], PILImage.Image) and row["image_1"].size == (8, 6)
    assert row["image_2"].getpixel((0, 0)) == (0, 0, 255) and row["question"] == record["question"]

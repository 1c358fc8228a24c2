"""The dataset card: a YAML header the Hub reads (configs over the Parquet shards, the images as `image` features,
generation_info as text, a license from the sources', only non-empty splits), the release's name, content hash and
counts, and each source's license and citation. (`datasets` reads whole exports: tests/export/test_hub_view.py.)"""

from __future__ import annotations

import pytest
import yaml

from benchmark.card import dataset_card
from benchmark.licenses import MVTEC_AD, YOUTUBE_8M, SourceTerms
from benchmark.records import FIELDS


def card(**changes) -> str:
    arguments = dict(
        name="Subtle v1",
        sources={"yt8m": (SourceTerms(license="cc-by-4.0"), 2)},
        counts={"temporal": {"natural": {"test": 2, "val": 0}}},
        answer_first={"temporal": {"test": [1, 2], "val": [0, 0]}},
        shards={"test": ["parquet/test-00000-of-00001.parquet"]},
        sizes={"test": 900},
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
    assert features["generation_info"] == "string" and features["distractors"] == "string"
    assert meta["license"] == "cc-by-4.0" and meta["pretty_name"] == "Subtle v1"
    assert meta["configs"] == [
        {"config_name": "default", "data_files": [{"split": "test", "path": ["parquet/test-00000-of-00001.parquet"]}]}
    ]
    assert meta["dataset_info"]["splits"] == [{"name": "test", "num_bytes": 900, "num_examples": 2}]


def test_the_body_names_the_release_its_content_hash_and_its_counts():
    text = card()
    assert "# Subtle v1" in text and "- name: Subtle v1" in text
    assert f"`{'ab' * 32}`" in text and "items: 2 (test 2, val 0); images: 4" in text
    assert "The val split has no item" in text and "| temporal | 50% (1/2) | - (0/0) |" in text


def test_a_name_that_yaml_would_misread_is_quoted_and_a_license_must_be_a_hub_id():
    assert header(card(name="v2: the hard pairs # draft"))["pretty_name"] == "v2: the hard pairs # draft"
    with pytest.raises(ValueError, match="not a license id"):
        card(sources={"yt8m": (SourceTerms(license="CC BY 4.0"), 2)})


def test_sources_that_agree_give_their_license_and_sources_that_differ_give_other_with_a_table():
    same = {"mvtec": (MVTEC_AD, 3), "mvtec_bottles": (SourceTerms(license="cc-by-nc-sa-4.0"), 1)}
    assert header(card(sources=same))["license"] == "cc-by-nc-sa-4.0"
    mixed = {"yt8m": (YOUTUBE_8M, 2), "mvtec": (MVTEC_AD, 3), "synthetic": (SourceTerms(license="mit"), 4)}
    text = card(sources=mixed)
    assert header(text)["license"] == "other"
    assert "| mvtec | 3 | cc-by-nc-sa-4.0 | MVTec AD: CC BY-NC-SA 4.0, non-commercial use only |" in text
    assert "| synthetic | 4 | mit |  |" in text and "| yt8m | 2 | cc-by-4.0 | the YouTube-8M dataset" in text
    # Each citation in a block of its own, under its source; a source without one has none.
    assert "**mvtec**\n\n```\n@inproceedings{bergmann2019mvtec," in text and "**synthetic**" not in text
    assert header(card(sources={}, counts={}, answer_first={}, shards={}, sizes={}))["license"] == "unknown"


def test_a_citation_or_note_cannot_break_out_of_its_block_or_its_cell():
    terms = SourceTerms(license="other", citation="```\n# Injected heading\n```", note="a | b\nc")
    text = card(sources={"odd": (terms, 2)})
    assert "| odd | 2 | other | a \\| b c |" in text
    assert "````\n```\n# Injected heading\n```\n````" in text

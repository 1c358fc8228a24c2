"""A record: its fields in order, its rules, its item id (built, derived, taken apart) and its group."""

from __future__ import annotations

import json

import pytest

from benchmark.records import (
    FIELDS,
    build_record,
    derived_pair_number,
    exported_source_id,
    generation_info_text,
    item_id,
    item_id_tails,
    local_image_path,
    record_item_id,
    record_problems,
    source_group,
    video_group,
)


def record(**changes) -> dict:
    fields = dict(
        image_1="images/yt8m/temporal/a.jpg",
        image_2="images/yt8m/temporal/b.jpg",
        question="Which image was taken later?",
        answer="second image",
        distractors=["first image"],
        caption=None,
        category="temporal",
        domain="natural",
        source="yt8m",
        source_id="abc_1_2",
    )
    return build_record(**{**fields, **changes})


def test_a_built_record_has_the_fields_in_the_evaluators_order_and_obeys_the_rules():
    built = record()
    assert list(built) == list(FIELDS)
    assert built["raw_folder"] == "yt8m_temporal_pairs" and built["has_caption"] is False
    assert record_problems(built) == []


def test_a_blank_caption_is_no_caption():
    assert record(caption="   ")["caption"] is None and record(caption="It moved.")["has_caption"] is True


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"category": "colour"}, "unknown category 'colour'"),
        ({"domain": "space"}, "unknown domain 'space'"),
        ({"has_caption": True}, "has_caption is true but caption is empty"),
        ({"image_1": "../x.jpg"}, "field 'image_1': image path '../x.jpg' must be relative to the dataset folder"),
        ({"has_caption": 0}, "field 'has_caption' must be bool, got int"),
        ({"split": "test"}, "extra field 'split'"),
        ({"distractors": ["second image"]}, "the answer 'second image' is among the distractors"),
    ],
)
def test_it_names_what_is_wrong_with_a_record(change, problem):
    problems = record_problems({**record(), **change})
    assert any(found.startswith(problem) for found in problems), problems


def test_the_item_id_is_category_source_source_id_and_a_pair_without_one_gets_a_stable_derived_one():
    assert item_id(category="temporal", source="yt8m", source_id="abc_1_2") == "temporal_yt8m_abc_1_2"
    assert record_item_id(record()) == "temporal_yt8m_abc_1_2"
    assert item_id(category="state", source="yt8m", source_id="", pair_id=7, yt8m_id="vid") == "state_yt8m_vid_7"
    assert exported_source_id(source_id="", pair_id=7) == "pair7"


def test_an_item_id_can_be_taken_apart_into_its_candidate_source_ids_and_pair_number():
    identifier = item_id(category="attribute", source="levir_cd", source_id="12")
    assert "12" in item_id_tails(identifier) and "cd_12" in item_id_tails(identifier)
    assert derived_pair_number("state_yt8m_vid_7") == 7 and derived_pair_number("state_src_x") is None


def test_a_video_group_survives_a_round_trip_through_the_derived_source_id():
    derived = exported_source_id(source_id="", pair_id=3, yt8m_id="vid_a")
    assert source_group("yt8m", derived) == video_group("vid_a") == "yt8m:vid_a"
    assert source_group("levir", "tile_4_9") == "levir:tile" and source_group("levir", "7") == ""
    assert source_group("yt8m", "v" * 50 + "_1_2", max_length=20) == "yt8m:" + "v" * 15
    assert video_group(None) == ""


def test_generation_info_is_json_text_in_the_parquet_view_as_the_jsonl_line_writes_it():
    info = {"family": "colour", "factors": {"hue": 30, "name": "rot"}, "seed": 1}
    line = json.dumps({"generation_info": info}, ensure_ascii=False)
    text = generation_info_text(info)
    assert f'{{"generation_info": {text}}}' == line and json.loads(text) == info
    assert generation_info_text(None) is None and generation_info_text('{"seed": 2}') == '{"seed": 2}'


@pytest.mark.parametrize("info", [{"model": "m", "seed": 1}, '{"model": "m"}', "made by hand", "", None])
def test_generation_info_is_an_object_a_string_or_null(info):
    assert record_problems(record(generation_info=info)) == []


@pytest.mark.parametrize("info, got", [(7, "int"), (["m"], "list"), (True, "bool")])
def test_generation_info_of_another_type_is_refused(info, got):
    assert record_problems({**record(), "generation_info": info}) == [
        f"field 'generation_info' must be dict or str or null, got {got}"
    ]


def test_a_hub_url_names_the_file_after_resolve_main_and_any_other_url_no_file():
    url = "https://huggingface.co/datasets/KRAFTON/VLM-SubtleBench/resolve/main/images/changeit/state/0.png"
    assert local_image_path(url) == "images/changeit/state/0.png"
    assert local_image_path("images/a.jpg") == "images/a.jpg"
    assert record_problems(record(image_1=url)) == []
    assert record_problems(record(image_2="https://example.org/b.jpg")) == [
        "field 'image_2': image URL 'https://example.org/b.jpg' names no file of the folder "
        "(a Hub URL's path after '/resolve/main/' does)"
    ]
    escaping = "https://huggingface.co/datasets/x/resolve/main/../../etc/passwd"
    assert "must be relative to the dataset folder" in record_problems(record(image_1=escaping))[0]

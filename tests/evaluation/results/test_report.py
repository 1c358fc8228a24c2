"""The release report from a release's frozen items: the split's items only, the same bytes after a pair is corrected,
answers on unknown ids refused."""

from __future__ import annotations

import pytest

from annotator.models import Pair, Release
from benchmark.report import ReportInputError, report_markdown
from evaluation.results.report import release_report, release_report_files
from tests.factories import make_pair, release_item

# (item_id, split, category, domain, cluster): six test items in three videos, one val item.
ITEMS = [
    ("temporal_yt8m_a_1_2", "test", "temporal", "natural", "yt8m:a"),
    ("temporal_yt8m_a_3_4", "test", "temporal", "natural", "yt8m:a"),
    ("viewpoint_yt8m_a_5_6", "test", "viewpoint", "natural", "yt8m:a"),
    ("temporal_yt8m_b_1_2", "test", "temporal", "gaming", "yt8m:b"),
    ("state_yt8m_b_3_4", "test", "state", "gaming", "yt8m:b"),
    ("temporal_yt8m_c_1_2", "test", "temporal", "natural", "yt8m:c"),
    ("temporal_yt8m_c_3_4", "val", "temporal", "natural", "yt8m:c"),
]
HUMANS = [
    ("temporal_yt8m_a_1_2", "p1", True),
    ("temporal_yt8m_a_1_2", "p2", False),
    ("viewpoint_yt8m_a_5_6", "p1", True),
    ("temporal_yt8m_b_1_2", "p2", True),
    ("state_yt8m_b_3_4", "p3", True),
    ("temporal_yt8m_c_1_2", "p3", False),
]
MODELS = {
    "gpt-4o": [(item_id, n % 2 == 0) for n, (item_id, *_) in enumerate(ITEMS)],  # the val item's answer too
    "imported_run": [("temporal_yt8m_a_1_2", True), ("state_yt8m_b_3_4", False)],
}


def make_release() -> Release:
    pair = make_pair()
    release = Release.objects.create(number=1, manifest_sha256="0" * 64, content_sha256="1" * 64, card="# card\n")
    positions = {"test": 0, "val": 0}
    for item_id, split, category, domain, cluster in ITEMS:
        positions[split] += 1
        release_item(
            release, pair, item_id=item_id, split=split, position=positions[split], category=category, domain=domain,
            cluster=cluster,
        ).save()  # fmt: skip
    return release


@pytest.mark.django_db
def test_it_reports_the_splits_items_from_the_release_rows():
    release = make_release()
    report = release_report(release, human_answers=HUMANS, model_answers=MODELS)
    assert (report.release, report.release_hash, report.split, report.items) == ("v1", "1" * 64, "test", 6)
    humans = report.humans.micro
    # Items: 1/2, 1, 1, 1, 0 (a_1_2 has two raters): 7/2 over 5 items.
    assert (humans.estimate * 10, humans.items, humans.clusters, humans.raters) == (7, 5, 3, 3)
    gpt = report.models[0]
    assert (gpt.label, gpt.micro.items, gpt.categories["temporal"].items) == ("gpt-4o", 6, 4)  # not the val item
    assert [row.label for row in report.gaps] == ["Humans - gpt-4o", "Humans - imported_run"]
    assert report.gaps[1].micro.items == 2
    val = release_report(release, human_answers=[], model_answers=MODELS, split="val")
    assert (val.items, val.models[0].micro.estimate, val.humans.micro) == (1, 1, None)


@pytest.mark.django_db
def test_correcting_a_pair_after_the_release_changes_no_byte_of_the_report():
    release = make_release()
    before = release_report_files(release_report(release, human_answers=HUMANS, model_answers=MODELS))
    Pair.objects.update(category="state", domain="gaming", question="Which image is brighter?")
    assert Pair.objects.get().question == "Which image is brighter?"
    release = Release.objects.get(pk=release.pk)
    after = release_report_files(release_report(release, human_answers=HUMANS, model_answers=MODELS))
    assert after == before
    assert [name for name, _, _ in after] == [
        "v1-test-report.csv",
        "v1-test-report.json",
        "v1-test-report.md",
        "v1-test-report.tex",
        "v1-test-gaps.svg",
        "v1-test-gaps.png",
    ]
    assert b"| Humans | " in after[2][1] and after[5][1].startswith(b"\x89PNG")


@pytest.mark.django_db
def test_an_answer_on_an_id_the_release_does_not_hold_is_refused_by_name():
    release = make_release()
    with pytest.raises(ReportInputError, match=r"model 'gpt-4o', answer 1 \(item 'temporal_yt8m_zz_1_2'\): no such"):
        release_report(release, human_answers=[], model_answers={"gpt-4o": [("temporal_yt8m_zz_1_2", True)]})
    with pytest.raises(ValueError, match="split must be one of test, val, got 'train'"):
        release_report(release, human_answers=[], model_answers={}, split="train")


@pytest.mark.django_db
def test_the_report_does_not_depend_on_the_order_of_the_answers():
    release = make_release()
    forward = release_report(release, human_answers=HUMANS, model_answers=MODELS)
    backward = release_report(
        release,
        human_answers=HUMANS[::-1],
        model_answers={label: answers[::-1] for label, answers in reversed(MODELS.items())},
    )
    assert report_markdown(backward) == report_markdown(forward)

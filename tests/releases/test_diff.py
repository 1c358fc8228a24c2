"""Correcting a pair after publishing changes nothing in the release; the next release's diff names what changed
(the fields), what went (with the reason) and what came (new, or back in)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotator.models import Pair, Release, ReleaseDiff
from annotator.picking.services import pair_reopen, pair_review
from annotator.releases.services import release_diff, release_diff_stored, release_get
from annotator.videos.services import ResampleRefused, _check_no_pairs, video_resample_problems
from tests.export_fixtures import make_pair, make_video, tree_bytes

pytestmark = pytest.mark.django_db


def publish(out: Path) -> Release:
    call_command(
        "export_benchmark", "--out", str(out), "--reproducible", "--val-fraction", "0", "--release", "--unpublished"
    )
    return Release.objects.order_by("-number").first()


def attribute_pair() -> Pair:
    return make_pair(
        category="attribute",
        question="Which colour did the cup by the window turn?",
        answer="red",
        distractors=["blue"],
    )


def correct(pair: Pair, by, **corrections) -> None:
    pair_reopen(pair=pair, by=by, reason="A second look.")
    pair.refresh_from_db()
    pair_review(pair=pair, reviewer=by, decision="correct", version=pair.version, corrections=corrections)


def test_a_correction_after_publishing_changes_nothing_in_the_release_and_shows_in_the_next_diff(tmp_path, coordinator):
    # All of one non-binary category: no answer balancing, so no orientation depends on which others are released.
    corrected, rejected, broken, kept = attribute_pair(), attribute_pair(), attribute_pair(), attribute_pair()
    v1 = publish(tmp_path / "v1")
    frozen = {item.item_id: (item.line, item.image_1_sha256) for item in v1.items.all()}
    item = v1.items.get(pair=corrected)

    correct(corrected, coordinator, question="What is the new colour of the cup?", answer="green")
    pair_reopen(pair=rejected, by=coordinator, reason="Not subtle.")
    rejected.refresh_from_db()
    pair_review(pair=rejected, reviewer=coordinator, decision="reject", version=rejected.version, reason="No.")
    Pair.objects.filter(pk=broken.pk).update(distractors=["red"])  # an invalid question
    added = attribute_pair()

    v1 = release_get("v1")
    assert {i.item_id: (i.line, i.image_1_sha256) for i in v1.items.all()} == frozen
    assert v1.items.get(pair=corrected).record["question"] == "Which colour did the cup by the window turn?"
    assert v1.items.get(pk=item.pk).record["answer"] == "red"
    call_command("release_files", "v1", str(tmp_path / "v1-again"))
    assert tree_bytes(tmp_path / "v1-again") == tree_bytes(tmp_path / "v1")

    v2 = publish(tmp_path / "v2")
    diff = release_diff(release=v2)
    assert diff["previous"] == v1 and diff["unchanged"] == 1
    assert [(row["item_id"], row["fields"]) for row in diff["changed"]] == [(item.item_id, ["question", "answer"])]
    assert diff["changed"][0]["changes"][1] == {"field": "answer", "before": "red", "after": "green"}
    removed = {row["pair"]: row["reason"] for row in diff["removed"]}
    assert removed[rejected.pk] == "the pair is now rejected"
    assert removed[broken.pk].startswith("left out: ") and "distractor" in removed[broken.pk]
    assert [(row["pair"], row["reason"]) for row in diff["added"]] == [(added.pk, "new pair")]
    assert v2.items.filter(pair=kept).get().line == v1.items.get(pair=kept).line

    rejected.refresh_from_db()
    pair_reopen(pair=rejected, by=coordinator, reason="It is subtle after all.")
    rejected.refresh_from_db()
    pair_review(pair=rejected, reviewer=coordinator, decision="accept", version=rejected.version)
    v3 = publish(tmp_path / "v3")
    assert [(row["pair"], row["reason"]) for row in release_diff(release=v3)["added"]] == [
        (rejected.pk, "back in (last in v1)")
    ]
    assert release_diff(release=v1) is None

    # Each diff was kept when its release was made; the page reads it, the same as computed.
    assert ReleaseDiff.objects.filter(release__in=[v1, v2, v3]).count() == 3
    assert release_diff_stored(release=v1) is None
    assert release_diff_stored(release=v2) == diff
    # A release made before diffs were kept: computed the first time it is asked for, then read, never again.
    ReleaseDiff.objects.filter(release=v3).delete()
    first = release_diff_stored(release=v3)
    assert first == release_diff(release=v3) and ReleaseDiff.objects.filter(release=v3).exists()
    with CaptureQueriesContext(connection) as queries:
        assert release_diff_stored(release=v3) == first
    assert len(queries) == 1 and "annotator_releaseitem" not in queries[0]["sql"]


def test_a_video_whose_frames_a_release_holds_is_never_resampled(tmp_path):
    video = make_video(frames=2)
    pair = make_pair(video=video)
    publish(tmp_path / "v1")
    other = make_pair()
    # The release holds the frames even once no pair uses them any more (an edit of the pair's images).
    Pair.objects.filter(pk=pair.pk).update(image_1=other.image_1, image_2=other.image_2, video=other.video)
    with pytest.raises(ResampleRefused, match=r"release\(s\) v1 hold items of its current frames"):
        _check_no_pairs(video)
    problems = video_resample_problems(video=video, every=3.0, count=None)
    assert any("release(s) v1 hold items" in problem for problem in problems)

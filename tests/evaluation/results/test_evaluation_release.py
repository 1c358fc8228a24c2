"""Studies sample a release (issue 23, part 3): drawn from its split, shown and scored as released, whatever happens
to the pairs afterwards; studies made before releases keep working and say so."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from annotator.models import Category, Domain, Pair, ReleaseItem
from annotator.picking.services import pair_reopen, pair_review
from evaluation.models import Study, StudyItem
from evaluation.studies import participation, reports, sampling
from evaluation.studies import services as studies
from evaluation.studies.release_answers import human_answers_on_release
from tests.factories import DESKTOP_WINDOW, make_pair
from tests.release_factories import make_release

pytestmark = pytest.mark.django_db

CATS = (Category.STATE, Category.QUALITY, Category.ACTION)
DOMAINS = (Domain.NATURAL, Domain.GAMING)


def make_pool(n: int = 36) -> list[Pair]:
    pairs = []
    for i in range(n):
        category = CATS[i % 3]
        fields = {}
        if category == Category.ACTION:
            fields = {"question": "What did the person do?", "answer": "sat down", "distractors": ["stood up", "ran"]}
        if category == Category.STATE:
            fields = {"question": "In which image is the apple peeled more?"}
        pairs.append(make_pair(category=category, domain=DOMAINS[i // 3 % 2], **fields))
    return pairs


def every_fourth_in_val(pairs):
    val = {pair.pk for index, pair in enumerate(pairs) if index % 4 == 3}
    return lambda pair: "val" if pair.pk in val else "test"


def ready_participant(study: Study):
    participant = studies.participant_create(study=study)
    participant.consent()
    while (a := participation.participant_next_practice(participant=participant)) is not None:
        participation.assignment_answer(participant=participant, token=a.token, position=1)
    return participant


# --- The draw ---------------------------------------------------------------------------------------------------


def test_a_study_on_a_release_draws_only_its_test_split_stratified_and_seeded():
    pairs = make_pool(36)
    release = make_release(pairs, split_of=every_fourth_in_val(pairs))
    test_items = {item.pk: item for item in release.items.filter(split="test")}
    assert len(test_items) == 27
    # Drawn first, without practice: a study's practice pairs leave every later study's pool (practice is never
    # scored anywhere), so only then is the pool the same.
    again = studies.study_create(name="Again", release=release, fraction=0.5, seed=4, practice_count=0)
    study = studies.study_create(name="On v1", release=release, fraction=0.5, seed=4, practice_count=2)
    assert (study.release, study.split, study.pool_size) == (release, "test", 27)
    scored = list(study.items.scored())
    assert {item.release_item_id for item in scored} <= set(test_items)
    assert all(item.pair_id == test_items[item.release_item_id].pair_id for item in scored)
    # Stratified exactly as sampling.allocate apportions the test split's strata.
    strata = Counter((item.category, item.domain) for item in test_items.values())
    expected = {stratum: n for stratum, n in sampling.allocate(strata, 0.5, 4).items() if n}
    assert Counter((item.category, item.domain) for item in scored) == expected
    practice = list(study.items.practice())
    assert len(practice) == 2 and all(item.release_item_id in test_items for item in practice)
    assert not {item.release_item_id for item in practice} & {item.release_item_id for item in scored}
    # Seeded: the same release, fraction and seed give the same items.
    assert sorted(again.items.scored().values_list("release_item_id", flat=True)) == sorted(
        item.release_item_id for item in scored
    )
    assert study.baseline_label == "Humans on release v1 (test)"


def test_val_is_drawn_on_request_and_excluded_pairs_and_other_releases_stay_out():
    pairs = make_pool(24)
    make_release(pairs[:6])  # an older release: none of its items may be drawn
    release = make_release(pairs, split_of=every_fourth_in_val(pairs))
    Pair.objects.filter(pk=pairs[3].pk).update(excluded_from_studies=True)  # a val pair
    study = studies.study_create(name="Val", release=release, split="val", fraction=1, practice_count=0)
    drawn = set(study.items.scored().values_list("release_item_id", flat=True))
    val = set(release.items.filter(split="val").exclude(pair=pairs[3]).values_list("pk", flat=True))
    assert drawn == val and len(val) == 5 and study.split == "val"
    with pytest.raises(studies.StudyError, match="split: must be test or val"):
        studies.study_create(name="x", release=release, split="train")
    with pytest.raises(studies.StudyError, match="Release v2 has no test items matching the filters"):
        studies.study_create(name="x", release=release, categories=[Category.TEMPORAL])
    with pytest.raises(studies.StudyError, match="split: a split is a release's"):
        studies.study_create(name="x", split="test")


def test_attention_checks_come_from_the_release_outside_the_sample():
    pairs = make_pool(12)
    release = make_release(pairs[:10])
    study = studies.study_create(name="S", release=release, fraction=0.5, practice_count=0)
    outside = release.items.exclude(pk__in=study.items.values("release_item")).first()
    [check] = studies.study_add_attention_checks(study=study, pair_ids=[outside.pair_id])
    assert (check.release_item, check.kind) == (outside, StudyItem.Kind.ATTENTION)
    with pytest.raises(studies.StudyError, match=f"pair {pairs[11].pk} is not in release v1"):
        studies.study_add_attention_checks(study=study, pair_ids=[pairs[11].pk])


# --- Shown and scored as released ---------------------------------------------------------------------------------


def correct_the_pair(pair: Pair, reviewer, coordinator) -> None:
    """A reviewer's correction after the release, through the pair's own services: question and answer change."""
    pair_reopen(pair=pair, by=coordinator, reason="the answer was wrong")
    pair.refresh_from_db()
    pair_review(
        pair=pair,
        reviewer=reviewer,
        decision="correct",
        version=pair.version,
        corrections={
            "question": "In which image is the apple peeled less?",
            "answer": "first image",
            "distractors": ["second image"],
        },
    )


def test_a_pair_corrected_after_the_release_changes_neither_the_page_nor_the_scoring(
    client, client_for, reviewer, coordinator
):
    pair = make_pair(category=Category.STATE, question="In which image is the apple peeled more?")
    release = make_release([pair], swapped={pair.pk})
    record = release.items.get().record
    assert (record["answer"], record["distractors"]) == ("first image", ["second image"])  # traded and flipped
    study = studies.study_create(name="Frozen", release=release, fraction=1, practice_count=0)
    participant = studies.participant_create(study=study)
    client.post(f"/p/{participant.token}/consent/", {"agree": "yes", **DESKTOP_WINDOW})

    correct_the_pair(pair, reviewer, coordinator)
    pair.refresh_from_db()
    assert (pair.question, pair.answer, pair.status) == (
        "In which image is the apple peeled less?",
        "first image",
        "accepted",
    )
    assert ReleaseItem.objects.get().line == json.dumps(record, ensure_ascii=False)  # the release never changes

    page = client.get(f"/p/{participant.token}/practice/", follow=True).content.decode()
    assert "In which image is the apple peeled more?" in page and "peeled less" not in page
    assignment = participant.assignments.get()
    shown = participation.shown_options(assignment)
    assert sorted(shown) == ["first image", "second image"]
    # Answer as the released record says ("first image": the pair's second image, shown first).
    client.post(
        f"/p/{participant.token}/items/{assignment.token}/",
        {"option": shown.index("first image") + 1, "client_key": "k1"},
    )
    assignment.refresh_from_db()
    assert assignment.correct is True
    item = study.items.get()
    assert item.question_id == release.items.get().item_id
    assert item.presented().image_1 == pair.image_2 and item.presented().answer == "first image"
    assert human_answers_on_release(release) == [(item.question_id, participant.rater_key, True)]
    row = reports.responses_csv(study).splitlines()[1].split(",")
    assert row[4] == item.question_id and row[9] == "first image" and row[10] == "1"
    summary = client_for(coordinator).get(f"/studies/{study.pk}/summary.json").json()
    assert summary["study"]["baseline"] == "Humans on release v1 (test)"
    assert summary["study"]["release"]["name"] == "v1" and summary["accuracy"]["micro"]["correct"] == 1


def test_the_image_urls_serve_the_released_order():
    pair = make_pair(category=Category.STATE, question="In which image is the apple peeled more?")
    release = make_release([pair], swapped={pair.pk})
    study = studies.study_create(name="Order", release=release, fraction=1, practice_count=0)
    participant = ready_participant(study)
    assignment = participation.participant_next_item(participant=participant)
    assert assignment.item.presented().image(1) == pair.image_2
    assert assignment.item.presented().image(2) == pair.image_1


def test_human_answers_on_a_release_hold_scored_answers_only_with_stable_opaque_rater_keys():
    pairs = make_pool(12)
    release = make_release(pairs[:10])
    study = studies.study_create(name="S", release=release, fraction=0.5, practice_count=2)
    outside = release.items.exclude(pk__in=study.items.values("release_item")).first()
    studies.study_add_attention_checks(study=study, pair_ids=[outside.pair_id])
    before = studies.study_create(name="Before", fraction=1, practice_count=0)  # not on the release
    for one in (study, before):
        participation.participant_answer_all(participant=studies.participant_create(study=one), accuracy=1, seed=1)
    answers = human_answers_on_release(release)
    scored = {item.release_item.item_id for item in study.items.scored().select_related("release_item")}
    assert [item_id for item_id, _, _ in answers] == sorted(scored)  # no practice, no attention check
    participant = study.participants.get()
    assert {key for _, key, _ in answers} == {participant.rater_key}
    assert participant.token not in participant.rater_key and len(participant.rater_key) == 16
    assert all(correct for _, _, correct in answers)


# --- Before releases -----------------------------------------------------------------------------------------------


def test_a_study_before_releases_still_shows_the_live_pair_and_says_so(client, client_for, coordinator):
    make_pool(6)
    study = studies.study_create(name="Old", fraction=1, practice_count=0)
    assert study.release is None and not study.items.filter(release_item__isnull=False).exists()
    item = study.items.first()
    assert item.presented().question == item.pair.question and item.presented().image_1 == item.pair.image_1
    participant = ready_participant(study)
    assignment = participation.participant_next_item(participant=participant)
    correct = assignment.permutation.index(0) + 1
    participation.assignment_answer(participant=participant, token=assignment.token, position=correct)
    assignment.refresh_from_db()
    assert assignment.correct is True
    page = client_for(coordinator).get(f"/studies/{study.pk}/").content.decode()
    assert "Humans on the accepted pairs (before releases)" in page
    assert "before releases" in client_for(coordinator).get("/studies/").content.decode()


def test_the_dashboard_header_names_the_release_and_split(client_for, coordinator):
    pairs = make_pool(8)
    release = make_release(pairs, split_of=every_fourth_in_val(pairs))
    study = studies.study_create(name="Header", release=release, split="val", fraction=1, practice_count=0)
    page = client_for(coordinator).get(f"/studies/{study.pk}/").content.decode()
    assert '<span class="badge" id="baseline">Humans on release v1 (val)</span>' in page
    assert "from the 2 val items of release v1" in page


# --- Entry points without a release ---------------------------------------------------------------------------------

FORM = {"name": "F", "fraction": "1", "seed": "0", "raters_per_item": "1", "practice_count": "0"}
FORM |= {"items_per_participant": "0", "invites": "0", "open_cap": "0"}


def test_the_form_and_the_api_say_publish_a_release_first_when_there_is_none(client_for, coordinator):
    make_pool(3)
    client = client_for(coordinator)
    page = client.get("/studies/").content.decode()
    assert "No release yet: publish a release first." in page
    refused = client.post("/studies/create/", FORM)
    assert refused.status_code == 302 and not Study.objects.exists()
    assert "publish a release first" in client.get(refused["Location"]).content.decode()
    api = client.post("/api/studies/create/", {"name": "A"}, content_type="application/json")
    assert api.status_code == 400 and "publish a release first" in json.dumps(api.json())
    assert not Study.objects.exists()


def test_the_form_and_the_api_default_to_the_latest_release_and_take_another(client_for, coordinator):
    pairs = make_pool(6)
    make_release(pairs[:3])
    latest = make_release(pairs)
    client = client_for(coordinator)
    assert '<option value="v2" selected>v2' in client.get("/studies/").content.decode()
    created = client.post("/studies/create/", FORM | {"release": "2"})
    assert Study.objects.get(name="F").release == latest and created.status_code == 302
    response = client.post("/api/studies/create/", {"name": "A", "fraction": 1}, content_type="application/json")
    assert (response.status_code, response.json()["release"], response.json()["baseline"]) == (
        201,
        2,
        "Humans on release v2 (test)",
    )
    assert response.json()["release_name"] == "v2"
    older = client.post("/api/studies/create/", {"name": "B", "release": 1}, content_type="application/json")
    assert older.status_code == 201 and Study.objects.get(name="B").items.scored().count() >= 1
    assert Study.objects.get(name="B").release.number == 1
    missing = client.post("/api/studies/create/", {"name": "C", "release": 9}, content_type="application/json")
    assert missing.status_code == 400 and "no release v9 (releases: v2, v1)" in json.dumps(missing.json())

"""The description task against two real loopback servers (tests/model_server.py): a fake model that describes each
pair by a table of ours, and a fake judge that answers by a rule of ours (yes when the description holds the caption,
a reply without a verdict for a description that says "unsure"). Circular evaluation: an item counts right only when
right in every rotation of its options, a reply without a letter is a wrong answer in its rotation (the item stays in
every denominator), and each rotation is asked with the run's strategy."""

from __future__ import annotations

import base64
import json
from fractions import Fraction
from io import StringIO

import numpy as np
import pytest
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command

from annotator.llm.endpoints import endpoint_create
from annotator.models import Category, Job, Pair
from benchmark.description import JUDGE_SYSTEM
from evaluation.models import JudgeVerdict, ModelEvaluation, ModelItemResult
from evaluation.results.compare import model_sources, release_compare, run_side
from evaluation.results.judge_check import judge_agreement
from evaluation.results.release_report import release_report_of
from evaluation.runs.description import accuracy_table
from evaluation.runs.results_files import results_file
from evaluation.runs.selectors import model_answers_on_release
from evaluation.runs.services import evaluation_items, evaluation_run, evaluation_start
from evaluation.runs.strategies import default_prompt
from evaluation.runs.summaries import evaluation_summary
from subtlebench.errors import Invalid
from tests.factories import make_image, make_pair, make_video
from tests.model_server import ModelServer
from tests.modeleval_release_factories import make_release

pytestmark = pytest.mark.django_db

# pair name -> (category, caption, the fake model's description, the judge's expected verdict: None = no verdict)
TABLE = {
    "walks": (Category.TEMPORAL, "the man walks forward", "In the second image the man walks forward.", True),
    "mug": (Category.ATTRIBUTE, "the mug turned red", "The mug turned blue.", False),
    "cup": (Category.SPATIAL, "the cup moved left", "The cup moved left and a shadow appeared.", True),
    "blur": (Category.QUALITY, "the image is blurrier", "unsure", None),
}


def judge_rule(seen) -> str:
    """The fake judge: yes when the description holds the caption (case aside), no otherwise; no verdict at all
    when the description is "unsure"."""
    text = seen.text
    caption = text.split("Reference (the person's caption):\n", 1)[1].split("\n\n", 1)[0]
    description = text.split("Description to grade:\n", 1)[1].split("\n\n", 1)[0]
    if description == "unsure":
        return "I cannot tell from these texts."
    verdict = "yes" if caption.lower() in description.lower() else "no"
    return f"### Reasoning\nCompared the texts.\n\n### Verdict\n{verdict}"


def data_url(image) -> str:
    with default_storage.open(image.file.name, "rb") as handle:
        return "data:image/png;base64," + base64.b64encode(handle.read()).decode()


@pytest.fixture
def world():
    # Each pair its own first image (the factory's videos all share their frames' pixels): the fake model tells the
    # pairs apart by it.
    pairs = {}
    for number, (name, (category, _, _, _)) in enumerate(TABLE.items()):
        pair = make_pair(category=category)
        Pair.objects.filter(pk=pair.pk).update(
            image_1=make_image(shift=20 + 7 * number, name=f"described/{number}.jpg")
        )
        pair.refresh_from_db()
        pairs[name] = pair
    pairs["uncaptioned"] = make_pair(category=Category.TEMPORAL)
    pairs["val"] = make_pair(category=Category.TEMPORAL)
    captions = {pairs[name].pk: caption for name, (_, caption, _, _) in TABLE.items()}
    captions[pairs["val"].pk] = "the val caption"
    release = make_release(
        [(pair, "val" if name == "val" else "test", False) for name, pair in pairs.items()], captions=captions
    )
    descriptions = {data_url(pairs[name].image_1): text for name, (_, _, text, _) in TABLE.items()}
    model = ModelServer(model="tiny-vlm").start()
    model.reply = lambda seen: descriptions[seen.images[0]] if seen.images else None
    judge = ModelServer(model="tiny-judge").start()
    judge.reply = judge_rule
    yield {"pairs": pairs, "release": release, "model": model, "judge": judge}
    model.stop()
    judge.stop()


def endpoints(coordinator, world):
    model = endpoint_create(
        user=coordinator, name="describer", base_url=world["model"].base_url, model_id="tiny-vlm", timeout_s=5
    )
    judge = endpoint_create(
        user=coordinator, name="judge", base_url=world["judge"].base_url, model_id="tiny-judge", timeout_s=5
    )
    return model, judge


def test_the_judge_scores_each_description_by_its_rule_and_only_captioned_items_are_asked(world, coordinator, settings):
    settings.MODEL_EVAL_ITEM_TRIES = 2
    model, judge = endpoints(coordinator, world)
    evaluation = evaluation_start(
        endpoint=model, user=coordinator, source="release", release=world["release"], task="description", judge=judge
    )
    assert evaluation.items == 4 and evaluation.judge == judge and evaluation.prompt["user"]
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    rows = {row.pair_id: row for row in evaluation.results.all()}
    pairs = world["pairs"]
    # The uncaptioned item and the other split's were never asked.
    assert set(rows) == {pairs[name].pk for name in TABLE}
    for name, (_, _, description, verdict) in TABLE.items():
        row = rows[pairs[name].pk]
        assert row.response_text == description
        assert row.is_correct is verdict, name
    unsure = rows[pairs["blur"].pk]
    assert unsure.failure == "malformed" and "no verdict (yes or no)" in unsure.failure_message
    assert unsure.asks == 2
    assert (evaluation.answered, evaluation.correct, evaluation.failed) == (3, 2, 1)
    # The model got the official free-form layout: the instruction, then the two images as PNG data URLs.
    asked = world["model"].requests[0].body["messages"]
    assert [part["type"] for part in asked[1]["content"]] == ["text", "image_url", "image_url"]
    # The judge got text only: our judge prompt, the caption and the description, never the images.
    graded = world["judge"].requests[0]
    assert graded.system == JUDGE_SYSTEM and graded.images == []
    assert graded.body["temperature"] == 0
    # Accuracy per category with intervals, over the answered items.
    table = accuracy_table(evaluation)
    assert (table["overall"]["correct"], table["overall"]["n"]) == (2, 3)
    assert table["overall"]["low"] < 2 / 3 < table["overall"]["high"]
    assert {c: (cell["correct"], cell["n"]) for c, cell in table["categories"].items()} == {
        "temporal": (1, 1),
        "attribute": (0, 1),
        "spatial": (1, 1),
    }
    # The results file: the official free-form layout with the judge's verdicts.
    document = results_file(evaluation)
    assert document["total_pairs"] == 4 and document["evaluated_pairs"] == 3 and document["judge_model"] == "tiny-judge"
    by_name = {entry["base_name"]: entry for entry in document["results"]}
    walks = by_name[rows[pairs["walks"].pk].question_id]
    assert walks["caption"] == "the man walks forward" and walks["judge_match"] is True
    assert document["accuracy_intervals"]["categories"]["attribute"]["accuracy"] == 0.0


def test_a_custom_judge_prompt_is_stored_with_the_run_and_sent(world, coordinator):
    model, judge = endpoints(coordinator, world)
    prompt = {
        "system": "Grade strictly.",
        "user": "Reference (the person's caption):\n{caption}\n\nDescription to grade:\n{description}\n\nSame change?",
    }
    evaluation = evaluation_start(
        endpoint=model,
        user=coordinator,
        source="release",
        release=world["release"],
        task="description",
        judge=judge,
        judge_prompt=prompt,
    )
    assert evaluation.judge_prompt == prompt
    evaluation_run(evaluation_id=evaluation.pk)
    assert {seen.system for seen in world["judge"].requests} == {"Grade strictly."}
    assert all(seen.text.endswith("Same change?") for seen in world["judge"].requests)


def test_a_description_run_without_a_judge_or_a_caption_is_refused(world, coordinator):
    model, judge = endpoints(coordinator, world)
    release = world["release"]
    with pytest.raises(Invalid) as refused:
        evaluation_start(endpoint=model, user=coordinator, source="release", release=release, task="description")
    assert "Name the judge" in str(refused.value.errors["judge"])
    with pytest.raises(Invalid) as refused:
        evaluation_start(
            endpoint=model,
            user=coordinator,
            source="release",
            release=release,
            task="description",
            judge=judge,
            judge_prompt={"user": "no placeholders"},
        )
    assert "lacks {caption}" in str(refused.value.errors["judge_prompt"])
    bare = make_release([(make_pair(), "test", False)], number=2)
    with pytest.raises(Invalid) as refused:
        evaluation_start(
            endpoint=model, user=coordinator, source="release", release=bare, task="description", judge=judge
        )
    assert "has a caption" in str(refused.value.errors["task"])
    with pytest.raises(Invalid):
        evaluation_start(
            endpoint=model,
            user=coordinator,
            source="release",
            release=release,
            task="description",
            judge=judge,
            circular=True,
        )
    assert not ModelEvaluation.objects.exists()


def test_circular_evaluation_counts_an_item_right_only_when_right_in_every_rotation(coordinator):
    attribute = dict(
        question="What changed about the mug?", answer="its colour", distractors=["its size", "its texture"]
    )
    pairs = {
        "steady": make_pair(category=Category.ATTRIBUTE, **attribute),
        "not-last": make_pair(
            category=Category.SPATIAL, question="How did the cup move?", answer="left", distractors=["right", "up"]
        ),
        "first": make_pair(category=Category.TEMPORAL),  # binary: "second image" or "first image"
    }
    release = make_release([(pair, "test", False) for pair in pairs.values()])
    answers = {pair.question: pair.answer for pair in pairs.values()}

    def policy(question: str, options: list[str]) -> str:
        if question == "What changed about the mug?":
            return answers[question]  # always right
        if question == "How did the cup move?":  # right unless the answer is shown last
            return answers[question] if options[-1] != answers[question] else options[0]
        return options[0]  # position bias: right in one rotation of two

    server = ModelServer(policy=policy).start()
    try:
        endpoint = endpoint_create(user=coordinator, name="m", base_url=server.base_url, model_id="tiny-vlm")
        evaluation = evaluation_start(
            endpoint=endpoint, user=coordinator, source="release", release=release, circular=True
        )
        assert evaluation.circular
        evaluation = evaluation_run(evaluation_id=evaluation.pk)
    finally:
        server.stop()
    assert evaluation.job.status == Job.Status.SUCCEEDED
    rows = {row.pair_id: row for row in evaluation.results.all()}
    steady, not_last, first = rows[pairs["steady"].pk], rows[pairs["not-last"].pk], rows[pairs["first"].pk]
    # One request per rotation: as many as the item has options.
    assert server.sent("What changed about the mug?") == 3 and server.sent("How did the cup move?") == 3
    assert server.sent("Which image was taken later?") == 2
    assert steady.is_correct is True and len(steady.rotations) == 3
    # Right in two rotations of three, wrong in the one that shows the answer last: wrong.
    assert not_last.is_correct is False and len(not_last.rotations) == 3
    # The letters differ by rotation for the steady item (the answer moves), and the biased one always says A.
    assert len(set(steady.rotations)) == 3 and first.rotations == ["A", "A"] and first.is_correct is False
    assert (evaluation.answered, evaluation.correct) == (3, 1)


GARBLED = "I cannot tell which option is right."


def test_a_circular_run_counts_a_rotation_without_a_letter_wrong_and_keeps_the_item_in_every_denominator(
    coordinator, client_for
):
    # 117 items of three options: 78 answered right in every rotation, 38 with a position bias (the first option:
    # right in one rotation of three), and one answered right except in its second rotation, where the reply has
    # no letter. Scored as the official evaluator scores an unparsable reply: 78 of 117, not 78 of 116.
    video = make_video(frames=2)
    categories = [Category.ATTRIBUTE, Category.SPATIAL, Category.EXISTENCE]
    pairs = [
        make_pair(
            video=video,
            category=categories[number % 3],
            question=f"What changed in item {number}?",
            answer="the true change",
            distractors=["a wrong change", "another wrong change"],
        )
        for number in range(117)
    ]
    release = make_release([(pair, "test", False) for pair in pairs])
    steady = {pair.question for pair in pairs[:78]} | {pairs[116].question}
    hard = pairs[116]

    def policy(question: str, options: list[str]) -> str:
        return "the true change" if question in steady else options[0]

    server = ModelServer(policy=policy).start()
    try:
        endpoint = endpoint_create(user=coordinator, name="m", base_url=server.base_url, model_id="tiny-vlm")
        evaluation = evaluation_start(
            endpoint=endpoint, user=coordinator, source="release", release=release, circular=True
        )
        [shown] = [item for item in evaluation_items(evaluation) if item.question == hard.question]
        second_rotation = shown.options[1:] + shown.options[:1]
        server.reply = lambda seen: (
            GARBLED if seen.question == hard.question and seen.options == second_rotation else None
        )
        evaluation = evaluation_run(evaluation_id=evaluation.pk)
    finally:
        server.stop()
    job = evaluation.job
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.errors
    # An answer, not a failure: asked once per rotation and never again.
    assert server.sent(hard.question) == 3 and len(server.requests) == 3 * 117
    row = evaluation.results.get(pair=hard)
    assert row.is_correct is False and row.failure == "" and row.parse_outcome == "unparsable"
    correct_letters = ["ABC"[(shown.correct_index - shift) % 3] for shift in range(3)]
    assert row.rotations == [correct_letters[0], "", correct_letters[2]]
    assert GARBLED in row.response_text.split("[rotation 1]")[1]

    # The stored counts, the summary stored at the end and a fresh one, the table with intervals.
    assert (evaluation.items, evaluation.answered, evaluation.correct, evaluation.failed) == (117, 117, 78, 0)
    assert evaluation.unparsable == 1 and evaluation.accuracy == 78 / 117
    for summary in (job.result, evaluation_summary(evaluation)):
        assert (summary["answered"], summary["correct"], summary["failed"], summary["unparsable"]) == (117, 78, 0, 1)
        assert summary["accuracy"] == 78 / 117
        assert sum(cell["answered"] for cell in summary["per_category"].values()) == 117
        assert summary["per_category"][hard.category]["unparsable"] == 1
    table = accuracy_table(evaluation)
    assert (table["overall"]["correct"], table["overall"]["n"]) == (78, 117)

    # The results file: the item is an answered, wrong entry with its three rotations, the second without a letter.
    document = results_file(evaluation)
    assert (document["answered_count"], document["correct_count"], document["failed_count"]) == (117, 78, 0)
    assert document["accuracy"] == 78 / 117 and document["unparsable_count"] == 1 and document["circular"] is True
    [entry] = [entry for entry in document["questions"] if entry["question_id"] == row.question_id]
    assert entry["is_correct"] is False and "error" not in entry and entry["parse_outcome"] == "unparsable"
    assert [r["predicted_answer"] for r in entry["rotations"]] == [correct_letters[0], None, correct_letters[2]]
    assert [r["correct_letter"] for r in entry["rotations"]] == correct_letters
    assert [r["is_correct"] for r in entry["rotations"]] == [True, False, True]
    assert [r["parse_outcome"] for r in entry["rotations"]] == ["parsed", "unparsable", "parsed"]
    assert entry["rotations"][1]["options"] == second_rotation
    steady_entries = [e for e in document["questions"] if e["is_correct"]]
    assert len(steady_entries) == 78 and all(len(e["rotations"]) == 3 for e in steady_entries)

    # The release report, the compare page's table and a paired side read the same outcome.
    answers_on_release = model_answers_on_release(release)
    [(label, given)] = answers_on_release.items()
    assert len(given) == 117 and dict(given)[row.question_id] is False
    [model_row] = release_report_of(release).models
    assert model_row.micro.items == 117 and model_row.micro.estimate == Fraction(78, 117)
    [compared] = release_compare(release=release)["runs"]
    assert (compared["own"]["correct"], compared["own"]["n"], compared["failed"]) == (78, 117, 0)
    side = run_side(evaluation, "test")
    assert len(side) == 117 and side[row.release_item_id][0] == 0
    api = client_for(coordinator).get(f"/api/models/runs/{evaluation.pk}/").json()
    assert (api["answered"], api["failed"], api["unparsable"], api["accuracy"]) == (117, 0, 1, 78 / 117)


@pytest.mark.parametrize("strategy", ["highlight", "two_stage"])
def test_a_circular_run_asks_every_rotation_with_the_runs_strategy(coordinator, strategy):
    pair = make_pair(
        category=Category.SPATIAL, question="How did the cup move?", answer="left", distractors=["right", "up"]
    )
    pair.image_1, pair.image_2 = make_image(shift=0), make_image(shift=6)  # the square moved: boxes to draw
    pair.save()
    release = make_release([(pair, "test", False)])
    server = ModelServer(policy=lambda question, options: "left").start()
    try:
        endpoint = endpoint_create(user=coordinator, name="m", base_url=server.base_url, model_id="tiny-vlm")
        evaluation = evaluation_start(
            endpoint=endpoint, user=coordinator, source="release", release=release, circular=True, strategy=strategy
        )
        evaluation = evaluation_run(evaluation_id=evaluation.pk)
    finally:
        server.stop()
    row = evaluation.results.get()
    assert row.is_correct is True and len(row.rotations) == 3
    answered = [seen for seen in server.requests if seen.options]
    assert len(answered) == 3 and len({tuple(seen.options) for seen in answered}) == 3
    assert {seen.system for seen in answered} == {default_prompt(strategy)["system"]}
    if strategy == "highlight":
        # Every rotation's images carry the computed boxes.
        for seen in answered:
            for image in seen.decoded():
                pixels = np.asarray(image).astype(int)
                assert ((pixels[..., 0] > 190) & (pixels[..., 1] < 70) & (pixels[..., 2] < 70)).any(), "no red box"
    else:
        # One description, then every rotation with it.
        [described] = [seen for seen in server.requests if not seen.options]
        assert described.system == default_prompt("two_stage")["describe_system"]
        assert all(server.description in seen.text for seen in answered)
        assert row.first_response == server.description


def test_a_circular_run_with_llm_extraction_is_refused(coordinator):
    release = make_release([(make_pair(), "test", False)])
    endpoint = endpoint_create(user=coordinator, name="m", base_url="http://127.0.0.1:9/v1", model_id="tiny-vlm")
    with pytest.raises(Invalid) as refused:
        evaluation_start(
            endpoint=endpoint,
            user=coordinator,
            source="release",
            release=release,
            circular=True,
            extraction_endpoint=endpoint,
            send=False,
        )
    assert "one per rotation" in " ".join(refused.value.errors["extraction_endpoint"])
    assert not ModelEvaluation.objects.exists()


# --- The judge checked by people -------------------------------------------------------------------------------


def judged_run(world, coordinator):
    model, judge = endpoints(coordinator, world)
    evaluation = evaluation_start(
        endpoint=model, user=coordinator, source="release", release=world["release"], task="description", judge=judge
    )
    return evaluation_run(evaluation_id=evaluation.pk)


def test_people_judge_the_sample_blind_and_the_report_shows_the_judges_kappa(
    world, coordinator, reviewer, client_for, settings
):
    settings.MODEL_EVAL_ITEM_TRIES = 1
    evaluation = judged_run(world, coordinator)
    pairs = world["pairs"]
    # The person's verdicts: the walking man matches, the mug and the cup do not. The judge said yes, no, yes.
    person = {pairs["walks"].pk: "yes", pairs["mug"].pk: "no", pairs["cup"].pk: "no"}
    client = client_for(reviewer)
    url = f"/models/runs/{evaluation.pk}/judge-check/"
    for step in range(3):
        page = client.get(url)
        html = page.content.decode()
        assert page.status_code == 200 and f"you judged {step} of 3" in html
        result = page.context["result"]
        assert page.context["caption"] == TABLE[next(n for n, p in pairs.items() if p.pk == result.pair_id)][1]
        # Blind: neither the judge's reply nor its verdict is on the page.
        assert result.judge_text not in html and "Verdict" not in html
        answer = client.post(url, {"result": result.pk, "verdict": person[result.pair_id]})
        assert answer.status_code == 302
    page = client.get(url)
    assert page.context["result"] is None and 'id="judge-check-done"' in page.content.decode()
    # A second verdict on one description is refused, and nothing changes.
    first = evaluation.results.filter(is_correct__isnull=False).first()
    client.post(url, {"result": first.pk, "verdict": "yes"}, follow=True)
    assert JudgeVerdict.objects.count() == 3
    # Judge (yes, no, yes) against the person (yes, no, no): po = 2/3; judge yes 2/3, person yes 1/3;
    # pe = 2/3 * 1/3 + 1/3 * 2/3 = 4/9; kappa = (2/3 - 4/9) / (1 - 4/9) = (2/9) / (5/9) = 0.4;
    # SE = sqrt((2/3)(1/3) / (3 * (5/9)^2)) = sqrt(0.24) = 0.4899; 0.4 -+ 1.96 * 0.4899 = [-0.560, 1.36 -> 1].
    agreement = judge_agreement(evaluation)
    assert agreement["units"] == 3 and agreement["people"] == 1
    assert agreement["kappa"] == pytest.approx(0.4) and agreement["agreement"] == pytest.approx(2 / 3)
    assert agreement["low"] == pytest.approx(0.4 - 1.959963984540054 * 0.24**0.5) and agreement["high"] == 1.0
    report = client_for(coordinator).get(f"/releases/v{world['release'].number}/report/")
    html = report.content.decode()
    assert 'id="report-descriptions"' in html and "<strong>0.40</strong>" in html and "-0.56 to 1.00" in html


def test_two_people_on_the_same_eleven_descriptions_count_the_judges_verdicts_eleven_times(
    world, coordinator, reviewer, client_for, settings
):
    """The world of benchmark's panel test (tests/benchmark/test_paired.py): the judge says yes on seven descriptions
    and no on four; rita (a reviewer) and cora (the coordinator) judge all eleven. Per description their share of yes
    is 1 1 1 1 1 1/2 0 | 0 0 1/2 1; po = 8/11, pe = 65/121, kappa = 23/56 = 0.4107; n = 11, so SE 0.290144 and
    [-0.157958, 0.979387]. The 22 verdicts counted as units would give the too-narrow [0.0086, 0.8128]."""
    settings.MODEL_EVAL_ITEM_TRIES = 1
    evaluation = judged_run(world, coordinator)
    judged = list(evaluation.results.filter(is_correct__isnull=False))
    assert sorted(result.is_correct for result in judged) == [False, True, True]
    for number, verdict in enumerate([True] * 5 + [False] * 3):
        judged.append(
            ModelItemResult.objects.create(
                evaluation=evaluation,
                question_id=f"temporal_extra_{number}",
                category=Category.TEMPORAL,
                domain="natural",
                correct_letter="A",
                is_correct=verdict,
            )
        )
    ordered = sorted(judged, key=lambda result: (not result.is_correct, result.pk))  # the seven yes, then the four no
    assert "".join("Y" if result.is_correct else "N" for result in ordered) == "YYYYYYYNNNN"
    for person, labels in ((reviewer, "YYYYYYNNNNY"), (coordinator, "YYYYYNNNNYY")):
        for result, label in zip(ordered, labels, strict=True):
            JudgeVerdict.objects.create(result=result, reviewer=person, matches=label == "Y")
    agreement = judge_agreement(evaluation)
    assert (agreement["units"], agreement["verdicts"], agreement["descriptions"], agreement["people"]) == (
        11,
        22,
        11,
        2,
    )
    assert agreement["kappa"] == pytest.approx(23 / 56, abs=1e-12) and agreement["agreement"] == pytest.approx(8 / 11)
    assert (round(agreement["low"], 6), round(agreement["high"], 6)) == (-0.157958, 0.979387)
    html = client_for(coordinator).get(f"/releases/v{world['release'].number}/report/").content.decode()
    assert '22 <span class="muted">(11 descriptions, 2 people)</span>' in html and "-0.16 to 0.98" in html


def test_the_judge_check_page_refuses_anonymous_wrong_roles_wrong_methods_and_other_runs(
    world, coordinator, annotator, client, client_for
):
    evaluation = judged_run(world, coordinator)
    url = f"/models/runs/{evaluation.pk}/judge-check/"
    assert client.get(url).status_code == 302  # to the login page
    assert client_for(annotator).get(url).status_code == 403
    coordinator_client = client_for(coordinator)
    assert coordinator_client.put(url).status_code == 405
    plain = evaluation_start(
        endpoint=evaluation.endpoint, user=coordinator, source="release", release=world["release"], send=False
    )
    assert coordinator_client.get(f"/models/runs/{plain.pk}/judge-check/").status_code == 404
    # A result outside the run's sample is refused with a message, nothing stored.
    page = coordinator_client.post(url, {"result": "999999", "verdict": "yes"}, follow=True)
    assert "not in the sample" in page.content.decode() and not JudgeVerdict.objects.exists()


# --- The API and the start page --------------------------------------------------------------------------------


def test_the_api_starts_a_description_run_and_gives_its_intervals_and_results_file(world, coordinator, client_for):
    model, judge = endpoints(coordinator, world)
    client = client_for(coordinator)
    body = {
        "endpoint": model.pk,
        "source": "release",
        "release": world["release"].pk,
        "task": "description",
        "judge": judge.pk,
        "judge_prompt": {
            "user": "Reference (the person's caption):\n{caption}\n\nDescription to grade:\n{description}"
        },
    }
    response = client.post("/api/models/runs/create/", body, content_type="application/json")
    assert response.status_code == 202, response.content
    run = response.json()
    assert (run["task"], run["judge"], run["circular"]) == ("description", "judge", False)
    evaluation_run(evaluation_id=run["id"])
    detail = client.get(f"/api/models/runs/{run['id']}/").json()
    assert (detail["intervals"]["overall"]["correct"], detail["intervals"]["overall"]["n"]) == (2, 3)
    assert set(detail["intervals"]["categories"]) == {"temporal", "attribute", "spatial"}
    document = client.get(f"/api/models/runs/{run['id']}/results/").json()
    assert document["judge_prompt"]["user"].endswith("{description}") and len(document["results"]) == 4
    # A judge on a multiple-choice run is refused, the field named.
    refused = client.post(
        "/api/models/runs/create/", {**body, "task": "multiple_choice"}, content_type="application/json"
    )
    assert refused.status_code == 400 and "judge" in refused.json()["errors"]


def test_the_start_page_starts_a_description_run_with_the_judge_prompt_as_edited(world, coordinator, client_for):
    model, judge = endpoints(coordinator, world)
    client = client_for(coordinator)
    form = client.get("/models/runs/new/")
    assert "{caption}" in form.content.decode() and 'name="circular"' in form.content.decode()
    response = client.post(
        "/models/runs/new/",
        {
            "endpoint": model.pk,
            "source": "release",
            "release": world["release"].pk,
            "split": "test",
            "seed": 0,
            "task": "description",
            "judge": judge.pk,
            "judge_system": "Be strict.\r\nReally.",
            "judge_user": "C: {caption} D: {description}",
        },
    )
    evaluation = ModelEvaluation.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/models/runs/{evaluation.pk}/"
    assert evaluation.task == "description" and evaluation.judge == judge
    assert evaluation.judge_prompt == {"system": "Be strict.\nReally.", "user": "C: {caption} D: {description}"}
    assert evaluation.items == 4


def test_evaluate_model_runs_the_description_task_with_a_judge_and_writes_the_free_form_file(
    world, coordinator, tmp_path
):
    endpoints(coordinator, world)
    out, said = tmp_path / "ff.json", StringIO()
    with pytest.raises(CommandError, match="1 of 4 items have no answer"):  # the "unsure" one: no verdict
        call_command(
            "evaluate_model", "describer", "--release", "v1", "--judge", "judge", "--out", str(out), stdout=said
        )
    assert "spatial" in said.getvalue() and "all             2 / 3" in said.getvalue()
    document = json.loads(out.read_text())
    assert document["judge_model"] == "tiny-judge" and document["evaluated_pairs"] == 3
    with pytest.raises(CommandError, match="--judge nobody: no model of that name"):
        call_command("evaluate_model", "describer", "--release", "v1", "--judge", "nobody", stdout=StringIO())


def test_a_judge_that_does_not_serve_its_model_fails_the_run_before_anything_is_sent(world, coordinator):
    model, judge = endpoints(coordinator, world)
    world["judge"].served = ["another-judge"]
    evaluation = evaluation_start(
        endpoint=model, user=coordinator, source="release", release=world["release"], task="description", judge=judge
    )
    evaluation = evaluation_run(evaluation_id=evaluation.pk)
    job = evaluation.job
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert job.errors[0].startswith("the judge judge: model tiny-judge is not served by judge; it serves: another")
    assert world["model"].requests == [] and not evaluation.results.exists()


def test_a_description_run_counts_in_no_models_correct_k_of_n_of_a_pair(world, coordinator, settings):
    settings.MODEL_EVAL_ITEM_TRIES = 1
    evaluation = judged_run(world, coordinator)
    assert evaluation.answered == 3
    scores = Pair.objects.filter(pk=world["pairs"]["walks"].pk).with_model_score().get()
    assert (scores.model_answered, scores.model_correct) == (0, 0)
    assert model_sources() == []

"""Models beside the humans, and hard pairs (issue 16, parts 4 and 6), on a small fixture worked by hand.

Six sampled pairs, two categories, two domains:

    pair  category  domain   humans      model A (latest run)   imported file
    t1    temporal  natural  T T         wrong                  right
    t2    temporal  natural  T F         right                  right
    t3    temporal  gaming   (none)      right                  right
    s1    state     natural  T           wrong (older: right)   wrong
    s2    state     gaming   F           request failed         wrong
    s3    state     gaming   T T F       wrong                  wrong
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from fractions import Fraction

import pytest
from django.core.management import call_command
from django.utils import timezone

from annotator.export.services import ExportOptions, benchmark_export
from annotator.models import Category, Domain, Pair
from annotator.picking.services import model_success_by_category
from benchmark.report import score_cell
from evaluation.models import Assignment, Participant
from evaluation.results.beside import human_right_model_missed, models_overview
from evaluation.results.study_summary import study_summary
from evaluation.studies import services as studies
from tests import export_fixtures
from tests.factories import make_pair
from tests.model_fixtures import import_into_study, make_endpoint, make_run, record

pytestmark = pytest.mark.django_db

T, S = Category.TEMPORAL, Category.STATE
NAT, GAM = Domain.NATURAL, Domain.GAMING

# Wilson 95% intervals, worked by hand (z = 1.96): 2/3 -> 0.2077-0.9385, 3/4 -> 0.3006-0.9544, 1/3 -> 0.0615-0.7923.


def figure(scores: dict[str, Fraction], pairs: dict, answers: int = 1) -> tuple[float, float]:
    """The interval the release report gives these item scores (benchmark.report.score_cell, the one definition),
    each item with `answers` answers; each pair is its own video, so its own cluster."""
    entries = [
        (name, score, answers, frozenset(), "temporal", f"video:{pairs[name].video_id}")
        for name, score in scores.items()
    ]
    cell = score_cell(entries)
    return cell.low, cell.high


def answer(participant: Participant, item, correct: bool, sequence: int) -> None:
    now = timezone.now()
    Assignment.objects.create(
        participant=participant,
        item=item,
        sequence=sequence,
        permutation=[0, 1],
        lease_expires=now + timedelta(hours=1),
        answered_at=now,
        chosen=0 if correct else 1,
        correct=correct,
    )


@pytest.fixture
def world():
    pairs = {
        "t1": make_pair(category=T, domain=NAT),
        "t2": make_pair(category=T, domain=NAT),
        "t3": make_pair(category=T, domain=GAM),
        "s1": make_pair(category=S, domain=NAT),
        "s2": make_pair(category=S, domain=GAM),
        "s3": make_pair(category=S, domain=GAM),
    }
    study = studies.study_create(name="Baseline", fraction=1, practice_count=0)
    items = {name: study.items.get(pair=pair) for name, pair in pairs.items()}
    humans = {"t1": [True, True], "t2": [True, False], "s1": [True], "s2": [False], "s3": [True, True, False]}
    people = [studies.participant_create(study=study) for _ in range(3)]
    for name, answers in humans.items():
        for person, correct in zip(people, answers, strict=False):
            answer(person, items[name], correct, sequence=list(humans).index(name) + 1)
    a = make_endpoint("model-a")
    older = make_run(a, study_id=study.pk, age_minutes=30)
    record(older, pairs["s1"], True)  # superseded by the newer run's answer
    newer = make_run(a, study_id=study.pk)
    for name, correct in {"t1": False, "t2": True, "t3": True, "s1": False, "s2": None, "s3": False}.items():
        record(newer, pairs[name], correct)
    imported_right = {items["t1"].pk, items["t2"].pk, items["t3"].pk}
    content = json.dumps(
        [{"question_id": item.question_id, "is_correct": item.pk in imported_right} for item in items.values()]
    ).encode()
    import_into_study(study, name="gpt-file", content=content, file_name="mc.json")
    return {"pairs": pairs, "study": study, "endpoint": a}


# A run's name is what it is (evaluation.runs.naming): these runs stored no prompt and the default settings.
MODEL_A = "model-a · standard · multiple choice"
GPT_FILE = "gpt-file · standard · multiple choice"


def by_name(models: list[dict], name: str) -> dict:
    return next(m for m in models if m["name"] == name)


def test_it_reports_each_models_accuracy_per_category_and_domain_beside_the_humans_on_the_same_items(world):
    model = by_name(study_summary(world["study"])["models"], MODEL_A)
    assert model["kind"] == "app"
    temporal, state = model["categories"]["temporal"], model["categories"]["state"]
    # Every item it answered: t1 t2 t3 (2 of 3); state s1 s3 (0 of 2: the failed s2 is not counted as wrong).
    assert (temporal["model_all"]["correct"], temporal["model_all"]["n"]) == (2, 3)
    pairs = world["pairs"]
    one, half, none = Fraction(1), Fraction(1, 2), Fraction(0)
    expected = figure({"t1": none, "t2": one, "t3": one}, pairs)
    assert (temporal["model_all"]["low"], temporal["model_all"]["high"]) == pytest.approx(expected, abs=1e-12)
    assert (state["model_all"]["correct"], state["model_all"]["n"]) == (0, 2)
    # Beside the humans: only the items humans answered too (t3 has no human answer).
    assert (temporal["model"]["correct"], temporal["model"]["n"]) == (1, 2)
    assert (temporal["human"]["correct"], temporal["human"]["n"]) == (3, 4)
    # The humans: t1 right by both its raters (1), t2 by one of two (1/2): 3/4, the mean of the items' scores.
    assert temporal["human"]["accuracy"] == 0.75 and temporal["human"]["items"] == 2
    expected = figure({"t1": one, "t2": half}, pairs, answers=2)
    assert (temporal["human"]["low"], temporal["human"]["high"]) == pytest.approx(expected, abs=1e-12)
    assert temporal["difference"] == pytest.approx(0.75 - 0.5)
    assert (state["model"]["correct"], state["model"]["n"]) == (0, 2)
    assert (state["human"]["correct"], state["human"]["n"]) == (3, 4)  # s1 T + s3 T T F; s2 failed for the model
    natural, gaming = model["domains"]["natural"], model["domains"]["gaming"]
    assert (natural["model_all"]["correct"], natural["model_all"]["n"]) == (1, 3)
    expected = figure({"t1": none, "t2": one, "s1": none}, pairs)
    assert (natural["model_all"]["low"], natural["model_all"]["high"]) == pytest.approx(expected, abs=1e-12)
    assert (natural["human"]["correct"], natural["human"]["n"]) == (4, 5)
    assert (gaming["model_all"]["correct"], gaming["model_all"]["n"]) == (1, 2)  # t3, s3
    assert (gaming["model"]["correct"], gaming["model"]["n"], gaming["human"]["n"]) == (0, 1, 3)  # s3 only
    assert (model["matched"], model["same_items"], model["failed"]) == (5, 4, 1)
    assert model["model_all_avg"]["accuracy"] == pytest.approx((2 / 3 + 0) / 2)


def test_imported_and_app_runs_stand_side_by_side_and_the_paper_table_gets_a_row_per_model(world):
    results = study_summary(world["study"])
    assert sorted((m["kind"], m["name"]) for m in results["models"]) == [("app", MODEL_A), ("imported", GPT_FILE)]
    imported = by_name(results["models"], GPT_FILE)
    assert (imported["categories"]["temporal"]["model_all"]["correct"], imported["matched"]) == (3, 6)
    assert imported["categories"]["state"]["model"]["n"] == 3  # s1 s2 s3 all have human answers
    rows = {row["label"]: row for row in results["paper_table"]["rows"]}
    columns = results["paper_table"]["columns"]
    assert rows[MODEL_A]["cells"][columns.index("TM")] == pytest.approx(2 / 3)
    assert rows[MODEL_A]["cells"][columns.index("ST")] == 0
    assert rows[MODEL_A]["cells"][columns.index("AT")] is None
    assert rows[MODEL_A]["avg"] == pytest.approx(1 / 3)
    assert rows[f"{GPT_FILE} (imported)"]["avg"] == pytest.approx(0.5)


def test_the_study_dashboard_shows_the_model_rows(world, client_for, coordinator):
    page = client_for(coordinator).get(f"/studies/{world['study'].pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    table = html[html.index('id="paper-table"') : html.index("</table>", html.index('id="paper-table"'))]
    assert f"<td>{MODEL_A}</td>" in table and f"<td>{GPT_FILE} (imported)</td>" in table
    assert "66.7" in table  # model-a temporal
    beside = html[html.index('id="models-beside"') :]
    low, high = figure({"t1": Fraction(0), "t2": Fraction(1), "t3": Fraction(1)}, world["pairs"])
    assert f"{100 * low:.1f}–{100 * high:.1f}" in beside  # model-a temporal, every item answered
    assert "1 failed, not counted" in beside


def test_the_models_page_matches_runs_to_the_humans_by_pair_across_studies(world, client_for, coordinator):
    overview = models_overview()
    model = by_name(overview["models"], MODEL_A)
    assert (model["matched"], model["same_items"]) == (5, 4)
    assert model["categories"]["state"]["human"]["n"] == 4
    page = client_for(coordinator).get("/studies/models/", {"study": world["study"].pk})
    assert page.status_code == 200
    low, high = figure({"t1": Fraction(1), "t2": Fraction(1, 2)}, world["pairs"], answers=2)  # humans, temporal: 3/4
    assert b"model-a" in page.content and b"gpt-file" in page.content
    assert f"{100 * low:.1f}–{100 * high:.1f}".encode() in page.content


def test_the_models_page_refuses_a_bad_filter_and_others_than_coordinators(world, client_for, annotator, client):
    assert client.get("/studies/models/").status_code == 302
    assert client_for(annotator).get("/studies/models/").status_code == 403
    assert client_for(annotator).get("/studies/models/misses/").status_code == 403


def test_the_models_pages_answer_405_to_a_post_and_400_to_a_bad_filter(world, client_for, coordinator):
    client = client_for(coordinator)
    assert client.post("/studies/models/").status_code == 405
    assert client.post("/studies/models/misses/").status_code == 405
    bad = client.get("/studies/models/misses/", {"category": "colour"})
    assert bad.status_code == 400 and b"Category: Select a valid choice" in bad.content
    unknown = client.get("/studies/models/misses/", {"model": "endpoint-999999"})
    assert unknown.status_code == 400 and b"no model" in unknown.content


def miss_ids(world, **filters) -> set[str]:
    names = {pair.pk: name for name, pair in world["pairs"].items()}
    rows, _ = human_right_model_missed(study=world["study"], **filters)
    return {names[row["pair_id"]] for row in rows}


def test_the_per_item_view_lists_exactly_the_items_humans_got_right_and_models_missed(world):
    # Humans right (a majority): t1, s1, s3 (t2 is 1 of 2, s2 0 of 1, t3 unanswered).
    # Every model that answered missed: s1, s3 (the imported file got t1 right).
    assert miss_ids(world) == {"s1", "s3"}
    assert miss_ids(world, model_key=f"endpoint-{world['endpoint'].pk}") == {"t1", "s1", "s3"}
    assert miss_ids(world, model_key=f"endpoint-{world['endpoint'].pk}", category=T) == {"t1"}
    assert miss_ids(world, domain=GAM) == {"s3"}


def test_the_per_item_page_links_each_item_to_its_review_page_and_pages(world, client_for, coordinator, settings):
    client = client_for(coordinator)
    key = f"endpoint-{world['endpoint'].pk}"
    page = client.get("/studies/models/misses/", {"study": world["study"].pk, "model": key})
    html = page.content.decode()
    assert page.status_code == 200
    listed = set(map(int, re.findall(r'data-pair="(\d+)"', html)))
    assert listed == {world["pairs"][n].pk for n in ("t1", "s1", "s3")}
    assert f'href="/review/pairs/{world["pairs"]["t1"].pk}/"' in html
    from evaluation.results import views

    settings_size = views.MISSES_PER_PAGE
    views.MISSES_PER_PAGE = 2
    try:
        first = client.get("/studies/models/misses/", {"model": key}).content.decode()
        second = client.get("/studies/models/misses/", {"model": key, "page": 2}).content.decode()
    finally:
        views.MISSES_PER_PAGE = settings_size
    assert len(re.findall(r'data-pair="', first)) == 2 and len(re.findall(r'data-pair="', second)) == 1
    assert "Page 1 of 2" in first and f"?model={key}&page=2" in first


# --- Models correct k of n ------------------------------------------------------------------------------------


def test_each_pair_carries_models_correct_k_of_n_over_the_latest_answer_per_endpoint(world):
    b = make_endpoint("model-b")
    run_b = make_run(b)
    record(run_b, world["pairs"]["t1"], True)
    record(run_b, world["pairs"]["s2"], None)
    scores = {
        name: (p.model_correct, p.model_answered)
        for name, p in ((n, Pair.objects.with_model_score().get(pk=pair.pk)) for n, pair in world["pairs"].items())
    }
    # The imported file is a study's, not an endpoint's: k of n counts the app's endpoints.
    assert scores == {"t1": (1, 2), "t2": (1, 1), "t3": (1, 1), "s1": (0, 1), "s2": (0, 0), "s3": (0, 1)}
    only_b = Pair.objects.with_model_score(endpoints=[b.pk]).get(pk=world["pairs"]["t1"].pk)
    assert (only_b.model_correct, only_b.model_answered) == (1, 1)


def test_a_pair_whose_requests_failed_in_two_runs_is_one_failed_pair(world):
    record(make_run(world["endpoint"]), world["pairs"]["s2"], None)  # s2 failed again, in a later run
    model = by_name(study_summary(world["study"])["models"], MODEL_A)
    assert (model["matched"], model["failed"]) == (5, 1)


def test_a_failed_request_keeps_the_endpoints_earlier_answer(world):
    later = make_run(world["endpoint"])
    record(later, world["pairs"]["t2"], None)
    pair = Pair.objects.with_model_score().get(pk=world["pairs"]["t2"].pk)
    assert (pair.model_correct, pair.model_answered) == (1, 1)


def test_the_model_accuracy_filter_keeps_pairs_at_most_that_share_got_right(world):
    b = make_endpoint("model-b")
    record(make_run(b), world["pairs"]["t1"], True)  # t1: 1 of 2
    kept = {p.pk for p in Pair.objects.model_accuracy_at_most(0.5)}
    names = {pair.pk: name for name, pair in world["pairs"].items()}
    assert {names[pk] for pk in kept} == {"t1", "s1", "s2", "s3"}  # t2, t3: 1 of 1; s2: no answer, kept
    assert {names[p.pk] for p in Pair.objects.model_accuracy_at_most(0.49)} == {"s1", "s2", "s3"}


def test_the_k_of_n_range_filter_takes_each_bound(world):
    names = {pair.pk: name for name, pair in world["pairs"].items()}

    def chosen(**bounds) -> set[str]:
        return {names[p.pk] for p in Pair.objects.model_score_between(**bounds)}

    assert chosen(correct_min=1) == {"t2", "t3"}
    assert chosen(correct_max=0, answered_min=1) == {"t1", "s1", "s3"}
    assert chosen(correct_max=0) == {"t1", "s1", "s2", "s3"}  # s2: no answer (its request failed)


def test_no_chosen_model_means_no_answer_and_every_pair_is_kept(world):
    assert {(p.model_correct, p.model_answered) for p in Pair.objects.with_model_score(endpoints=[])} == {(0, 0)}
    assert Pair.objects.model_accuracy_at_most(0, endpoints=[]).count() == 6


def test_an_export_with_the_filter_and_no_model_results_keeps_every_pair(tmp_path):
    pairs = [export_fixtures.make_pair(category=T) for _ in range(3)]
    out = tmp_path / "none"
    benchmark_export(options=ExportOptions(out=str(out), val_fraction=0, max_model_accuracy=0))
    assert exported_source_ids(out) == {p.source_id for p in pairs}
    assert "every endpoint with results (none had results)" in (out / "README.md").read_text()


def test_a_list_of_pairs_with_their_scores_costs_one_query(world, django_assert_max_num_queries):
    for _ in range(20):
        pair = make_pair(category=T)
        record(make_run(world["endpoint"]), pair, True)
    with django_assert_max_num_queries(1):
        rows = [(p.pk, p.model_score()) for p in Pair.objects.with_model_score()[:50]]
    assert len(rows) == 26 and sum(k for _, (k, _) in rows) == 22


def test_the_review_page_shows_models_correct_k_of_n(world, client_for, reviewer):
    page = client_for(reviewer).get(f"/review/pairs/{world['pairs']['t2'].pk}/")
    assert 'id="model-score"' in page.content.decode()
    assert "models 1/1 correct" in page.content.decode()
    untouched = make_pair()
    assert (
        "no model has answered this pair" in client_for(reviewer).get(f"/review/pairs/{untouched.pk}/").content.decode()
    )


def test_the_pair_api_output_carries_models_correct_k_of_n(client_for, annotator, reviewer):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    a, b = make_endpoint(), make_endpoint()
    record(make_run(a), pair, False)
    record(make_run(b), pair, True)
    response = client_for(reviewer).post(
        f"/api/pairs/{pair.pk}/review/", {"decision": "accept", "version": 1}, content_type="application/json"
    )
    assert response.status_code == 200
    assert (response.json()["pair"]["model_correct"], response.json()["pair"]["model_answered"]) == (1, 2)


def test_the_picking_overview_shows_per_category_how_often_models_already_succeed(world, client_for, coordinator):
    figures = model_success_by_category()
    # model-a's latest answers: temporal 2 of 3; state 0 of 2 (the failed s2 is left out).
    assert (figures["temporal"]["correct"], figures["temporal"]["answers"]) == (2, 3)
    assert (figures["state"]["correct"], figures["state"]["answers"], figures["state"]["unsolved"]) == (0, 2, 2)
    assert figures["attribute"]["answers"] == 0
    html = client_for(coordinator).get("/overview/").content.decode()
    assert '67% <span class="muted">n 3</span>' in html


# --- The export keeps the hard pairs --------------------------------------------------------------------------


def hard_pair_world():
    """Eight temporal pairs of four videos; models a and b; the answers give each pair a known share."""
    a, b = make_endpoint("alpha"), make_endpoint("beta")
    run_a, run_b = make_run(a), make_run(b)
    shares = {}
    outcomes = [(True, True), (True, False), (False, False), (None, None), (True, None), (False, None)]
    pairs = []
    for n in range(8):
        pair = export_fixtures.make_pair(category=T)
        pairs.append(pair)
        if n < len(outcomes):
            ra, rb = outcomes[n]
            if ra is not None:
                record(run_a, pair, ra)
            if rb is not None:
                record(run_b, pair, rb)
            answered = [r for r in outcomes[n] if r is not None]
            shares[pair.pk] = (sum(answered), len(answered))
        else:
            shares[pair.pk] = (0, 0)
    return pairs, shares


def exported_source_ids(root) -> set[str]:
    records = export_fixtures.all_records(root)
    return {r["source_id"] for r in records}


def test_the_export_keeps_only_pairs_at_most_that_share_of_the_models_got_right(tmp_path, capsys):
    pairs, shares = hard_pair_world()
    out = tmp_path / "hard"
    call_command("export_benchmark", "--out", str(out), "--max-model-accuracy", "0.5", "--val-fraction", "0.5")
    expected = {p.source_id for p in pairs if shares[p.pk][1] == 0 or shares[p.pk][0] <= 0.5 * shares[p.pk][1]}
    # (T,T) 2/2 and (T,None) 1/1 go; (T,F) 1/2, (F,F), no answers, (F,None) stay.
    assert len(expected) == 6
    assert exported_source_ids(out) == expected
    card = (out / "README.md").read_text()
    assert "model accuracy filter: kept only pairs that at most 0.5 of the chosen models" in card
    assert "every endpoint with results (`alpha`, `beta`)" in card and "pairs no chosen model answered are kept" in card
    assert '"max_model_accuracy": 0.5' in card
    job_result = benchmark_export(
        options=ExportOptions(out=str(tmp_path / "dry"), max_model_accuracy=0.5), dry_run=True
    )
    assert job_result["items"] == 6 and "at most 0.5" in job_result["model_filter"]
    call_command("validate_benchmark", str(out))
    assert "no violations" in capsys.readouterr().out


def test_the_export_counts_only_the_chosen_models(tmp_path):
    pairs, shares = hard_pair_world()
    out = tmp_path / "alpha-only"
    result = benchmark_export(
        options=ExportOptions(out=str(out), val_fraction=0.5, max_model_accuracy=0, models=("alpha",))
    )
    # alpha alone: right on pairs 0, 1, 4; those go.
    assert exported_source_ids(out) == {p.source_id for i, p in enumerate(pairs) if i not in (0, 1, 4)}
    assert result["options"]["models"] == ["alpha"] and result["options"]["max_model_accuracy"] == 0
    assert "models: `alpha`;" in (out / "README.md").read_text()


def test_the_export_refuses_an_unknown_model_name_and_a_share_out_of_range(tmp_path):
    hard_pair_world()
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=r"no model endpoint named gamma \(known: alpha, beta\)"):
        call_command(
            "export_benchmark", "--out", str(tmp_path / "x"), "--max-model-accuracy", "0.5", "--models", "gamma"
        )
    with pytest.raises(CommandError, match=r"max_model_accuracy: must be a share from 0 to 1, got 1.5"):
        call_command("export_benchmark", "--out", str(tmp_path / "x"), "--max-model-accuracy", "1.5")
    assert not (tmp_path / "x").exists()


def test_the_export_api_takes_the_model_filter_and_refuses_unknown_names(client_for, coordinator):
    hard_pair_world()
    client = client_for(coordinator)
    bad = client.post(
        "/api/exports/start/",
        {"target": "hard", "max_model_accuracy": 0.5, "models": ["gamma"]},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "gamma" in json.dumps(bad.json())
    good = client.post(
        "/api/exports/start/",
        {"target": "hard", "max_model_accuracy": 0.5, "models": ["beta"]},
        content_type="application/json",
    )
    assert good.status_code == 202
    assert (good.json()["options"]["max_model_accuracy"], good.json()["options"]["models"]) == (0.5, ["beta"])


def test_there_is_one_compare_page_for_runs_and_for_runs_beside_the_humans(world, client_for, coordinator):
    """/studies/models/ is the compare page, its part beside the humans: the same form, the runs' part and the
    humans' part, and a bad filter of either part refused on it."""
    client = client_for(coordinator)
    for address in ("/models/compare/", "/studies/models/"):
        page = client.get(address, {"study": world["study"].pk}).content.decode()
        assert 'id="compare-filters"' in page and 'id="beside-humans"' in page and 'name="study"' in page
        assert page.count('class="model-beside"') == 2  # model-a and the imported gpt-file beside the humans
    assert client.get("/models/compare/", {"study": "999999"}).status_code == 400

"""Human-baseline studies: the frozen sample, the participant flow, blinding, leases, results, pages and API."""

from __future__ import annotations

import json
import re
import threading
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from annotator.models import Category, Domain, Pair
from demo.studies import seed_demo_study
from evaluation.models import Assignment, Participant, Study, StudyItem
from evaluation.studies import participation
from evaluation.studies import services as studies
from subtlebench.tokens import api_token_create
from tests.factories import DESKTOP_WINDOW, make_pair
from tests.model_fixtures import import_into_study
from tests.release_factories import make_release

pytestmark = pytest.mark.django_db

CATS = [Category.TEMPORAL, Category.STATE, Category.ACTION]


def make_pool(n: int = 30, categories=CATS, domains=(Domain.NATURAL, Domain.GAMING)) -> list[Pair]:
    return [make_pair(category=categories[i % len(categories)], domain=domains[i % len(domains)]) for i in range(n)]


def ready_participant(study: Study) -> Participant:
    """A participant who agreed and finished the practice."""
    participant = studies.participant_create(study=study)
    participant.consent()
    while (a := participation.participant_next_practice(participant=participant)) is not None:
        participation.assignment_answer(participant=participant, token=a.token, position=1)
    return participant


def answer_correctly(participant, assignment, **kwargs):
    position = assignment.permutation.index(0) + 1
    return participation.assignment_answer(participant=participant, token=assignment.token, position=position, **kwargs)


# --- The sample ----------------------------------------------------------------------------------------------


def test_it_draws_a_stratified_frozen_sample_of_accepted_pairs_only():
    pool = make_pool(30)
    make_pair(status=Pair.Status.SUBMITTED)
    study = studies.study_create(name="S", fraction=0.2, seed=3, practice_count=2)
    scored = list(study.items.scored())
    assert len(scored) == 6  # six strata of five: one each
    assert {(i.category, i.domain) for i in scored} == {(p.category, p.domain) for p in pool}
    practice = set(study.items.practice().values_list("pair_id", flat=True))
    assert len(practice) == 2 and not practice & {i.pair_id for i in scored}
    assert study.pool_size == 30
    # Frozen: more accepted pairs later do not change it.
    make_pool(10)
    assert list(study.items.scored()) == scored


def test_it_draws_the_same_pairs_for_the_same_pool_fraction_and_seed():
    make_pool(30)
    # Without practice items: a study's practice pairs leave every later study's pool (no pair is practice in one
    # study and scored in another), so the pool would not be the same.
    first = studies.study_create(name="A", fraction=0.2, seed=5, practice_count=0)
    second = studies.study_create(name="B", fraction=0.2, seed=5, practice_count=0)
    other = studies.study_create(name="C", fraction=0.2, seed=6, practice_count=0)

    def pairs(study):
        return sorted(study.items.scored().values_list("pair_id", flat=True))

    assert pairs(first) == pairs(second)
    assert pairs(first) != pairs(other)


def test_it_filters_the_pool_by_category_and_refuses_an_empty_pool():
    make_pool(12)
    study = studies.study_create(name="S", fraction=1, categories=[Category.STATE])
    assert set(study.items.scored().values_list("category", flat=True)) == {Category.STATE}
    with pytest.raises(studies.StudyError, match="no accepted pairs"):
        studies.study_create(name="S", categories=[Category.QUALITY])


def test_the_command_creates_a_study_and_prints_invite_links(settings):
    settings.SITE_URL = "https://studio.example"
    make_release(make_pool(20))
    out = StringIO()
    call_command(
        "create_study", "Baseline", "--fraction", "0.3", "--seed", "1", "--raters", "2", "--invites", "3", stdout=out
    )
    study = Study.objects.get(name="Baseline")
    assert study.raters_per_item == 2 and study.seed == 1
    assert study.release.number == 1 and study.split == "test" and "(Humans on release v1 (test))" in out.getvalue()
    links = re.findall(r"https://studio\.example/p/[\w-]+/", out.getvalue())
    assert len(links) == 3
    assert {link.split("/")[-2] for link in links} == set(study.participants.values_list("token", flat=True))


# --- The participant flow ----------------------------------------------------------------------------------


def test_a_participant_goes_from_consent_through_practice_to_the_completion_code(client):
    make_pool(12)
    study = studies.study_create(name="S", fraction=0.5, practice_count=2, redirect_url="https://app.prolific.com/x")
    participant = studies.participant_create(study=study)
    base = f"/p/{participant.token}/"
    response = client.get(base + "?PROLIFIC_PID=pp1&STUDY_ID=st1&SESSION_ID=se1")
    assert b"Consent" in response.content
    participant.refresh_from_db()
    assert participant.prolific_pid == "" and participant.consented_at is None  # a GET writes nothing
    # The consent form carries Prolific's parameters; agreeing records them.
    carried = dict(re.findall(r'<input type="hidden" name="([A-Z_]+)" value="([^"]*)">', response.content.decode()))
    assert carried == {"PROLIFIC_PID": "pp1", "STUDY_ID": "st1", "SESSION_ID": "se1"}
    assert client.post(base + "consent/", carried).status_code == 400
    assert (
        client.post(base + "consent/", {"agree": "yes", **carried, **DESKTOP_WINDOW})["Location"] == base + "practice/"
    )
    participant.refresh_from_db()
    assert (participant.prolific_pid, participant.prolific_study_id, participant.prolific_session_id) == (
        "pp1",
        "st1",
        "se1",
    )
    for _ in range(2):
        assert client.get(base + "practice/").status_code == 200
        assignment = Assignment.objects.filter(participant=participant, answered_at__isnull=True).get()
        feedback = client.post(
            base + f"practice/{assignment.token}/", {"option": assignment.permutation.index(0) + 1}, follow=True
        )
        assert feedback.redirect_chain == [(base + f"practice/{assignment.token}/", 302)]  # Post/Redirect/Get
        assert b"Correct" in feedback.content
    assert b"Practice done" in client.get(base + "practice/").content
    answered = 0
    while True:
        response = client.get(base + "items/")
        if response.status_code == 302:
            break
        assignment = Assignment.objects.get(token=response.context["assignment"].token)
        client.post(base + f"items/{assignment.token}/", {"option": 1, "active_ms": 4000})
        answered += 1
    assert answered == 6
    done = client.get(base + "done/")
    assert study.completion_code.encode() in done.content
    assert b"https://app.prolific.com/x" in done.content


def test_a_reload_resumes_at_the_same_item_with_the_same_option_order(client):
    make_pool(12)
    study = studies.study_create(name="S", fraction=0.5, practice_count=0)
    participant = ready_participant(study)
    first = client.get(f"/p/{participant.token}/items/")
    second = client.get(f"/p/{participant.token}/items/")
    assert first.context["assignment"].token == second.context["assignment"].token
    assert first.context["options"] == second.context["options"]
    assert Assignment.objects.filter(participant=participant).count() == 1


def test_a_double_submit_counts_once_and_the_first_answer_is_final(client):
    make_pool(6)
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    participant = ready_participant(study)
    assignment = participation.participant_next_item(participant=participant)
    url = f"/p/{participant.token}/items/{assignment.token}/"
    client.post(url, {"option": 1, "client_key": "k1"})
    client.post(url, {"option": 2, "client_key": "k1"})
    assignment.refresh_from_db()
    assert assignment.chosen == assignment.permutation[0]
    assert Assignment.objects.answered().count() == 1
    # Through the API, too: the repeat is reported as not recorded.
    api = client.post(
        f"/api/p/{participant.token}/item/{assignment.token}/answer/", {"option": 2}, content_type="application/json"
    )
    assert api.json() == {"recorded": False}


def test_it_refuses_a_client_key_already_used_for_another_answer():
    make_pool(6)
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    participant = ready_participant(study)
    first = participation.participant_next_item(participant=participant)
    answer_correctly(participant, first, client_key="same")
    second = participation.participant_next_item(participant=participant)
    with pytest.raises(studies.StudyError, match="client_key"):
        answer_correctly(participant, second, client_key="same")


def test_it_gives_an_item_to_no_more_participants_than_its_raters_and_frees_expired_leases():
    make_pool(3, categories=[Category.TEMPORAL], domains=[Domain.NATURAL])
    study = studies.study_create(name="S", fraction=1 / 3, raters_per_item=2, practice_count=0)
    a, b, c = (ready_participant(study) for _ in range(3))
    now = timezone.now()
    assert participation.participant_next_item(participant=a, now=now) is not None
    answer_correctly(b, participation.participant_next_item(participant=b, now=now), now=now)
    assert participation.participant_next_item(participant=c, now=now) is None  # both places taken
    c.refresh_from_db()
    assert c.finished_at is None  # a's place may still open: c waits
    later = now + timedelta(minutes=30)  # a's lease has run out, unanswered
    taken = participation.participant_next_item(participant=c, now=later)
    assert taken is not None
    # a comes back too late: the place went to c, so a's answer is refused and a is done.
    lost = Assignment.objects.get(participant=a)
    with pytest.raises(participation.LeaseLost):
        answer_correctly(a, lost, now=later)
    assert participation.participant_next_item(participant=a, now=later) is None


def test_it_flags_answers_faster_than_the_threshold(settings):
    settings.STUDY_TOO_FAST_SECONDS = 2
    make_pool(6)
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    participant = ready_participant(study)
    now = timezone.now()
    first = participation.participant_next_item(participant=participant, now=now)
    answer_correctly(participant, first, active_ms=800, now=now + timedelta(seconds=10))
    second = participation.participant_next_item(participant=participant, now=now)
    # Hidden-tab time is the page's to subtract; the server caps the claim at the time since serving.
    answer_correctly(participant, second, active_ms=999999, now=now + timedelta(seconds=5))
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.too_fast, first.active_ms) == (True, 800)
    assert (second.too_fast, second.active_ms) == (False, 5000)


def test_attention_checks_reach_every_participant_and_are_reported_apart():
    pool = make_pool(8)
    study = studies.study_create(name="S", fraction=0.5, practice_count=0)
    outside = [p for p in pool if not study.items.filter(pair=p).exists()]
    studies.study_add_attention_checks(study=study, pair_ids=[outside[0].pk])
    with pytest.raises(studies.StudyError, match="already in this study"):
        studies.study_add_attention_checks(study=study, pair_ids=[outside[0].pk])
    participant = ready_participant(study)
    kinds = []
    while (a := participation.participant_next_item(participant=participant)) is not None:
        kinds.append(a.item.kind)
        if a.item.kind == StudyItem.Kind.ATTENTION:
            wrong = 2 if a.permutation[0] == 0 else 1
            participation.assignment_answer(participant=participant, token=a.token, position=wrong)
        else:
            answer_correctly(participant, a)
    scored = study.items.scored().count()
    assert kinds.count(StudyItem.Kind.ATTENTION) == 1 and kinds.count(StudyItem.Kind.SCORED) == scored
    from evaluation.studies.reports import study_results

    results = study_results(study)
    assert results["accuracy"]["micro"]["accuracy"] == 1.0 and results["accuracy"]["micro"]["n"] == scored
    assert results["attention_checks"]["n"] == 1 and results["attention_checks"]["correct"] == 0
    assert results["participants"][0]["attention_total"] == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_participants_never_over_fill_an_item():
    make_pool(6, categories=[Category.TEMPORAL], domains=[Domain.NATURAL])
    study = studies.study_create(name="S", fraction=1, raters_per_item=2, practice_count=0)
    participants = [ready_participant(study) for _ in range(8)]
    barrier = threading.Barrier(len(participants))
    errors = []

    def work(participant):
        try:
            barrier.wait()
            while (a := participation.participant_next_item(participant=participant)) is not None:
                answer_correctly(participant, a)
        except Exception as error:  # reported below, with the thread's traceback lost but the message kept
            errors.append(repr(error))
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(p,)) for p in participants]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    per_item = [item.assignments.answered().count() for item in study.items.scored()]
    assert per_item == [2] * 6


# --- Blinding ----------------------------------------------------------------------------------------------


def test_a_participant_sees_no_category_domain_source_file_name_answer_position_or_pair_id(client, settings):
    secret = make_pair(
        id=987654321,
        category=Category.EXISTENCE,
        domain=Domain.AERIAL,
        source="levircdsecret",
        source_id="tile_48213_77",
        question="What was added to the shelf in the second image?",
        answer="a small shed",
        distractors=["a car", "a tree", "a boat", "a pool"],
        similarity=0.91357,
    )
    with connection.cursor() as cursor:  # ids no page could show by chance
        cursor.execute("ALTER SEQUENCE evaluation_studyitem_id_seq RESTART WITH 555000111")
        cursor.execute("ALTER SEQUENCE evaluation_assignment_id_seq RESTART WITH 444000222")
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    other = studies.participant_create(study=study)
    participant = ready_participant(study)
    page = client.get(f"/p/{participant.token}/items/")
    assignment = page.context["assignment"]
    api_item = client.get(f"/api/p/{participant.token}/item/")
    image_urls = re.findall(r'src="(/p/[^"]+/image/[^"]+/)"', page.content.decode())
    images = [client.get(url) for url in image_urls]
    assert len(images) == 2 and all(r.status_code == 200 and r["Content-Type"] == "image/jpeg" for r in images)
    assert all("Content-Disposition" not in r for r in images)
    correct_position = assignment.permutation.index(0) + 1
    start = client.get(f"/p/{other.token}/")
    answered = client.post(f"/p/{participant.token}/items/{assignment.token}/", {"option": 1}, follow=True)
    assert b"completion code" in answered.content
    pages = [page, start, answered, api_item]
    text = "".join(r.content.decode() for r in pages) + " ".join(image_urls)
    forbidden = [
        "existence",
        "aerial",
        "levircdsecret",
        "tile_48213_77",
        "987654321",
        "0.91357",
        "0.914",
        secret.image_1.file.name,
        secret.image_2.file.name,
        secret.image_1.original_name.rsplit(".", 1)[0],
        str(secret.video.yt8m_id),
        str(assignment.item_id),
        str(assignment.pk),
        "data-correct",
        "permutation",
    ]
    for value in forbidden:
        assert value.lower() not in text.lower(), value
    # The options are the pair's, in the stored per-participant order, numbered by position only.
    options = re.findall(r'name="option" value="(\d)"', page.content.decode())
    assert options == ["1", "2", "3", "4", "5"]
    assert api_item.json()["options"] == [secret.options[i] for i in assignment.permutation]
    assert 1 <= correct_position <= 5


def test_image_urls_expire_and_belong_to_their_participant(client, settings):
    make_pool(3)
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    participant = ready_participant(study)
    other = ready_participant(study)
    page = client.get(f"/p/{participant.token}/items/")
    url = re.findall(r'src="(/p/[^"]+/image/[^"]+/)"', page.content.decode())[0]
    assert client.get(url.replace(participant.token, other.token)).status_code == 404
    settings.STUDY_IMAGE_URL_MAX_AGE = -1
    assert client.get(url).status_code == 404


def test_option_order_is_a_stored_shuffle_per_participant_and_item():
    make_pair(answer="a", distractors=["b", "c", "d", "e"])
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    orders = set()
    for _ in range(12):
        participant = ready_participant(study)
        study.raters_per_item = 99
        study.save()
        assignment = participation.participant_next_item(participant=participant)
        assert sorted(assignment.permutation) == [0, 1, 2, 3, 4]
        orders.add(tuple(assignment.permutation))
    assert len(orders) > 1


# --- Model results ----------------------------------------------------------------------------------------


def results_file(study, correct_for: set[int]) -> bytes:
    entries = [
        {
            "question_id": item.question_id,
            "correct_answer": item.pair.answer,
            "predicted_answer": item.pair.answer if item.pk in correct_for else "x",
            "is_correct": item.pk in correct_for,
        }
        for item in study.items.scored().select_related("pair")
    ]
    entries.append({"question_id": "temporal_yt8m_notinsample", "is_correct": True})
    return json.dumps(entries).encode()


def test_it_imports_model_results_matched_by_question_id_and_sets_them_beside_humans():
    make_pool(6, categories=[Category.TEMPORAL, Category.STATE], domains=[Domain.NATURAL])
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    participant = ready_participant(study)
    while (a := participation.participant_next_item(participant=participant)) is not None:
        answer_correctly(participant, a)
    temporal = set(study.items.scored().filter(category=Category.TEMPORAL).values_list("pk", flat=True))
    run = import_into_study(study, name="GPT-x", content=results_file(study, temporal), file_name="mc.json")
    assert run.items == 6
    from evaluation.results.study_summary import study_summary

    model = study_summary(study)["models"][0]
    assert model["categories"]["temporal"]["model"]["accuracy"] == 1.0
    assert model["categories"]["state"]["model"]["accuracy"] == 0.0
    assert model["categories"]["state"]["difference"] == pytest.approx(1.0)
    assert model["difference"] == pytest.approx(0.5)


# --- Coordinator pages and API ------------------------------------------------------------------------------


@pytest.fixture
def finished_study():
    make_pool(12)
    # Three participants share the 12 rater places (6 items, 2 raters each), 4 answers each.
    study = studies.study_create(
        name="Finished", fraction=0.5, raters_per_item=2, practice_count=1, items_per_participant=4
    )
    for number in range(3):
        participant = studies.participant_create(study=study)
        participation.participant_answer_all(participant=participant, accuracy=0.8, seed=number)
    return study


COORDINATOR_PAGES = [
    ("get", "/studies/"),
    ("get", "/studies/{pk}/"),
    ("get", "/studies/{pk}/invites/"),
    ("get", "/studies/{pk}/invites.csv"),
    ("get", "/studies/{pk}/responses.csv"),
    ("get", "/studies/{pk}/summary.json"),
    ("post", "/studies/create/"),
    ("post", "/studies/{pk}/invites/create/"),
    ("post", "/studies/{pk}/attention/"),
    ("post", "/studies/{pk}/abandoned/release/"),
]


@pytest.mark.parametrize("method, url", COORDINATOR_PAGES)
def test_coordinator_pages_need_login_the_role_and_the_right_method(
    client, client_for, reviewer, coordinator, method, url
):
    make_pool(3)
    study = studies.study_create(name="S", fraction=1)
    url = url.format(pk=study.pk)
    assert getattr(client, method)(url).status_code == 302
    assert getattr(client_for(reviewer), method)(url).status_code == 403
    if method == "get":
        assert client_for(coordinator).post(url).status_code == 405
    else:  # a form's target: a GET goes to the page with the form (Post/Redirect/Get), other methods are 405
        assert client_for(coordinator).get(url).status_code == 302
        assert client_for(coordinator).put(url).status_code == 405


PARTICIPANT_PAGES = [
    ("get", "/p/{token}/"),
    ("post", "/p/{token}/consent/"),
    ("get", "/p/{token}/practice/"),
    ("get", "/p/{token}/items/"),
    ("post", "/p/{token}/items/x/"),
    ("get", "/p/{token}/done/"),
    ("post", "/p/{token}/practice/x/"),
    ("get", "/p/{token}/image/x/"),
    ("get", "/p/open/{token}/"),
    ("get", "/api/p/{token}/item/"),
    ("post", "/api/p/{token}/item/x/answer/"),
]


@pytest.mark.parametrize("method, url", PARTICIPANT_PAGES)
def test_participant_pages_need_a_valid_token_and_the_right_method(client, method, url):
    make_pool(3)
    study = studies.study_create(name="S", fraction=1)
    participant = studies.participant_create(study=study)
    kwargs = {"content_type": "application/json"} if method == "post" else {}
    assert getattr(client, method)(url.format(token="not-a-token"), **kwargs).status_code == 404
    url = url.format(token=participant.token)
    if method == "get" or url.startswith("/api/"):
        wrong = "post" if method == "get" else "get"
        assert getattr(client, wrong)(url).status_code == 405
    else:  # a form's target: a GET goes back to the participant's page, other methods are 405
        assert client.get(url)["Location"].startswith(f"/p/{participant.token}/")
        assert client.put(url).status_code == 405


def test_the_dashboard_shows_accuracy_intervals_table_chart_and_agreement(
    client_for, coordinator, finished_study, django_assert_max_num_queries
):
    client = client_for(coordinator)
    with django_assert_max_num_queries(20):
        response = client.get(f"/studies/{finished_study.pk}/")
    html = response.content.decode()
    results = response.context["r"]
    micro = results["accuracy"]["micro"]
    assert micro["n"] == 12 and f"{100 * micro['accuracy']:.1f}%" in html
    for column in ["AT", "ST", "EM", "TM", "SP", "EX", "QN", "QL", "VP", "AC", "AVG"]:
        assert f">{column}</th>" in html
    # Drawn in the page, with nothing loaded from another host (a CSRF token or a nonce may spell "cdn" by chance).
    assert "<svg" in html and 'class="whisker"' in html and not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert results["agreement"]["items"] == 6 and "Fleiss" in html
    assert html.count('class="badge badge-ok">finished') == 3


def test_the_study_list_creates_a_study_from_the_form(client_for, coordinator, django_assert_max_num_queries):
    make_release(make_pool(10))
    client = client_for(coordinator)
    response = client.post(
        "/studies/create/",
        {
            "name": "Form",
            "release": "1",
            "fraction": "0.5",
            "seed": "2",
            "raters_per_item": "1",
            "practice_count": "1",
            "items_per_participant": "0",
            "invites": "2",
            "open_cap": "0",
        },
    )
    study = Study.objects.get(name="Form")
    assert response["Location"] == f"/studies/{study.pk}/"
    assert study.participants.count() == 2 and study.seed == 2
    with django_assert_max_num_queries(8):
        assert b"Form" in client.get("/studies/").content
    bad = client.post(
        "/studies/create/",
        {
            "name": "X",
            "release": "1",
            "fraction": "0.5",
            "seed": "0",
            "raters_per_item": "1",
            "practice_count": "0",
            "items_per_participant": "0",
            "invites": "0",
            "open_cap": "0",
            "categories": ["quality"],
        },
    )
    assert bad.status_code == 302 and bad["Location"] == "/studies/"
    assert b"Release v1 has no test items matching the filters" in client.get(bad["Location"]).content


def test_the_csv_and_json_summary_hold_every_response(client_for, coordinator, finished_study):
    client = client_for(coordinator)
    csv_text = client.get(f"/studies/{finished_study.pk}/responses.csv").content.decode("utf-8-sig")
    lines = csv_text.strip().splitlines()
    assert lines[0].startswith("participant,prolific_pid,sequence,kind,question_id")
    assert len(lines) == 1 + 12
    summary = client.get(f"/studies/{finished_study.pk}/summary.json").json()
    assert summary["study"]["seed"] == 0 and summary["sample"]["scored_items"] == 6
    assert summary["accuracy"]["micro"]["n"] == 12 and "low" in summary["accuracy"]["micro"]
    assert summary["agreement"]["fleiss_kappa"] is not None


API = [
    ("get", "/api/studies/"),
    ("post", "/api/studies/create/"),
    ("get", "/api/studies/{pk}/invites/"),
    ("post", "/api/studies/{pk}/invites/create/"),
    ("get", "/api/studies/{pk}/progress/"),
    ("get", "/api/studies/{pk}/results/"),
]


@pytest.mark.parametrize("method, url", API)
def test_api_endpoints_need_a_coordinator_and_the_right_method(client, client_for, annotator, coordinator, method, url):
    make_pool(3)
    study = studies.study_create(name="S", fraction=1)
    url = url.format(pk=study.pk)
    assert getattr(client, method)(url).status_code in (401, 403)
    assert getattr(client_for(annotator), method)(url).status_code == 403
    wrong = "post" if method == "get" else "get"
    assert getattr(client_for(coordinator), wrong)(url).status_code == 405


def test_the_api_creates_a_study_invites_and_reports_results_with_a_token(client, coordinator, finished_study):
    make_release(Pair.objects.order_by("pk"))
    _, key = api_token_create(user=coordinator)
    auth = {"HTTP_AUTHORIZATION": f"Token {key}"}
    created = client.post(
        "/api/studies/create/",
        {"name": "Api", "fraction": 0.5, "seed": 4, "invites": 2},
        content_type="application/json",
        **auth,
    )
    assert created.status_code == 201 and created.json()["seed"] == 4
    assert (created.json()["release"], created.json()["split"]) == (1, "test")
    pk = created.json()["id"]
    invites = client.post(f"/api/studies/{pk}/invites/create/", {"count": 3}, content_type="application/json", **auth)
    assert invites.status_code == 201 and len(invites.json()) == 3
    assert len(client.get(f"/api/studies/{pk}/invites/", **auth).json()) == 5
    progress = client.get(f"/api/studies/{finished_study.pk}/progress/", **auth).json()
    assert progress["progress"]["responses"] == 12 and progress["progress"]["finished"] == 3
    results = client.get(f"/api/studies/{finished_study.pk}/results/", **auth).json()
    assert results["accuracy"]["micro"]["n"] == 12
    bad = client.post(
        "/api/studies/create/", {"name": "X", "categories": ["quality"]}, content_type="application/json", **auth
    )
    assert bad.status_code == 400 and "Release v1 has no test items" in bad.json()["detail"]


def test_the_participant_api_serves_the_current_item_and_takes_answers(client):
    make_pool(3)
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    fresh = studies.participant_create(study=study)
    assert client.get(f"/api/p/{fresh.token}/item/").status_code == 409
    participant = ready_participant(study)
    seen = 0
    while not (item := client.get(f"/api/p/{participant.token}/item/").json())["done"]:
        answer = client.post(
            f"/api/p/{participant.token}/item/{item['item']}/answer/", {"option": 1}, content_type="application/json"
        )
        assert answer.json() == {"recorded": True}
        seen += 1
    assert seen == 3 and item["completion_code"] == study.completion_code
    assert (
        client.post(
            f"/api/p/{participant.token}/item/nope/answer/", {"option": 1}, content_type="application/json"
        ).status_code
        == 404  # not one of this participant's items (issue 13: another's item is not found either)
    )


# --- Demo --------------------------------------------------------------------------------------------------


def test_the_demo_creates_one_study_with_finished_participants_and_is_safe_to_rerun():
    assert seed_demo_study() is None  # no accepted pairs yet: nothing to sample
    make_pool(12)
    study = seed_demo_study()
    assert study.participants.filter(finished_at__isnull=False).count() == 4
    assert Assignment.objects.filter(item__study=study, item__kind=StudyItem.Kind.SCORED).answered().count() == 12
    assert seed_demo_study() == study and Study.objects.count() == 1


def test_a_participant_waits_while_the_last_places_are_leased_to_others(client):
    make_pool(3, categories=[Category.TEMPORAL], domains=[Domain.NATURAL])
    study = studies.study_create(name="S", fraction=1 / 3, practice_count=0)
    holder, waiting = ready_participant(study), ready_participant(study)
    assert participation.participant_next_item(participant=holder) is not None
    response = client.get(f"/p/{waiting.token}/items/")
    assert b"Please wait" in response.content
    assert client.get(f"/api/p/{waiting.token}/item/").json() == {"done": False, "wait": True}
    waiting.refresh_from_db()
    assert waiting.finished_at is None

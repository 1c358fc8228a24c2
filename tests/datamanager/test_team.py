"""Team analytics (issue 15, part 4), the double-review sample, the video page (part 3) and the home page (part 5).

The figures are checked against small fixtures worked by hand in the comments.
"""

from __future__ import annotations

import math
from datetime import date, datetime, time, timedelta

import pytest
from django.utils import timezone

from annotator.models import Caption, DoubleReview, Job, Pair, PairDraft, Review, Target, TeamSettings, Video
from annotator.picking import services as picking
from annotator.stats import figures
from annotator.stats import services as stats
from benchmark.paired import cohen_kappa
from tests.conftest import make_user
from tests.factories import make_pair, make_video
from tests.video_fixtures import *  # noqa: F403 (fixtures)
from tests.video_fixtures import run_queued

CAPTION = "The red square moved a little to the right of where it was."


def decide(pair: Pair, reviewer, decision: str, reason: str = "") -> Review:
    pair.refresh_from_db()
    corrections = {"question": "Which of the two images was taken later?"} if decision == "correct" else None
    return picking.pair_review(
        pair=pair, reviewer=reviewer, decision=decision, version=pair.version, reason=reason, corrections=corrections
    )


def noon(day: date) -> datetime:
    """Midday of a calendar day in the site's time zone. Figures tests put their rows there and pass `today`, so a
    run that crosses midnight (rows made on one day, figures read on the next) counts the same days."""
    return timezone.make_aware(datetime.combine(day, time(12)))


def drawn(pair: Pair) -> DoubleReview:
    return DoubleReview.objects.create(pair=pair, pair_version=pair.version, rate=1.0)


# --- Cohen's kappa ------------------------------------------------------------------------------------------------


def test_it_computes_kappa_and_its_interval_on_a_two_by_two_table_worked_by_hand():
    # 10 items; rows: first reviewer, columns: second reviewer.
    #                 accept  reject
    #   accept           6       1      | 7
    #   reject           1       2      | 3
    #                    7       3        10
    # p_o = (6 + 2) / 10 = 0.8;  p_e = 0.7 * 0.7 + 0.3 * 0.3 = 0.58
    # kappa = (0.8 - 0.58) / (1 - 0.58) = 0.22 / 0.42 = 0.523810
    # SE = sqrt(0.8 * 0.2 / (10 * 0.42^2)) = sqrt(0.16 / 1.764) = 0.301169
    # 95%: 0.523810 -+ 1.959964 * 0.301169 = -0.066471 .. 1.114091, clipped to 1.0
    table = [("a", "a")] * 6 + [("a", "r")] + [("r", "a")] + [("r", "r")] * 2
    result = cohen_kappa(table)
    assert result.units == 10 and result.agreeing == 8
    assert result.observed == pytest.approx(0.8) and result.expected == pytest.approx(0.58)
    assert result.kappa == pytest.approx(0.523810, abs=1e-6)
    assert result.standard_error == pytest.approx(0.301169, abs=1e-6)
    assert result.low == pytest.approx(-0.066471, abs=1e-6)
    assert result.high == 1.0
    row = figures.kappa_row(table)
    assert row == {"n": 10, "agree": 8, "kappa": result.kappa, "low": result.low, "high": 1.0}


def test_kappa_is_undefined_without_items_or_when_both_always_say_the_same():
    assert figures.kappa_row([]) == {"n": 0, "agree": 0, "kappa": None, "low": None, "high": None}
    same = figures.kappa_row([("a", "a")] * 5)  # p_e = 1
    assert same["kappa"] is None and same["agree"] == 5 and same["n"] == 5


# --- The double-review draw --------------------------------------------------------------------------------------


def test_the_draw_has_the_configured_rate():
    # 2,000 draws at 5%: mean 100, sd sqrt(2000 * 0.05 * 0.95) = 9.75; 99.9% of binomial outcomes lie within
    # 100 -+ 3.29 sd = 68 .. 132.
    hits = sum(stats.double_review_drawn(pair_id, 1, 0.05) for pair_id in range(1, 2001))
    assert 68 <= hits <= 132
    assert sum(stats.double_review_drawn(pair_id, 1, 0.0) for pair_id in range(1, 2001)) == 0
    assert sum(stats.double_review_drawn(pair_id, 1, 1.0) for pair_id in range(1, 2001)) == 2000


def test_the_draw_comes_from_the_server_secret(settings):
    before = [stats.double_review_score(pair_id, 1) for pair_id in range(1, 50)]
    settings.SECRET_KEY = "another-secret-" + "x" * 40
    after = [stats.double_review_score(pair_id, 1) for pair_id in range(1, 50)]
    assert before != after
    assert all(0 <= score < 1 for score in after)


def submit_one(user, video, *, index_b=1, active_ms=None, client_key="key-00000001", pair_id=None, version=None):
    return picking.pair_submit(
        user=user,
        video=video,
        index_a=0,
        index_b=index_b,
        category="temporal",
        question="Which image was taken later?",
        client_key=client_key,
        active_ms=active_ms,
        pair_id=pair_id,
        version=version,
    )[0]


def test_a_submit_is_drawn_at_rate_100_percent_and_never_at_0(annotator):
    video = make_video(frames=4)
    row = TeamSettings.current()
    row.double_review_rate = 1.0
    row.save()
    first = submit_one(annotator, video, index_b=1, client_key="key-all-0001")
    assert DoubleReview.objects.filter(pair=first, pair_version=1).count() == 1
    row.double_review_rate = 0.0
    row.save()
    second = submit_one(annotator, video, index_b=2, client_key="key-none-0001")
    assert not DoubleReview.objects.filter(pair=second).exists()


def test_the_default_rate_is_five_percent(db):
    assert TeamSettings.current().double_review_rate == 0.05


def test_the_workbench_active_time_is_stored_and_summed_over_versions(client_for, annotator):
    video = make_video(frames=3)
    client = client_for(annotator)
    client.post("/api/work/lease/")
    body = {
        "video": video.pk,
        "index_a": 0,
        "index_b": 1,
        "category": "temporal",
        "question": "Which image was taken later?",
        "client_key": "active-time-1",
        "active_ms": 42000,
    }
    created = client.post("/api/pairs/submit/", body, content_type="application/json")
    assert created.status_code == 201, created.content
    pair = Pair.objects.get(pk=created.json()["id"])
    assert pair.active_ms == 42000
    again = {**body, "client_key": "active-time-2", "pair": pair.pk, "version": pair.version, "active_ms": 8000}
    assert client.post("/api/pairs/submit/", again, content_type="application/json").status_code == 200
    pair.refresh_from_db()
    assert (pair.version, pair.active_ms) == (2, 50000)
    negative = {**again, "client_key": "active-time-3", "version": 2, "active_ms": -5}
    assert client.post("/api/pairs/submit/", negative, content_type="application/json").status_code == 400


# --- The blind second review -------------------------------------------------------------------------------------


@pytest.fixture
def decided_sample(annotator, reviewer, coordinator):
    """Alice's pair, drawn, rejected by rita with a reason only rita and alice may see before the second review."""
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    item = drawn(pair)
    decide(pair, reviewer, "reject", reason="SECRET-REASON the frames are swapped")
    return pair, item


def test_the_second_reviewers_page_does_not_show_the_first_decision(client_for, coordinator, decided_sample):
    pair, item = decided_sample
    client = client_for(coordinator)
    page = client.get(f"/review/second/{item.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert pair.question in html
    for leak in ("SECRET-REASON", "rejected", "rita", "badge-rejected"):
        assert leak not in html
    # The ordinary review page of the same pair hides it as well while the second review waits.
    review_page = client.get(f"/review/pairs/{pair.pk}/").content.decode()
    for leak in ("SECRET-REASON", "badge-rejected", "rita"):
        assert leak not in review_page
    assert f"/review/second/{item.pk}/" in review_page
    # Trying the ordinary review says where to go, not what the first decision was.
    tried = client.post(f"/api/pairs/{pair.pk}/review/", {"decision": "accept", "version": pair.version})
    assert tried.status_code == 409 and f"/review/second/{item.pk}/" in tried.json()["detail"]
    for leak in ("SECRET-REASON", "rejected", "rita"):
        assert leak not in tried.content.decode()


def test_the_api_of_the_second_review_does_not_show_the_first_decision(client_for, coordinator, decided_sample):
    pair, item = decided_sample
    client = client_for(coordinator)
    following = client.get("/api/second-reviews/next/")
    assert following.status_code == 200
    data = following.json()
    assert data["item"]["id"] == item.pk and data["item"]["pair"]["id"] == pair.pk and data["waiting"] == 1
    text = following.content.decode()
    for leak in ("SECRET-REASON", "reject", "status", "rita"):
        assert leak not in text
    answer = client.post(f"/api/second-reviews/{item.pk}/", {"decision": "accept"}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    for leak in ("SECRET-REASON", "reject", "status", "rita"):
        assert leak not in answer.content.decode()
    item.refresh_from_db()
    pair.refresh_from_db()
    # The second review never changes the pair: the first decision stands.
    assert (item.second_decision, item.second_reviewer, pair.status) == ("accept", coordinator, Pair.Status.REJECTED)
    assert item.first_review.decision == "reject"
    assert client.post(f"/api/second-reviews/{item.pk}/", {"decision": "accept"}).status_code == 409


def test_the_first_reviewer_and_the_author_cannot_give_the_second_review(client_for, reviewer, decided_sample):
    pair, item = decided_sample
    response = client_for(reviewer).post(f"/api/second-reviews/{item.pk}/", {"decision": "accept"})
    assert response.status_code == 403
    assert "decided pair" in response.json()["detail"]
    # The first reviewer sees their own decision as usual, and is offered no second review.
    assert b"SECRET-REASON" in client_for(reviewer).get(f"/review/pairs/{pair.pk}/").content
    assert client_for(reviewer).get("/api/second-reviews/next/").json() == {"item": None, "waiting": 0}
    item.refresh_from_db()
    assert item.second_decision == ""


def test_a_second_review_waits_for_the_first_decision(client_for, coordinator, annotator):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    item = drawn(pair)
    response = client_for(coordinator).post(f"/api/second-reviews/{item.pk}/", {"decision": "accept"})
    assert response.status_code == 409
    assert "no first decision" in response.json()["detail"]


def test_a_rejecting_second_review_needs_a_reason(client_for, coordinator, decided_sample):
    _, item = decided_sample
    client = client_for(coordinator)
    response = client.post(f"/review/second/{item.pk}/", {"decision": "reject", "reason": " "})
    assert response.status_code == 302 and response["Location"] == f"/review/second/{item.pk}/"
    item.refresh_from_db()
    assert item.second_decision == ""
    done = client.post(f"/review/second/{item.pk}/", {"decision": "reject", "reason": "Swapped frames."})
    assert done.status_code == 302
    item.refresh_from_db()
    assert (item.second_decision, item.second_reason) == ("reject", "Swapped frames.")


# --- The figures -------------------------------------------------------------------------------------------------


def test_the_figures_per_annotator_and_reviewer_worked_by_hand(annotator, annotator2, reviewer):
    # alice submits three pairs today with 30 s, 50 s and 90 s of active time: median 50 s; categories temporal and
    # quality. rita accepts one, corrects one (an accept) and rejects one: acceptance 2 / 3 = 67%; rita's reject
    # rate 1 / 3 = 33%. bob writes four captions today, one of them flagged: flag rate 1 / 4 = 25%.
    pairs = [
        make_pair(status=Pair.Status.SUBMITTED, author=annotator, active_ms=ms, category=category)
        for ms, category in ((30000, "temporal"), (50000, "temporal"), (90000, "quality"))
    ]
    decide(pairs[0], reviewer, "accept")
    decide(pairs[1], reviewer, "correct")
    decide(pairs[2], reviewer, "reject", reason="Not subtle.")
    now = timezone.now()
    for i in range(4):
        Caption.objects.create(
            pair=make_pair(),
            author=annotator2,
            text=CAPTION,
            status="submitted",
            submitted_at=now,
            flags=["short"] if i == 0 else [],
        )
    today = timezone.localdate()
    Pair.objects.exclude(submitted_at=None).update(submitted_at=noon(today))
    Review.objects.update(created=noon(today))
    Caption.objects.update(submitted_at=noon(today))
    team = figures.team_figures(days=7, today=today)
    alice = next(r for r in team["annotators"] if r["username"] == "alice")
    assert (alice["submitted"], alice["accepted"], alice["rejected"]) == (3, 2, 1)
    assert alice["acceptance"] == pytest.approx(2 / 3) and alice["acceptance_pct"] == 67
    assert alice["median_active_s"] == 50.0
    assert alice["categories"] == ["quality", "temporal"]
    bob = next(r for r in team["annotators"] if r["username"] == "bob")
    assert (bob["captions"], bob["flagged"], bob["flag_rate_pct"]) == (4, 1, 25)
    [alice_total] = [r for r in team["annotator_totals"] if r["username"] == "alice"]
    assert (alice_total["submitted"], alice_total["acceptance_pct"], alice_total["median_active_s"]) == (3, 67, 50.0)
    rita = next(r for r in team["reviewers"] if r["username"] == "rita")
    assert (rita["decisions"], rita["rejected"], rita["reject_rate_pct"]) == (3, 1, 33)
    assert sum(b["a"] for b in team["chart_pairs"]["bars"]) >= 3  # alice's three, and the caption pairs


def test_the_figures_are_per_day(annotator, reviewer):
    today = timezone.localdate()
    old = make_pair(status=Pair.Status.SUBMITTED, author=annotator, active_ms=10000)
    make_pair(status=Pair.Status.SUBMITTED, author=annotator, active_ms=20000)
    make_pair(status=Pair.Status.SUBMITTED, author=annotator)  # imported or older: no active time, left out
    Pair.objects.update(submitted_at=noon(today))
    Pair.objects.filter(pk=old.pk).update(submitted_at=noon(today - timedelta(days=3)))
    team = figures.team_figures(days=7, today=today)
    rows = [r for r in team["annotators"] if r["username"] == "alice"]
    assert [(r["submitted"], r["median_active_s"]) for r in rows] == [(1, 10.0), (2, 20.0)]
    # Over the window: the median of 10 s and 20 s.
    assert team["annotator_totals"][0]["median_active_s"] == 15.0
    assert [r["username"] for r in figures.team_figures(days=2, today=today)["annotators"]] == ["alice"]


def test_agreement_per_reviewer_pair_matches_the_hand_worked_table(annotator, reviewer, coordinator):
    # The table of the kappa test above, with rita first and cora second: kappa 0.5238 over 10 pairs.
    plan = [("accept", "accept")] * 6 + [("accept", "reject"), ("reject", "accept")] + [("reject", "reject")] * 2
    for first, second in plan:
        pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
        item = drawn(pair)
        decide(pair, reviewer, first, reason="No." if first == "reject" else "")
        stats.second_review_submit(double_review=item, reviewer=coordinator, decision=second, reason="No.")
    result = figures.agreement()
    [row] = result["pairs"]
    assert row["reviewers"] == ("cora", "rita") and row["n"] == 10
    assert row["kappa"] == pytest.approx(0.523810, abs=1e-6)
    assert row["low"] == pytest.approx(-0.066471, abs=1e-6) and row["high"] == 1.0
    assert len(result["disagreements"]) == 2
    assert (result["drawn"], result["done"], result["waiting"]) == (10, 10, 0)
    assert all(p.status in ("accepted", "rejected") for p in Pair.objects.all())


def test_targets_show_their_progress(coordinator):
    for _ in range(3):
        make_pair(category="temporal", domain="natural")
    stats.targets_set(counts={("temporal", "natural"): 4, ("quality", "gaming"): 2})
    rows = {(r["category"], r["domain"]): r for r in figures.target_progress()}
    assert (rows[("temporal", "natural")]["in_benchmark"], rows[("temporal", "natural")]["to_go"]) == (3, 1)
    assert rows[("temporal", "natural")]["percent"] == 75
    assert rows[("quality", "gaming")]["to_go"] == 2


# --- The /stats/ pages -------------------------------------------------------------------------------------------


def test_stats_is_for_coordinators(client, client_for, annotator, reviewer, coordinator):
    assert client.get("/stats/").status_code == 302
    assert client_for(annotator).get("/stats/").status_code == 403
    assert client_for(reviewer).get("/stats/").status_code == 403
    assert client_for(coordinator).post("/stats/").status_code == 405
    assert client_for(coordinator).get("/stats/").status_code == 200
    assert client_for(reviewer).post("/stats/settings/", {"rate": "50"}).status_code == 403
    # A form target answers a GET with its page (Post/Redirect/Get), never a blank 405.
    assert client_for(coordinator).get("/stats/settings/")["Location"] == "/stats/"


def test_a_coordinator_sets_the_rate_and_a_bad_one_changes_nothing(client_for, coordinator):
    client = client_for(coordinator)
    assert client.post("/stats/settings/", {"rate": "12.5"}).status_code == 302
    assert TeamSettings.current().double_review_rate == pytest.approx(0.125)
    response = client.post("/stats/settings/", {"rate": "150"}, follow=True)
    assert "from 0 to 100" in response.content.decode()
    assert TeamSettings.current().double_review_rate == pytest.approx(0.125)
    assert 'value="12.5"' in client.get("/stats/").content.decode()


def test_a_coordinator_sets_targets_in_the_form(client_for, coordinator):
    client = client_for(coordinator)
    response = client.post("/stats/targets/", {"t-temporal-natural": "40", "t-quality-gaming": "7"})
    assert response.status_code == 302
    assert dict(Target.objects.values_list("category", "count")) == {"temporal": 40, "quality": 7}
    bad = client.post("/stats/targets/", {"t-temporal-natural": "many", "t-state-aerial": "3"}, follow=True)
    assert "temporal x natural" in bad.content.decode()
    assert Target.objects.count() == 2 and not Target.objects.filter(category="state").exists()
    client.post("/stats/targets/", {"t-temporal-natural": "40"})  # the empty cell removes quality x gaming
    assert list(Target.objects.values_list("category", flat=True)) == ["temporal"]
    page = client.get("/stats/").content.decode()
    assert 'name="t-temporal-natural"' in page and 'value="40"' in page


def test_the_stats_page_shows_kappa_and_disagreements(client_for, annotator, reviewer, coordinator):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    item = drawn(pair)
    decide(pair, reviewer, "accept")
    stats.second_review_submit(double_review=item, reviewer=coordinator, decision="reject", reason="Too obvious.")
    html = client_for(coordinator).get("/stats/?days=30").content.decode()
    assert 'id="kappa"' in html and "cora · rita" in html
    assert "Too obvious." in html and f"/review/pairs/{pair.pk}/" in html
    assert "<svg" in html
    assert client_for(coordinator).get("/stats/?days=abc").status_code == 200  # a message, the default window


# --- The video page ----------------------------------------------------------------------------------------------


def test_the_video_page_shows_what_a_coordinator_needs(client_for, coordinator, annotator, annotator2):
    video = make_video(frames=4)
    make_pair(status=Pair.Status.SUBMITTED, author=annotator, video=video)
    make_pair(status=Pair.Status.ACCEPTED, author=annotator, video=video)
    picking.video_lease_next(user=annotator2)
    picking.video_release(video=video, user=annotator2, reason="no_pair", note="All frames look alike.")
    html = client_for(coordinator).get(f"/videos/{video.pk}/").content.decode()
    assert html.count('class="frame"') == 4 and 'id="thumbnail-strip"' in html
    assert "1 submitted" in html and "1 accepted" in html
    assert "no usable pair" in html and "All frames look alike." in html and "bob" in html
    assert f"/work/videos/{video.pk}/" in html
    assert f'<option value="{annotator.pk}"' in html  # assign by name, from a list
    assert "pair(s) use its current frames" in html  # re-sampling is refused while pairs use the frames


def test_a_coordinator_assigns_a_video_by_choosing_a_person(client_for, coordinator, annotator, reviewer):
    video = make_video(frames=2)
    client = client_for(coordinator)
    assert client.post(f"/videos/{video.pk}/assign/", {"user": annotator.pk}).status_code == 302
    video.refresh_from_db()
    assert video.assigned_to == annotator and video.assigned_at is not None
    # Someone who is not an annotator is not in the list: refused, the assignment stays.
    refused = client.post(f"/videos/{video.pk}/assign/", {"user": reviewer.pk}, follow=True)
    assert "choose an annotator from the list" in refused.content.decode()
    assert Video.objects.get(pk=video.pk).assigned_to == annotator
    assert client.post(f"/videos/{video.pk}/assign/", {"user": ""}).status_code == 302
    assert Video.objects.get(pk=video.pk).assigned_to is None
    assert client_for(annotator).post(f"/videos/{video.pk}/assign/", {"user": annotator.pk}).status_code == 403
    overview = client_for(coordinator).get("/overview/").content.decode()
    assert f'<option value="{annotator.pk}">alice</option>' in overview


def test_the_overview_says_who_holds_what(client_for, coordinator, annotator, annotator2):
    held = make_video(frames=2, yt8m_id="held-one")
    given = make_video(frames=2, yt8m_id="given-one")
    picking.video_lease_next(user=annotator)
    picking.video_assign(video=given, user=annotator2, by=coordinator)
    held.refresh_from_db()
    assert held.lease_holder == annotator and held.lease_since is not None
    html = client_for(coordinator).get("/overview/").content.decode()
    section = html[html.index('id="holdings"') :]
    assert "alice" in section and "held-one" in section and "bob" in section and "given-one" in section
    assert section.count(">for ") == 2  # how long each lease and assignment has been held


def test_resampling_is_refused_while_pairs_use_the_frames(client_for, coordinator, annotator):
    video = make_video(frames=3)
    make_pair(status=Pair.Status.REJECTED, author=annotator, video=video)
    response = client_for(coordinator).post(f"/videos/{video.pk}/resample/", {"every": "0.5", "confirm": "on"})
    assert response.status_code == 302 and response["Location"] == f"/videos/{video.pk}/"
    assert not Job.objects.exists()
    page = client_for(coordinator).get(response["Location"]).content.decode()
    assert "1 pair(s) use its current frames (1 rejected)" in page


def test_resampling_needs_a_confirmation_then_replaces_the_frames(
    client_for, coordinator, annotator, h264_video, django_capture_on_commit_callbacks
):
    video = make_video(frames=3)
    Video.objects.filter(pk=video.pk).update(source=str(h264_video))
    PairDraft.objects.create(author=annotator, video=video, state={"a": 0, "b": 2}, version=1)
    client = client_for(coordinator)
    unconfirmed = client.post(f"/videos/{video.pk}/resample/", {"frames": "6"}, follow=True)
    assert "Confirm that the video" in unconfirmed.content.decode()
    assert not Job.objects.exists()
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(f"/videos/{video.pk}/resample/", {"frames": "6", "confirm": "on"})
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.kind == Job.Kind.IMPORT and job.created_by == coordinator
    assert run_queued(next(c for c in callbacks if hasattr(c, "keywords"))) == "ok"
    video.refresh_from_db()
    assert (video.frame_count, video.sample_count, video.frames.count()) == (6, 6, 6)
    assert not PairDraft.objects.filter(video=video).exists()  # the draft named frames that are gone


# --- The home page -----------------------------------------------------------------------------------------------


@pytest.fixture
def home_world(annotator, annotator2, reviewer, coordinator):
    held = make_video(frames=3, yt8m_id="alices-video")
    picking.video_lease_next(user=annotator)
    other = make_video(frames=3, yt8m_id="drafted-video")
    PairDraft.objects.create(author=annotator, video=other, state={"a": 1}, version=1)
    returned = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    decide(returned, reviewer, "reject", reason="The answer is the other frame.")
    for _ in range(2):
        make_pair(status=Pair.Status.SUBMITTED, author=annotator2)
    make_pair(status=Pair.Status.SUBMITTED, author=reviewer)
    stats.targets_set(counts={("temporal", "natural"): 10})
    return held


def test_home_tells_an_annotator_what_waits(client_for, annotator, home_world, django_assert_max_num_queries):
    client = client_for(annotator)
    with django_assert_max_num_queries(10):
        response = client.get("/")
    waiting = response.context["waiting"]
    assert waiting["counts"] == {"returned": 1, "captions_to_write": 0, "pairs_to_author": 0}
    assert waiting["held_video"] == home_world and waiting["draft"].video.yt8m_id == "drafted-video"
    html = response.content.decode()
    assert "The answer is the other frame." in html and "alices-video" in html and "drafted-video" in html
    assert "Pairs to review" not in html
    # 10 temporal x natural accepted pairs wanted; none accepted yet (the rejected one and submitted ones don't count)
    assert waiting["targets"]["to_go"] == 10 and "10</strong> to go" in html


def test_home_tells_a_reviewer_and_a_coordinator_what_waits(
    client_for, reviewer, coordinator, home_world, django_assert_max_num_queries
):
    counts = client_for(reviewer).get("/").context["waiting"]["counts"]
    # Three submitted pairs: two of bob's, one of rita's own (never hers to review); alice's was rejected.
    assert counts == {"pairs_to_review": 2, "captions_to_review": 0, "second_reviews": 0, "came_back": 0}
    superuser = make_user("root", "annotator", "reviewer", "coordinator")
    client = client_for(superuser)
    client.get("/")
    with django_assert_max_num_queries(10):
        response = client.get("/")
    assert response.context["waiting"]["counts"]["pairs_to_review"] == 3
    assert 'id="count-pairs-to-review"' in response.content.decode()
    assert client_for(coordinator).get("/").context["waiting"]["counts"]["pairs_to_review"] == 3


def test_home_counts_captions_to_write_and_to_review(client_for, annotator, annotator2, coordinator):
    from annotator.captions import services as captions

    pairs = [make_pair(author=coordinator) for _ in range(3)]
    captions.caption_batch_create(
        created_by=coordinator, title="t", selection="list", pair_ids=[p.pk for p in pairs], captions_per_item=2
    )
    task = captions.caption_task_lease(user=annotator2)
    captions.caption_submit(task_id=task.pk, user=annotator2, text=CAPTION)
    # Six tasks (two per pair), one done: five open for alice; bob captioned one pair, so its other task is not his.
    assert client_for(annotator).get("/").context["waiting"]["counts"]["captions_to_write"] == 5
    assert client_for(annotator2).get("/").context["waiting"]["counts"]["captions_to_write"] == 4
    assert client_for(coordinator).get("/").context["waiting"]["counts"]["captions_to_review"] == 1


def test_home_needs_a_login_and_only_answers_get(client, client_for, stranger):
    assert client.get("/").status_code == 302
    assert client_for(stranger).post("/").status_code == 405
    assert "no role yet" in client_for(stranger).get("/").content.decode()


def test_the_math_of_the_interval_matches_the_docstring_formula():
    table = [("a", "a")] * 3 + [("r", "r")] * 1 + [("a", "r")] * 1
    result = cohen_kappa(table)
    p_o, p_e, n = 0.8, 0.8 * 0.6 + 0.2 * 0.4, 5
    assert result.standard_error == pytest.approx(math.sqrt(p_o * (1 - p_o) / (n * (1 - p_e) ** 2)))

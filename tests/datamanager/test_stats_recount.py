"""The figures of /stats/ and /overview/ (issue 56: one GROUP BY per page part, in place of a query per figure) are a
plain recount of the rows: on a fixed world, after accepts, a correction, rejections, a deletion and a reopening,
each figure equals the one counted here in Python from every pair and review."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from datetime import datetime, time

from django.conf import settings
from django.utils import timezone

from annotator.models import EmbeddingModel, Pair, Review
from annotator.picking import services as picking
from annotator.stats import figures
from annotator.stats.drafting import drafting_figures
from tests.factories import make_pair, make_video


def decide(pair: Pair, reviewer, decision: str, reason: str = "") -> None:
    pair.refresh_from_db()
    corrections = {"question": "Which of the two images was taken later?"} if decision == "correct" else None
    picking.pair_review(
        pair=pair, reviewer=reviewer, decision=decision, version=pair.version, reason=reason, corrections=corrections
    )


def world(annotator, annotator2, reviewer) -> None:
    """Two annotators' pairs in three categories and two domains, two of them on one video, one re-scored below
    the bar, one scored by another model (stale), one without an author; decided, deleted and reopened."""
    video = make_video(frames=4)
    pairs = []
    for n, (author, category, domain, similarity) in enumerate(
        (
            (annotator, "temporal", "natural", 0.93),
            (annotator, "temporal", "natural", 0.95),
            (annotator, "quality", "gaming", 0.90),
            (annotator, "quality", "gaming", 0.93),  # re-scored below the bar once accepted: held back
            (annotator2, "state", "natural", 0.91),
            (annotator2, "state", "gaming", 0.92),
            (annotator2, "temporal", "gaming", 0.88),
            (None, "quality", "natural", 0.99),
        )
    ):
        pairs.append(
            make_pair(
                status=Pair.Status.SUBMITTED,
                author=author,
                category=category,
                domain=domain,
                similarity=similarity,
                active_ms=10_000 * (n + 1) if author else None,
                video=video if n in (0, 1) else None,
            )
        )
    decide(pairs[0], reviewer, "accept")
    decide(pairs[1], reviewer, "correct")
    decide(pairs[2], reviewer, "reject", reason="Not subtle.")
    decide(pairs[3], reviewer, "accept")
    decide(pairs[4], reviewer, "accept")
    decide(pairs[5], reviewer, "reject", reason="Not subtle.")
    decide(pairs[7], reviewer, "accept")
    pairs[6].delete()  # deleted after its submission: counted nowhere
    picking.pair_reopen(pair=Pair.objects.get(pk=pairs[4].pk), by=reviewer, reason="A second look.")
    Pair.objects.filter(pk=pairs[2].pk).update(similarity_model="another-model")  # stale
    Pair.objects.filter(pk=pairs[3].pk).update(similarity=0.7)


def recount_overview() -> dict:
    fingerprint = EmbeddingModel.objects.current_fingerprint()
    rows = list(Pair.objects.exclude(status__in=("draft", "withdrawn")))
    in_benchmark = {
        p.pk
        for p in rows
        if p.status == "accepted"
        and p.similarity is not None
        and p.similarity_model == fingerprint
        and (p.similarity >= settings.SIMILARITY_THRESHOLD or p.similarity_override_reason)
    }
    by_category = defaultdict(Counter)
    for p in rows:
        key = "in_benchmark" if p.pk in in_benchmark else ("held_back" if p.status == "accepted" else p.status)
        by_category[p.category][key] += 1
    people = defaultdict(Counter)
    for p in rows:
        if p.author_id:
            people[p.author.username]["pairs"] += 1
    for review in Review.objects.exclude(decision="reopen").select_related("pair__author"):
        if review.pair.author_id and review.pair.status not in ("draft", "withdrawn"):
            people[review.pair.author.username]["rejected" if review.decision == "reject" else "accepted"] += 1
    return {
        "categories": {c: dict(n) for c, n in by_category.items()},
        "people": {u: dict(n) for u, n in people.items()},
    }


def test_the_overview_and_stats_figures_are_a_recount_of_the_rows(annotator, annotator2, reviewer):
    world(annotator, annotator2, reviewer)
    today = timezone.localdate()
    noon = timezone.make_aware(datetime.combine(today, time(12)))
    Pair.objects.exclude(submitted_at=None).update(submitted_at=noon)
    Review.objects.update(created=noon)
    expected = recount_overview()

    overview = picking.overview_figures()
    got = {
        c["name"]: {k: c[k] for k in ("in_benchmark", "held_back", "submitted", "rejected") if c[k]}
        for c in overview["categories"]
        if any(c[k] for k in ("in_benchmark", "held_back", "submitted", "rejected"))
    }
    assert got == expected["categories"]
    assert got == {
        "temporal": {"in_benchmark": 2},
        "quality": {"in_benchmark": 1, "held_back": 1, "rejected": 1},
        "state": {"submitted": 1, "rejected": 1},
    }
    assert {
        p["username"]: {k: p[k] for k in ("pairs", "accepted", "rejected") if p[k]} for p in overview["people"]
    } == (expected["people"])
    assert overview["domains"] == ["natural"]  # the only domain with a pair in the benchmark
    grid = {row["category"]: row["counts"] for row in overview["grid"]}
    assert (grid["temporal"], grid["quality"], grid["state"]) == ([2], [1], [0])

    # /stats/: per annotator and day, per reviewer and day, the charts, as a recount of every pair and review.
    team = figures.team_figures(days=7, today=today)
    submitted = [p for p in Pair.objects.exclude(status="draft") if p.submitted_at]
    reviews = list(Review.objects.select_related("pair__author", "reviewer"))
    for row in team["annotators"]:
        mine = [p for p in submitted if p.author and p.author.username == row["username"]]
        decided = [r for r in reviews if r.pair.author and r.pair.author.username == row["username"]]
        times = [p.active_ms for p in mine if p.active_ms is not None]
        assert row["submitted"] == len(mine)
        assert row["categories"] == sorted({p.category for p in mine})
        assert row["median_active_s"] == (statistics.median(times) / 1000 if times else None)
        assert row["rejected"] == sum(r.decision == "reject" for r in decided)
        assert row["accepted"] == sum(r.decision != "reject" for r in decided)
    assert {r["username"] for r in team["annotators"]} == {"alice", "bob"}
    [rita] = team["reviewers"]
    assert (rita["decisions"], rita["rejected"]) == (len(reviews), sum(r.decision == "reject" for r in reviews))
    bar = next(b for b in team["chart_pairs"]["bars"] if b["day"] == today)
    assert bar["a"] == len(submitted)
    bar = next(b for b in team["chart_decisions"]["bars"] if b["day"] == today)
    assert (bar["a"], bar["b"]) == (
        sum(r.decision != "reject" for r in reviews),
        sum(r.decision == "reject" for r in reviews),
    )

    # Models that draft: every decided pair here is hand-written; the two of one video are one cluster.
    hand = drafting_figures()["hand"]
    decided = [p for p in Pair.objects.filter(status__in=("accepted", "rejected"), author__isnull=False)]
    assert (hand["decided"], hand["accepted"]) == (len(decided), sum(p.status == "accepted" for p in decided))


def test_a_deleted_pair_leaves_every_figure(annotator, annotator2, reviewer):
    world(annotator, annotator2, reviewer)
    before = picking.overview_figures()["totals"]
    Pair.objects.filter(category="temporal", status="accepted").first().delete()
    after = picking.overview_figures()["totals"]
    assert after["in_benchmark"] == before["in_benchmark"] - 1
    assert after == {**before, "in_benchmark": before["in_benchmark"] - 1}
    assert recount_overview()["categories"]["temporal"] == {"in_benchmark": 1}
